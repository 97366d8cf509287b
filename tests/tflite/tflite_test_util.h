// What the TensorFlow Lite cross-check tests share: the library, loaded once
// per test program from DFARM_TFLITE_LIB (scripts/setup.sh fetches it), and
// REQUIRE_TFLITE(), which skips a test when the library is absent.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "agent/runner/tflite_c.h"

namespace dfarm::tflite_test {

// The library, or null (the reason printed once on stderr).
inline runner::tflite::Library* Tflite() {
  static std::string error;
  static std::unique_ptr<runner::tflite::Library> lib =
      runner::tflite::Library::Load(runner::tflite::DefaultLibraryPath(DFARM_TFLITE_LIB), &error);
  if (lib == nullptr) std::fprintf(stderr, "%s\n", error.c_str());
  return lib.get();
}

}  // namespace dfarm::tflite_test

#define REQUIRE_TFLITE()                                                          \
  if (::dfarm::tflite_test::Tflite() == nullptr) {                                \
    GTEST_SKIP() << "no TensorFlow Lite library at "                              \
                 << ::dfarm::runner::tflite::DefaultLibraryPath(DFARM_TFLITE_LIB) \
                 << " (scripts/setup.sh)";                                        \
  }
