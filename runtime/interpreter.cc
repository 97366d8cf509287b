#include "runtime/interpreter.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/kernels/kernel_util.h"
#include "runtime/memory_planner.h"

namespace dfarm::runtime {
namespace {

// Gives the heap's free pages back to the OS (glibc). The float32 copies of
// weights that FreeKeptInputs() freed while the nodes were prepared would
// otherwise stay resident under the arena allocated next: glibc's dynamic
// mmap threshold had put them in the heap, and its trim threshold keeps
// them there (hand_landmark_full's peak RSS: 34.6 MB without, 29.3 with).
void ReturnFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

constexpr size_t kArenaAlignment = 64;

void FreeArena(std::byte* p) { std::free(p); }

size_t AlignUp(size_t n) { return (n + kArenaAlignment - 1) & ~(kArenaAlignment - 1); }

// Ok when delegates may be offered `node`: no tensor it reads or writes is
// `open` (by tensor index: declared [], see Interpreter::MarkOpenShapes) and
// each holds an element (XNNPACK aborts on a dimension 0; our kernels give
// the empty result, as TFLite does). Else kUnsupported naming the tensor:
// the node stays on the CPU, the reason in the placement.
Status OfferableToDelegates(const Node& node, const std::vector<bool>& open) {
  for (const std::vector<Tensor*>* tensors : {&node.inputs, &node.outputs}) {
    for (const Tensor* t : *tensors) {
      if (t == nullptr) continue;
      const std::string who = "tensor " + std::to_string(t->index) + " '" + t->name + "'";
      if (open[t->index]) {
        const std::vector<int32_t> declared =
            t->shape_signature.empty() ? std::vector<int32_t>{} : t->shape_signature;
        return Status::Unsupported(who + " is declared " + ShapeToString(declared) +
                                   " and sized only at Prepare");
      }
      if (t->num_elements() == 0) {
        return Status::Unsupported(who + " " + ShapeToString(t->shape) +
                                   " is empty; no delegate is offered an empty tensor");
      }
    }
  }
  return Status::Ok();
}

// Offers `inner` only the nodes OfferableToDelegates() admits.
class OfferableNodesOnly final : public Delegate {
 public:
  // Keeps both pointers; `open` is indexed by tensor.
  OfferableNodesOnly(Delegate* inner, const std::vector<bool>* open)
      : Delegate(inner->name(), inner->options()), inner_(inner), open_(open) {}

  Status CheckNode(const Node& node) const override {
    DFARM_RETURN_IF_ERROR(OfferableToDelegates(node, *open_));
    return inner_->CheckNode(node);
  }
  std::unique_ptr<DelegateKernel> CreateKernel() override { return inner_->CreateKernel(); }

