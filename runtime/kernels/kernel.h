// The kernel interface: a Node is one operator instance, an OpRegistration the
// pair of functions that prepares and runs it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/schema/tflite_generated.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace dfarm::runtime {

class ThreadPool;  // kernels/parallel.h

// What the interpreter lends every node (Node::context): its thread pool and
// one scratch block shared by all nodes, since only one node runs at a time.
// Owned by the interpreter; kernels keep no pointer into the scratch past
// one Eval().
struct ExecutionContext {
  // Null when num_threads is 1: the kernel runs on the calling thread.
  const ThreadPool* threadpool = nullptr;
  int num_threads = 1;
  // num_threads parts of scratch_stride bytes each (64-byte aligned), every
  // part at least the largest Node::scratch_bytes; a task uses the part of
  // the thread running it (ParallelFor's slot). Set after every Prepare();
  // null before (and when no node asked for scratch).
  std::byte* scratch = nullptr;
  size_t scratch_stride = 0;

  // Thread part `thread` (< num_threads) of the scratch.
  std::byte* ThreadScratch(int thread) const {
    return scratch + static_cast<size_t>(thread) * scratch_stride;
  }
};

// State a kernel computes in Prepare() and reads in Eval().
class OpData {
 public:
  virtual ~OpData() = default;
};

struct OpRegistration;

struct Node {
  int index = -1;
  std::string op_name;  // "CONV_2D", or a custom op's code
  tflite::BuiltinOperator code = tflite::BuiltinOperator::ADD;
  const tflite::Operator* op = nullptr;  // in the Model; for builtin options
  std::vector<Tensor*> inputs;           // nullptr for an omitted optional input
  std::vector<Tensor*> outputs;          // never null
  const OpRegistration* registration = nullptr;
  std::unique_ptr<OpData> data;  // owned; set by Prepare()
  bool folded = false;           // evaluated once in AllocateTensors()
  // A float RELU, RELU6 or RELU_N1_TO_1 the interpreter folded into this node
  // (it was the only reader of this node's output, which the node now writes
  // in its place); NONE when none. Set only where the registration says
  // applies_folded_activation; kernels read it through NodeActivation().
  tflite::ActivationFunctionType folded_activation = tflite::ActivationFunctionType::NONE;
  // Zeros a float PAD the interpreter folded into this node adds around its
  // input's height and width: top, bottom, left, right. The node's input is
  // then the PAD's input. Set only where the registration says
  // applies_folded_pad; kernels read it through ComputeConvWindow().
  int folded_pad[4] = {0, 0, 0, 0};
  // A float PAD of the last dimension only the interpreter folded into this
  // ADD: input folded_channel_pad[0] (0 or 1; -1 when none) is the PAD's
  // input, which the ADD reads as if padded by folded_channel_pad[1] zeros
  // before and [2] after. Set only where the registration says
  // applies_folded_channel_pad.
  int folded_channel_pad[3] = {-1, 0, 0};
  // A float ADD the interpreter folded into this node (this node's output
  // was one input of the ADD and read by nothing else): the ADD's other
  // input, which the node adds to its result before its activation (then
  // folded_activation is the ADD's), writing the ADD's output. The addend
  // covers output channels [folded_addend_channels[0], [1]) (fewer than all
  // when the ADD read it through a folded channel pad); 0.0f is added to the
  // others. Null when none. Set only where the registration says
  // applies_folded_add.
  Tensor* folded_addend = nullptr;
  int folded_addend_channels[2] = {0, 0};
  // The node that runs this activation, PAD or ADD node's work
  // (folded_activation, folded_pad, folded_channel_pad, folded_addend), or
  // -1: Invoke() skips a node folded so.
  int folded_into = -1;
  // A node the interpreter runs inside this one (InterpreterOptions::
  // fuse_rows; only where this node's registration says runs_then): each
  // task of this node, once it has written output rows [b, e) (the output
  // as [rows, last dimension]), runs then's eval_rows on the same rows, on
  // the same thread, while they are in its cache. Null when none.
  Node* then = nullptr;
  // The node whose tasks run this one (it is that node's `then`), or -1:
  // Invoke() skips it. Unlike a folded node it keeps its OpData.
  int runs_in = -1;
  // Bytes of the shared scratch each thread of Eval() uses, set by Prepare()
  // (ExecutionContext::ThreadScratch); 0 when Eval() needs none.
  size_t scratch_bytes = 0;
  // Bit k set by Prepare() when neither Eval() nor a later Prepare() of this
  // node reads input k's data: the kernel keeps what it needs of that
  // constant in its OpData (a packed filter) and finds it there again in
  // prepared_before. The interpreter frees a folded tensor once every node
  // reading it has kept it so (InterpreterOptions::free_kept_folded); its
  // data is null from then on.
  uint32_t kept_inputs = 0;
  // While Prepare() runs again on a prepared node (the interpreter folded a
  // neighbour into it), the previous Prepare()'s OpData, which Prepare may
  // take from; null otherwise.
  std::unique_ptr<OpData> prepared_before;
  // The interpreter's context, set before Prepare() (num_threads is known
  // there; the scratch only from Eval()). Null for a node run outside an
  // interpreter: kernels then run on one thread and must need no scratch.
  const ExecutionContext* context = nullptr;

  // The builtin options as T, or null when the node carries other (or none).
  template <typename T>
  const T* options() const {
    return op->builtin_options_as<T>();
  }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data.get());
  }
};

struct OpRegistration {
  // Called from AllocateTensors(), in execution order, and again on a node
  // the interpreter folds a neighbour into (Node::prepared_before). Checks
  // arity, dtypes and shapes, sets each output's shape with
  // CheckOutputShape() (a fully known declared shape must match), and may
  // store OpData. Inputs with has_static_value() hold their values already
  // (but see Node::kept_inputs); other tensors have no storage yet (it is
  // planned after every Prepare). Messages name the fault only; the
  // interpreter adds the op and node.
  Status (*prepare)(Node& node);
  // Computes the outputs. Must not allocate; may use node.context's thread
  // pool and its scratch (node.scratch_bytes per thread).
  Status (*eval)(Node& node);
  // Whether the kernel applies Node::folded_activation when its own fused
  // activation is NONE (the interpreter folds a following RELU into it).
  bool applies_folded_activation = false;
  // Whether the kernel pads its input by Node::folded_pad (the interpreter
  // folds a float PAD of height and width before it into it).
  bool applies_folded_pad = false;
  // Whether the kernel reads an input padded by Node::folded_channel_pad.
  bool applies_folded_channel_pad = false;
  // Whether the kernel adds Node::folded_addend to its result (the
  // interpreter folds a float ADD after it into it: CONV_2D, the resizes).
  // The ADD's own activation folds only where applies_folded_activation.
  bool applies_folded_add = false;
  // Whether Eval() runs Node::then on the rows each task writes, for this
  // node (a float DEPTHWISE_CONV_2D on its fast kernel). Null: never.
  bool (*runs_then)(const Node& node) = nullptr;
  // Whether eval_rows can compute this node's output rows [begin, end)
  // from the same rows of input 0 alone (and inputs computed before it):
  // a 1x1 stride-1 float CONV_2D on the GEMM. Null: never.
  bool (*rows_from_input)(const Node& node) = nullptr;
  // Output rows [begin, end) on the calling thread, with thread slot
  // `slot`'s scratch (node.scratch_bytes). Only where rows_from_input.
  void (*eval_rows)(const Node& node, int64_t begin, int64_t end, int slot) = nullptr;
};

}  // namespace dfarm::runtime
