# dfarm_test(NAME SOURCES a.cc b.cc LIBS lib1 lib2 [LABELS unit] [NO_MAIN] [OPTIMIZE]
#            [NO_PCH] [PG] [SERIAL gtest-filter] [UNITY n] [NO_DISCOVER] [PROPERTIES k v ...])
# PROPERTIES: more CTest properties for each test (e.g. RUN_SERIAL TRUE).
# SERIAL: the tests matching this GoogleTest filter run alone (RUN_SERIAL),
# the others of the program beside the rest of the suite.
# NO_MAIN: the sources bring their own main() (e.g. to create a QApplication).
# OPTIMIZE: the test sources keep the build type's flags (see DFARM_TEST_CXX_FLAGS).
# PG: the tests use the CTest run's one PostgreSQL server (fixture dfarm_pg:
# dfarm-test-pg starts it before the first such test and stops it after the
# last; its port is in the file $DFARM_TEST_PG_FILE), each test a database of
# its own on it (reports/store/store_test_fixture.h), instead of a server per
# test process.
# NO_DISCOVER: no CTest tests yet; the caller runs gtest_discover_tests itself
# (once per set of test properties, each with its TEST_FILTER).
# NO_PCH: no shared precompiled header: Qt's targets make a program -fPIC,
# which the shared header (built -fPIE) is not.
# UNITY n: the sources compile as unity sources of n files each (CMake's
# UNITY_BUILD): most of a test source's build is the headers and GoogleTest's
# templates, which a unity source pays once. Default 8; UNITY 1 compiles each
# source alone (names in anonymous namespaces must differ between the files
# of one program otherwise).
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

# The headers most test sources include, precompiled once (dfarm_test_pch)
# and reused by every test built with DFARM_TEST_CXX_FLAGS: parsing them took
# about 3 s of CPU per test source. ccache caches such builds only with
# CCACHE_SLOPPINESS=pch_defines,time_macros (scripts/build.sh sets it).
option(DFARM_TEST_PCH "Precompile GoogleTest, gmock and nlohmann/json once for the tests" ON)
set(_dfarm_test_definitions
  DFARM_MODELS_DIR="${DFARM_MODELS_DIR}"
  DFARM_BINARY_DIR="${PROJECT_BINARY_DIR}"
  DFARM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
separate_arguments(_dfarm_test_flags UNIX_COMMAND "${DFARM_TEST_CXX_FLAGS}")
if(DFARM_TEST_PCH)
  add_executable(dfarm_test_pch ${PROJECT_SOURCE_DIR}/cmake/test_pch_main.cc)
  target_link_libraries(dfarm_test_pch PRIVATE GTest::gtest GTest::gmock
                        nlohmann_json::nlohmann_json)
  target_compile_definitions(dfarm_test_pch PRIVATE ${_dfarm_test_definitions})
  target_compile_options(dfarm_test_pch PRIVATE ${_dfarm_test_flags})
  target_precompile_headers(dfarm_test_pch PRIVATE
    <gtest/gtest.h> <gmock/gmock.h> <nlohmann/json.hpp>
    <filesystem> <fstream> <string> <vector>)
endif()

# The file dfarm-test-pg writes the shared server's "PORT PID" to.
set(DFARM_TEST_PG_FILE "${PROJECT_BINARY_DIR}/Testing/dfarm-pg-server.txt")

function(dfarm_test name)
  cmake_parse_arguments(T "NO_MAIN;OPTIMIZE;NO_PCH;NO_DISCOVER;PG" "SERIAL;UNITY" "SOURCES;LIBS;LABELS;PROPERTIES"
                        ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${name} ${T_SOURCES})
  if(NOT T_UNITY)
    set(T_UNITY 8)
  endif()
  list(LENGTH T_SOURCES _dfarm_sources)
  if(T_UNITY GREATER 1 AND _dfarm_sources GREATER 1)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${T_UNITY})
  endif()
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock)
  if(NOT T_OPTIMIZE)
    target_compile_options(${name} PRIVATE ${_dfarm_test_flags})
    if(DFARM_TEST_PCH AND NOT T_NO_PCH)
      target_precompile_headers(${name} REUSE_FROM dfarm_test_pch)
    endif()
  endif()
  if(NOT T_NO_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  target_compile_definitions(${name} PRIVATE ${_dfarm_test_definitions})
  if(T_PG)
    list(APPEND T_PROPERTIES FIXTURES_REQUIRED dfarm_pg
         ENVIRONMENT "DFARM_TEST_PG_FILE=${DFARM_TEST_PG_FILE}")
    add_dependencies(${name} dfarm-test-pg)
  endif()
  if(T_NO_DISCOVER)
    return()
  elseif(T_SERIAL)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "-${T_SERIAL}"
                         PROPERTIES LABELS "${T_LABELS}" ${T_PROPERTIES})
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "${T_SERIAL}"
                         PROPERTIES LABELS "${T_LABELS}" RUN_SERIAL TRUE ${T_PROPERTIES})
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}"
                         ${T_PROPERTIES})
  endif()
endfunction()
