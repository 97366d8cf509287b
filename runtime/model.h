// Model: a verified .tflite file held in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime/schema/tflite_generated.h"
#include "runtime/status.h"

namespace dfarm::runtime {

class Model {
 public:
  // Reads the file at `path` into an owned, aligned buffer, then verifies it
  // (see FromBuffer). The name in messages is the file's base name.
  static Status Load(const std::string& path, std::unique_ptr<Model>* model_out);

  // Copies `bytes` into an owned, aligned buffer, runs the FlatBuffers
  // verifier and the semantic checks below. Nothing from `bytes` is kept.
  // Every failure is one line: "failed to load model 'NAME': <fault>".
  //
  // Semantic checks on subgraph 0 (the one we run): tensor, buffer, opcode,
  // input and output indices in range; constant tensors' buffers hold exactly
  // shape x dtype size bytes; no tensor written twice, no constant or model
  // input written, every read tensor is constant, a model input, or written by
  // an earlier operator (so the operator order is a valid schedule).
  static Status FromBuffer(std::string name, std::span<const uint8_t> bytes,
                           std::unique_ptr<Model>* model_out);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model();

  const std::string& name() const { return name_; }
  const tflite::Model* fb() const { return fb_; }
  // Subgraph 0, the graph the interpreter runs.
  const tflite::SubGraph* subgraph() const { return fb_->subgraphs()->Get(0); }
  size_t size_bytes() const { return size_; }

  // The data of buffer `index`; empty when the buffer holds none.
  // Precondition: index < fb()->buffers()->size().
  std::span<const uint8_t> BufferData(uint32_t index) const;

  // The builtin code of operator code `index`, reading both code fields as
  // the format requires (older files set only deprecated_builtin_code).
  tflite::BuiltinOperator BuiltinCode(uint32_t opcode_index) const;

  // "CONV_2D", or the custom code of a custom op ("CUSTOM" when it has none).
  // Precondition: opcode_index < fb()->operator_codes()->size().
  std::string OperatorName(uint32_t opcode_index) const;

 private:
  Model(std::string name, size_t size);
  Status Verify();

  std::string name_;
  size_t size_ = 0;
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> data_;  // 64-byte aligned
  const tflite::Model* fb_ = nullptr;                    // points into data_
};

// The element count of `shape`, or -1 when a dimension is negative or the
// count exceeds kMaxTensorElements.
int64_t ShapeElementCount(std::span<const int32_t> shape);
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

}  // namespace dfarm::runtime
