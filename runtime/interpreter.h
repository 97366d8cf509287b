// Interpreter: runs subgraph 0 of a Model with the kernels of an OpResolver.
//
// Ownership: the interpreter keeps references to the Model and the
// OpResolver (and the registrations it hands out); both must outlive it. It
// owns its tensors' metadata, the kernels' OpData, the folded tensors' blocks
// and one arena, allocated in AllocateTensors(), which together hold every
// non-constant tensor; one scratch block all kernels share (each node's
// Node::scratch_bytes per thread, the largest wins); and, with num_threads
// > 1, one thread pool, created in the constructor, which every node's
// kernel reaches through Node::context. Invoke() allocates nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/delegate.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/parallel.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace dfarm::runtime {

struct InterpreterOptions {
  // AllocateTensors() refuses (kUnsupported) a model whose arena would be
  // larger, rather than let a corrupt shape exhaust the device's memory.
  size_t max_arena_bytes = size_t{4} << 30;
  // Threads our kernels may use in Invoke() (the calling one included);
  // values below 1 count as 1. Results do not depend on it (see
  // kernels/parallel.h).
  int num_threads = 1;
  // Folds a float RELU, RELU6 or RELU_N1_TO_1 into the CONV_2D,
  // DEPTHWISE_CONV_2D, ADD, SUB, MUL or DIV before it when it is the only
  // reader of that node's output (which is no model output): the node writes
  // the activation's output and the activation node is skipped, one pass
  // over the tensor fewer (TensorFlow Lite's converter fuses the same
  // pairs). The same bits either way; the skipped intermediate gets no
  // storage. See FoldNodes().
  bool fold_activations = true;
  // Folds a float PAD of height and width only (constant paddings) into the
  // CONV_2D or DEPTHWISE_CONV_2D that is the only reader of its output: the
  // conv reads the PAD's input and counts the zeros in its own padding
  // (Node::folded_pad), one copy of the tensor fewer. The taps on the zeros
  // are skipped instead of added, so an output can differ only in the sign
  // of a zero. A float PAD of the last dimension only goes the same way
  // into an ADD whose other input has the padded shape
  // (Node::folded_channel_pad; the ADD adds 0.0f there, as on the PAD's
  // zeros: the same bits). See FoldNodes().
  bool fold_pads = true;
  // Folds a float ADD of two same-shape inputs (or one read through a folded
  // channel pad, see fold_pads) into the CONV_2D writing one of them when
  // the ADD is that output's only reader and the conv has no activation of
  // its own: the conv adds the other input to its result as it writes it
  // (Node::folded_addend) and writes the ADD's output, taking the ADD's
  // activation; a residual block's sum is then no pass over memory of its
  // own. The other input must be computed before the conv runs. The same
  // bits. See FoldNodes().
  bool fold_adds = true;
  // Runs a float 1x1 stride-1 CONV_2D inside the DEPTHWISE_CONV_2D right
  // before it when the conv reads the depthwise conv's output: each task
  // of the depthwise conv runs the conv's GEMM on the output rows it just
  // wrote (Node::then), so there is no wait for the other threads between
  // the two, and the rows are read from the cache of the core that wrote
  // them. Both outputs are written as before (the same bits); the conv is
  // no step of its own (its time is the depthwise conv's in a profile).
  // See FuseRows().
  bool fuse_rows = true;
  // Frees a folded tensor (e.g. float16 weights dequantized once) as soon
  // as every node reading it keeps its own form of it (Node::kept_inputs: a
  // CONV_2D's packed filter) or was folded itself, instead of holding both
  // until the interpreter goes; the tensor's data is null from then on. Not
  // with delegates (they read the tensors when they claim nodes), nor for a
  // model output. The same bits either way.
  bool free_kept_folded = true;
};

