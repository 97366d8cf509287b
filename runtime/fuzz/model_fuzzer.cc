// libFuzzer target for the .tflite loader: the input is a model file's bytes.
// Model::FromBuffer must refuse a bad model with a Status; a model it accepts
// is given to an Interpreter with every reference kernel, whose
// AllocateTensors() must likewise fail cleanly, and a small one is invoked
// once with inputs filled from the fuzz bytes. Built only with
// -DDFARM_BUILD_FUZZERS=ON and clang; see runtime/fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/fuzz/run_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  dfarm::runtime::fuzz::RunModel(bytes, bytes);
  return 0;
}
