# Install rules: `cmake --install build --prefix P` lays out
#   P/bin/                    dfarm, dfarm-agent, dfarm-runner, dfarm-tflite-runner,
#                             dfarm-conformance (built with the tests), dfarm-dashboard (GUI)
#   P/lib/dfarm/plugins/      the example delegate plugin (GNUInstallDirs' LIBDIR)
#   P/include/dfarm/          dfarm_delegate_plugin.h, with P/lib/pkgconfig/dfarm-delegate-plugin.pc
#   P/share/dfarm/arm64/      the device programs of the cross build (build/arm64/{bin,lib},
#                             scripts/build.sh arm64) when it was built: data to push to devices
#   P/share/dfarm/examples/   the example plugin's source, built against the installed header
#   P/share/man/man1, man7    help2man pages of every program (when help2man is installed),
#                             docs/dfarm.7
#   P/share/bash-completion/completions/dfarm, P/share/zsh/vendor-completions/_dfarm
#   P/lib/systemd/system/     dfarm-agent.service, dfarm-node.service (DFARM_SYSTEMD_UNITDIR)
#   P/share/applications, P/share/icons/hicolor/scalable/apps   the dashboard's launcher
# dfarm finds dfarm-agent and dfarm-runner beside itself (harness/devices/devices.h
# BesideSelf), the arm64 builds in P/share/dfarm/arm64/bin (Arm64ProgramOf in
# harness/spec/runner_builds.h), so an installed tree needs no build folder.
include(GNUInstallDirs)

set(_dfarm_pkg ${PROJECT_SOURCE_DIR}/packaging)
set(_dfarm_gen ${PROJECT_BINARY_DIR}/packaging)

# Programs and the plugin SDK.
set(_dfarm_programs)
foreach(_p dfarm dfarm-agent dfarm-runner dfarm-tflite-runner dfarm-conformance dfarm-dashboard)
  if(TARGET ${_p})
    list(APPEND _dfarm_programs ${_p})
  endif()
