#include "agent/runner/profile.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace dfarm::runner {

runtime::Status ProfileRuns(runtime::Interpreter& interpreter, const runtime::Placement& placement,
                            uint32_t runs, Profile* profile_out) {
  using Clock = std::chrono::steady_clock;
  Profile profile;
  profile.runs = runs;
  // The steps that do work: CPU nodes and each partition's first node.
  std::vector<size_t> steps;
  for (size_t step = 0; step < interpreter.invoked_nodes_size(); ++step) {
    const int node = interpreter.step_node(step);
    const runtime::NodePlacement* p =
        static_cast<size_t>(node) < placement.nodes.size() ? &placement.nodes[node] : nullptr;
    NodeProfile entry;
    entry.index = node;
    entry.op = interpreter.node(static_cast<size_t>(node)).op_name;
    entry.delegate = p != nullptr ? p->delegate : "cpu";
    if (p != nullptr && p->partition >= 0) {
      if (!profile.nodes.empty() && profile.nodes.back().partition == p->partition) {
        profile.nodes.back().nodes.push_back(node);
        continue;
      }
      entry.op = "DELEGATE";
      entry.partition = p->partition;
      entry.nodes.push_back(node);
    }
    steps.push_back(step);
    profile.nodes.push_back(std::move(entry));
  }
  std::vector<double> total_us(steps.size(), 0.0);
  for (uint32_t run = 0; run < runs; ++run) {
    for (size_t i = 0; i < steps.size(); ++i) {
      const Clock::time_point start = Clock::now();
      runtime::Status s = interpreter.InvokeStep(steps[i]);
      total_us[i] += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      if (!s.ok()) return s;
    }
  }
  std::map<std::string, OpProfile> by_op;
  double all_us = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    NodeProfile& n = profile.nodes[i];
    n.mean_us = runs > 0 ? total_us[i] / runs : 0;
    OpProfile& op = by_op[n.op];
    op.op = n.op;
    ++op.count;
    op.total_us += n.mean_us;
    all_us += n.mean_us;
  }
  for (auto& [name, op] : by_op) {
    op.pct = all_us > 0 ? 100.0 * op.total_us / all_us : 0;
    profile.by_op.push_back(op);
  }
  std::stable_sort(profile.by_op.begin(), profile.by_op.end(),
                   [](const OpProfile& a, const OpProfile& b) { return a.total_us > b.total_us; });
  *profile_out = std::move(profile);
  return runtime::Status::Ok();
}

}  // namespace dfarm::runner
