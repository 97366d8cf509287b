// GitHub-flavoured Markdown report for a PR comment: a compact verdict (or
// cell) table first, the details after. Every stored string goes through
// Md(): no control characters, no line breaks, Markdown punctuation escaped.
#include <algorithm>
#include <sstream>

#include "reports/format.h"
#include "reports/html_sections.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

// A fenced block that `text` cannot close: a fence longer than its longest backtick run.
std::string Fenced(const std::string& text) {
  const std::string body = Printable(text, /*keep_lines=*/true);
  size_t run = 0, longest = 0;
  for (char c : body) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + "\n" + body + (body.empty() || body.back() != '\n' ? "\n" : "") + fence + "\n";
}

const char* HealthWord(RunHealth h) {
  switch (h) {
    case RunHealth::kGreen:
      return "✅ passed";
    case RunHealth::kAmber:
      return "⚠️ incomplete";
    case RunHealth::kRed:
      return "❌ failed";
  }
  return "";
}

std::string Percent(double ratio) {
  return (ratio >= 1 ? "+" : "") + Fixed((ratio - 1) * 100, 1) + "%";
}

void Summary(std::ostringstream& md, const RunReport& report) {
  const store::RunRow& run = report.run;
  JobCounts counts = CountJobs(report.jobs);
  md << "# DelegateFarm run " << run.id << ": " << Md(run.name) << "\n\n";
  md << "**" << HealthWord(HealthOf(report)) << "**: run " << Md(run.status) << ", " << counts.total
     << " jobs (" << counts.ok << " ok, " << counts.failed << " failed";
  if (counts.pending) md << ", " << counts.pending << " not run";
  md << ")";
  if (report.comparison) {
    const Comparison& c = *report.comparison;
    std::map<std::string, size_t> by_verdict;
    for (const CellVerdict& v : c.cells) ++by_verdict[gate::VerdictName(v.verdict)];
    md << "; gate against run " << c.baseline_run;
    if (!c.baseline_name.empty()) md << " (" << Md(c.baseline_name) << ")";
    md << ": **" << (c.passed ? "passed" : "failed") << "**";
    for (const auto& [verdict, n] : by_verdict) md << ", " << n << " " << Md(verdict);
  }
  md << "\n\n";
  md << "- **Run:** " << run.id << "\n";
  md << "- **Created:** " << Md(run.created_at) << "\n";
  if (!run.finished_at.empty()) md << "- **Finished:** " << Md(run.finished_at) << "\n";
  md << "- **Status:** " << Md(run.status) << "\n";
  md << "- **Jobs:** " << counts.total << " (" << counts.ok << " ok, " << counts.failed
     << " failed";
  if (counts.pending) md << ", " << counts.pending << " not run";
  md << ")\n\n";
}

void VerdictTable(std::ostringstream& md, const Comparison& c) {
  md << "## Verdicts\n\n| cell | verdict | baseline ms | candidate ms | change | 95% CI | q | "
        "findings |\n| --- | --- | ---: | ---: | ---: | --- | ---: | --- |\n";
  for (const CellVerdict& v : c.cells) {
    md << "| " << Md(v.cell.Label()) << " | **" << gate::VerdictName(v.verdict) << "** | ";
    if (v.baseline_trials > 0 && v.candidate_trials > 0 && v.ratio > 0) {
      md << Ms(v.baseline_median_us) << " | " << Ms(v.candidate_median_us) << " | "
         << Percent(v.ratio) << " | " << Percent(v.ci_low) << " … " << Percent(v.ci_high) << " | "
         << Sig(v.q_value) << " | ";
    } else {
      md << "– | – | – | – | – | ";
    }
    std::string findings;
    for (const std::string& f : v.findings) findings += (findings.empty() ? "" : "; ") + f;
    md << (findings.empty() ? "–" : Md(findings)) << " |\n";
  }
  if (!c.notes.empty()) {
    md << "\n";
    for (const std::string& n : c.notes) md << "> " << Md(n) << "\n";
  }
  md << "\n";
}

