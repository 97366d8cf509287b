// Per-op profiles over a run's cells (spec benchmark.profile): what the
// Markdown and HTML reports' "Profiles" sections show.
#include <algorithm>
#include <cstdio>
#include <map>

#include "reports/report.h"

namespace dfarm::reports {

std::vector<store::ProfileOp> CellProfileOps(const RunReport& report, const CellGroup& cell) {
  std::map<std::string, store::ProfileOp> sums;
  std::vector<std::string> order;  // first appearance, for equal totals
  size_t trials = 0;
  for (size_t i : cell.jobs) {
    auto it = report.profiles.find(report.jobs[i].id);
    if (it == report.profiles.end()) continue;
    ++trials;
    for (const store::ProfileOp& o : it->second.by_op) {
      auto [entry, added] = sums.try_emplace(o.op, store::ProfileOp{o.op, o.count, 0, 0});
      if (added) order.push_back(o.op);
      entry->second.total_us += o.total_us;
      entry->second.pct += o.pct;
    }
  }
  std::vector<store::ProfileOp> out;
  for (const std::string& op : order) {
    store::ProfileOp o = sums[op];
    o.total_us /= static_cast<double>(trials);
    o.pct /= static_cast<double>(trials);
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.total_us > b.total_us; });
  return out;
}

size_t CellProfiledTrials(const RunReport& report, const CellGroup& cell) {
  size_t n = 0;
  for (size_t i : cell.jobs) n += report.profiles.count(report.jobs[i].id);
  return n;
}

std::string TopOpsLabel(const std::vector<store::ProfileOp>& ops, size_t n) {
  std::string out;
  for (size_t k = 0; k < ops.size() && k < n; ++k) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f%%", ops[k].pct);
    out += (out.empty() ? "" : ", ") + ops[k].op + " " + pct;
  }
  return out;
}

}  // namespace dfarm::reports
