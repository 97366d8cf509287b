#include "runtime/model.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace dfarm::runtime {
namespace {

constexpr size_t kBufferAlignment = 64;
constexpr uint32_t kSchemaVersion = 3;

uint8_t* AllocateAligned(size_t size) {
  size_t rounded = (size + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  return static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, std::max<size_t>(rounded, 64)));
}

void FreeAligned(uint8_t* p) { std::free(p); }

std::string ShapeString(const flatbuffers::Vector<int32_t>* shape) {
  std::string s = "[";
  if (shape != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < shape->size(); ++i) {
      if (i > 0) s += ",";
      s += std::to_string(shape->Get(i));
    }
  }
  return s + "]";
}

std::string Printable(const uint8_t* bytes, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    char c = static_cast<char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f) {
      s += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", bytes[i]);
      s += hex;
    }
  }
  return s;
}

template <typename T>
flatbuffers::uoffset_t SizeOf(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

}  // namespace

int64_t ShapeElementCount(std::span<const int32_t> shape) {
  int64_t count = 1;
  for (int32_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && count > kMaxTensorElements / d) return -1;
    count *= d;
  }
  return count;
}

Model::Model(std::string name, size_t size)
    : name_(std::move(name)), size_(size), data_(AllocateAligned(size), &FreeAligned) {}

Model::~Model() = default;

Status Model::Load(const std::string& path, std::unique_ptr<Model>* model_out) {
  std::string name = std::filesystem::path(path).filename().string();
  std::string prefix = "failed to load model '" + name + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::Error(prefix + ": '" + path + "' is a directory");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return Status::Error(prefix + ": cannot open '" + path + "': " + std::strerror(errno));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(f, &std::fclose);
  long size = -1;
  if (std::fseek(f, 0, SEEK_END) == 0) size = std::ftell(f);
  if (size < 0 || std::fseek(f, 0, SEEK_SET) != 0) {
    return Status::Error(prefix + ": cannot read '" + path + "': not a regular file");
  }
  if (static_cast<uint64_t>(size) >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::Unsupported(prefix + ": file is larger than 2 GiB");
  }
  std::unique_ptr<Model> model(new Model(std::move(name), static_cast<size_t>(size)));
  if (model->data_ == nullptr) {
    return Status::Error(prefix + ": out of memory for " + std::to_string(size) + " bytes");
  }
  if (std::fread(model->data_.get(), 1, model->size_, f) != model->size_) {
    return Status::Error(prefix + ": cannot read '" + path + "'");
  }
  DFARM_RETURN_IF_ERROR(model->Verify().WithPrefix(prefix));
  *model_out = std::move(model);
  return Status::Ok();
}

Status Model::FromBuffer(std::string name, std::span<const uint8_t> bytes,
                         std::unique_ptr<Model>* model_out) {
  std::string prefix = "failed to load model '" + name + "'";
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::Unsupported(prefix + ": file is larger than 2 GiB");
  }
  std::unique_ptr<Model> model(new Model(std::move(name), bytes.size()));
  if (model->data_ == nullptr) {
    return Status::Error(prefix + ": out of memory for " + std::to_string(bytes.size()) + " bytes");
  }
  if (!bytes.empty()) std::memcpy(model->data_.get(), bytes.data(), bytes.size());
  DFARM_RETURN_IF_ERROR(model->Verify().WithPrefix(prefix));
  *model_out = std::move(model);
  return Status::Ok();
}

std::span<const uint8_t> Model::BufferData(uint32_t index) const {
  const tflite::Buffer* buffer = fb_->buffers()->Get(index);
  if (buffer == nullptr || buffer->data() == nullptr) return {};
  return {buffer->data()->data(), buffer->data()->size()};
}

tflite::BuiltinOperator Model::BuiltinCode(uint32_t opcode_index) const {
  const tflite::OperatorCode* code = fb_->operator_codes()->Get(opcode_index);
  return static_cast<tflite::BuiltinOperator>(std::max<int32_t>(
      code->deprecated_builtin_code(), static_cast<int32_t>(code->builtin_code())));
}

std::string Model::OperatorName(uint32_t opcode_index) const {
  tflite::BuiltinOperator code = BuiltinCode(opcode_index);
  if (code == tflite::BuiltinOperator::CUSTOM) {
    const flatbuffers::String* custom = fb_->operator_codes()->Get(opcode_index)->custom_code();
    return custom != nullptr ? custom->str() : "CUSTOM";
  }
  const char* name = tflite::EnumNameBuiltinOperator(code);
  if (name == nullptr || *name == '\0') {
    return "BUILTIN_" + std::to_string(static_cast<int32_t>(code));
  }
  return name;
}

