#include "delegates/external/external_delegate.h"

#include <algorithm>
#include <unordered_map>

#include "delegates/registry.h"
#include "runtime/kernels/kernel_util.h"

namespace dfarm::delegates {
namespace {

using runtime::Status;

DfarmPluginTensor ToPlugin(const runtime::Tensor& t) {
  DfarmPluginTensor p{};
  p.index = t.index;
  p.name = t.name.c_str();
  // Our DType order differs from TFLite's TensorType; the ABI uses TFLite's.
  switch (t.dtype) {
#define DFARM_PLUGIN_DTYPE(e, tfl, name, size)               \
  case runtime::DType::e:                                    \
    p.dtype = static_cast<int32_t>(tflite::TensorType::tfl); \
    break;
    DFARM_DTYPES(DFARM_PLUGIN_DTYPE)
#undef DFARM_PLUGIN_DTYPE
  }
  p.rank = t.rank();
  p.dims = t.shape.data();
  p.bytes = t.bytes;
  p.data = t.has_static_value() ? t.data : nullptr;
  p.is_static = t.has_static_value() ? 1 : 0;
  p.quantized = t.quantized ? 1 : 0;
  p.scale = t.scale;
  p.zero_point = t.zero_point;
  return p;
}

DfarmPluginNode NodeHeader(const runtime::Node& node) {
  DfarmPluginNode n{};
  n.index = node.index;
  n.builtin_code = static_cast<int32_t>(node.code);
  n.op_name = node.op_name.c_str();
  n.fused_activation = static_cast<int32_t>(runtime::FusedActivation(node));
  return n;
}

// The C view of one partition, built once at Init(); addresses stay put.
class ExternalKernel : public runtime::DelegateKernel {
 public:
  explicit ExternalKernel(const ExternalDelegate* delegate) : delegate_(delegate) {}
  ~ExternalKernel() override {
    if (kernel_ != nullptr && delegate_->api().kernel_free != nullptr) {
      delegate_->api().kernel_free(kernel_);
    }
  }

  Status Init(const runtime::Partition& partition) override {
    // Every tensor the partition touches, once.
    std::unordered_map<int, size_t> slot;
    auto add = [&](const runtime::Tensor* t) {
      if (t != nullptr && slot.emplace(t->index, sources_.size()).second) sources_.push_back(t);
    };
    for (const runtime::Node* node : partition.nodes) {
      for (const runtime::Tensor* t : node->inputs) add(t);
      for (const runtime::Tensor* t : node->outputs) add(t);
    }
    tensors_.reserve(sources_.size());
    for (const runtime::Tensor* t : sources_) tensors_.push_back(ToPlugin(*t));
    auto ptr = [&](const runtime::Tensor* t) -> const DfarmPluginTensor* {
      return t == nullptr ? nullptr : &tensors_[slot.at(t->index)];
    };
    // One pointer array for all nodes' inputs and outputs, then the partition's.
    for (const runtime::Node* node : partition.nodes) {
      for (const runtime::Tensor* t : node->inputs) pointers_.push_back(ptr(t));
      for (const runtime::Tensor* t : node->outputs) pointers_.push_back(ptr(t));
    }
    for (const runtime::Tensor* t : partition.inputs) pointers_.push_back(ptr(t));
    for (const runtime::Tensor* t : partition.outputs) pointers_.push_back(ptr(t));
    size_t at = 0;
    nodes_.reserve(partition.nodes.size());
    for (const runtime::Node* node : partition.nodes) {
      DfarmPluginNode n = NodeHeader(*node);
      n.num_inputs = static_cast<int32_t>(node->inputs.size());
      n.inputs = pointers_.data() + at;
      at += node->inputs.size();
      n.num_outputs = static_cast<int32_t>(node->outputs.size());
      n.outputs = pointers_.data() + at;
      at += node->outputs.size();
      nodes_.push_back(n);
    }
    for (const DfarmPluginNode& n : nodes_) node_pointers_.push_back(&n);
    partition_.index = partition.index;
    partition_.num_nodes = static_cast<int32_t>(nodes_.size());
    partition_.nodes = node_pointers_.data();
    partition_.num_inputs = static_cast<int32_t>(partition.inputs.size());
    partition_.inputs = pointers_.data() + at;
    at += partition.inputs.size();
    partition_.num_outputs = static_cast<int32_t>(partition.outputs.size());
    partition_.outputs = pointers_.data() + at;
    return delegate_->ToStatus(
        delegate_->api().kernel_init(delegate_->handle(), &partition_, &kernel_), "kernel_init");
  }

  Status Prepare(const runtime::Partition&) override {
    for (size_t i = 0; i < sources_.size(); ++i) tensors_[i].data = sources_[i]->data;
    if (delegate_->api().kernel_prepare == nullptr) return Status::Ok();
    return delegate_->ToStatus(delegate_->api().kernel_prepare(kernel_, &partition_),
                               "kernel_prepare");
  }

  Status Invoke(const runtime::Partition&) override {
    const DfarmPluginStatus s = delegate_->api().kernel_invoke(kernel_, &partition_);
    if (s == DFARM_PLUGIN_OK) return Status::Ok();
    return delegate_->ToStatus(s, "kernel_invoke");
  }