 private:
  Delegate* inner_;
  const std::vector<bool>* open_;
};

// "3 ops of this model have no kernel: A (custom; node 0), B (custom; nodes
// 1, 4), SIN (node 3)" for the nodes of `refused` (node indices) whose op has
// no kernel (Node::registration null), each op once; empty when they are
// fewer than two ops.
std::string MissingKernels(const std::vector<Node>& nodes, const std::vector<int>& refused) {
  constexpr size_t kNodesNamed = 5;
  std::vector<std::string> ops;
  std::vector<std::vector<int>> op_nodes;
  for (int n : refused) {
    const Node& node = nodes[n];
    if (node.registration != nullptr) continue;
    const std::string op =
        node.op_name + (node.code == tflite::BuiltinOperator::CUSTOM ? " (custom; " : " (");
    const size_t k = std::find(ops.begin(), ops.end(), op) - ops.begin();
    if (k == ops.size()) ops.push_back(op), op_nodes.emplace_back();
    op_nodes[k].push_back(n);
  }
  if (ops.size() < 2) return "";
  std::string text = std::to_string(ops.size()) + " ops of this model have no kernel: ";
  for (size_t k = 0; k < ops.size(); ++k) {
    const std::vector<int>& at = op_nodes[k];
    text += (k > 0 ? ", " : "") + ops[k] + (at.size() == 1 ? "node " : "nodes ");
    for (size_t i = 0; i < std::min(at.size(), kNodesNamed); ++i) {
      text += (i > 0 ? ", " : "") + std::to_string(at[i]);
    }
    if (at.size() > kNodesNamed)
      text += " and " + std::to_string(at.size() - kNodesNamed) + " more";
    text += ")";
  }
  return text;
}

}  // namespace

Interpreter::Interpreter(const Model& model, const OpResolver& resolver,
                         const InterpreterOptions& options)
    : model_(model),
      resolver_(resolver),
      options_(options),
      arena_(nullptr, &FreeArena),
      threadpool_(options.num_threads),
      scratch_(nullptr, &FreeArena) {
  context_.threadpool = threadpool_.threads() > 1 ? &threadpool_ : nullptr;
  context_.num_threads = threadpool_.threads();
  const tflite::SubGraph* graph = model.subgraph();
  const uint32_t num_tensors = graph->tensors() != nullptr ? graph->tensors()->size() : 0;
  tensors_.resize(num_tensors);
  for (uint32_t t = 0; t < num_tensors; ++t) {
    const tflite::Tensor* fb = graph->tensors()->Get(t);
    Tensor& tensor = tensors_[t];
    tensor.index = static_cast<int>(t);
    tensor.name = fb->name() != nullptr ? fb->name()->str() : "";
    if (fb->shape() != nullptr) tensor.shape.assign(fb->shape()->begin(), fb->shape()->end());
    if (fb->shape_signature() != nullptr) {
      tensor.shape_signature.assign(fb->shape_signature()->begin(), fb->shape_signature()->end());
    }
    if (!DTypeFromTflite(fb->type(), &tensor.dtype) && setup_status_.ok()) {
      const char* type_name = tflite::EnumNameTensorType(fb->type());
      setup_status_ = Status::Unsupported(
          "model '" + model.name() + "' tensor " + std::to_string(t) + " '" + tensor.name +
          "' has dtype " +
          (type_name != nullptr && *type_name ? type_name : std::to_string(int(fb->type()))) +
          ", which is not supported");
    }
    tensor.bytes = static_cast<size_t>(tensor.num_elements()) * DTypeSize(tensor.dtype);
    std::span<const uint8_t> data = model.BufferData(fb->buffer());
    if (fb->sparsity() != nullptr) {
      tensor.sparsity = fb->sparsity();
      tensor.bytes = data.size();
      if (data.empty() && setup_status_.ok()) {
        setup_status_ = Status::Unsupported("model '" + model.name() + "' tensor " +
                                            std::to_string(t) + " '" + tensor.name +
                                            "' is sparse but not constant, which is not supported");
      }
    }
    if (!data.empty()) {
      tensor.allocation = Allocation::kConstant;
      // Constant tensors are never written (see Tensor::data).
      tensor.data = reinterpret_cast<std::byte*>(const_cast<uint8_t*>(data.data()));
    }
    if (Status s = ReadQuantization(fb->quantization(), &tensor); !s.ok() && setup_status_.ok()) {
      setup_status_ = s.WithPrefix("model '" + model.name() + "' tensor " + std::to_string(t));
    }
  }

  const uint32_t num_ops = graph->operators() != nullptr ? graph->operators()->size() : 0;
  nodes_.resize(num_ops);
  for (uint32_t i = 0; i < num_ops; ++i) {
    const tflite::Operator* op = graph->operators()->Get(i);
    Node& node = nodes_[i];
    node.index = static_cast<int>(i);
    node.context = &context_;
    node.op = op;
    node.code = model.BuiltinCode(op->opcode_index());
    node.op_name = model.OperatorName(op->opcode_index());
    if (op->inputs() != nullptr) {
      for (int32_t t : *op->inputs()) node.inputs.push_back(t < 0 ? nullptr : &tensors_[t]);
    }
    if (op->outputs() != nullptr) {
      for (int32_t t : *op->outputs()) node.outputs.push_back(&tensors_[t]);
    }
  }
  if (graph->inputs() != nullptr) {
    for (int32_t t : *graph->inputs()) inputs_.push_back(&tensors_[t]);
  }
  if (graph->outputs() != nullptr) {
    for (int32_t t : *graph->outputs()) outputs_.push_back(&tensors_[t]);
  }
}

Interpreter::~Interpreter() = default;

std::string Interpreter::NodeLabel(const Node& node) const {
  return "model '" + model_.name() + "' node " + std::to_string(node.index) + " (" + node.op_name +
         ")";
}

Status Interpreter::AllocateTensors() {
  if (allocated_) return Status::Ok();
  if (!setup_status_.ok()) return setup_status_;
  setup_status_ = AllocateOnce();
  allocated_ = setup_status_.ok();
  return setup_status_;
}

Status Interpreter::AllocateOnce() {
  if (arena_ != nullptr || !persistent_.empty()) {
    return Status::InvalidArgument(
        "AllocateTensors() already failed halfway; build a new "
        "Interpreter");
  }
  MarkFolded();
  MarkOpenShapes();
  DFARM_RETURN_IF_ERROR(ResolveKernels());
  // Kernels size scratch from tensor shapes in Prepare, before the arena is
  // planned: a tensor over the arena limit is refused first.
  for (const Tensor& t : tensors_) {
    if (t.allocation != Allocation::kConstant) DFARM_RETURN_IF_ERROR(CheckTensorFits(t));
  }
  // Every node is checked by our kernels' Prepare before any delegate sees
  // it: a delegate is offered only shapes, element counts and parameters
  // the CPU path accepts.
  DFARM_RETURN_IF_ERROR(PrepareNodes());
  DFARM_RETURN_IF_ERROR(
      delegation_.Build(nodes_, outputs_, GuardedDelegates(), "model '" + model_.name() + "'"));
  plan_ = delegation_.order();
  DFARM_RETURN_IF_ERROR(KeepCpuNodes());
  FoldNodes();
  FuseRows();
  DFARM_RETURN_IF_ERROR(PrepareFoldedInto());
  DFARM_RETURN_IF_ERROR(Plan());
  return delegation_.Prepare();
}

void Interpreter::MarkOpenShapes() {
  open_shapes_.assign(tensors_.size(), false);
  for (const Node& node : nodes_) {
    for (const Tensor* t : node.outputs) {
      open_shapes_[t->index] = t->allocation != Allocation::kConstant && t->shape.empty();
    }
  }
}

std::vector<Delegate*> Interpreter::GuardedDelegates() {
  std::vector<Delegate*> guarded;
  for (Delegate* d : delegates_) {
    guarded_delegates_.push_back(std::make_unique<OfferableNodesOnly>(d, &open_shapes_));
    guarded.push_back(guarded_delegates_.back().get());
  }
  return guarded;
}

bool Interpreter::MustRunOnCpu(const Node& node) const {
  return delegates_.empty() || node.folded || !OfferableToDelegates(node, open_shapes_).ok();
}

Status Interpreter::ResolveKernels() {
  cpu_status_.assign(nodes_.size(), Status::Ok());
  std::vector<int> refused;
  for (Node& node : nodes_) {
    const bool custom = node.code == tflite::BuiltinOperator::CUSTOM;
    node.registration =
        custom ? resolver_.FindCustom(node.op_name) : resolver_.FindBuiltin(node.code);
    Status& why = cpu_status_[node.index];
    if (node.registration == nullptr) {
      why = Status::Unsupported(NodeLabel(node) + ": op " + (custom ? "(custom) " : "") +
                                "is not supported (no kernel registered)");
    }
    for (const Tensor* in : node.inputs) {
      if (why.ok() && in != nullptr && in->sparsity != nullptr &&
          node.code != tflite::BuiltinOperator::DENSIFY) {
        why =
            Status::Unsupported(NodeLabel(node) + ": input tensor " + std::to_string(in->index) +
                                " '" + in->name + "' is sparse; only DENSIFY reads sparse tensors");
      }
    }
    if (!why.ok() && MustRunOnCpu(node)) refused.push_back(node.index);
  }
  return CpuRefusal(refused);
}

Status Interpreter::CpuRefusal(const std::vector<int>& refused) const {
  if (refused.empty()) return Status::Ok();
  const Status& first = cpu_status_[refused.front()];
  const std::string missing = MissingKernels(nodes_, refused);
  if (missing.empty() || first.code() != StatusCode::kUnsupported) return first;
  return Status::Unsupported(first.message() + "; " + missing);
}

Status Interpreter::KeepCpuNodes() {
  std::vector<int> refused;
  for (Node& node : nodes_) {
    if (delegation_.PartitionOf(node.index) >= 0) {
      node.data.reset();  // our kernel does not run it
      node.scratch_bytes = 0;
    } else if (!cpu_status_[node.index].ok()) {
      refused.push_back(node.index);
    }
  }
  return CpuRefusal(refused);
}

namespace {

// Whether `pad` (a PAD node) pads a float input of rank `rank` by constant
// amounts in [0, 2^24] only along dimensions whose bit is set in `dims`
// (bit i: dimension i): then `amounts` gets before, after of each of them,
// in order.
bool PadsOnly(const Node& pad, int rank, unsigned dims, int* amounts) {
  if (pad.inputs.size() != 2 || pad.inputs[0] == nullptr || pad.inputs[1] == nullptr) return false;
  const Tensor& in = *pad.inputs[0];
  const Tensor& paddings = *pad.inputs[1];
  if (in.dtype != DType::kFloat32 || in.rank() != rank || !paddings.has_static_value() ||
      paddings.shape != std::vector<int32_t>{rank, 2} ||
      (paddings.dtype != DType::kInt32 && paddings.dtype != DType::kInt64)) {
    return false;
  }
  for (int i = 0; i < 2 * rank; ++i) {
    const int64_t v = paddings.dtype == DType::kInt32 ? paddings.data_as<int32_t>()[i]
                                                      : paddings.data_as<int64_t>()[i];
    const bool folded = (dims >> (i / 2)) & 1u;
    if (!folded && v != 0) return false;
    if (folded && (v < 0 || v > (int64_t{1} << 24))) return false;
    if (folded) *amounts++ = static_cast<int>(v);
  }
  return true;
}

// Who writes and reads each tensor, for FoldNodes().
struct FoldIndex {
  std::vector<int> readers;   // nodes reading it, +1 for a model output
  std::vector<int> producer;  // the node writing it, or -1
  std::vector<int> reader;    // the last node reading it, or -1
};

// The step of each node in `plan`, or -1 for a node not in it.
std::vector<int> PlanSteps(const std::vector<int>& plan, size_t nodes) {
  std::vector<int> step(nodes, -1);
  for (size_t i = 0; i < plan.size(); ++i) step[plan[i]] = static_cast<int>(i);
  return step;
}

// The node writing each tensor, or -1; a node folded into another is
// skipped (its host writes the tensor).
std::vector<int> Producers(const std::vector<Node>& nodes, size_t tensors) {
  std::vector<int> producer(tensors, -1);
  for (const Node& n : nodes) {
    if (n.folded_into >= 0) continue;
    for (const Tensor* out : n.outputs) producer[out->index] = n.index;
  }
  return producer;
}

}  // namespace

bool Interpreter::FoldableNode(const Node& n) const {
  return !n.folded && n.folded_into < 0 && delegation_.PartitionOf(n.index) < 0 &&
         n.registration != nullptr;
}

// A float tensor one node writes and one node or the model's outputs read
// (FoldIndex::readers == 1), not a variable.
bool Interpreter::PrivateFloat(const Tensor* t, const std::vector<int>& readers,
                               const std::vector<int>& producer) const {
  return t != nullptr && t->dtype == DType::kFloat32 && readers[t->index] == 1 &&
         producer[t->index] >= 0 && !model_.subgraph()->tensors()->Get(t->index)->is_variable();
}

void Interpreter::FoldNodes() {
  FoldIndex ix;
  ix.readers.assign(tensors_.size(), 0);
  ix.producer = Producers(nodes_, tensors_.size());
  ix.reader.assign(tensors_.size(), -1);
  for (const Node& node : nodes_) {
    for (const Tensor* t : node.inputs) {
      if (t != nullptr) ++ix.readers[t->index], ix.reader[t->index] = node.index;
    }
  }
  for (const Tensor* t : outputs_) ++ix.readers[t->index];  // a model output stays written
  const std::vector<int> step = PlanSteps(plan_, nodes_.size());
  for (Node& node : nodes_) {
    if (!FoldableNode(node) || node.outputs.size() != 1) continue;
    if (options_.fold_activations) FoldActivation(node, ix.readers, ix.producer);
    if (options_.fold_adds && node.code == tflite::BuiltinOperator::ADD) {
      FoldAdd(node, ix.readers, ix.producer, step);
    }
    // readers == 1 with a reading node: no model output (that counts too).
    if (options_.fold_pads && node.code == tflite::BuiltinOperator::PAD &&
        PrivateFloat(node.outputs[0], ix.readers, ix.producer) &&
        ix.reader[node.outputs[0]->index] >= 0) {
      FoldPad(node, nodes_[ix.reader[node.outputs[0]->index]]);
    }
  }
  plan_.erase(
      std::remove_if(plan_.begin(), plan_.end(), [&](int n) { return nodes_[n].folded_into >= 0; }),
      plan_.end());
}

void Interpreter::FoldActivation(Node& act, const std::vector<int>& readers,
                                 std::vector<int>& producer) {
  using Op = tflite::BuiltinOperator;
  using Act = tflite::ActivationFunctionType;
  Act activation = Act::NONE;
  if (act.code == Op::RELU) activation = Act::RELU;
  if (act.code == Op::RELU6) activation = Act::RELU6;
  if (act.code == Op::RELU_N1_TO_1) activation = Act::RELU_N1_TO_1;
  if (activation == Act::NONE || act.inputs.size() != 1 ||
      !PrivateFloat(act.inputs[0], readers, producer) || act.outputs[0]->dtype != DType::kFloat32 ||
      model_.subgraph()->tensors()->Get(act.outputs[0]->index)->is_variable()) {
    return;
  }
  Node& prev = nodes_[producer[act.inputs[0]->index]];
  if (!FoldableNode(prev) || !prev.registration->applies_folded_activation ||
      prev.outputs.size() != 1 || prev.folded_activation != Act::NONE ||
      FusedActivation(prev) != Act::NONE) {
    return;
  }
  prev.outputs[0] = act.outputs[0];
  prev.folded_activation = activation;
  producer[act.outputs[0]->index] = prev.index;
  act.folded_into = prev.index;
}

void Interpreter::FoldPad(Node& pad, Node& next) {
  if (!FoldableNode(next)) return;
  const Tensor* padded = pad.outputs[0];
  // Height and width of a 4-D input, into a conv's padding.
  int amounts[4];
  if (next.registration->applies_folded_pad && !next.inputs.empty() && next.inputs[0] == padded &&
      PadsOnly(pad, 4, 0b0110u, amounts) &&
      std::all_of(next.folded_pad, next.folded_pad + 4, [](int p) { return p == 0; })) {
    next.inputs[0] = pad.inputs[0];
    std::copy(amounts, amounts + 4, next.folded_pad);
    pad.folded_into = next.index;
    return;
  }
  // The last dimension, into an ADD whose other input has the padded shape.
  const int rank = pad.inputs.empty() || pad.inputs[0] == nullptr ? 0 : pad.inputs[0]->rank();
  if (!next.registration->applies_folded_channel_pad || next.inputs.size() != 2 ||
      next.folded_channel_pad[0] >= 0 || rank < 1 ||
      !PadsOnly(pad, rank, 1u << (rank - 1), amounts)) {
    return;
  }
  const int k = next.inputs[0] == padded ? 0 : 1;
  const Tensor* other = next.inputs[1 - k];
  if (next.inputs[k] != padded || other == nullptr || other->dtype != DType::kFloat32 ||
      OpenShape(*other) || other->shape.size() != static_cast<size_t>(rank)) {
    return;
  }
  // The other input has the padded shape (in int64: a corrupt model's
  // dimension plus the padding may not fit int32).
  for (int d = 0; d < rank; ++d) {
    const int64_t padded_dim =
        int64_t{pad.inputs[0]->shape[d]} + (d == rank - 1 ? int64_t{amounts[0]} + amounts[1] : 0);
    if (other->shape[d] != padded_dim) return;
  }
  next.inputs[k] = pad.inputs[0];
  next.folded_channel_pad[0] = k;
  next.folded_channel_pad[1] = amounts[0];
  next.folded_channel_pad[2] = amounts[1];
  pad.folded_into = next.index;
}

void Interpreter::FoldAdd(Node& add, const std::vector<int>& readers, std::vector<int>& producer,
                          const std::vector<int>& step) {
  const Tensor* out = add.outputs[0];
  if (add.inputs.size() != 2 || out->dtype != DType::kFloat32 || OpenShape(*out) ||
      out->rank() != 4 || model_.subgraph()->tensors()->Get(out->index)->is_variable()) {
    return;
  }
  for (int k = 0; k < 2; ++k) {
    Tensor* result = add.inputs[k];
    Tensor* other = add.inputs[1 - k];
    if (!PrivateFloat(result, readers, producer) || OpenShape(*result) ||
        result->shape != out->shape || other == nullptr || other == result ||
        other->dtype != DType::kFloat32 || OpenShape(*other) ||
        model_.subgraph()->tensors()->Get(other->index)->is_variable()) {
      continue;
    }
    // The other input: the output's shape, or read through a folded channel pad.
    const bool padded = add.folded_channel_pad[0] == 1 - k;
    if (add.folded_channel_pad[0] == k || (!padded && other->shape != out->shape)) continue;
    Node& prev = nodes_[producer[result->index]];
    const int made = producer[other->index];  // -1: a constant or model input
    if (!FoldableNode(prev) || !prev.registration->applies_folded_add || prev.outputs.size() != 1 ||
        prev.folded_activation != tflite::ActivationFunctionType::NONE ||
        FusedActivation(prev) != tflite::ActivationFunctionType::NONE ||
        prev.folded_addend != nullptr || (made >= 0 && step[made] >= step[prev.index]) ||
        (NodeActivation(add) != tflite::ActivationFunctionType::NONE &&
         !prev.registration->applies_folded_activation)) {
      continue;
    }
    const int before = padded ? add.folded_channel_pad[1] : 0;
    prev.outputs[0] = add.outputs[0];
    prev.folded_addend = other;
    prev.folded_addend_channels[0] = before;
    prev.folded_addend_channels[1] = before + other->shape[3];
    prev.folded_activation = NodeActivation(add);
    producer[out->index] = prev.index;
    add.folded_into = prev.index;
    return;
  }
}

Status Interpreter::PrepareNode(Node& node) {
  node.prepared_before = std::move(node.data);
  node.scratch_bytes = 0;
  node.kept_inputs = 0;
  const Status prepared = node.registration->prepare(node);
  node.prepared_before.reset();
  DFARM_RETURN_IF_ERROR(prepared.WithPrefix(NodeLabel(node)));
  for (const Tensor* out : node.outputs) DFARM_RETURN_IF_ERROR(CheckTensorFits(*out));
  return Status::Ok();
}

std::vector<int> Interpreter::PendingReads() const {
  std::vector<int> pending(tensors_.size(), 0);
  for (const Node& node : nodes_) {
    for (const Tensor* t : node.inputs) {
      if (t != nullptr) ++pending[t->index];
    }
  }
  for (const Tensor* t : outputs_) ++pending[t->index];  // never freed
  return pending;
}

void Interpreter::FreeKeptInputs(const Node& node, std::vector<int>* pending) {
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    Tensor* t = node.inputs[k];
    const bool kept = k < 32 && ((node.kept_inputs >> k) & 1u) != 0;
    if (t == nullptr || !(node.folded || kept) || --(*pending)[t->index] > 0) continue;
    const int block =
        t->index < static_cast<int>(persistent_block_.size()) ? persistent_block_[t->index] : -1;
    if (t->allocation != Allocation::kFolded || block < 0) continue;
    persistent_[block].reset();
    persistent_block_[t->index] = -1;
    persistent_bytes_ -= AlignUp(t->bytes);
    t->data = nullptr;
  }
}

