#include "delegates/xnnpack/xnnpack_delegate.h"

#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "delegates/registry.h"
#include "delegates/xnnpack/xnnpack_nodes.h"
#include "runtime/memory_planner.h"

namespace dfarm::delegates {
namespace {

using runtime::Status;
using xnnpack_internal::SubgraphBuild;
using xnnpack_internal::XnnStatusName;

struct SubgraphDeleter {
  void operator()(xnn_subgraph* s) const { xnn_delete_subgraph(s); }
};
struct RuntimeDeleter {
  void operator()(xnn_runtime* r) const { xnn_delete_runtime(r); }
};
using SubgraphPtr = std::unique_ptr<xnn_subgraph, SubgraphDeleter>;
using RuntimePtr = std::unique_ptr<xnn_runtime, RuntimeDeleter>;

// No XNN_FLAG_HINT_SPARSE_INFERENCE: tried on the corpus (the *_sparse model
// included), it gave no speed-up.
uint32_t RuntimeFlags(const XnnpackOptions& o) {
  return o.fp16 ? XNN_FLAG_FORCE_FP16_INFERENCE : 0;
}

// Whether XNNPACK runs a float32 subgraph in float16 here: it refuses the
// forced flag on CPUs without float16 arithmetic.
Status CheckFp16Support() {
  xnn_subgraph_t raw = nullptr;
  if (xnn_create_subgraph(2, 0, &raw) != xnn_status_success) {
    return Status::Error("xnnpack could not create a subgraph");
  }
  SubgraphPtr subgraph(raw);
  const size_t dims[1] = {4};
  uint32_t in = 0, out = 1;
  xnn_define_tensor_value(raw, xnn_datatype_fp32, 1, dims, nullptr, 0,
                          XNN_VALUE_FLAG_EXTERNAL_INPUT, &in);
  xnn_define_tensor_value(raw, xnn_datatype_fp32, 1, dims, nullptr, 1,
                          XNN_VALUE_FLAG_EXTERNAL_OUTPUT, &out);
  xnn_define_clamp(raw, 0.0f, 6.0f, in, out, 0);
  xnn_runtime_t rt = nullptr;
  const xnn_status s = xnn_create_runtime_v2(raw, nullptr, XNN_FLAG_FORCE_FP16_INFERENCE, &rt);
  if (s == xnn_status_success) {
    xnn_delete_runtime(rt);
    return Status::Ok();
  }
  return Status::Unsupported(std::string("fp16 inference unsupported on this CPU (xnnpack: ") +
                             XnnStatusName(s) + ")");
}

// A partition's external values, in the order their ids are given: its
// run-time inputs, then the CONCATENATION outputs a node in it reads (inputs
// too), then its outputs that no CONCATENATION writes. A CONCATENATION's
// output is no XNNPACK value: its inputs are copied into external values over
// its blocks; when a later node reads it, it is an external input too
// (XNNPACK runs the nodes in the order defined).
struct External {
  const runtime::Tensor* tensor;
  bool input;
};
std::vector<External> ExternalTensors(const runtime::Partition& partition) {
  std::unordered_set<const runtime::Tensor*> concat_outputs, read_inside;
  for (const runtime::Node* node : partition.nodes) {
    for (const runtime::Tensor* t : node->inputs) read_inside.insert(t);
    if (node->code == tflite::BuiltinOperator::CONCATENATION) {
      concat_outputs.insert(node->outputs[0]);
    }
  }
  std::vector<External> externals;
  for (const runtime::Tensor* t : partition.inputs) {
    if (!t->has_static_value()) externals.push_back({t, true});
  }
  for (const runtime::Tensor* t : concat_outputs) {
    if (read_inside.count(t) != 0) externals.push_back({t, true});
  }
  for (const runtime::Tensor* t : partition.outputs) {
    if (concat_outputs.count(t) == 0) externals.push_back({t, false});
  }
  return externals;
}

// The partition's outputs that a node of the same partition reads too.
std::unordered_set<const runtime::Tensor*> OutputsReadInside(const runtime::Partition& partition) {
  std::unordered_set<const runtime::Tensor*> outputs(partition.outputs.begin(),
                                                     partition.outputs.end());
  std::unordered_set<const runtime::Tensor*> read;
  for (const runtime::Node* node : partition.nodes) {
    for (const runtime::Tensor* t : node->inputs) {
      if (t != nullptr && outputs.count(t) != 0) read.insert(t);
    }
  }
  return read;
}

// The external values the CONCATENATIONs of `partition` add: one per input.
size_t ConcatSliceCount(const runtime::Partition& partition) {
  size_t num_slices = 0;
  for (const runtime::Node* node : partition.nodes) {
    if (node->code == tflite::BuiltinOperator::CONCATENATION) num_slices += node->inputs.size();
  }
  return num_slices;
}

Status CheckFp16Node(const runtime::Node& node);

// Whether `t` is read by no node of `partition` but `reader`, and is no
// partition output: a value XNNPACK may keep inside a fused operator.
bool OnlyReader(const runtime::Partition& partition, const runtime::Tensor* t,
                const runtime::Node* reader) {
  if (std::find(partition.outputs.begin(), partition.outputs.end(), t) != partition.outputs.end()) {
    return false;
  }
  for (const runtime::Node* node : partition.nodes) {
    if (node != reader &&
        std::find(node->inputs.begin(), node->inputs.end(), t) != node->inputs.end()) {
      return false;
    }
  }
  return true;
}

// A float PAD of height and width only (constant paddings, pad value 0), read
// only by the CONV_2D or DEPTHWISE_CONV_2D after it: XNNPACK's subgraph
// optimization folds it into the convolution's padding.
bool PadFusesIntoNext(const runtime::Partition& partition, size_t i) {
  using Op = tflite::BuiltinOperator;
  if (i + 1 >= partition.nodes.size()) return false;
  const runtime::Node& pad = *partition.nodes[i];
  const runtime::Node& conv = *partition.nodes[i + 1];
  if (pad.code != Op::PAD || pad.inputs.size() != 2 || pad.outputs.size() != 1) return false;
  if (conv.code != Op::CONV_2D && conv.code != Op::DEPTHWISE_CONV_2D) return false;
  if (conv.inputs.empty() || conv.inputs[0] != pad.outputs[0]) return false;
  const runtime::Tensor* in = pad.inputs[0];
  const runtime::Tensor* paddings = pad.inputs[1];
  if (in == nullptr || in->dtype != runtime::DType::kFloat32 || in->rank() != 4 ||
      paddings == nullptr || !paddings->has_static_value() || paddings->num_elements() != 8) {
    return false;
  }
  for (int k : {0, 1, 6, 7}) {  // batch and channels, before and after
    const int64_t p = paddings->dtype == runtime::DType::kInt64   ? paddings->data_as<int64_t>()[k]
                      : paddings->dtype == runtime::DType::kInt32 ? paddings->data_as<int32_t>()[k]
                                                                  : -1;
    if (p != 0) return false;
  }
  return OnlyReader(partition, pad.outputs[0], &conv);
}

// A RELU, RELU6 or RELU_N1_TO_1 (an XNNPACK clamp) that is the only reader
// of the output of the node before it, of a type XNNPACK fuses a clamp into.
bool ClampFusesIntoPrevious(const runtime::Partition& partition, size_t i) {
  using Op = tflite::BuiltinOperator;
  if (i == 0 || i >= partition.nodes.size()) return false;
  const runtime::Node& act = *partition.nodes[i];
  const runtime::Node& prev = *partition.nodes[i - 1];
  if (act.code != Op::RELU && act.code != Op::RELU6 && act.code != Op::RELU_N1_TO_1) return false;
  switch (prev.code) {
    case Op::CONV_2D:
    case Op::DEPTHWISE_CONV_2D:
    case Op::TRANSPOSE_CONV:
    case Op::FULLY_CONNECTED:
    case Op::ADD:
    case Op::SUB:
    case Op::MUL:
    case Op::DIV:
    case Op::AVERAGE_POOL_2D:
    case Op::MAX_POOL_2D:
      break;
    default:
      return false;
  }
  if (act.inputs.empty() || prev.outputs.size() != 1 || act.inputs[0] != prev.outputs[0]) {
    return false;
  }
  return OnlyReader(partition, prev.outputs[0], &act);
}

// The nodes from `i` that XNNPACK runs as one operator, in order: a PAD that
// PadFusesIntoNext, the main node (*timed), a clamp that
// ClampFusesIntoPrevious. Returns the index after them.
size_t FusionGroup(const runtime::Partition& partition, size_t i,
                   std::vector<runtime::Node*>* members, size_t* timed) {
  if (PadFusesIntoNext(partition, i)) members->push_back(partition.nodes[i++]);
  *timed = i;
  members->push_back(partition.nodes[i++]);
  if (ClampFusesIntoPrevious(partition, i)) members->push_back(partition.nodes[i++]);
  return i;
}

// `nodes` (adjacent ones of `partition`) as a partition of their own: what
// they read from outside the group is its inputs, what the last one writes
// its outputs.
runtime::Partition GroupPartition(const runtime::Partition& partition,
                                  std::vector<runtime::Node*> nodes) {
  runtime::Partition group;
  group.index = partition.index;
  group.delegate = partition.delegate;
  group.nodes = std::move(nodes);
  std::unordered_set<const runtime::Tensor*> written, read;
  for (runtime::Node* node : group.nodes) {
    for (runtime::Tensor* t : node->inputs) {
      if (t != nullptr && written.count(t) == 0 && read.insert(t).second) {
        group.inputs.push_back(t);
      }
    }
    for (runtime::Tensor* t : node->outputs) {
      if (t != nullptr) written.insert(t);
    }
  }
  for (runtime::Tensor* t : group.nodes.back()->outputs) {
    if (t != nullptr) group.outputs.push_back(t);
  }
  return group;
}

class XnnpackKernel : public runtime::DelegateKernel {
 public:
  explicit XnnpackKernel(const XnnpackDelegate* delegate) : delegate_(delegate) {}