void CellTable(std::ostringstream& md, const RunReport& report,
               const std::vector<CellGroup>& cells) {
  md << "## Cells\n\n| cell | status | p50 ms | vs cpu | max abs error vs cpu | placement |\n"
        "| --- | --- | ---: | ---: | ---: | --- |\n";
  for (const CellGroup& cell : cells) {
    size_t ok = 0;
    std::string status, accuracy, placement;
    for (size_t i : cell.jobs) {
      const store::JobRow& j = report.jobs[i];
      if (j.status == store::kJobOk) {
        ++ok;
        if (accuracy.empty()) accuracy = AccuracyLabel(report, j);
        if (placement.empty()) placement = PlacementLabel(j);
      } else if (status.empty()) {
        status = j.status;
      }
    }
    if (status.empty()) status = "ok";
    if (cell.jobs.size() > 1) {
      status += " (" + std::to_string(ok) + "/" + std::to_string(cell.jobs.size()) + " ok)";
    }
    auto median = CellMedianUs(report, cell);
    auto speedup = SpeedupVsCpu(report, cells, cell);
    // A delegate that left nodes on the CPU says so beside the speed-up; one
    // that took none has no speed-up of its own.
    const auto partial = CellPartialDelegation(report, cell);
    std::string vs_cpu = speedup ? Fixed(*speedup, 2) + "×" : "–";
    if (partial) {
      vs_cpu = (partial->TookNone() ? "not delegated" : vs_cpu) + " ⚠ " + Md(partial->Label());
    }
    md << "| " << Md(cell.cell.Label()) << " | " << Md(status) << " | "
       << (median ? Ms(*median) : "–") << " | " << vs_cpu << " | "
       << (accuracy.empty() ? "–" : Md(accuracy)) << " | "
       << (placement.empty() ? "–" : Md(placement)) << " |\n";
  }
  md << "\n";
}

void JobTable(std::ostringstream& md, const RunReport& report,
              const std::vector<CellGroup>& cells) {
  md << "## Jobs\n\n<details><summary>" << report.jobs.size()
     << " jobs: metrics, placement, accuracy, device state</summary>\n\n";
  md << "| model | delegate | device | trial | status | init ms | first ms | mean ms | p50 ms | "
        "p90 ms | p99 ms | peak RSS MiB | placement | max abs error vs cpu | device state |\n";
  md << "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | "
        "---: | --- |\n";
  std::vector<size_t> order;  // cell order, by trial
  for (const CellGroup& cell : cells) order.insert(order.end(), cell.jobs.begin(), cell.jobs.end());
  for (size_t i : order) {
    const store::JobRow& j = report.jobs[i];
    md << "| " << Md(j.model) << " | " << Md(DelegateLabel(j)) << " | " << Md(j.device) << " | "
       << j.trial << " | " << Md(j.status) << " | ";
    if (j.metrics) {
      const store::JobMetrics& m = *j.metrics;
      md << Ms(m.init_us) << " | " << Ms(m.first_us) << " | " << Ms(m.mean_us) << " | "
         << Ms(m.p50_us) << " | " << Ms(m.p90_us) << " | " << Ms(m.p99_us) << " | "
         << PeakRssMiB(m.peak_rss_bytes) << " | ";
    } else {
      md << "– | – | – | – | – | – | – | ";
    }
    std::string placement = PlacementLabel(j);
    std::string flags = DeviceStateFlags(j);
    std::string accuracy = AccuracyLabel(report, j);
    md << (placement.empty() ? "–" : Md(placement)) << " | "
       << (accuracy.empty() ? "–" : Md(accuracy)) << " | "
       << (flags.empty() ? "–" : "⚠ " + Md(flags)) << " |\n";
  }
  md << "\n</details>\n";
}

// The top op types of each profiled cell (spec benchmark.profile).
void ProfileTable(std::ostringstream& md, const RunReport& report,
                  const std::vector<CellGroup>& cells) {
  if (report.profiles.empty()) return;
  md << "\n## Profiles\n\nTime per op type in one run (`benchmark.profile`), the top 3 of "
        "each profiled cell; `dfarm show RUN --job ID` has every op type and node.\n\n"
        "| cell | profiled trials | top op types |\n| --- | ---: | --- |\n";
  for (const CellGroup& cell : cells) {
    const size_t trials = CellProfiledTrials(report, cell);
    if (trials == 0) continue;
    const std::string top = TopOpsLabel(CellProfileOps(report, cell));
    md << "| " << Md(cell.cell.Label()) << " | " << trials << " | " << (top.empty() ? "–" : Md(top))
       << " |\n";
  }
}

// Sustained-mode jobs (spec benchmark.sustained_s): the curve in brief.
void SustainedTable(std::ostringstream& md, const RunReport& report,
                    const std::vector<CellGroup>& cells) {
  if (report.sustained.empty()) return;
  md << "\n## Sustained\n\nLatency over time (`benchmark.sustained_s`): the p50 of the first "
        "and last time windows; a rise with the temperature is thermal throttling. `dfarm show "
        "RUN --job ID --json` has every window.\n\n| job | device | time | p50 first | p50 last "
        "| change | slowest | temperature |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- "
        "|\n";
  for (const CellGroup& cell : cells) {
    for (size_t i : cell.jobs) {
      const store::JobRow& j = report.jobs[i];
      auto s = SummarizeSustained(report, j);
      if (!s) continue;
      md << "| " << Md(store::CellOf(j).Label()) << " #" << j.id << " | " << Md(j.device) << " | "
         << Fixed(s->secs, 1) << " s | " << Ms(s->first_p50_us) << " ms | " << Ms(s->last_p50_us)
         << " ms | " << (s->change_pct >= 0 ? "+" : "") << Fixed(s->change_pct, 1) << "% | "
         << Ms(s->slowest_p50_us) << " ms at " << Fixed(s->slowest_t_s, 1) << " s | "
         << (s->peak_temp_c ? Fixed(*s->start_temp_c, 1) + " → " + Fixed(*s->peak_temp_c, 1) + " °C"
                            : std::string("–"))
         << " |\n";
    }
  }
}

