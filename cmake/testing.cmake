# dfarm_test(NAME SOURCES a.cc b.cc LIBS lib1 lib2 [LABELS unit] [NO_MAIN] [OPTIMIZE]
#            [PROPERTIES k v ...])
# PROPERTIES: more CTest properties for each test (e.g. RUN_SERIAL TRUE).
# NO_MAIN: the sources bring their own main() (e.g. to create a QApplication).
# One GoogleTest executable; each TEST becomes a CTest test.
set(DFARM_MODELS_DIR "${PROJECT_SOURCE_DIR}/models" CACHE PATH
    "Folder with the real .tflite models fetched by scripts/setup.sh")

# Test code is compiled for build speed: DFARM_TEST_CXX_FLAGS come after the
# build type's flags, so -O0 wins over Release's -O3 for the test sources
# alone; the code under test (the libraries a test links) keeps its flags.
# Empty: the build type's flags. A test whose own code computes heavily (a
# naive reference over real models) passes OPTIMIZE to keep them.
set(DFARM_TEST_CXX_FLAGS "-O0" CACHE STRING
    "Compiler flags for the test sources (after the build type's): -O0 builds fastest")

function(dfarm_test name)
  cmake_parse_arguments(T "NO_MAIN;OPTIMIZE" "" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock)
  if(DFARM_TEST_CXX_FLAGS AND NOT T_OPTIMIZE)
    separate_arguments(_flags UNIX_COMMAND "${DFARM_TEST_CXX_FLAGS}")
    target_compile_options(${name} PRIVATE ${_flags})
  endif()
  if(NOT T_NO_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  target_compile_definitions(${name} PRIVATE
    DFARM_MODELS_DIR="${DFARM_MODELS_DIR}"
    DFARM_BINARY_DIR="${PROJECT_BINARY_DIR}"
    DFARM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}"
                       ${T_PROPERTIES})
endfunction()
