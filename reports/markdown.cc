// GitHub-flavoured Markdown report.
#include <sstream>

#include "reports/format.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

// A table cell: no newlines, pipes and backslashes escaped.
std::string Cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '\\' || c == '`' || c == '*' || c == '<' || c == '>') {
      out += '\\';
      out += c;
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderMarkdown(const RunReport& report) {
  const store::RunRow& run = report.run;
  JobCounts counts = CountJobs(report.jobs);
  std::ostringstream md;
  md << "# DelegateFarm run " << run.id << ": " << Cell(run.name) << "\n\n";
  md << "- **Run:** " << run.id << "\n";
  md << "- **Created:** " << Cell(run.created_at) << "\n";
  if (!run.finished_at.empty()) md << "- **Finished:** " << Cell(run.finished_at) << "\n";
  md << "- **Status:** " << Cell(run.status) << "\n";
  md << "- **Jobs:** " << counts.total << " (" << counts.ok << " ok, " << counts.failed
     << " failed";
  if (counts.pending) md << ", " << counts.pending << " not run";
  md << ")\n\n";

  md << "## Jobs\n\n";
  md << "| model | delegate | device | status | init ms | first ms | mean ms | p50 ms | "
        "p90 ms | p99 ms | peak RSS MiB | placement | max abs error vs cpu | device state |\n";
  md << "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | "
        "--- |\n";
  for (const store::JobRow& j : report.jobs) {
    md << "| " << Cell(j.model) << " | " << Cell(DelegateLabel(j)) << " | " << Cell(j.device)
       << " | " << Cell(j.status) << " | ";
    if (j.metrics) {
      const store::JobMetrics& m = *j.metrics;
      md << Ms(m.init_us) << " | " << Ms(m.first_us) << " | " << Ms(m.mean_us) << " | "
         << Ms(m.p50_us) << " | " << Ms(m.p90_us) << " | " << Ms(m.p99_us) << " | "
         << MiB(m.peak_rss_bytes) << " | ";
    } else {
      md << "– | – | – | – | – | – | – | ";
    }
    std::string placement = PlacementLabel(j);
    std::string flags = DeviceStateFlags(j);
    std::string accuracy = AccuracyLabel(report, j);
    md << (placement.empty() ? "–" : Cell(placement)) << " | "
       << (accuracy.empty() ? "–" : Cell(accuracy)) << " | "
       << (flags.empty() ? "–" : "⚠ " + Cell(flags)) << " |\n";
  }

  size_t flagged = 0;
  for (const store::JobRow& j : report.jobs) flagged += DeviceStateFlags(j).empty() ? 0 : 1;
  if (flagged) {
    md << "\n## Device state warnings\n\n"
       << "Jobs that started hot or ran throttled measured a device that was not at rest.\n\n";
    for (const store::JobRow& j : report.jobs) {
      std::string flags = DeviceStateFlags(j);
      if (flags.empty()) continue;
      md << "- ⚠ **" << Cell(j.model) << "** " << Cell(DelegateLabel(j)) << " on " << Cell(j.device)
         << ": " << Cell(flags) << (j.state_note.empty() ? "" : " (" + Cell(j.state_note) + ")")
         << "\n";
    }
  }

  if (counts.failed) {
    md << "\n## Failures\n\n";
    for (const store::JobRow& j : report.jobs) {
      if (j.status == store::kJobOk || !store::IsFinalJobStatus(j.status)) continue;
      md << "- **" << Cell(j.model) << "** " << Cell(DelegateLabel(j)) << " on " << Cell(j.device)
         << ": `" << Cell(j.status) << "` " << Cell(j.error) << "\n";
    }
  }
  return md.str();
}

}  // namespace dfarm::reports