 private:
  const ExternalDelegate* delegate_;
  DfarmPluginKernel* kernel_ = nullptr;  // owned: kernel_free()d
  std::vector<const runtime::Tensor*> sources_;
  std::vector<DfarmPluginTensor> tensors_;
  std::vector<const DfarmPluginTensor*> pointers_;
  std::vector<DfarmPluginNode> nodes_;
  std::vector<const DfarmPluginNode*> node_pointers_;
  DfarmPluginPartition partition_{};
};

}  // namespace

ExternalDelegate::ExternalDelegate(std::unique_ptr<PluginLibrary> library,
                                   const runtime::DelegatePartitionOptions& options)
    : Delegate(library->api().name, options), library_(std::move(library)) {}

ExternalDelegate::~ExternalDelegate() {
  if (handle_ != nullptr) api().destroy(handle_);
}

void ExternalDelegate::Report(void* self, const char* message) {
  static_cast<ExternalDelegate*>(self)->message_ = message != nullptr ? message : "";
}

Status ExternalDelegate::ToStatus(DfarmPluginStatus status, const char* method) const {
  std::string message = message_.empty() ? std::string("no reason given") : message_;
  message_.clear();
  switch (status) {
    case DFARM_PLUGIN_OK:
      return Status::Ok();
    case DFARM_PLUGIN_UNSUPPORTED:
      return Status::Unsupported(message);
    case DFARM_PLUGIN_ERROR:
      break;
  }
  if (status != DFARM_PLUGIN_ERROR) {
    message = "returned unknown status " + std::to_string(static_cast<int>(status));
  }
  return Status::Error("plugin '" + name() + "' " + method + " failed: " + message);
}

Status ExternalDelegate::Create(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& plugin_options,
    const runtime::DelegatePartitionOptions& partition_options,
    std::unique_ptr<ExternalDelegate>* out) {
  std::unique_ptr<PluginLibrary> library;
  DFARM_RETURN_IF_ERROR(PluginLibrary::Open(path, &library));
  std::unique_ptr<ExternalDelegate> delegate(
      new ExternalDelegate(std::move(library), partition_options));
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : plugin_options) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  const DfarmPluginStatus s =
      delegate->api().create(keys.data(), values.data(), static_cast<int32_t>(keys.size()),
                             &ExternalDelegate::Report, delegate.get(), &delegate->handle_);
  if (s != DFARM_PLUGIN_OK || delegate->handle_ == nullptr) {
    Status status = delegate->ToStatus(s == DFARM_PLUGIN_OK ? DFARM_PLUGIN_ERROR : s, "create");
    delegate->handle_ = nullptr;
    return status.WithPrefix("external delegate plugin '" + path + "'");
  }
  *out = std::move(delegate);
  return Status::Ok();
}

Status ExternalDelegate::CheckNode(const runtime::Node& node) const {
  std::vector<DfarmPluginTensor> tensors;
  tensors.reserve(node.inputs.size() + node.outputs.size());
  std::vector<const DfarmPluginTensor*> pointers;
  for (const runtime::Tensor* t : node.inputs) {
    if (t == nullptr) {
      pointers.push_back(nullptr);
      continue;
    }
    tensors.push_back(ToPlugin(*t));
    pointers.push_back(&tensors.back());
  }
  for (const runtime::Tensor* t : node.outputs) {
    tensors.push_back(ToPlugin(*t));
    pointers.push_back(&tensors.back());
  }
  DfarmPluginNode n = NodeHeader(node);
  n.num_inputs = static_cast<int32_t>(node.inputs.size());
  n.inputs = pointers.data();
  n.num_outputs = static_cast<int32_t>(node.outputs.size());
  n.outputs = pointers.data() + node.inputs.size();
  return ToStatus(api().supports_node(handle_, &n), "supports_node");
}

std::unique_ptr<runtime::DelegateKernel> ExternalDelegate::CreateKernel() {
  return std::make_unique<ExternalKernel>(this);
}

Status CreateExternalDelegate(const std::vector<std::pair<std::string, std::string>>& options,
                              std::unique_ptr<runtime::Delegate>* delegate_out) {
  runtime::DelegatePartitionOptions partition_options;
  DFARM_RETURN_IF_ERROR(ParsePartitionOptions(options, &partition_options));
  std::string path;
  std::vector<std::pair<std::string, std::string>> plugin_options;
  for (const auto& [key, value] : options) {
    if (key == "path") {
      path = value;
    } else if (std::find(std::begin(kPartitionOptionKeys), std::end(kPartitionOptionKeys), key) ==
               std::end(kPartitionOptionKeys)) {
      plugin_options.emplace_back(key, value);
    }
  }
  if (path.empty()) {
    return Status::Error(
        "delegate 'external' needs option 'path' (the plugin's shared library, "
        "e.g. 'path:/abs/libmy_delegate.so')");
  }
  std::unique_ptr<ExternalDelegate> delegate;
  DFARM_RETURN_IF_ERROR(
      ExternalDelegate::Create(path, plugin_options, partition_options, &delegate));
  *delegate_out = std::move(delegate);
  return Status::Ok();
}

}  // namespace dfarm::delegates