// Delegate init and fp16 cost (delegate_init.cc), per model.
void DelegateInitTable(std::ostringstream& md, const RunReport& report,
                       const std::vector<CellGroup>& cells) {
  const std::vector<InitCell> rows = DelegateInitCells(report, cells);
  if (rows.empty()) return;
  auto ms = [](const std::optional<double>& us) { return us ? Ms(*us) : std::string("–"); };
  md << "\n## Delegate init and fp16 cost\n\nPer model: mean latency, first inference, init "
        "with program compilation (cold) and from the serialized cache (warm), in ms (means over "
        "the ok trials); the worst max abs error against the reference; for a reduced-precision "
        "cell (`precision_loss_allowed`) the error it adds over the same delegate without it, "
        "per output.\n\n";
  for (const auto& [device, gpu] : SectionGpus(rows)) {
    md << "OpenCL device of **" << Md(device) << "**: " << Md(gpu) << "\n\n";
  }
  md << "| model | delegate | device | mean | first inference | init | cold init | warm init | "
        "max abs error | fp16 cost |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- |\n";
  for (const InitCell& c : rows) {
    std::string cost = c.reduced_precision ? "no fp32 twin or no comparison" : "–";
    if (!c.costs.empty()) cost.clear();
    for (const OutputCost& o : c.costs) {
      cost += (cost.empty() ? "" : "; ") +
              Md(o.name.empty() ? "#" + std::to_string(o.index) : o.name) + ": " +
              (o.cost >= 0 ? "+" : "") + Sig(o.cost) + " (" + Sig(o.fp16_max_abs_error) + " vs " +
              Sig(o.fp32_max_abs_error) + ")";
    }
    md << "| " << Md(c.model) << " | " << Md(c.config) << " | " << Md(c.device) << " | "
       << ms(c.mean_us) << " | " << ms(c.first_us) << " | " << ms(c.init_us) << " | "
       << ms(c.init_cold_us) << " | " << ms(c.init_warm_us) << " | "
       << (c.max_abs_error ? Sig(*c.max_abs_error) : "–") << " | " << cost << " |\n";
  }
}

void Warnings(std::ostringstream& md, const RunReport& report) {
  size_t flagged = 0;
  for (const store::JobRow& j : report.jobs) flagged += DeviceStateFlags(j).empty() ? 0 : 1;
  if (!flagged) return;
  md << "\n## Device state warnings\n\n"
     << "Jobs that started hot or ran throttled measured a device that was not at rest.\n\n";
  for (const store::JobRow& j : report.jobs) {
    std::string flags = DeviceStateFlags(j);
    if (flags.empty()) continue;
    md << "- ⚠ **" << Md(j.model) << "** " << Md(DelegateLabel(j)) << " on " << Md(j.device) << ": "
       << Md(flags) << (j.state_note.empty() ? "" : " (" + Md(j.state_note) + ")") << "\n";
  }
}

void Failures(std::ostringstream& md, const RunReport& report) {
  if (CountJobs(report.jobs).failed == 0) return;
  md << "\n## Failures\n\n";
  for (const store::JobRow& j : report.jobs) {
    if (j.status == store::kJobOk || !store::IsFinalJobStatus(j.status)) continue;
    md << "- **" << Md(j.model) << "** " << Md(DelegateLabel(j)) << " on " << Md(j.device) << ": `"
       << Md(j.status) << "` " << Md(j.error) << "\n";
    auto tail = report.stderr_tails.find(j.id);
    if (tail != report.stderr_tails.end()) {
      md << "\n<details><summary>stderr (last lines)</summary>\n\n"
         << Fenced(tail->second) << "\n</details>\n\n";
    }
  }
}

}  // namespace

std::string RenderMarkdown(const RunReport& report) {
  std::ostringstream md;
  Summary(md, report);
  const std::vector<CellGroup> cells =
      report.cells.empty() ? GroupCells(report.jobs) : report.cells;
  if (report.comparison) {
    VerdictTable(md, *report.comparison);
  } else {
    CellTable(md, report, cells);
  }
  JobTable(md, report, cells);
  DelegateInitTable(md, report, cells);
  ProfileTable(md, report, cells);
  SustainedTable(md, report, cells);
  TaskAccuracyTable(md, report, cells);
  Warnings(md, report);
  Failures(md, report);
  return md.str();
}

}  // namespace dfarm::reports
