#include "agent/runner/profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

namespace dfarm::runner {
namespace {

using Clock = std::chrono::steady_clock;

// One timed step: a CPU node or a partition's first node.
struct Step {
  size_t step = 0;
  size_t entry = 0;             // its entry in Profile::nodes
  bool node_timed = false;      // a partition whose delegate times its nodes
  size_t first_node_entry = 0;  // then: the entry of its first node
};

// The entries of the steps that do work: CPU nodes and each partition's first node.
std::vector<Step> ListSteps(const runtime::Interpreter& interpreter,
                            const runtime::Placement& placement, Profile* profile) {
  std::vector<Step> steps;
  for (size_t step = 0; step < interpreter.invoked_nodes_size(); ++step) {
    const int node = interpreter.step_node(step);
    const runtime::NodePlacement* p =
        static_cast<size_t>(node) < placement.nodes.size() ? &placement.nodes[node] : nullptr;
    NodeProfile entry;
    entry.index = node;
    entry.op = interpreter.node(static_cast<size_t>(node)).op_name;
    entry.delegate = p != nullptr ? p->delegate : "cpu";
    if (p != nullptr && p->partition >= 0) {
      if (!profile->nodes.empty() && profile->nodes.back().partition == p->partition) {
        profile->nodes.back().nodes.push_back(node);
        continue;
      }
      entry.op = "DELEGATE";
      entry.partition = p->partition;
      entry.nodes.push_back(node);
    }
    steps.push_back({step, profile->nodes.size()});
    profile->nodes.push_back(std::move(entry));
  }
  return steps;
}

// One untimed run, in step order (each step reads what the ones before
// wrote), each partition profiled where its delegate can: marks those whose
// delegate times their nodes and inserts an entry per node after the
// partition's.
runtime::Status ProbeNodeTiming(runtime::Interpreter& interpreter, std::vector<Step>* steps,
                                Profile* profile) {
  std::vector<NodeProfile> nodes;
  std::vector<double> node_us;
  for (Step& s : *steps) {
    const NodeProfile whole = profile->nodes[s.entry];
    s.entry = nodes.size();
    nodes.push_back(whole);
    const runtime::Status probe = whole.partition >= 0
                                      ? interpreter.InvokeStepProfiled(s.step, &node_us)
                                      : runtime::Status::Unsupported("a CPU node");
    if (probe.code() == runtime::StatusCode::kUnsupported) {
      DFARM_RETURN_IF_ERROR(interpreter.InvokeStep(s.step));
      continue;
    }
    if (!probe.ok()) return probe;
    s.node_timed = true;
    s.first_node_entry = nodes.size();
    for (int node : whole.nodes) {
      NodeProfile entry;
      entry.index = node;
      entry.op = interpreter.node(static_cast<size_t>(node)).op_name;
      entry.delegate = whole.delegate;
      entry.partition = whole.partition;
      entry.in_partition = true;
      nodes.push_back(std::move(entry));
    }
  }
  profile->nodes = std::move(nodes);
  return runtime::Status::Ok();
}

// One pass over every step, in order. `profiled`: partitions whose
// delegate times their nodes run profiled, their nodes' times and their own
// (the nodes' sum) into total_us, and nothing else is timed; otherwise every
// step runs plainly, timed into total_us, or plain_us for those partitions.
runtime::Status TimePass(runtime::Interpreter& interpreter, const std::vector<Step>& steps,
                         bool profiled, std::vector<double>* total_us,
                         std::vector<double>* plain_us) {
  std::vector<double> node_us;
  for (const Step& s : steps) {
    if (profiled && s.node_timed) {
      DFARM_RETURN_IF_ERROR(interpreter.InvokeStepProfiled(s.step, &node_us));
      for (size_t i = 0; i < node_us.size(); ++i) {
        (*total_us)[s.first_node_entry + i] += node_us[i];
        (*total_us)[s.entry] += node_us[i];
      }
      continue;
    }
    if (profiled) {
      DFARM_RETURN_IF_ERROR(interpreter.InvokeStep(s.step));
      continue;
    }
    const Clock::time_point start = Clock::now();
    runtime::Status status = interpreter.InvokeStep(s.step);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (!status.ok()) return status;
    (s.node_timed ? *plain_us : *total_us)[s.entry] += us;
  }
  return runtime::Status::Ok();
}

// Sums each step's time over `runs` runs into mean_us. A run is a plain
// pass, then, when some partition's delegate times its nodes, a profiled
// pass: each pass finds a step after the same steps as Invoke() does.
runtime::Status TimeRuns(runtime::Interpreter& interpreter, const std::vector<Step>& steps,
                         uint32_t runs, Profile* profile) {
  std::vector<double> total_us(profile->nodes.size(), 0.0), plain_us(total_us);
  const bool node_timed =
      std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.node_timed; });
  for (uint32_t run = 0; run < runs; ++run) {
    DFARM_RETURN_IF_ERROR(TimePass(interpreter, steps, false, &total_us, &plain_us));
    if (node_timed) DFARM_RETURN_IF_ERROR(TimePass(interpreter, steps, true, &total_us, &plain_us));
  }
  for (size_t i = 0; i < profile->nodes.size(); ++i) {
    profile->nodes[i].mean_us = runs > 0 ? total_us[i] / runs : 0;
    profile->nodes[i].plain_us = runs > 0 ? plain_us[i] / runs : 0;
  }
  return runtime::Status::Ok();
}