endforeach()
set(DFARM_INSTALLED_PROGRAMS ${_dfarm_programs})  # tests/install checks them
install(TARGETS ${_dfarm_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS dfarm_example_delegate LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/dfarm/plugins)
install(FILES ${PROJECT_SOURCE_DIR}/delegates/external/dfarm_delegate_plugin.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dfarm)
# The example's source includes the header by its path in this tree; the
# installed copy includes it as an SDK user would (pkg-config's -I).
file(READ ${PROJECT_SOURCE_DIR}/delegates/external/example/example_delegate.c _dfarm_example)
string(REPLACE "#include \"delegates/external/dfarm_delegate_plugin.h\""
       "#include <dfarm_delegate_plugin.h>" _dfarm_example "${_dfarm_example}")
file(CONFIGURE OUTPUT ${_dfarm_gen}/example_delegate.c CONTENT "${_dfarm_example}" @ONLY)
install(FILES ${_dfarm_gen}/example_delegate.c ${_dfarm_pkg}/plugin/Makefile
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dfarm/examples/plugin)

# Files naming install paths are written at install time (the .pc file's
# folders are relative to its prefix, for pkg-config --define-prefix), so that
# `cmake --install --prefix P` (not only the configured prefix) gets P's paths.
set(DFARM_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
    "Where the systemd units go (relative: under the install prefix)")
install(CODE "
  set(DFARM_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  set(DFARM_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(DFARM_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(DFARM_VERSION \"${PROJECT_VERSION}\")
  foreach(_f dfarm-agent.service dfarm-node.service dfarm-delegate-plugin.pc)
    configure_file(\"${_dfarm_pkg}/\${_f}.in\" \"${_dfarm_gen}/install/\${_f}\" @ONLY)
  endforeach()")
if(IS_ABSOLUTE "${DFARM_SYSTEMD_UNITDIR}")
  set(_dfarm_unitdir "${DFARM_SYSTEMD_UNITDIR}")
else()
  set(_dfarm_unitdir "\${CMAKE_INSTALL_PREFIX}/${DFARM_SYSTEMD_UNITDIR}")
endif()
install(CODE "
  file(INSTALL DESTINATION \"${_dfarm_unitdir}\" TYPE FILE
       FILES \"${_dfarm_gen}/install/dfarm-agent.service\" \"${_dfarm_gen}/install/dfarm-node.service\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\" TYPE FILE
       FILES \"${_dfarm_gen}/install/dfarm-delegate-plugin.pc\")")

# The arm64 device programs (a separate cross build in build/arm64, see
# scripts/build.sh): copied as they are when that build is there at install time.
install(DIRECTORY ${PROJECT_BINARY_DIR}/arm64/bin ${PROJECT_BINARY_DIR}/arm64/lib
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dfarm/arm64 USE_SOURCE_PERMISSIONS OPTIONAL)

install(FILES ${PROJECT_SOURCE_DIR}/docs/dfarm.7 DESTINATION ${CMAKE_INSTALL_MANDIR}/man7)
if(TARGET dfarm-dashboard)
  install(FILES ${_dfarm_pkg}/desktop/dfarm-dashboard.desktop
          DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${_dfarm_pkg}/desktop/dfarm-dashboard.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
endif()

# One page per program; dfarm's gets every subcommand's --help appended
# (packaging/gen_completions.py writes that section, man/dfarm.h2m). The
# programs run by their bare names (PATH), as a user types them.
function(dfarm_man_pages)
  set(_names
    "dfarm=sweep TensorFlow Lite models over delegates and devices, and report the results"
    "dfarm-agent=device agent: stores artifacts by sha256 and runs dfarm-runner jobs for a host"
    "dfarm-runner=run a .tflite model with a delegate; report latency, memory and outputs"
    "dfarm-tflite-runner=dfarm-runner's contract on TensorFlow Lite's own runtime"
    "dfarm-conformance=run the op conformance catalog through delegates and the reference"
    "dfarm-dashboard=Qt dashboard over a DelegateFarm results database")
  set(_pages)
  foreach(_entry IN LISTS _names)
    string(FIND "${_entry}" "=" _eq)
    string(SUBSTRING "${_entry}" 0 ${_eq} _p)
    math(EXPR _eq "${_eq} + 1")
    string(SUBSTRING "${_entry}" ${_eq} -1 _what)
    if(NOT TARGET ${_p})
      continue()
    endif()
    set(_out ${_dfarm_gen}/man/${_p}.1)
    set(_include)
    set(_deps ${_p})
    if(_p STREQUAL "dfarm")
      set(_include --include=${_dfarm_gen}/man/dfarm.h2m)
      list(APPEND _deps ${_dfarm_gen}/man/dfarm.h2m)
    endif()
    add_custom_command(OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -E env "PATH=$<TARGET_FILE_DIR:${_p}>:$ENV{PATH}"
              QT_QPA_PLATFORM=offscreen
              ${DFARM_HELP2MAN} --no-info --section=1 --source=DelegateFarm
              --version-string=${PROJECT_VERSION} "--name=${_what}" ${_include}
              --output=${_out} ${_p}
      DEPENDS ${_deps}
      COMMENT "man page ${_p}(1) (help2man)")
    list(APPEND _pages ${_out})
  endforeach()
  add_custom_target(dfarm_man_pages ALL DEPENDS ${_pages})
  install(FILES ${_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endfunction()

# Man pages (help2man over each program's --help) and dfarm's shell
# completions (packaging/gen_completions.py over `dfarm [SUB] --help`), made
# at build time so they never drift from the programs. Not in a cross build
# (its programs do not run here); without help2man or python3 they are skipped
# with a message.
option(DFARM_BUILD_DOCS "Generate man pages (help2man) and dfarm's shell completions" ON)
# Nor in a sanitizer build: a leak report at a program's exit would fail help2man.
if(CMAKE_CROSSCOMPILING OR NOT TARGET dfarm OR DFARM_SANITIZE)
  set(DFARM_BUILD_DOCS OFF)
endif()
set(DFARM_HAVE_MANPAGES OFF)
set(DFARM_HAVE_COMPLETIONS OFF)
if(DFARM_BUILD_DOCS)
  find_program(DFARM_HELP2MAN help2man)
  find_package(Python3 COMPONENTS Interpreter)
  if(NOT Python3_Interpreter_FOUND)
    message(STATUS "python3 not found: no shell completions or dfarm subcommand man pages")
  else()
    set(DFARM_HAVE_COMPLETIONS ON)
    set(_gen ${_dfarm_pkg}/gen_completions.py)
    add_custom_command(
      OUTPUT ${_dfarm_gen}/completions/dfarm ${_dfarm_gen}/completions/_dfarm
             ${_dfarm_gen}/man/dfarm.h2m
      COMMAND ${Python3_EXECUTABLE} ${_gen} $<TARGET_FILE:dfarm> ${_dfarm_gen}
      DEPENDS dfarm ${_gen}
      COMMENT "dfarm shell completions from dfarm --help")
    add_custom_target(dfarm_completions ALL
      DEPENDS ${_dfarm_gen}/completions/dfarm ${_dfarm_gen}/completions/_dfarm)
    install(FILES ${_dfarm_gen}/completions/dfarm
            DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
    install(FILES ${_dfarm_gen}/completions/_dfarm
            DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
  endif()
  if(NOT DFARM_HELP2MAN)
    message(STATUS "help2man not found (apt-get install help2man): no man pages")
  elseif(DFARM_HAVE_COMPLETIONS)
    set(DFARM_HAVE_MANPAGES ON)
    dfarm_man_pages()
  endif()
endif()
