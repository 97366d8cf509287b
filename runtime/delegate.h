// Delegate API, modeled on TensorFlow Lite's SimpleDelegateInterface: a
// delegate has a name and partition options, says per node whether it can
// run it, and gives a DelegateKernel per partition (a maximal set of claimed
// nodes, see runtime/partitioner.h) with Init / Prepare / Invoke.
//
// Delegates are given to the Interpreter in order (Interpreter::AddDelegate);
// each claims from the nodes that the ones before it left, and the reference
// kernels of the OpResolver run whatever is left (the CPU comes last).
//
// "Unsupported" is kept apart from "failed": CheckNode() answers Ok (claimed)
// or kUnsupported (with the reason, reported in the placement); any other
// code is a failure of the delegate and stops AllocateTensors().
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/partitioner.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace dfarm::runtime {

struct DelegatePartitionOptions {
  // Delegate at most this many partitions, the largest ones; 0: no limit.
  int max_delegated_partitions = 0;
  // Partitions with fewer nodes stay on the CPU.
  int min_nodes_per_partition = 1;
  // AllocateTensors() fails (kUnsupported) when any node that runs in
  // Invoke() would fall back to the CPU. Nodes folded at load do not count.
  bool require_full_delegation = false;
  // Only nodes with first <= index <= last are offered to the delegate (as
  // TensorFlow Lite's first/last_delegate_node_index: the culprit finder's
  // bisection); the others stay on the CPU with the reason given.
  int first_delegate_node_index = 0;
  int last_delegate_node_index = std::numeric_limits<int>::max();
};

// One partition a delegate runs. Owned by the Interpreter; its address and
// contents stay valid for the interpreter's lifetime, so kernels may keep it.
struct Partition {
  int index = -1;                // among the interpreter's delegated partitions, in execution order
  std::string delegate;          // the delegate's name
  std::vector<Node*> nodes;      // in a valid execution order
  std::vector<Tensor*> inputs;   // read by the nodes, written outside (model inputs,
                                 // constants, folded tensors, other partitions' outputs)
  std::vector<Tensor*> outputs;  // written by the nodes and read outside or model outputs
};

// Runs one partition. Created by Delegate::CreateKernel().
class DelegateKernel {
 public:
  virtual ~DelegateKernel() = default;
  // Called once in AllocateTensors(), before the arena exists: tensors have
  // dtypes and shapes, constant ones their data. Fails (kError) or refuses
  // (kUnsupported) the partition for the whole interpreter.
  virtual Status Init(const Partition& partition) = 0;
  // Called once in AllocateTensors() after every CPU node is prepared and the
  // constant-input nodes are folded: every tensor has its storage, and inputs
  // with has_static_value() hold their values (pack weights here).
  virtual Status Prepare(const Partition& partition) = 0;
  // Computes the partition's outputs from its inputs. Must not allocate.
  // Tensors inside the partition (neither inputs nor outputs) have arena
  // storage the kernel may use or ignore.
  virtual Status Invoke(const Partition& partition) = 0;
  // (optional) Runs the partition as Invoke() does, timing each of its nodes
  // by the delegate's own means: `node_us_out` gets one time in microseconds
  // per node of partition.nodes, in that order. The times split the run on
  // one clock: a node's runs from the previous node's end (the run's start
  // for the first node) to its own end, so the copies into the partition
  // fall on its first node and those out of it on its last. Left out: the
  // work the profile adds, and what the delegate's clock cannot see (each
  // delegate says what). Their sum is the partition's time in this run. A
  // node with no work of its own (run inside another's) reads 0. Every
  // node's outputs, not only the partition's, hold their values in the
  // tensors' (arena) storage afterwards, for per-layer comparisons. Called
  // only after Prepare(), and only on kernels of a delegate whose
  // EnableProfiling() returned Ok before AllocateTensors(); not a hot path
  // (it may allocate on its first call). kUnsupported: this delegate times
  // its partitions only as a whole.
  virtual Status InvokeProfiled(const Partition& partition, std::vector<double>* node_us_out) {
    (void)node_us_out;
    return Status::Unsupported("delegate '" + partition.delegate +
                               "' does not time the nodes of its partitions");
  }
};

class Delegate {
 public:
  Delegate(std::string name, DelegatePartitionOptions options)
      : name_(std::move(name)), options_(options) {}
  virtual ~Delegate() = default;
  Delegate(const Delegate&) = delete;
  Delegate& operator=(const Delegate&) = delete;

  const std::string& name() const { return name_; }
  const DelegatePartitionOptions& options() const { return options_; }

  // Whether the delegate can run `node` (op, dtypes, shapes, params): Ok, or
  // kUnsupported with a reason naming what it lacks ("DEQUANTIZE from float16
  // is not supported"); any other code is a failure. Tensors have no arena
  // storage yet; constant ones hold their data. The Interpreter asks only
  // about nodes the resolver's kernel has prepared without error (shapes
  // and element counts checked; a node without a kernel, or whose kernel
  // answered kUnsupported, is the delegate's alone to check) and none with
  // an empty tensor (see Interpreter::AllocateTensors()).
  virtual Status CheckNode(const Node& node) const = 0;

  // A kernel for one partition; the interpreter owns it and calls Init().
  virtual std::unique_ptr<DelegateKernel> CreateKernel() = 0;

  // The delegate's own figures, by name, read after AllocateTensors() (the
  // runner's "delegate_stats"): e.g. the gpu delegate's programs_compiled,
  // programs_loaded (from its serialization cache) and compile_us. Empty by
  // default.
  virtual std::vector<std::pair<std::string, double>> Stats() const { return {}; }

  // (optional) Asks the delegate to time the nodes inside its partitions
  // (DelegateKernel::InvokeProfiled); called before AllocateTensors(), only
  // when a profile is wanted, so Invoke() pays nothing otherwise. Ok: every
  // kernel it creates takes InvokeProfiled(). kUnsupported by default.
  virtual Status EnableProfiling() {
    return Status::Unsupported("delegate '" + name_ +
                               "' does not time the nodes of its partitions");
  }

 private:
  std::string name_;
  DelegatePartitionOptions options_;
};

// Where one node runs.
struct NodePlacement {
  int node = -1;
  std::string op;                // "CONV_2D", or a custom op's code
  std::string delegate = "cpu";  // the delegate's name, or "cpu"
  int partition = -1;            // Partition::index; -1 on the CPU
  bool folded = false;           // evaluated once in AllocateTensors() (on the CPU)
  // Why the node fell back to the CPU, one "name: reason" per delegate that
  // was asked, joined by "; ". Empty when delegated or when no delegate was given.
  std::string reason;
};

struct Placement {
  int partitions = 0;                // delegated partitions
  std::vector<NodePlacement> nodes;  // by node index
};

// The delegation of one interpreter: which nodes each delegate takes, the
// partitions' kernels, and the order Invoke() runs the nodes in. Built by the
// Interpreter in AllocateTensors(); keeps pointers into its nodes and tensors.
class DelegationPlan {
 public:
  DelegationPlan() = default;
  ~DelegationPlan();
  DelegationPlan(const DelegationPlan&) = delete;
  DelegationPlan& operator=(const DelegationPlan&) = delete;

  // Partitions the nodes that are not folded among `delegates` (in order;
  // they must outlive the plan), creates and Init()s the kernels. `label`
  // names the model in messages ("model 'face.tflite'").
  Status Build(std::vector<Node>& nodes, const std::vector<Tensor*>& model_outputs,
               const std::vector<Delegate*>& delegates, const std::string& label);

  // Prepares every partition's kernel, in execution order.
  Status Prepare();

  // The non-folded nodes in the order Invoke() runs them; a partition's
  // nodes are adjacent.
  const std::vector<int>& order() const { return order_; }
  // The partition node `node` belongs to, or -1 when it runs on the CPU.
  int PartitionOf(int node) const { return node_partition_[node]; }
  // True for the first node of a partition in order(): the step that runs it.
  bool StartsPartition(int node) const {
    const int p = node_partition_[node];
    return p >= 0 && partitions_[p]->partition.nodes.front()->index == node;
  }
  Status InvokePartition(int partition);
  // InvokePartition() with the kernel's per-node times
  // (DelegateKernel::InvokeProfiled), one per node of partition(partition).
  Status InvokePartitionProfiled(int partition, std::vector<double>* node_us_out);

  size_t partitions_size() const { return partitions_.size(); }
  const Partition& partition(size_t index) const { return partitions_[index]->partition; }
  const Placement& placement() const { return placement_; }

 private:
  struct Entry {
    Partition partition;
    Delegate* delegate = nullptr;
    std::unique_ptr<DelegateKernel> kernel;
  };
  // Appends the partition of `members` (node indices in execution order) run
  // by `delegate`, and places its nodes there.
  void AddPartition(std::vector<Node>& nodes, const std::vector<int>& members, Delegate* delegate,
                    const std::unordered_set<int>& model_output_ids);
  // Creates and Init()s every partition's kernel.
  Status CreateKernels(const std::string& label);

  std::vector<std::unique_ptr<Entry>> partitions_;
  std::vector<int> order_;
  std::vector<int> node_partition_;
  Placement placement_;
  std::string label_;
};

}  // namespace dfarm::runtime