Status Interpreter::PrepareNodes() {
  // Without delegates every node's Prepare is its last but for the few
  // prepared again after FoldNodes(), which find what they kept in
  // Node::prepared_before.
  const bool free_kept = options_.free_kept_folded && delegates_.empty();
  std::vector<int> pending;
  if (free_kept) pending = PendingReads();
  bool freed = false;
  for (Node& node : nodes_) {
    if (!cpu_status_[node.index].ok()) continue;
    if (Status s = PrepareNode(node); !s.ok()) {
      // Our kernel lacks what the node needs (kUnsupported), but a delegate
      // may have it: the node fails only if it is left to the CPU.
      if (s.code() != StatusCode::kUnsupported || MustRunOnCpu(node)) return s;
      cpu_status_[node.index] = s;
      node.data.reset();
      continue;
    }
    if (node.folded) {
      for (Tensor* out : node.outputs) DFARM_RETURN_IF_ERROR(AllocatePersistent(out));
      DFARM_RETURN_IF_ERROR(EnsureScratch(node.scratch_bytes));
      DFARM_RETURN_IF_ERROR(node.registration->eval(node).WithPrefix(NodeLabel(node)));
    }
    if (free_kept) {
      const size_t before = persistent_bytes_;
      FreeKeptInputs(node, &pending);
      freed = freed || persistent_bytes_ < before;
    }
  }
  if (freed) ReturnFreedMemory();
  return Status::Ok();
}

