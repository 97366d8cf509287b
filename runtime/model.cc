#include "runtime/model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
  // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer, and is
  // refused by its type below; reads from the regular file then block as usual.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::Error(prefix + ": cannot open '" + path + "': " + std::strerror(errno));
  }
  struct stat st;
  int flags = -1;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (flags = ::fcntl(fd, F_GETFL)) < 0 ||
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ::close(fd);
    return Status::Error(prefix + ": '" + path + "' is not a regular file");
  }
  std::FILE* f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    ::close(fd);
    return Status::Error(prefix + ": cannot read '" + path + "': " + std::strerror(errno));
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

namespace {

// The framing of a .tflite file: big enough, the 'TFL3' identifier, and a
// FlatBuffer the verifier accepts. On success tflite::GetModel(data) is safe.
Status VerifyFlatBuffer(const uint8_t* data, size_t size) {
  if (size < 8) {
    return Status::Error("file is too small (" + std::to_string(size) +
                         " bytes) to be a .tflite model");
  }
  if (!flatbuffers::BufferHasIdentifier(data, tflite::ModelIdentifier())) {
    return Status::Error("not a .tflite model (file identifier '" + Printable(data + 4, 4) +
                         "', expected 'TFL3')");
  }
  flatbuffers::Verifier::Options options;
  options.max_tables = 50'000'000;
  options.max_depth = 64;
  flatbuffers::Verifier verifier(data, size, options);
  if (!tflite::VerifyModelBuffer(verifier)) {
    return Status::Error("the file is truncated or corrupt (FlatBuffers verification failed)");
  }
  return Status::Ok();
}

// The model-level tables: schema version, at least one subgraph, the buffer 0
// sentinel, and no buffer keeping its data outside the FlatBuffer.
Status VerifyModelTables(const tflite::Model& fb) {
  if (fb.version() != kSchemaVersion) {
    return Status::Error("schema version " + std::to_string(fb.version()) + ", expected " +
                         std::to_string(kSchemaVersion));
  }
  if (SizeOf(fb.subgraphs()) == 0) return Status::Error("the model has no subgraphs");
  if (SizeOf(fb.buffers()) == 0) {
    return Status::Error("the model has no buffers (buffer 0 must be the empty sentinel)");
  }
  for (uint32_t b = 0; b < fb.buffers()->size(); ++b) {
    const tflite::Buffer* buffer = fb.buffers()->Get(b);
    if (buffer != nullptr && buffer->offset() > 1) {
      return Status::Unsupported("buffer " + std::to_string(b) +
                                 " keeps its data outside the FlatBuffer (a model over 2 GiB)");
    }
  }
  return Status::Ok();
}

// " 'name'" for a named tensor, "" for an unnamed one.
std::string QuotedName(const tflite::Tensor& tensor) {
  return tensor.name() != nullptr ? " '" + tensor.name()->str() + "'" : "";
}

// The semantic checks on one subgraph (Model::FromBuffer lists them). Check()
// runs them in a fixed order, so a model with several faults always reports
// the same first one: tensors, model inputs and outputs, operators (opcode,
// indices, what they write), what operators read, model outputs written.
// Keeps references to `model` and `graph` for its own lifetime only.
class SubgraphVerifier {
 public:
  SubgraphVerifier(const Model& model, const tflite::SubGraph& graph)
      : model_(model),
        graph_(graph),
        num_buffers_(model.fb()->buffers()->size()),
        num_opcodes_(SizeOf(model.fb()->operator_codes())),
        num_tensors_(SizeOf(graph.tensors())),
        constant_(num_tensors_, false),
        writer_(num_tensors_, kNotWritten) {}

  Status Check() {
    DFARM_RETURN_IF_ERROR(CheckTensors());
    DFARM_RETURN_IF_ERROR(CheckModelInputsAndOutputs());
    DFARM_RETURN_IF_ERROR(CheckOperators());
    DFARM_RETURN_IF_ERROR(CheckReads());
    return CheckOutputsWritten();
  }

 private:
  // writer_ values besides the index of the operator that writes the tensor.
  static constexpr int kModelInput = -2;
  static constexpr int kNotWritten = -1;

  Status CheckTensorRef(const std::string& who, int32_t index) const {
    if (index < 0 || static_cast<uint32_t>(index) >= num_tensors_) {
      return Status::Error(who + " refers to tensor " + std::to_string(index) +
                           ", but the subgraph has " + std::to_string(num_tensors_) + " tensors");
    }
    return Status::Ok();
  }

  // "operator 3 (CONV_2D)"; the name only once the opcode index is known good.
  std::string OperatorLabel(uint32_t i) const {
    const tflite::Operator* op = graph_.operators()->Get(i);
    std::string label = "operator " + std::to_string(i);
    if (op->opcode_index() < num_opcodes_) {
      label += " (" + model_.OperatorName(op->opcode_index()) + ")";
    }
    return label;
  }