// by_op over the entries that make up one run: a partition timed per node
// counts as its nodes.
void SumByOp(Profile* profile) {
  std::map<std::string, OpProfile> by_op;
  double all_us = 0;
  for (size_t i = 0; i < profile->nodes.size(); ++i) {
    const NodeProfile& n = profile->nodes[i];
    const bool split = i + 1 < profile->nodes.size() && !n.in_partition && n.partition >= 0 &&
                       profile->nodes[i + 1].in_partition;
    if (split) continue;
    OpProfile& op = by_op[n.op];
    op.op = n.op;
    ++op.count;
    op.total_us += n.mean_us;
    all_us += n.mean_us;
  }
  for (auto& [name, op] : by_op) {
    op.pct = all_us > 0 ? 100.0 * op.total_us / all_us : 0;
    profile->by_op.push_back(op);
  }
  std::stable_sort(profile->by_op.begin(), profile->by_op.end(),
                   [](const OpProfile& a, const OpProfile& b) { return a.total_us > b.total_us; });
}

}  // namespace

runtime::Status ProfileRuns(runtime::Interpreter& interpreter, const runtime::Placement& placement,
                            uint32_t runs, Profile* profile_out) {
  Profile profile;
  profile.runs = runs;
  std::vector<Step> steps = ListSteps(interpreter, placement, &profile);
  DFARM_RETURN_IF_ERROR(ProbeNodeTiming(interpreter, &steps, &profile));
  DFARM_RETURN_IF_ERROR(TimeRuns(interpreter, steps, runs, &profile));
  SumByOp(&profile);
  *profile_out = std::move(profile);
  return runtime::Status::Ok();
}

std::vector<PartitionTime> PartitionTimes(const Profile& profile) {
  std::vector<PartitionTime> out;
  for (const NodeProfile& n : profile.nodes) {
    if (n.in_partition) {
      if (!out.empty() && out.back().partition == n.partition) {
        ++out.back().nodes;
        out.back().nodes_us += n.mean_us;
      }
    } else if (n.partition >= 0) {
      out.push_back({n.partition, n.delegate, 0, n.mean_us, 0, n.plain_us});
    }
  }
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const PartitionTime& p) { return p.nodes == 0; }),
      out.end());
  return out;
}

std::string PartitionProfileText(const Profile& profile) {
  std::string s;
  for (const PartitionTime& p : PartitionTimes(profile)) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "partition %d (%s, %zu nodes): %.1f us profiled (its nodes %.1f us), %.1f us "
                  "run plainly (%.1f%%)\n",
                  p.partition, p.delegate.c_str(), p.nodes, p.whole_us, p.nodes_us, p.plain_us,
                  p.plain_us > 0 ? 100.0 * p.whole_us / p.plain_us : 0.0);
    s += buf;
  }
  return s;
}

}  // namespace dfarm::runner
