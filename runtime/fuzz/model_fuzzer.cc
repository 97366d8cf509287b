// libFuzzer target for the .tflite loader: the input is a model file's bytes.
// Model::FromBuffer must refuse a bad model with a Status; a model it accepts
// is given to an Interpreter with every reference kernel, whose
// AllocateTensors() must likewise fail cleanly, and a small one is invoked
// once with inputs filled from the fuzz bytes. Built only with
// -DDFARM_BUILD_FUZZERS=ON and clang; see runtime/fuzz/README.md.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"

namespace dfarm::runtime {
namespace {

// Larger models (the real corpus: invoking them under ASan slowed fuzzing to
// 2 runs/s) are planned but not run; the arena limit keeps a corrupt shape
// from asking for gigabytes.
constexpr size_t kMaxInvokeArenaBytes = size_t{1} << 20;
constexpr size_t kMaxArenaBytes = size_t{256} << 20;

size_t g_sink = 0;  // keeps the reads from being optimised away

const OpResolver& Resolver() {
  static const OpResolver* resolver = [] {
    auto* r = new OpResolver;
    r->AddAllReferenceOps();
    return r;
  }();
  return *resolver;
}

void FuzzOne(const uint8_t* data, size_t size) {
  std::unique_ptr<Model> model;
  Status status = Model::FromBuffer("fuzz.tflite", std::span<const uint8_t>(data, size), &model);
  g_sink += status.message().size();
  if (!status.ok()) return;
  if (const auto* codes = model->fb()->operator_codes()) {
    for (uint32_t i = 0; i < codes->size(); ++i) g_sink += model->OperatorName(i).size();
  }

  InterpreterOptions options;
  options.max_arena_bytes = kMaxArenaBytes;
  Interpreter interpreter(*model, Resolver(), options);
  status = interpreter.AllocateTensors();
  g_sink += status.message().size();
  if (!status.ok() || interpreter.arena_bytes() > kMaxInvokeArenaBytes) return;

  // Inputs cycle through the fuzz bytes, so index-like inputs (GATHER) take
  // arbitrary values too.
  size_t next = 0;
  for (Tensor* input : interpreter.inputs()) {
    if (input->data == nullptr) continue;
    auto* bytes = reinterpret_cast<uint8_t*>(input->data);
    for (size_t i = 0; i < input->bytes; ++i) bytes[i] = data[next++ % size];
  }
  status = interpreter.Invoke();
  g_sink += status.message().size();
  for (const Tensor* output : interpreter.outputs()) {
    if (output->data == nullptr || output->bytes == 0) continue;
    g_sink +=
        static_cast<size_t>(output->data[0]) + static_cast<size_t>(output->data[output->bytes - 1]);
  }
}

}  // namespace
}  // namespace dfarm::runtime

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dfarm::runtime::FuzzOne(data, size);
  return 0;
}