  // Buffer index, shape and quantization of every tensor, and the size and
  // alignment of the constant ones (recorded in constant_).
  Status CheckTensors() {
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      const tflite::Tensor* tensor = graph_.tensors()->Get(t);
      std::string who = "tensor " + std::to_string(t);
      if (tensor == nullptr) return Status::Error(who + " is missing");
      if (tensor->buffer() >= num_buffers_) {
        return Status::Error(who + " refers to buffer " + std::to_string(tensor->buffer()) +
                             ", but the model has " + std::to_string(num_buffers_) + " buffers");
      }
      std::span<const int32_t> shape;
      if (tensor->shape() != nullptr) shape = {tensor->shape()->data(), tensor->shape()->size()};
      int64_t elements = ShapeElementCount(shape);
      if (elements < 0) {
        return Status::Error(who + " has an invalid shape " + ShapeString(tensor->shape()));
      }
      DFARM_RETURN_IF_ERROR(CheckShapeSignature(who, *tensor));
      if (tensor->quantization() != nullptr) {
        Tensor parsed;
        parsed.shape.assign(shape.begin(), shape.end());
        if (Status s = ReadQuantization(tensor->quantization(), &parsed); !s.ok()) {
          return Status::Error(who + QuotedName(*tensor) + ": " + s.message());
        }
      }
      std::span<const uint8_t> bytes = model_.BufferData(tensor->buffer());
      if (bytes.empty()) continue;
      constant_[t] = true;
      DFARM_RETURN_IF_ERROR(CheckConstantData(who, *tensor, elements, bytes));
    }
    return Status::Ok();
  }

  // shape_signature, when present and shape is not [], has shape's rank and
  // each dimension -1 (known only at Prepare) or shape's.
  static Status CheckShapeSignature(const std::string& who, const tflite::Tensor& tensor) {
    const flatbuffers::Vector<int32_t>* signature = tensor.shape_signature();
    if (signature == nullptr || signature->size() == 0) return Status::Ok();
    const uint32_t rank = SizeOf(tensor.shape());
    bool valid = rank == 0 || rank == signature->size();
    for (uint32_t i = 0; i < signature->size() && valid; ++i) {
      const int32_t d = signature->Get(i);
      valid = d == -1 || (d >= 0 && (rank == 0 || d == tensor.shape()->Get(i)));
    }
    if (!valid) {
      return Status::Error(who + QuotedName(tensor) + " has shape_signature " +
                           ShapeString(signature) + ", which does not fit its shape " +
                           ShapeString(tensor.shape()));
    }
    return Status::Ok();
  }

  // A constant tensor's data is aligned to its elements and exactly
  // shape x dtype size bytes (unless the dtype or sparsity has no fixed size).
  static Status CheckConstantData(const std::string& who, const tflite::Tensor& tensor,
                                  int64_t elements, std::span<const uint8_t> bytes) {
    size_t element_size = TfliteTypeSize(tensor.type());
    if (element_size == 0 || tensor.sparsity() != nullptr) return Status::Ok();
    if (reinterpret_cast<uintptr_t>(bytes.data()) % std::min<size_t>(element_size, 8) != 0) {
      return Status::Error(who + " data in buffer " + std::to_string(tensor.buffer()) +
                           " is not aligned to its " + std::to_string(element_size) +
                           "-byte elements");
    }
    uint64_t expected = static_cast<uint64_t>(elements) * element_size;
    if (bytes.size() != expected) {
      return Status::Error(who + QuotedName(tensor) + " holds " + std::to_string(bytes.size()) +
                           " bytes in buffer " + std::to_string(tensor.buffer()) +
                           ", but its shape " + ShapeString(tensor.shape()) + " of " +
                           tflite::EnumNameTensorType(tensor.type()) + " needs " +
                           std::to_string(expected) + " bytes");
    }
    return Status::Ok();
  }

  // Model inputs and outputs in range; model inputs recorded in writer_.
  Status CheckModelInputsAndOutputs() {
    for (uint32_t i = 0; i < SizeOf(graph_.inputs()); ++i) {
      int32_t t = graph_.inputs()->Get(i);
      DFARM_RETURN_IF_ERROR(CheckTensorRef("model input " + std::to_string(i), t));
      writer_[t] = kModelInput;
    }
    for (uint32_t i = 0; i < SizeOf(graph_.outputs()); ++i) {
      DFARM_RETURN_IF_ERROR(
          CheckTensorRef("model output " + std::to_string(i), graph_.outputs()->Get(i)));
    }
    return Status::Ok();
  }