  Status Init(const runtime::Partition& partition) override {
    for (const runtime::Node* node : partition.nodes) {
      Status s = xnnpack_internal::VisitNode(*node, nullptr);
      if (!s.ok()) return s.WithPrefix("node " + std::to_string(node->index));
    }
    return Status::Ok();
  }

  Status Prepare(const runtime::Partition& partition) override {
    return BuildRuntime(partition, &whole_);
  }

  Status Invoke(const runtime::Partition& partition) override {
    if (whole_.runtime == nullptr) {
      return Status::InvalidArgument("xnnpack partition " + std::to_string(partition.index) +
                                     " was not prepared");
    }
    return Run(whole_, partition.index);
  }

  // This XNNPACK (2022-02) has no runtime profiling (xnn_get_runtime_profiling_info
  // came later), so each node runs as a runtime of its own, built on first
  // call, and the host clock marks the end of each: a node's time runs from
  // the previous mark to its own, the call's overhead included. Nodes
  // XNNPACK's subgraph optimization fuses (FusionGroup: a spatial PAD into
  // the conv after it, a clamp into the node before it) run as one runtime
  // whose time goes to the main node; the fused ones read 0. The tensors
  // between runtimes live in a buffer planned by lifetime (PlanCompact), as
  // XNNPACK plans its own. What only the profile needs comes after a mark
  // and before the next node's start, so no node's time holds it: copying
  // those tensors to the arena, and making again the outputs fusion keeps
  // inside. The partition has no copies at its edges (its inputs and
  // outputs are the arena's).
  Status InvokeProfiled(const runtime::Partition& partition,
                        std::vector<double>* node_us_out) override {
    if (!delegate_->profiling()) {
      return Status::Unsupported("xnnpack times nodes only after EnableProfiling()");
    }
    if (groups_.empty()) DFARM_RETURN_IF_ERROR(BuildNodeRuntimes(partition));
    node_us_out->assign(partition.nodes.size(), 0.0);
    using Clock = std::chrono::steady_clock;
    Clock::time_point start = Clock::now();
    for (const Group& g : groups_) {
      DFARM_RETURN_IF_ERROR(Run(g.runtime, partition.index));
      const Clock::time_point end = Clock::now();
      (*node_us_out)[g.timed] = std::chrono::duration<double, std::micro>(end - start).count();
      for (const XnnRuntime& f : g.fused) DFARM_RETURN_IF_ERROR(Run(f, partition.index));
      for (const runtime::Tensor* t : g.copy_out) {
        std::memcpy(t->data, compact_at_.at(t), t->bytes);
      }
      start = Clock::now();
    }
    return Status::Ok();
  }

