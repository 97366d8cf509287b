#include "runtime/delegate.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace dfarm::runtime {
namespace {

// A step of the graph while delegates claim nodes: one CPU node, or a
// partition an earlier delegate took.
struct Unit {
  std::vector<int> nodes;
  int delegate = -1;  // index into the delegates; -1: on the CPU so far
};

std::string NodeText(const Node& node) {
  return "node " + std::to_string(node.index) + " (" + node.op_name + ")";
}

void AppendReason(std::string* reasons, const std::string& delegate, const std::string& why) {
  if (!reasons->empty()) *reasons += "; ";
  *reasons += delegate + ": " + why;
}

PartitionerNode UnitAsPartitionerNode(const std::vector<Node>& nodes, const Unit& unit) {
  PartitionerNode out;
  std::unordered_set<int> written;
  for (int n : unit.nodes) {
    for (const Tensor* t : nodes[n].outputs) {
      out.outputs.push_back(t->index);
      written.insert(t->index);
    }
  }
  for (int n : unit.nodes) {
    for (const Tensor* t : nodes[n].inputs) {
      if (t != nullptr && written.count(t->index) == 0) out.inputs.push_back(t->index);
    }
  }
  return out;
}

// The placement before any delegate claims: every node on the CPU.
Placement CpuPlacement(const std::vector<Node>& nodes) {
  Placement placement;
  placement.nodes.resize(nodes.size());
  for (const Node& node : nodes) {
    NodePlacement& p = placement.nodes[node.index];
    p.node = node.index;
    p.op = node.op_name;
    p.folded = node.folded;
  }
  return placement;
}

// The units before any delegate claims: one per node that is not folded.
std::vector<Unit> CpuUnits(const std::vector<Node>& nodes) {
  std::vector<Unit> units;
  for (const Node& node : nodes) {
    if (!node.folded) units.push_back(Unit{{node.index}, -1});
  }
  return units;
}

// The graph the partitioner sees, one PartitionerNode per unit, with the CPU
// units that `delegate` claims marked supported. The reasons it gives for
// the others go to `placement`; a failure to check stops the build.
Status CheckUnits(const std::vector<Node>& nodes, const std::vector<Unit>& units,
                  const Delegate& delegate, const std::string& label,
                  std::vector<PartitionerNode>* graph_out, Placement* placement) {
  std::vector<PartitionerNode>& graph = *graph_out;
  for (const Unit& unit : units) {
    graph.push_back(UnitAsPartitionerNode(nodes, unit));
    if (unit.delegate >= 0) continue;
    const Node& node = nodes[unit.nodes.front()];
    const DelegatePartitionOptions& o = delegate.options();
    if (node.index < o.first_delegate_node_index || node.index > o.last_delegate_node_index) {
      AppendReason(&placement->nodes[node.index].reason, delegate.name(),
                   "outside first_delegate_node_index..last_delegate_node_index " +
                       std::to_string(o.first_delegate_node_index) + ".." +
                       (o.last_delegate_node_index == std::numeric_limits<int>::max()
                            ? std::string("end")
                            : std::to_string(o.last_delegate_node_index)));
      continue;
    }
    Status s = delegate.CheckNode(node);
    if (s.ok()) {
      graph.back().supported = true;
    } else if (s.code() == StatusCode::kUnsupported) {
      AppendReason(&placement->nodes[node.index].reason, delegate.name(), s.message());
    } else {
      return s.WithPrefix(label + ": delegate '" + delegate.name() + "' failed to check " +
                          NodeText(node));
    }
  }
  return Status::Ok();
}

// Partitions `graph` (built from `units` by CheckUnits) and applies the
// delegate's partition limits. Each partition taken becomes one unit of
// delegate `d`; the units of the others stay as they were, in order, with
// the reason a partition was left out added to their placement.
std::vector<Unit> TakePartitions(std::vector<Unit> units, const std::vector<PartitionerNode>& graph,
                                 int d, const Delegate& delegate, Placement* placement) {
  std::vector<int> weight;
  for (const Unit& unit : units) weight.push_back(static_cast<int>(unit.nodes.size()));
  const DelegatePartitionOptions& o = delegate.options();
  std::vector<NodeSubset> subsets = PartitionGraph(graph);
  std::vector<std::string> left_out;
  std::vector<bool> taken = SelectPartitions(
      subsets, {o.max_delegated_partitions, o.min_nodes_per_partition}, weight, &left_out);
  std::vector<Unit> next;
  for (size_t s = 0; s < subsets.size(); ++s) {
    if (taken[s]) {
      Unit merged{{}, d};
      for (int u : subsets[s].nodes) merged.nodes.push_back(units[u].nodes.front());
      next.push_back(std::move(merged));
      continue;
    }
    for (int u : subsets[s].nodes) {
      if (!left_out[s].empty()) {
        AppendReason(&placement->nodes[units[u].nodes.front()].reason, delegate.name(),
                     left_out[s]);
      }
      next.push_back(std::move(units[u]));
    }
  }
  return next;
}

// Delegate `d` claims what it can of the units still on the CPU.
Status ClaimUnits(const std::vector<Node>& nodes, int d, const Delegate& delegate,
                  const std::string& label, std::vector<Unit>* units, Placement* placement) {
  std::vector<PartitionerNode> graph;
  DFARM_RETURN_IF_ERROR(CheckUnits(nodes, *units, delegate, label, &graph, placement));
  *units = TakePartitions(std::move(*units), graph, d, delegate, placement);
  return Status::Ok();
}

// The tensors `members` read and do not write, each once, in reading order.
std::vector<Tensor*> PartitionInputs(const std::vector<Node>& nodes,
                                     const std::vector<int>& members) {
  std::unordered_set<int> written, read;
  for (int n : members) {
    for (const Tensor* t : nodes[n].outputs) written.insert(t->index);
  }
  std::vector<Tensor*> inputs;
  for (int n : members) {
    for (Tensor* t : nodes[n].inputs) {
      if (t == nullptr || written.count(t->index) > 0 || !read.insert(t->index).second) continue;
      inputs.push_back(t);
    }
  }
  return inputs;
}

// The tensors `members` write that are model outputs or read by another node.
std::vector<Tensor*> PartitionOutputs(const std::vector<Node>& nodes,
                                      const std::vector<int>& members,
                                      const std::unordered_set<int>& model_output_ids) {
  std::unordered_set<int> member_set(members.begin(), members.end());
  std::vector<Tensor*> outputs;
  for (int n : members) {
    for (Tensor* t : nodes[n].outputs) {
      bool leaves = model_output_ids.count(t->index) > 0;
      for (const Node& other : nodes) {
        if (leaves) break;
        if (member_set.count(other.index) > 0) continue;
        leaves = std::any_of(other.inputs.begin(), other.inputs.end(),
                             [&](const Tensor* in) { return in == t; });
      }
      if (leaves) outputs.push_back(t);
    }
  }
  return outputs;
}

// kUnsupported when a delegate with require_full_delegation is given and a
// unit is left on the CPU; names the first such node and why it fell back.
Status CheckFullDelegation(const std::vector<Node>& nodes, const std::vector<Unit>& units,
                           const std::vector<Delegate*>& delegates, const Placement& placement,
                           const std::string& label) {
  for (const Delegate* delegate : delegates) {
    if (!delegate->options().require_full_delegation) continue;
    int fallen = 0;
    std::string first;
    for (const Unit& unit : units) {
      if (unit.delegate >= 0) continue;
      if (fallen++ == 0) {
        const NodePlacement& p = placement.nodes[unit.nodes.front()];
        first = NodeText(nodes[p.node]) + (p.reason.empty() ? "" : " (" + p.reason + ")");
      }
    }
    if (fallen > 0) {
      return Status::Unsupported(label + ": delegate '" + delegate->name() +
                                 "' requires full delegation, but " + std::to_string(fallen) +
                                 " node" + (fallen == 1 ? "" : "s") +
                                 " would fall back to the CPU, first " + first);
    }
  }
  return Status::Ok();
}

}  // namespace