void Interpreter::FuseRows() {
  if (!options_.fuse_rows) return;
  const std::vector<int> step = PlanSteps(plan_, nodes_.size());
  const std::vector<int> producer = Producers(nodes_, tensors_.size());
  std::vector<bool> graph_input(tensors_.size(), false);
  for (const Tensor* in : inputs_) graph_input[in->index] = true;
  // Whether `t` is a constant, a graph input or written by a step before
  // `first_step`.
  auto made_before = [&](const Tensor* t, int first_step) {
    if (t == nullptr || t->allocation != Allocation::kNone || graph_input[t->index]) return true;
    const int p = producer[t->index];
    return p >= 0 && step[p] >= 0 && step[p] < first_step;
  };
  std::vector<bool> drop(nodes_.size(), false);
  for (size_t i = 0; i + 1 < plan_.size(); ++i) {
    Node& first = nodes_[plan_[i]];
    Node& second = nodes_[plan_[i + 1]];
    if (!FoldableNode(first) || !FoldableNode(second) || first.registration->runs_then == nullptr ||
        !first.registration->runs_then(first) || first.then != nullptr || first.runs_in >= 0 ||
        first.outputs.size() != 1 || second.registration->rows_from_input == nullptr ||
        second.registration->eval_rows == nullptr || second.outputs.size() != 1 ||
        second.inputs.empty() || second.inputs[0] != first.outputs[0] ||
        first.outputs[0]->dtype != DType::kFloat32 ||
        !second.registration->rows_from_input(second)) {
      continue;
    }
    // The same rows: the conv's output has one row per pixel of the
    // depthwise conv's output.
    const Tensor& mid = *first.outputs[0];
    const Tensor& out = *second.outputs[0];
    if (mid.rank() < 1 || out.rank() != mid.rank() || mid.shape.back() <= 0 ||
        out.shape.back() <= 0 ||
        mid.num_elements() / mid.shape.back() != out.num_elements() / out.shape.back()) {
      continue;
    }
    // Every other input of the conv exists before the depthwise conv runs.
    bool ready = made_before(second.folded_addend, static_cast<int>(i)) &&
                 second.folded_addend != first.outputs[0];
    for (size_t k = 1; k < second.inputs.size() && ready; ++k) {
      ready = second.inputs[k] != first.outputs[0] &&
              made_before(second.inputs[k], static_cast<int>(i));
    }
    if (!ready) continue;
    first.then = &second;
    second.runs_in = first.index;
    drop[second.index] = true;
    ++i;  // the conv is taken: it starts no pair of its own
  }
  plan_.erase(std::remove_if(plan_.begin(), plan_.end(), [&](int n) { return drop[n]; }),
              plan_.end());
}