 private:
  // One XNNPACK runtime over the interpreter's tensors.
  struct XnnRuntime {
    std::deque<std::vector<std::byte>> owned;  // before runtime: outlives it
    std::vector<xnn_external_value> externals;
    RuntimePtr runtime;
  };

  // A runtime of InvokeProfiled(): one node, with those fused into it.
  struct Group {
    size_t timed = 0;              // the partition's node the time goes to
    runtime::Partition nodes;      // the group as a partition of its own
    XnnRuntime runtime;            // timed
    std::deque<XnnRuntime> fused;  // untimed: the outputs fusion keeps inside the group
    std::vector<const runtime::Tensor*> copy_out;  // in compact_: copied to the arena after
  };

  static Status Run(const XnnRuntime& rt, int partition_index) {
    const xnn_status s = xnn_invoke_runtime(rt.runtime.get());
    if (s != xnn_status_success) {
      return Status::Error("xnnpack failed to run partition " + std::to_string(partition_index) +
                           ": " + XnnStatusName(s));
    }
    return Status::Ok();
  }

  // groups_ and compact_: one runtime per node of `partition` (with the
  // nodes XNNPACK fuses into it, see FusionGroup), over compact_ for the
  // tensors between groups.
  Status BuildNodeRuntimes(const runtime::Partition& partition) {
    std::deque<Group> groups;
    for (size_t i = 0; i < partition.nodes.size();) {
      std::vector<runtime::Node*> members;
      groups.emplace_back();
      Group& g = groups.back();
      i = FusionGroup(partition, i, &members, &g.timed);
      g.nodes = GroupPartition(partition, std::move(members));
    }
    PlanCompact(partition, groups);
    for (Group& g : groups) {
      Status s = BuildRuntime(g.nodes, &g.runtime, &compact_at_);
      // Outputs the group keeps inside (fusion): made again, untimed, into the arena.
      for (size_t k = 0; s.ok() && k + 1 < g.nodes.nodes.size(); ++k) {
        runtime::Node* fused = g.nodes.nodes[k];
        g.fused.emplace_back();
        s = BuildRuntime(GroupPartition(partition, {fused}), &g.fused.back(), &compact_at_);
      }
      if (!s.ok()) {
        return s.WithPrefix("timing node " + std::to_string(partition.nodes[g.timed]->index) +
                            " alone");
      }
      for (const runtime::Tensor* t : g.nodes.outputs) {
        if (compact_at_.count(t) != 0) g.copy_out.push_back(t);
      }
    }
    groups_ = std::move(groups);
    return Status::Ok();
  }

