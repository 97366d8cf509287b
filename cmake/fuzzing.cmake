# DFARM_BUILD_FUZZERS: libFuzzer targets (agent/fuzz, runtime/fuzz). They need
# clang's -fsanitize=fuzzer; DFARM_FUZZERS_ENABLED says whether this compiler
# has it, and the folders add their fuzz/ subdirectory only then.
option(DFARM_BUILD_FUZZERS "Build the libFuzzer targets of agent/fuzz and runtime/fuzz (needs clang)" OFF)
set(DFARM_FUZZERS_ENABLED OFF)
if(DFARM_BUILD_FUZZERS)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS -fsanitize=fuzzer)
  check_cxx_source_compiles(
    "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
    DFARM_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND DFARM_HAVE_LIBFUZZER)
    set(DFARM_FUZZERS_ENABLED ON)
  else()
    message(STATUS "DFARM_BUILD_FUZZERS: no fuzz targets, the C++ compiler "
                   "(${CMAKE_CXX_COMPILER_ID}) lacks -fsanitize=fuzzer; configure with "
                   "CXX=clang++ (Debian: apt-get install clang)")
  endif()
endif()