DelegationPlan::~DelegationPlan() = default;

Status DelegationPlan::Build(std::vector<Node>& nodes, const std::vector<Tensor*>& model_outputs,
                             const std::vector<Delegate*>& delegates, const std::string& label) {
  placement_ = CpuPlacement(nodes);
  node_partition_.assign(nodes.size(), -1);
  std::vector<Unit> units = CpuUnits(nodes);
  for (size_t d = 0; d < delegates.size(); ++d) {
    DFARM_RETURN_IF_ERROR(
        ClaimUnits(nodes, static_cast<int>(d), *delegates[d], label, &units, &placement_));
  }

  // Partitions in execution order.
  std::unordered_set<int> model_output_ids;
  for (const Tensor* t : model_outputs) model_output_ids.insert(t->index);
  order_.clear();
  for (const Unit& unit : units) {
    order_.insert(order_.end(), unit.nodes.begin(), unit.nodes.end());
    if (unit.delegate >= 0) {
      AddPartition(nodes, unit.nodes, delegates[unit.delegate], model_output_ids);
    }
  }
  placement_.partitions = static_cast<int>(partitions_.size());

  DFARM_RETURN_IF_ERROR(CheckFullDelegation(nodes, units, delegates, placement_, label));
  DFARM_RETURN_IF_ERROR(CreateKernels(label));
  label_ = label;
  return Status::Ok();
}