  // compact_ and compact_at_: the tensors a group writes and a later one
  // reads (not the partition's outputs, which stay in the arena), planned by
  // lifetime in groups as XNNPACK plans a runtime's inner values, so the
  // nodes run over as little memory as in the partition's own runtime.
  void PlanCompact(const runtime::Partition& partition, const std::deque<Group>& groups) {
    std::unordered_set<const runtime::Tensor*> outputs(partition.outputs.begin(),
                                                       partition.outputs.end());
    std::vector<const runtime::Tensor*> planned;
    std::vector<runtime::BufferRequest> requests;
    std::unordered_map<const runtime::Tensor*, size_t> request_of;
    for (size_t g = 0; g < groups.size(); ++g) {
      for (const runtime::Tensor* t : groups[g].nodes.inputs) {
        if (auto it = request_of.find(t); it != request_of.end()) {
          requests[it->second].last_use = static_cast<int>(g);
        }
      }
      for (const runtime::Tensor* t : groups[g].nodes.outputs) {
        if (outputs.count(t) != 0 || request_of.count(t) != 0) continue;
        request_of.emplace(t, requests.size());
        planned.push_back(t);
        requests.push_back({t->bytes + XNN_EXTRA_BYTES, static_cast<int>(g), static_cast<int>(g)});
      }
    }
    constexpr size_t kAlignment = 64;
    std::vector<size_t> offsets;
    const size_t total = runtime::PlanGreedy(requests, kAlignment, &offsets);
    compact_.assign(total + kAlignment, std::byte{0});
    const uintptr_t base = reinterpret_cast<uintptr_t>(compact_.data());
    std::byte* aligned = compact_.data() + ((kAlignment - base % kAlignment) % kAlignment);
    for (size_t i = 0; i < planned.size(); ++i) compact_at_[planned[i]] = aligned + offsets[i];
  }

