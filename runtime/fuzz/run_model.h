// The run step the model fuzzers share: load a .tflite model's bytes, plan it
// with every reference kernel, and invoke a small one once with its inputs
// filled from `fill`. Every step must refuse a bad model with a Status (never
// crash, hang or trip a sanitizer). See README.md here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"

namespace dfarm::runtime::fuzz {

// Larger models (the real corpus: invoking them under ASan slowed fuzzing to
// 2 runs/s) are planned but not run; the arena limit keeps a corrupt shape
// from asking for gigabytes.
inline constexpr size_t kMaxInvokeArenaBytes = size_t{1} << 20;
inline constexpr size_t kMaxArenaBytes = size_t{256} << 20;

inline size_t g_sink = 0;  // keeps the reads from being optimised away

inline const OpResolver& Resolver() {
  static const OpResolver* resolver = [] {
    auto* r = new OpResolver;
    r->AddAllReferenceOps();
    return r;
  }();
  return *resolver;
}

// `fill` may be empty (inputs stay zero).
inline void RunModel(std::span<const uint8_t> bytes, std::span<const uint8_t> fill) {
  std::unique_ptr<Model> model;
  Status status = Model::FromBuffer("fuzz.tflite", bytes, &model);
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

  // Inputs cycle through the fill bytes, so index-like inputs (GATHER) take
  // arbitrary values too.
  size_t next = 0;
  for (Tensor* input : interpreter.inputs()) {
    if (input->data == nullptr || fill.empty()) continue;
    auto* data = reinterpret_cast<uint8_t*>(input->data);
    for (size_t i = 0; i < input->bytes; ++i) data[i] = fill[next++ % fill.size()];
  }
  status = interpreter.Invoke();
  g_sink += status.message().size();
  for (const Tensor* output : interpreter.outputs()) {
    if (output->data == nullptr || output->bytes == 0) continue;
    g_sink +=
        static_cast<size_t>(output->data[0]) + static_cast<size_t>(output->data[output->bytes - 1]);
  }
}

}  // namespace dfarm::runtime::fuzz