void DelegationPlan::AddPartition(std::vector<Node>& nodes, const std::vector<int>& members,
                                  Delegate* delegate,
                                  const std::unordered_set<int>& model_output_ids) {
  auto entry = std::make_unique<Entry>();
  entry->delegate = delegate;
  Partition& part = entry->partition;
  part.index = static_cast<int>(partitions_.size());
  part.delegate = delegate->name();
  for (int n : members) {
    part.nodes.push_back(&nodes[n]);
    node_partition_[n] = part.index;
    NodePlacement& p = placement_.nodes[n];
    p.delegate = part.delegate;
    p.partition = part.index;
    p.reason.clear();
  }
  part.inputs = PartitionInputs(nodes, members);
  part.outputs = PartitionOutputs(nodes, members, model_output_ids);
  partitions_.push_back(std::move(entry));
}

Status DelegationPlan::CreateKernels(const std::string& label) {
  for (auto& entry : partitions_) {
    entry->kernel = entry->delegate->CreateKernel();
    const std::string where = label + ": delegate '" + entry->partition.delegate + "' partition " +
                              std::to_string(entry->partition.index);
    if (entry->kernel == nullptr) return Status::Error(where + ": no kernel was created");
    DFARM_RETURN_IF_ERROR(entry->kernel->Init(entry->partition).WithPrefix(where + " init"));
  }
  return Status::Ok();
}

Status DelegationPlan::Prepare() {
  for (auto& entry : partitions_) {
    DFARM_RETURN_IF_ERROR(entry->kernel->Prepare(entry->partition)
                              .WithPrefix(label_ + ": delegate '" + entry->partition.delegate +
                                          "' partition " + std::to_string(entry->partition.index) +
                                          " prepare"));
  }
  return Status::Ok();
}

Status DelegationPlan::InvokePartition(int partition) {
  Entry& entry = *partitions_[partition];
  Status s = entry.kernel->Invoke(entry.partition);
  if (s.ok()) return s;
  return s.WithPrefix(label_ + ": delegate '" + entry.partition.delegate + "' partition " +
                      std::to_string(partition));
}

Status DelegationPlan::InvokePartitionProfiled(int partition, std::vector<double>* node_us_out) {
  Entry& entry = *partitions_[partition];
  node_us_out->clear();
  Status s = entry.kernel->InvokeProfiled(entry.partition, node_us_out);
  if (s.ok() && node_us_out->size() != entry.partition.nodes.size()) {
    s = Status::Error("the kernel timed " + std::to_string(node_us_out->size()) + " of " +
                      std::to_string(entry.partition.nodes.size()) + " nodes");
  }
  if (s.ok()) return s;
  return s.WithPrefix(label_ + ": delegate '" + entry.partition.delegate + "' partition " +
                      std::to_string(partition));
}

}  // namespace dfarm::runtime