  // Each operator in order: its opcode, its input indices, and its outputs.
  Status CheckOperators() {
    for (uint32_t i = 0; i < SizeOf(graph_.operators()); ++i) {
      const tflite::Operator* op = graph_.operators()->Get(i);
      if (op == nullptr) return Status::Error("operator " + std::to_string(i) + " is missing");
      DFARM_RETURN_IF_ERROR(CheckOperatorCode(i, *op));
      std::string label = OperatorLabel(i);
      for (uint32_t k = 0; k < SizeOf(op->inputs()); ++k) {
        int32_t t = op->inputs()->Get(k);
        if (t == -1) continue;  // omitted optional input
        DFARM_RETURN_IF_ERROR(CheckTensorRef(label + " input " + std::to_string(k), t));
      }
      DFARM_RETURN_IF_ERROR(CheckOperatorOutputs(i, *op, label));
    }
    return Status::Ok();
  }

  Status CheckOperatorCode(uint32_t i, const tflite::Operator& op) const {
    if (op.opcode_index() >= num_opcodes_) {
      return Status::Error("operator " + std::to_string(i) + " uses opcode " +
                           std::to_string(op.opcode_index()) + ", but the model has " +
                           std::to_string(num_opcodes_) + " operator codes");
    }
    if (model_.fb()->operator_codes()->Get(op.opcode_index()) == nullptr) {
      return Status::Error("operator code " + std::to_string(op.opcode_index()) + " is missing");
    }
    return Status::Ok();
  }

  // Outputs in range, none constant, a model input, or written before;
  // operator i recorded as their writer.
  Status CheckOperatorOutputs(uint32_t i, const tflite::Operator& op, const std::string& label) {
    for (uint32_t k = 0; k < SizeOf(op.outputs()); ++k) {
      int32_t t = op.outputs()->Get(k);
      DFARM_RETURN_IF_ERROR(CheckTensorRef(label + " output " + std::to_string(k), t));
      if (constant_[t])
        return Status::Error(label + " writes constant tensor " + std::to_string(t));
      if (writer_[t] == kModelInput) {
        return Status::Error(label + " writes tensor " + std::to_string(t) +
                             ", which is a model input");
      }
      if (writer_[t] >= 0) {
        return Status::Error(label + " writes tensor " + std::to_string(t) + ", which " +
                             OperatorLabel(writer_[t]) + " already writes");
      }
      writer_[t] = static_cast<int>(i);
    }
    return Status::Ok();
  }

  // Every tensor an operator reads is constant, a model input, a variable, or
  // written by an earlier operator.
  Status CheckReads() const {
    for (uint32_t i = 0; i < SizeOf(graph_.operators()); ++i) {
      const tflite::Operator* op = graph_.operators()->Get(i);
      for (uint32_t k = 0; k < SizeOf(op->inputs()); ++k) {
        int32_t t = op->inputs()->Get(k);
        if (t == -1 || constant_[t] || writer_[t] == kModelInput) continue;
        if (graph_.tensors()->Get(t)->is_variable()) continue;
        if (writer_[t] < 0) {
          return Status::Error(OperatorLabel(i) + " reads tensor " + std::to_string(t) +
                               ", which is neither constant, a model input, nor written by an "
                               "operator");
        }
        if (writer_[t] >= static_cast<int>(i)) {
          return Status::Error(OperatorLabel(i) + " reads tensor " + std::to_string(t) +
                               " before " + OperatorLabel(writer_[t]) +
                               " writes it (the graph has a cycle or is out of order)");
        }
      }
    }
    return Status::Ok();
  }

  Status CheckOutputsWritten() const {
    for (uint32_t i = 0; i < SizeOf(graph_.outputs()); ++i) {
      int32_t t = graph_.outputs()->Get(i);
      if (writer_[t] == kNotWritten && !constant_[t]) {
        return Status::Error("model output " + std::to_string(i) + " (tensor " + std::to_string(t) +
                             ") is never written");
      }
    }
    return Status::Ok();
  }

  const Model& model_;
  const tflite::SubGraph& graph_;
  const uint32_t num_buffers_;
  const uint32_t num_opcodes_;
  const uint32_t num_tensors_;
  std::vector<bool> constant_;  // tensor -> has data in its buffer
  std::vector<int> writer_;     // tensor -> writing operator, kModelInput or kNotWritten
};

}  // namespace

Status Model::Verify() {
  DFARM_RETURN_IF_ERROR(VerifyFlatBuffer(data_.get(), size_));
  fb_ = tflite::GetModel(data_.get());
  DFARM_RETURN_IF_ERROR(VerifyModelTables(*fb_));
  const tflite::SubGraph* graph = subgraph();
  if (graph == nullptr) return Status::Error("subgraph 0 is missing");
  return SubgraphVerifier(*this, *graph).Check();
}

}  // namespace dfarm::runtime