Status Model::Verify() {
  const uint8_t* data = data_.get();
  if (size_ < 8) {
    return Status::Error("file is too small (" + std::to_string(size_) +
                         " bytes) to be a .tflite model");
  }
  if (!flatbuffers::BufferHasIdentifier(data, tflite::ModelIdentifier())) {
    return Status::Error("not a .tflite model (file identifier '" + Printable(data + 4, 4) +
                         "', expected 'TFL3')");
  }
  flatbuffers::Verifier::Options options;
  options.max_tables = 50'000'000;
  options.max_depth = 64;
  flatbuffers::Verifier verifier(data, size_, options);
  if (!tflite::VerifyModelBuffer(verifier)) {
    return Status::Error("the file is truncated or corrupt (FlatBuffers verification failed)");
  }
  fb_ = tflite::GetModel(data);

  if (fb_->version() != kSchemaVersion) {
    return Status::Error("schema version " + std::to_string(fb_->version()) + ", expected " +
                         std::to_string(kSchemaVersion));
  }
  if (SizeOf(fb_->subgraphs()) == 0) return Status::Error("the model has no subgraphs");
  if (SizeOf(fb_->buffers()) == 0) {
    return Status::Error("the model has no buffers (buffer 0 must be the empty sentinel)");
  }
  const uint32_t num_buffers = fb_->buffers()->size();
  const uint32_t num_opcodes = SizeOf(fb_->operator_codes());
  for (uint32_t b = 0; b < num_buffers; ++b) {
    const tflite::Buffer* buffer = fb_->buffers()->Get(b);
    if (buffer != nullptr && buffer->offset() > 1) {
      return Status::Unsupported("buffer " + std::to_string(b) +
                                 " keeps its data outside the FlatBuffer (a model over 2 GiB)");
    }
  }

  const tflite::SubGraph* graph = subgraph();
  if (graph == nullptr) return Status::Error("subgraph 0 is missing");
  const uint32_t num_tensors = SizeOf(graph->tensors());
  auto tensor_ref = [&](const std::string& who, int32_t index) -> Status {
    if (index < 0 || static_cast<uint32_t>(index) >= num_tensors) {
      return Status::Error(who + " refers to tensor " + std::to_string(index) +
                           ", but the subgraph has " + std::to_string(num_tensors) + " tensors");
    }
    return Status::Ok();
  };

  std::vector<bool> constant(num_tensors, false);
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const tflite::Tensor* tensor = graph->tensors()->Get(t);
    std::string who = "tensor " + std::to_string(t);
    if (tensor == nullptr) return Status::Error(who + " is missing");
    if (tensor->buffer() >= num_buffers) {
      return Status::Error(who + " refers to buffer " + std::to_string(tensor->buffer()) +
                           ", but the model has " + std::to_string(num_buffers) + " buffers");
    }
    std::span<const int32_t> shape;
    if (tensor->shape() != nullptr) shape = {tensor->shape()->data(), tensor->shape()->size()};
    int64_t elements = ShapeElementCount(shape);
    if (elements < 0) {
      return Status::Error(who + " has an invalid shape " + ShapeString(tensor->shape()));
    }
    if (tensor->quantization() != nullptr) {
      Tensor parsed;
      parsed.shape.assign(shape.begin(), shape.end());
      if (Status s = ReadQuantization(tensor->quantization(), &parsed); !s.ok()) {
        std::string tname = tensor->name() != nullptr ? " '" + tensor->name()->str() + "'" : "";
        return Status::Error(who + tname + ": " + s.message());
      }
    }
    std::span<const uint8_t> bytes = BufferData(tensor->buffer());
    if (bytes.empty()) continue;
    constant[t] = true;
    size_t element_size = TfliteTypeSize(tensor->type());
    if (element_size == 0 || tensor->sparsity() != nullptr) continue;  // no fixed size to check
    if (reinterpret_cast<uintptr_t>(bytes.data()) % std::min<size_t>(element_size, 8) != 0) {
      return Status::Error(who + " data in buffer " + std::to_string(tensor->buffer()) +
                           " is not aligned to its " + std::to_string(element_size) +
                           "-byte elements");
    }
    uint64_t expected = static_cast<uint64_t>(elements) * element_size;
    if (bytes.size() != expected) {
      std::string tname = tensor->name() != nullptr ? " '" + tensor->name()->str() + "'" : "";
      return Status::Error(who + tname + " holds " + std::to_string(bytes.size()) +
                           " bytes in buffer " + std::to_string(tensor->buffer()) +
                           ", but its shape " + ShapeString(tensor->shape()) + " of " +
                           tflite::EnumNameTensorType(tensor->type()) + " needs " +
                           std::to_string(expected) + " bytes");
    }
  }

  // -2: model input; -1: not written; otherwise the operator that writes it.
  constexpr int kModelInput = -2;
  std::vector<int> writer(num_tensors, -1);
  for (uint32_t i = 0; i < SizeOf(graph->inputs()); ++i) {
    int32_t t = graph->inputs()->Get(i);
    DFARM_RETURN_IF_ERROR(tensor_ref("model input " + std::to_string(i), t));
    writer[t] = kModelInput;
  }
  for (uint32_t i = 0; i < SizeOf(graph->outputs()); ++i) {
    DFARM_RETURN_IF_ERROR(
        tensor_ref("model output " + std::to_string(i), graph->outputs()->Get(i)));
  }

  const uint32_t num_ops = SizeOf(graph->operators());
  auto op_label = [&](uint32_t i) {
    const tflite::Operator* op = graph->operators()->Get(i);
    std::string label = "operator " + std::to_string(i);
    if (op->opcode_index() < num_opcodes) label += " (" + OperatorName(op->opcode_index()) + ")";
    return label;
  };
  for (uint32_t i = 0; i < num_ops; ++i) {
    const tflite::Operator* op = graph->operators()->Get(i);
    if (op == nullptr) return Status::Error("operator " + std::to_string(i) + " is missing");
    if (op->opcode_index() >= num_opcodes) {
      return Status::Error("operator " + std::to_string(i) + " uses opcode " +
                           std::to_string(op->opcode_index()) + ", but the model has " +
                           std::to_string(num_opcodes) + " operator codes");
    }
    if (fb_->operator_codes()->Get(op->opcode_index()) == nullptr) {
      return Status::Error("operator code " + std::to_string(op->opcode_index()) + " is missing");
    }
    std::string label = op_label(i);
    for (uint32_t k = 0; k < SizeOf(op->inputs()); ++k) {
      int32_t t = op->inputs()->Get(k);
      if (t == -1) continue;  // omitted optional input
      DFARM_RETURN_IF_ERROR(tensor_ref(label + " input " + std::to_string(k), t));
    }
    for (uint32_t k = 0; k < SizeOf(op->outputs()); ++k) {
      int32_t t = op->outputs()->Get(k);
      DFARM_RETURN_IF_ERROR(tensor_ref(label + " output " + std::to_string(k), t));
      if (constant[t]) return Status::Error(label + " writes constant tensor " + std::to_string(t));
      if (writer[t] == kModelInput) {
        return Status::Error(label + " writes tensor " + std::to_string(t) +
                             ", which is a model input");
      }
      if (writer[t] >= 0) {
        return Status::Error(label + " writes tensor " + std::to_string(t) + ", which " +
                             op_label(writer[t]) + " already writes");
      }
      writer[t] = static_cast<int>(i);
    }
  }
  for (uint32_t i = 0; i < num_ops; ++i) {
    const tflite::Operator* op = graph->operators()->Get(i);
    for (uint32_t k = 0; k < SizeOf(op->inputs()); ++k) {
      int32_t t = op->inputs()->Get(k);
      if (t == -1 || constant[t] || writer[t] == kModelInput) continue;
      if (graph->tensors()->Get(t)->is_variable()) continue;
      if (writer[t] < 0) {
        return Status::Error(op_label(i) + " reads tensor " + std::to_string(t) +
                             ", which is neither constant, a model input, nor written by an "
                             "operator");
      }
      if (writer[t] >= static_cast<int>(i)) {
        return Status::Error(op_label(i) + " reads tensor " + std::to_string(t) + " before " +
                             op_label(writer[t]) +
                             " writes it (the graph has a cycle or is out of order)");
      }
    }
  }
  for (uint32_t i = 0; i < SizeOf(graph->outputs()); ++i) {
    int32_t t = graph->outputs()->Get(i);
    if (writer[t] == -1 && !constant[t]) {
      return Status::Error("model output " + std::to_string(i) + " (tensor " + std::to_string(t) +
                           ") is never written");
    }
  }
  return Status::Ok();
}

}  // namespace dfarm::runtime