  // Builds `out` for `partition`: its subgraph, runtime and external values.
  // `at`, when given, places some tensors elsewhere than their data.
  Status BuildRuntime(const runtime::Partition& partition, XnnRuntime* out,
                      const std::unordered_map<const runtime::Tensor*, std::byte*>* at = nullptr) {
    const bool fp16 = delegate_->xnnpack_options().fp16;
    if (fp16) DFARM_RETURN_IF_ERROR(CheckFp16Partition(partition));
    const std::vector<External> externals = ExternalTensors(partition);
    // fp16: outputs read inside the partition are written to an internal value and copied out.
    const std::unordered_set<const runtime::Tensor*> copied =
        fp16 ? OutputsReadInside(partition) : std::unordered_set<const runtime::Tensor*>{};
    struct Copy {
      const runtime::Tensor* tensor;
      uint32_t from, to;  // internal value -> external output
    };
    std::vector<Copy> copies;
    xnn_subgraph_t raw = nullptr;
    xnn_status s = xnn_create_subgraph(
        static_cast<uint32_t>(externals.size() + ConcatSliceCount(partition)), 0, &raw);
    if (s != xnn_status_success) {
      return Status::Error(std::string("xnnpack could not create a subgraph: ") + XnnStatusName(s));
    }
    SubgraphPtr subgraph(raw);
    SubgraphBuild build;
    build.subgraph = raw;
    build.owned = &out->owned;
    for (const External& e : externals) {
      uint32_t id = 0;
      DFARM_RETURN_IF_ERROR(
          DefineExternal(*e.tensor, Where(e.tensor, at), e.input, &build, &out->externals, &id));
      if (!e.input && copied.count(e.tensor) != 0) {
        uint32_t internal = 0;
        DFARM_RETURN_IF_ERROR(build.Internal(*e.tensor, e.tensor->shape, &internal));
        copies.push_back({e.tensor, internal, id});
        id = internal;
      }
      build.ids.emplace(e.tensor->index, id);
    }
    DFARM_RETURN_IF_ERROR(DefineConcatSlices(partition, at, &build, &out->externals));
    for (const runtime::Node* node : partition.nodes) {
      DFARM_RETURN_IF_ERROR(xnnpack_internal::VisitNode(*node, &build));
    }
    for (const Copy& c : copies) DFARM_RETURN_IF_ERROR(DefineCopy(raw, *c.tensor, c.from, c.to));
    return CreateRuntime(raw, partition.index, out);
  }

  // What XNNPACK's fp16 rewrite (xnn_subgraph_rewrite_for_fp16, run by
  // xnn_create_runtime_v2) would otherwise abort on, checked before the
  // subgraph is built: every node is one CheckNode() took in fp16 (a node type
  // the rewrite converts, no constant operand of ADD/MUL, no constant data
  // input); a partition output read inside the partition, which the rewrite
  // asserts is an external input, is written to an internal value and copied
  // out (DefineCopy). kUnsupported names the node, should a node slip past.
  static Status CheckFp16Partition(const runtime::Partition& partition) {
    for (const runtime::Node* node : partition.nodes) {
      const Status s = CheckFp16Node(*node);
      if (!s.ok()) {
        return Status::Unsupported("xnnpack's fp16 rewrite cannot take node " +
                                   std::to_string(node->index) + ": " + s.message());
      }
    }
    return Status::Ok();
  }

  // `to` = `from`, both of `t`'s shape: a static reshape, which the fp16 rewrite converts.
  static Status DefineCopy(xnn_subgraph_t subgraph, const runtime::Tensor& t, uint32_t from,
                           uint32_t to) {
    std::vector<size_t> dims(t.shape.begin(), t.shape.end());
    const xnn_status s = xnn_define_static_reshape(subgraph, dims.size(), dims.data(), from, to, 0);
    if (s != xnn_status_success) {
      return Status::Error("xnnpack could not copy out tensor " + std::to_string(t.index) + ": " +
                           XnnStatusName(s));
    }
    return Status::Ok();
  }

  // Defines external value number externals->size() for `t` at `data`.
  static Status DefineExternal(const runtime::Tensor& t, std::byte* data, bool input,
                               SubgraphBuild* build, std::vector<xnn_external_value>* externals,
                               uint32_t* id) {
    const uint32_t external_id = static_cast<uint32_t>(externals->size());
    DFARM_RETURN_IF_ERROR(build->DefineValue(
        t, t.shape, nullptr, external_id,
        input ? XNN_VALUE_FLAG_EXTERNAL_INPUT : XNN_VALUE_FLAG_EXTERNAL_OUTPUT, id));
    externals->push_back(xnn_external_value{*id, data});
    return Status::Ok();
  }

