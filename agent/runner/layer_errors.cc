#include "agent/runner/layer_errors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "agent/runner/accuracy.h"

namespace dfarm::runner {
namespace {

size_t TensorIndex(const runtime::Interpreter& interpreter, const runtime::Tensor* t) {
  return static_cast<size_t>(t - &interpreter.tensor(0));
}

// The tensors the nodes of `partition` write that a node outside it reads,
// or that are model outputs: what the delegate must materialize.
std::set<size_t> PartitionOutputs(const runtime::Interpreter& interpreter, int partition) {
  const runtime::Placement& placement = interpreter.placement();
  std::set<size_t> written, read_outside;
  for (size_t n = 0; n < interpreter.nodes_size(); ++n) {
    const runtime::Node& node = interpreter.node(n);
    const bool inside = placement.nodes[n].partition == partition;
    for (const runtime::Tensor* t : inside ? node.outputs : node.inputs) {
      if (t != nullptr) (inside ? written : read_outside).insert(TensorIndex(interpreter, t));
    }
  }
  for (const runtime::Tensor* t : interpreter.outputs()) {
    read_outside.insert(TensorIndex(interpreter, t));
  }
  std::set<size_t> out;
  for (size_t t : written) {
    if (read_outside.count(t) != 0) out.insert(t);
  }
  return out;
}

LayerError Compare(const runtime::Interpreter& got, size_t tensor,
                   const std::vector<double>& reference) {
  const runtime::Tensor& t = got.tensor(tensor);
  LayerError e;
  e.tensor = static_cast<int64_t>(tensor);
  e.name = t.name;
  const std::vector<double> values = TensorValues(t);
  const size_t n = std::min(values.size(), reference.size());
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(values[i] - reference[i]);
    // NaN on one side only is the largest error there is.
    const double err = std::isnan(d) ? (std::isnan(values[i]) != std::isnan(reference[i])
                                            ? std::numeric_limits<double>::infinity()
                                            : 0.0)
                                     : d;
    e.max_abs_error = std::max(e.max_abs_error, err);
    sum += err;
  }
  e.mean_abs_error = n == 0 ? 0 : sum / static_cast<double>(n);
  return e;
}

}  // namespace

namespace {

// One node's visible tensors, or a partition's as a whole (op "DELEGATE").
struct Visible {
  int node = -1;
  std::string op;
  std::set<size_t> tensors;
};

// Runs step `step` of `got` and says what it made visible: a CPU node's
// outputs; a partition's outputs, or, when its delegate runs it node by node
// (InvokeStepProfiled: every node's outputs land in the tensors), each
// node's outputs; nothing for a partition's later steps.
runtime::Status RunStep(runtime::Interpreter& got, size_t step, std::set<int>* partitions_run,
                        std::vector<Visible>* visible_out) {
  visible_out->clear();
  const int n = got.step_node(step);
  const runtime::NodePlacement& where = got.placement().nodes[n];
  if (where.partition < 0 || !partitions_run->insert(where.partition).second) {
    DFARM_RETURN_IF_ERROR(got.InvokeStep(step));
    if (where.partition >= 0) return runtime::Status::Ok();
    // A node run inside this one (Node::then, InterpreterOptions::fuse_rows)
    // wrote its outputs in the same step.
    for (const runtime::Node* node = &got.node(n); node != nullptr; node = node->then) {
      Visible v{node->index, got.placement().nodes[node->index].op, {}};
      for (const runtime::Tensor* t : node->outputs) v.tensors.insert(TensorIndex(got, t));
      visible_out->push_back(std::move(v));
    }
    return runtime::Status::Ok();
  }
  std::vector<double> node_us;
  const runtime::Status profiled = got.InvokeStepProfiled(step, &node_us);
  if (profiled.code() != runtime::StatusCode::kUnsupported) {
    DFARM_RETURN_IF_ERROR(profiled);
    for (size_t s = step; s < got.invoked_nodes_size(); ++s) {
      const int node = got.step_node(s);
      if (got.placement().nodes[node].partition != where.partition) continue;
      Visible v{node, got.placement().nodes[node].op, {}};
      for (const runtime::Tensor* t : got.node(node).outputs) {
        if (t != nullptr) v.tensors.insert(TensorIndex(got, t));
      }
      visible_out->push_back(std::move(v));
    }
    return runtime::Status::Ok();
  }
  DFARM_RETURN_IF_ERROR(got.InvokeStep(step));
  visible_out->push_back({n, "DELEGATE", PartitionOutputs(got, where.partition)});
  return runtime::Status::Ok();
}

}  // namespace

runtime::Status CompareLayers(runtime::Interpreter& got, runtime::Interpreter& reference,
                              std::vector<LayerError>* layers_out) {
  std::map<size_t, std::vector<double>> expected;
  for (size_t step = 0; step < reference.invoked_nodes_size(); ++step) {
    DFARM_RETURN_IF_ERROR(reference.InvokeStep(step));
    for (const runtime::Tensor* t : reference.node(reference.step_node(step)).outputs) {
      expected[TensorIndex(reference, t)] = TensorValues(*t);
    }
  }
  const runtime::Placement& placement = got.placement();
  std::vector<LayerError> layers;
  std::set<int> partitions_run;  // a partition's first step runs all of it
  std::vector<Visible> visible;
  for (size_t step = 0; step < got.invoked_nodes_size(); ++step) {
    DFARM_RETURN_IF_ERROR(RunStep(got, step, &partitions_run, &visible));
    for (const Visible& v : visible) {
      const runtime::NodePlacement& where = placement.nodes[v.node];
      for (size_t t : v.tensors) {
        auto it = expected.find(t);
        if (it == expected.end()) continue;
        LayerError e = Compare(got, t, it->second);
        e.node = v.node;
        e.op = v.op;
        e.delegate = where.delegate;
        e.partition = where.partition;
        layers.push_back(std::move(e));
      }
    }
  }
  *layers_out = std::move(layers);
  return runtime::Status::Ok();
}

}  // namespace dfarm::runner