class Interpreter {
 public:
  Interpreter(const Model& model, const OpResolver& resolver,
              const InterpreterOptions& options = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Resolves every node's kernel (Unsupported naming the op and node when one
  // is missing, or a tensor has a dtype we lack), prepares every node in
  // execution order, evaluating the nodes whose inputs are all constant once,
  // here ("folding", e.g. a DEQUANTIZE of float16 weights), then lets the
  // delegates claim nodes, and plans and allocates the arena. Calling it
  // again returns the first call's status.
  //
  // Every node is prepared before any delegate sees it, the nodes a delegate
  // will run included, so a delegate is offered only what our kernels accept
  // (shapes, element counts, parameters): a model our kernels refuse
  // (kError) is refused whatever the delegates. Only where our kernel is
  // missing or answers kUnsupported may a delegate still take the node (it
  // then checks the node alone); left to the CPU, the node fails so.
  //
  // Prepare comes first because an op may size its outputs there, as in
  // TensorFlow Lite, where the model declares them [] or with -1 dimensions
  // in shape_signature (see DeclaredShapeAdmits in tensor.h); a fully known
  // declared shape must equal the computed one. tensor(i).shape is the
  // computed shape afterwards.
  //
  // Storage has two parts: the folded tensors (and variables, zeroed), one
  // block each, allocated as they are prepared and live for the
  // interpreter's lifetime (or, with free_kept_folded, until every node
  // reading one has kept its own form of it); then the arena of the other
  // non-constant tensors, placed by PlanGreedy() from their lifetimes in
  // execution order.
  // Model inputs live from the first step, model outputs until the last, so
  // both keep their values between Invoke() calls.
  Status AllocateTensors();

  // Adds a delegate, before AllocateTensors(); delegates claim nodes in the
  // order they were added, the resolver's kernels run the rest (see
  // runtime/delegate.h). Delegates see the shapes Prepare computed from the
  // input shapes (the declared ones), so a graph whose shape_signature has
  // -1 (a dynamic batch) is offered like a static one. Not offered: nodes
  // reading or writing an empty tensor (a dimension 0) or a tensor whose
  // shape the model leaves to the op writing it (declared [], e.g. a
  // post-process's outputs). Keeps the pointer: the delegate must outlive
  // the interpreter.
  void AddDelegate(Delegate* delegate) { delegates_.push_back(delegate); }

  // Where each node runs, set by a successful AllocateTensors() (every node on
  // "cpu" without delegates).
  const Placement& placement() const { return delegation_.placement(); }

  // Runs the nodes that were not folded, in order. Fill the input tensors'
  // data first. Precondition: AllocateTensors() succeeded.
  Status Invoke();

  // Invoke() one step at a time, for profilers: Invoke() is InvokeStep(0), ...,
  // InvokeStep(invoked_nodes_size() - 1). Step i belongs to node step_node(i);
  // the step of a delegated partition's first node runs the whole partition,
  // the steps of its other nodes do nothing. Allocates nothing.
  // Precondition: AllocateTensors() succeeded and step < invoked_nodes_size().
  Status InvokeStep(size_t step);
  int step_node(size_t step) const { return plan_[step]; }
  // InvokeStep() of a step that runs a delegated partition, timed per node by
  // the delegate (DelegateKernel::InvokeProfiled): `node_us_out` gets one time
  // per node of the partition, in its order. kUnsupported when the delegate
  // cannot, or was not asked to (Delegate::EnableProfiling()); kInvalidArgument
  // for a step that runs no partition.
  Status InvokeStepProfiled(size_t step, std::vector<double>* node_us_out);

  // The model's inputs and outputs, in the model's order. The pointers stay
  // valid for the interpreter's lifetime; data is set by AllocateTensors().
  const std::vector<Tensor*>& inputs() const { return inputs_; }
  const std::vector<Tensor*>& outputs() const { return outputs_; }

  size_t tensors_size() const { return tensors_.size(); }
  const Tensor& tensor(size_t index) const { return tensors_[index]; }

  // Nodes in execution order; op_name is "CONV_2D" (or a custom op's code).
  size_t nodes_size() const { return nodes_.size(); }
  const Node& node(size_t index) const { return nodes_[index]; }

  // Bytes of the arena plus the folded tensors' and variables' blocks (each
  // rounded up to 64 bytes) held after AllocateTensors(), the freed ones
  // (free_kept_folded) not counted; 0 before.
  size_t arena_bytes() const { return arena_bytes_; }
  // The folded tensors' and variables' part of arena_bytes().
  size_t persistent_bytes() const { return persistent_bytes_; }
  // Bytes of the kernels' shared scratch block (all threads' parts), apart
  // from arena_bytes(); 0 before AllocateTensors().
  size_t scratch_bytes() const { return scratch_bytes_; }
  // Threads the kernels run on: options.num_threads, or 1 where the build
  // has no thread pool.
  int num_threads() const { return context_.num_threads; }
  // Number of nodes Invoke() runs (nodes_size() minus the folded ones and
  // the activations and PADs folded into a neighbour: Node::folded_into).
  size_t invoked_nodes_size() const { return plan_.size(); }

  const Model& model() const { return model_; }

 private:
  std::string NodeLabel(const Node& node) const;
  Status AllocateOnce();
  void MarkFolded();
  // Sets open_shapes_, before any Prepare, for the outputs the model
  // declares [] (what converters write where only the op can size a tensor,
  // e.g. TFLite_Detection_PostProcess). A -1 in shape_signature (a dynamic
  // batch) leaves the tensor offerable: Prepare fixes it from the input
  // shapes before delegates are asked, and where no kernel of ours prepares
  // the writer, the declared shape (with the batch TFLite also gives a
  // delegate) stands.
  void MarkOpenShapes();
  // delegates_, each wrapped to refuse the nodes OfferableToDelegates()
  // refuses (in interpreter.cc).
  std::vector<Delegate*> GuardedDelegates();
  // Whether no delegate can take `node`: none was added, it is folded, or
  // the wrappers of GuardedDelegates() refuse it.
  bool MustRunOnCpu(const Node& node) const;
  // Sets every node's registration; a node our kernels cannot run (no
  // kernel, a sparse input) gets the reason in cpu_status_, an error
  // (CpuRefusal) when it must run on the CPU.
  Status ResolveKernels();
  // After delegation: drops the delegated nodes' OpData; the CPU nodes our
  // kernels cannot run (cpu_status_) are the error (CpuRefusal).
  Status KeepCpuNodes();
  // Ok when `refused` (node indices, in order) is empty; else the first
  // one's cpu_status_, followed, when two or more ops lack a kernel, by every
  // such op and its nodes, so a model missing several custom ops names them
  // all at once.
  Status CpuRefusal(const std::vector<int>& refused) const;
  // InterpreterOptions::fold_activations, fold_pads and fold_adds, after
  // ResolveKernels(): sets Node::folded_activation / folded_pad /
  // folded_addend and folded_into, rewires the node's output to the
  // activation's or ADD's (its input to the PAD's) and drops the folded
  // node from plan_.
  void FoldNodes();
  // InterpreterOptions::fuse_rows, after FoldNodes(): sets Node::then and
  // runs_in on the pairs of consecutive steps that qualify and drops the
  // second node from plan_.
  void FuseRows();
  // Whether the model leaves `t`'s shape to an op (declared [] or with -1 in
  // shape_signature), even once Prepare has sized it.
  bool OpenShape(const Tensor& t) const { return open_shapes_[t.index] || DeclaredShapeIsOpen(t); }
  // Whether `node` runs on the CPU with a kernel, not folded away.
  bool FoldableNode(const Node& node) const;
  bool PrivateFloat(const Tensor* t, const std::vector<int>& readers,
                    const std::vector<int>& producer) const;
  // `act` (any node) into the node writing its input, when it is a foldable
  // activation; `producer` follows the rewiring.
  void FoldActivation(Node& act, const std::vector<int>& readers, std::vector<int>& producer);
  // `pad` (a PAD whose output only `next` reads) into `next`, when `next`
  // can take its zeros (folded_pad, folded_channel_pad).
  void FoldPad(Node& pad, Node& next);
  // `add` (an ADD) into the node writing one of its inputs, when that node
  // applies_folded_add and the other input is computed before it (`step`:
  // each node's position in plan_); `producer` follows the rewiring.
  void FoldAdd(Node& add, const std::vector<int>& readers, std::vector<int>& producer,
               const std::vector<int>& step);
  // Prepares `node` afresh (OpData, scratch_bytes, output shapes) and checks
  // its outputs fit the arena.
  Status PrepareNode(Node& node);
  // Prepares every node our kernels can run, in order, evaluating the folded
  // ones; a kUnsupported Prepare of a node a delegate may take goes to
  // cpu_status_ instead.
  Status PrepareNodes();
  // After FoldNodes(): prepares again each node another was folded into,
  // drops the folded nodes' OpData and sizes the shared scratch for the
  // nodes Invoke() runs on the CPU.
  Status PrepareFoldedInto();
  // Unsupported when `tensor` alone exceeds options_.max_arena_bytes.
  Status CheckTensorFits(const Tensor& tensor) const;
  // Gives `tensor` its own zeroed block of tensor->bytes, counted in
  // persistent_bytes_ against options_.max_arena_bytes.
  Status AllocatePersistent(Tensor* tensor);
  // Per tensor, the reader slots (node, input) that still need its data,
  // plus one for a model output (see free_kept_folded).
  std::vector<int> PendingReads() const;
  // After `node`'s Prepare (and Eval, when folded): frees the folded
  // tensors whose last pending read this node was.
  void FreeKeptInputs(const Node& node, std::vector<int>* pending);
  // Makes the shared scratch hold num_threads parts of at least
  // `per_thread` bytes (allocates only when it grows).
  Status EnsureScratch(size_t per_thread);
  void Lifetimes(std::vector<int>* first_out, std::vector<int>* last_out) const;
  Status Plan();
  Status RunNode(int index);

  const Model& model_;
  const OpResolver& resolver_;
  const InterpreterOptions options_;
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::vector<Tensor*> inputs_;
  std::vector<Tensor*> outputs_;
  std::vector<int> plan_;  // node indices Invoke() runs
  std::vector<Delegate*> delegates_;
  std::vector<std::unique_ptr<Delegate>> guarded_delegates_;
  std::vector<bool> open_shapes_;   // by tensor: no delegate is offered it (MarkOpenShapes)
  std::vector<Status> cpu_status_;  // by node: why our kernels cannot run it, or Ok
  DelegationPlan delegation_;
  Status setup_status_;  // a fault found while building tensors or allocating
  using Block = std::unique_ptr<std::byte[], void (*)(std::byte*)>;
  std::vector<Block> persistent_;      // folded tensors and variables
  std::vector<int> persistent_block_;  // by tensor: its index in persistent_, or -1
  Block arena_;
  ThreadPool threadpool_;
  Block scratch_;
  ExecutionContext context_;  // every node's Node::context
  size_t scratch_bytes_ = 0;
  size_t arena_bytes_ = 0;
  size_t persistent_bytes_ = 0;
  bool allocated_ = false;
};

}  // namespace dfarm::runtime