  // One external output per CONCATENATION input, over its block of the
  // node's output tensor (build->concat_slices).
  static std::byte* Where(const runtime::Tensor* t,
                          const std::unordered_map<const runtime::Tensor*, std::byte*>* at) {
    if (at == nullptr) return t->data;
    auto it = at->find(t);
    return it != at->end() ? it->second : t->data;
  }

  static Status DefineConcatSlices(const runtime::Partition& partition,
                                   const std::unordered_map<const runtime::Tensor*, std::byte*>* at,
                                   SubgraphBuild* build,
                                   std::vector<xnn_external_value>* externals) {
    for (const runtime::Node* node : partition.nodes) {
      if (node->code != tflite::BuiltinOperator::CONCATENATION) continue;
      const std::vector<size_t> offsets = xnnpack_internal::ConcatOffsets(*node);
      std::vector<uint32_t>& slices = build->concat_slices[node->index];
      for (size_t i = 0; i < node->inputs.size(); ++i) {
        uint32_t id = 0;
        DFARM_RETURN_IF_ERROR(DefineExternal(*node->inputs[i],
                                             Where(node->outputs[0], at) + offsets[i], false, build,
                                             externals, &id));
        slices.push_back(id);
      }
    }
    return Status::Ok();
  }

  // Creates out->runtime from `subgraph` and sets it up on out->externals.
  Status CreateRuntime(xnn_subgraph_t subgraph, int partition_index, XnnRuntime* out) {
    xnn_runtime_t rt = nullptr;
    xnn_status s = xnn_create_runtime_v2(subgraph, delegate_->threadpool(),
                                         RuntimeFlags(delegate_->xnnpack_options()), &rt);
    if (s != xnn_status_success) {
      const std::string why = std::string("xnnpack could not create the runtime of partition ") +
                              std::to_string(partition_index) + ": " + XnnStatusName(s);
      if (s == xnn_status_unsupported_hardware || s == xnn_status_unsupported_parameter) {
        return Status::Unsupported(why);
      }
      return Status::Error(why);
    }
    out->runtime.reset(rt);
    // The interpreter's tensors keep their addresses from here on.
    s = xnn_setup_runtime(rt, out->externals.size(), out->externals.data());
    if (s != xnn_status_success) {
      return Status::Error(std::string("xnnpack could not set up partition ") +
                           std::to_string(partition_index) + ": " + XnnStatusName(s));
    }
    return Status::Ok();
  }