Status Interpreter::PrepareFoldedInto() {
  std::vector<bool> again(nodes_.size(), false);
  for (Node& node : nodes_) {
    if (node.folded_into < 0) continue;
    again[node.folded_into] = true;
    node.data.reset();  // it runs inside the node it was folded into
    node.scratch_bytes = 0;
  }
  size_t scratch = 0;  // the largest per-thread request of a node Invoke() runs
  for (Node& node : nodes_) {
    if (delegation_.PartitionOf(node.index) >= 0 || node.folded_into >= 0) continue;
    if (again[node.index]) DFARM_RETURN_IF_ERROR(PrepareNode(node));
    if (!node.folded) scratch = std::max(scratch, node.scratch_bytes);
  }
  return EnsureScratch(scratch);
}

Status Interpreter::EnsureScratch(size_t per_thread) {
  const size_t stride = AlignUp(per_thread);
  if (stride <= context_.scratch_stride) return Status::Ok();
  const size_t threads = static_cast<size_t>(context_.num_threads);
  if (stride > options_.max_arena_bytes / threads) {
    return Status::Unsupported("model '" + model_.name() + "' kernels need " +
                               std::to_string(threads) + " x " + std::to_string(stride) +
                               " bytes of scratch, over the arena limit of " +
                               std::to_string(options_.max_arena_bytes) + " bytes");
  }
  scratch_.reset(static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, stride * threads)));
  if (scratch_ == nullptr) {
    return Status::Error("model '" + model_.name() + "': out of memory for " +
                         std::to_string(stride * threads) + " bytes of kernel scratch");
  }
  context_.scratch = scratch_.get();
  context_.scratch_stride = stride;
  scratch_bytes_ = stride * threads;
  return Status::Ok();
}

Status Interpreter::CheckTensorFits(const Tensor& tensor) const {
  if (tensor.bytes <= options_.max_arena_bytes) return Status::Ok();
  return Status::Unsupported(
      "model '" + model_.name() + "' tensor " + std::to_string(tensor.index) + " '" + tensor.name +
      "' " + DescribeTensor(tensor) + " needs " + std::to_string(tensor.bytes) +
      " bytes, over the arena limit of " + std::to_string(options_.max_arena_bytes) + " bytes");
}

Status Interpreter::AllocatePersistent(Tensor* tensor) {
  const size_t bytes = AlignUp(std::max<size_t>(tensor->bytes, 1));
  if (bytes > options_.max_arena_bytes - std::min(persistent_bytes_, options_.max_arena_bytes)) {
    return Status::Unsupported("model '" + model_.name() + "' needs over " +
                               std::to_string(persistent_bytes_ + bytes) +
                               " bytes for its folded tensors and variables, over the limit of " +
                               std::to_string(options_.max_arena_bytes) + " bytes");
  }
  persistent_.emplace_back(static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, bytes)),
                           &FreeArena);
  if (persistent_.back() == nullptr) {
    return Status::Error("model '" + model_.name() + "': out of memory for a " +
                         std::to_string(bytes) + "-byte tensor");
  }
  std::memset(persistent_.back().get(), 0, bytes);  // variables start at zero
  tensor->data = persistent_.back().get();
  if (persistent_block_.size() < tensors_.size()) persistent_block_.resize(tensors_.size(), -1);
  persistent_block_[tensor->index] = static_cast<int>(persistent_.size() - 1);
  persistent_bytes_ += AlignUp(tensor->bytes);
  return Status::Ok();
}