  const XnnpackDelegate* delegate_;
  XnnRuntime whole_;
  std::deque<Group> groups_;  // built on InvokeProfiled()'s first call
  std::vector<std::byte> compact_;
  std::unordered_map<const runtime::Tensor*, std::byte*> compact_at_;
};

}  // namespace

Status XnnpackDelegate::Create(const XnnpackOptions& options,
                               const runtime::DelegatePartitionOptions& partition_options,
                               std::unique_ptr<XnnpackDelegate>* out) {
  if (options.threads < 1) {
    return Status::Error("xnnpack option threads is " + std::to_string(options.threads) +
                         ", expected >= 1");
  }
  const xnn_status s = xnn_initialize(nullptr);
  if (s == xnn_status_unsupported_hardware) {
    return Status::Unsupported("xnnpack does not support this CPU");
  }
  if (s != xnn_status_success) {
    return Status::Error(std::string("xnnpack failed to initialize: ") + XnnStatusName(s));
  }
  if (options.fp16) DFARM_RETURN_IF_ERROR(CheckFp16Support());
  std::unique_ptr<XnnpackDelegate> d(new XnnpackDelegate(options, partition_options));
  if (options.threads > 1) {
    d->threadpool_ = pthreadpool_create(static_cast<size_t>(options.threads));
    if (d->threadpool_ == nullptr) {
      return Status::Error("could not create a pool of " + std::to_string(options.threads) +
                           " threads for xnnpack");
    }
  }
  *out = std::move(d);
  return Status::Ok();
}

XnnpackDelegate::~XnnpackDelegate() {
  if (threadpool_ != nullptr) pthreadpool_destroy(threadpool_);
}

namespace {

// The nodes this XNNPACK (2022-02) builds in float16, found by running the
// conformance catalog with fp16:true: the others fail to create the runtime,
// and HARD_SWISH aborts in create_hardswish_operator (an assert on fp32).
// Binary nodes only between run-time tensors (a constant operand is refused),
// and no constant data input (xnn_subgraph_rewrite_for_fp16 asserts it has none).
Status CheckFp16Node(const runtime::Node& node) {
  using Op = tflite::BuiltinOperator;
  for (const std::vector<runtime::Tensor*>* list : {&node.inputs, &node.outputs}) {
    for (const runtime::Tensor* t : *list) {
      if (t != nullptr && t->quantized) {
        return Status::Unsupported("quantized " + node.op_name +
                                   " is not run by xnnpack with fp16:true");
      }
    }
  }
  // The rewrite converts the data input in place and asserts it is no constant.
  const size_t data = node.code == Op::TRANSPOSE_CONV ? 2 : 0;
  if (data < node.inputs.size() && node.inputs[data] != nullptr &&
      node.inputs[data]->has_static_value()) {
    return Status::Unsupported(node.op_name + " of a constant input (tensor " +
                               std::to_string(node.inputs[data]->index) +
                               ") is not taken by xnnpack's fp16 rewrite (fp16:true)");
  }
  switch (node.code) {
    case Op::CONV_2D:
    case Op::DEPTHWISE_CONV_2D:
    case Op::TRANSPOSE_CONV:
    case Op::MAX_POOL_2D:
    case Op::MEAN:
    case Op::RESHAPE:
    case Op::PAD:
    case Op::PADV2:
    case Op::RESIZE_BILINEAR:
    case Op::RELU:
    case Op::RELU6:
    case Op::RELU_N1_TO_1:
    case Op::LEAKY_RELU:
    case Op::PRELU:
      return Status::Ok();
    case Op::ADD:
    case Op::MUL:
      for (const runtime::Tensor* t : node.inputs) {
        if (t != nullptr && t->has_static_value()) {
          return Status::Unsupported(node.op_name +
                                     " with a constant operand has no float16 kernel in this "
                                     "xnnpack (fp16:true)");
        }
      }
      return Status::Ok();
    case Op::CUSTOM:
      if (node.op_name == "Convolution2DTransposeBias") return Status::Ok();
      break;
    default:
      break;
  }
  return Status::Unsupported(node.op_name + " has no float16 kernel in this xnnpack (fp16:true)");
}

}  // namespace

Status XnnpackDelegate::EnableProfiling() {
  profiling_ = true;
  return Status::Ok();
}

Status XnnpackDelegate::CheckNode(const runtime::Node& node) const {
  DFARM_RETURN_IF_ERROR(xnnpack_internal::VisitNode(node, nullptr));
  return options_.fp16 ? CheckFp16Node(node) : Status::Ok();
}

std::unique_ptr<runtime::DelegateKernel> XnnpackDelegate::CreateKernel() {
  return std::make_unique<XnnpackKernel>(this);
}

Status CreateXnnpackDelegate(const std::vector<std::pair<std::string, std::string>>& options,
                             std::unique_ptr<runtime::Delegate>* delegate_out) {
  runtime::DelegatePartitionOptions partition;
  DFARM_RETURN_IF_ERROR(ParsePartitionOptions(options, &partition));
  XnnpackOptions xo;
  for (const auto& [key, value] : options) {
    if (key == "threads") {
      char* end = nullptr;
      errno = 0;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0 || n < 1 || n > 256) {
        return Status::Error("delegate option 'threads' has value '" + value +
                             "', expected an integer from 1 to 256");
      }
      xo.threads = static_cast<int>(n);
    } else if (key == "fp16") {
      if (value == "true" || value == "1") {
        xo.fp16 = true;
      } else if (value == "false" || value == "0") {
        xo.fp16 = false;
      } else {
        return Status::Error("delegate option 'fp16' has value '" + value +
                             "', expected true or false");
      }
    }
  }
  std::unique_ptr<XnnpackDelegate> d;
  DFARM_RETURN_IF_ERROR(XnnpackDelegate::Create(xo, partition, &d));
  *delegate_out = std::move(d);
  return Status::Ok();
}

}  // namespace dfarm::delegates