void Interpreter::MarkFolded() {
  // Fold nodes whose inputs all hold values before Invoke().
  for (Node& node : nodes_) {
    bool has_input = false, all_static = true;
    for (Tensor* in : node.inputs) {
      if (in == nullptr) continue;
      has_input = true;
      all_static = all_static && in->has_static_value();
    }
    node.folded = has_input && all_static;
    if (node.folded) {
      for (Tensor* out : node.outputs) out->allocation = Allocation::kFolded;
    }
  }
}

void Interpreter::Lifetimes(std::vector<int>* first_out, std::vector<int>* last_out) const {
  // Lifetimes in Invoke() steps; step i runs plan_[i]. A delegated node's
  // tensors live across its whole partition, which runs as one step.
  const int last_step = static_cast<int>(plan_.size());
  std::vector<int>& first = *first_out;
  std::vector<int>& last = *last_out;
  first.assign(tensors_.size(), -1);
  last.assign(tensors_.size(), -1);
  auto touch = [&](const Tensor* t, int step) {
    if (t == nullptr || t->allocation != Allocation::kNone) return;
    if (first[t->index] < 0) first[t->index] = step;
    last[t->index] = std::max(last[t->index], step);
  };
  // Graph inputs live through the whole Invoke(), as in TFLite: the caller
  // writes them once and may invoke many times, so no intermediate may reuse
  // their memory.
  for (Tensor* t : inputs_) touch(t, 0), touch(t, last_step);
  std::vector<int> partition_first(delegation_.partitions_size(), -1),
      partition_last(delegation_.partitions_size(), -1);
  for (int step = 0; step < last_step; ++step) {
    if (const int p = delegation_.PartitionOf(plan_[step]); p >= 0) {
      if (partition_first[p] < 0) partition_first[p] = step;
      partition_last[p] = step;
    }
  }
  for (int step = 0; step < last_step; ++step) {
    const Node& node = nodes_[plan_[step]];
    const int p = delegation_.PartitionOf(node.index);
    const int lo = p >= 0 ? partition_first[p] : step, hi = p >= 0 ? partition_last[p] : step;
    // A node run inside this one (Node::then) reads and writes in the same
    // step.
    for (const Node* n = &node; n != nullptr; n = n->then) {
      for (Tensor* t : n->inputs) touch(t, lo), touch(t, hi);
      touch(n->folded_addend, lo), touch(n->folded_addend, hi);
      for (Tensor* t : n->outputs) touch(t, lo), touch(t, hi);
    }
  }
  for (Tensor* t : outputs_) touch(t, last_step);
}

Status Interpreter::Plan() {
  std::vector<int> first, last;
  Lifetimes(&first, &last);
  const tflite::SubGraph* graph = model_.subgraph();
  // Variables live as long as the interpreter, beside the folded tensors.
  for (Tensor& t : tensors_) {
    if (!graph->tensors()->Get(t.index)->is_variable() || t.allocation != Allocation::kNone) {
      continue;
    }
    t.allocation = Allocation::kFolded;
    DFARM_RETURN_IF_ERROR(AllocatePersistent(&t));
  }

  std::vector<BufferRequest> requests;
  std::vector<int> request_tensor;
  for (const Tensor& t : tensors_) {
    if (t.allocation != Allocation::kNone || first[t.index] < 0) continue;
    requests.push_back({t.bytes, first[t.index], last[t.index]});
    request_tensor.push_back(t.index);
  }
  std::vector<size_t> offsets;
  const size_t planned = PlanGreedy(requests, kArenaAlignment, &offsets);

  const size_t persistent = persistent_bytes_;
  const size_t total = persistent + planned;
  if (total > options_.max_arena_bytes) {
    return Status::Unsupported("model '" + model_.name() + "' needs a " + std::to_string(total) +
                               "-byte arena, over the limit of " +
                               std::to_string(options_.max_arena_bytes) + " bytes");
  }
  arena_.reset(
      static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, std::max(planned, AlignUp(1)))));
  if (arena_ == nullptr) {
    return Status::Error("model '" + model_.name() + "': out of memory for a " +
                         std::to_string(planned) + "-byte arena");
  }
  arena_bytes_ = total;
  for (size_t r = 0; r < requests.size(); ++r) {
    Tensor& t = tensors_[request_tensor[r]];
    t.allocation = Allocation::kArena;
    t.data = arena_.get() + offsets[r];
  }
  return Status::Ok();
}

Status Interpreter::Invoke() {
  if (!allocated_) {
    return Status::InvalidArgument("Invoke() called before a successful AllocateTensors()");
  }
  for (int index : plan_) DFARM_RETURN_IF_ERROR(RunNode(index));
  return Status::Ok();
}

Status Interpreter::InvokeStep(size_t step) {
  if (!allocated_ || step >= plan_.size()) {
    return Status::InvalidArgument(
        "InvokeStep() called before a successful AllocateTensors() "
        "or past the last step");
  }
  return RunNode(plan_[step]);
}

Status Interpreter::InvokeStepProfiled(size_t step, std::vector<double>* node_us_out) {
  if (!allocated_ || step >= plan_.size() || !delegation_.StartsPartition(plan_[step])) {
    return Status::InvalidArgument(
        "InvokeStepProfiled() called before a successful AllocateTensors() or on step " +
        std::to_string(step) + ", which runs no delegated partition");
  }
  return delegation_.InvokePartitionProfiled(delegation_.PartitionOf(plan_[step]), node_us_out);
}

Status Interpreter::RunNode(int index) {
  if (const int p = delegation_.PartitionOf(index); p >= 0) {
    return delegation_.StartsPartition(index) ? delegation_.InvokePartition(p) : Status::Ok();
  }
  Node& node = nodes_[index];
  Status status = node.registration->eval(node);
  if (!status.ok()) return status.WithPrefix(NodeLabel(node));
  return Status::Ok();
}

}  // namespace dfarm::runtime
