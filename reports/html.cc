// Self-contained HTML report: inline CSS, no scripts, every string escaped.
#include <sstream>

#include "reports/format.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

std::string Esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

constexpr const char* kCss = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .3em; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dt { font-weight: 600; }
dd { margin: 0; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: .3em .6em; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.st { font-weight: 600; }
.st-ok { color: #17692b; }
.st-fail { color: #a31515; }
.st-pending { color: #777; }
li code { background: #f3f3f3; padding: 0 .3em; }
.warn { color: #8a5a00; font-weight: 600; }
)css";

const char* StatusClass(const std::string& status) {
  if (status == store::kJobOk || status == store::kRunFinished) return "st st-ok";
  if (status == store::kJobQueued || status == store::kJobRunning || status == store::kRunRunning ||
      status == store::kRunCancelled) {
    return "st st-pending";
  }
  return "st st-fail";
}

}  // namespace

std::string RenderHtml(const RunReport& report) {
  const store::RunRow& run = report.run;
  JobCounts counts = CountJobs(report.jobs);
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<title>DelegateFarm run " << run.id << ": " << Esc(run.name) << "</title>\n"
    << "<style>" << kCss << "</style>\n</head>\n<body>\n";
  h << "<h1>DelegateFarm run " << run.id << ": " << Esc(run.name) << "</h1>\n<dl>\n"
    << "<dt>Run</dt><dd>" << run.id << "</dd>\n"
    << "<dt>Created</dt><dd>" << Esc(run.created_at) << "</dd>\n";
  if (!run.finished_at.empty()) h << "<dt>Finished</dt><dd>" << Esc(run.finished_at) << "</dd>\n";
  h << "<dt>Status</dt><dd class=\"" << StatusClass(run.status) << "\">" << Esc(run.status)
    << "</dd>\n<dt>Jobs</dt><dd>" << counts.total << " (" << counts.ok << " ok, " << counts.failed
    << " failed";
  if (counts.pending) h << ", " << counts.pending << " not run";
  h << ")</dd>\n</dl>\n";

  h << "<h2>Jobs</h2>\n<table>\n<thead><tr><th>model</th><th>delegate</th><th>device</th>"
       "<th>status</th><th>init ms</th><th>first ms</th><th>mean ms</th><th>p50 ms</th>"
       "<th>p90 ms</th><th>p99 ms</th><th>peak RSS MiB</th><th>placement</th>"
       "<th>max abs error vs cpu</th><th>device state</th></tr></thead>\n<tbody>\n";
  for (const store::JobRow& j : report.jobs) {
    h << "<tr><td>" << Esc(j.model) << "</td><td>" << Esc(DelegateLabel(j)) << "</td><td>"
      << Esc(j.device) << "</td><td class=\"" << StatusClass(j.status) << "\">" << Esc(j.status)
      << "</td>";
    if (j.metrics) {
      const store::JobMetrics& m = *j.metrics;
      for (double us : {m.init_us, m.first_us, m.mean_us, m.p50_us, m.p90_us, m.p99_us}) {
        h << "<td class=\"num\">" << Ms(us) << "</td>";
      }
      h << "<td class=\"num\">" << MiB(m.peak_rss_bytes) << "</td>";
    } else {
      for (int i = 0; i < 7; ++i) h << "<td class=\"num\">&ndash;</td>";
    }
    std::string placement = PlacementLabel(j);
    std::string flags = DeviceStateFlags(j);
    h << "<td>" << (placement.empty() ? "&ndash;" : Esc(placement)) << "</td>";
    const std::string accuracy = AccuracyLabel(report, j);
    h << "<td class=\"num\">" << (accuracy.empty() ? "&ndash;" : Esc(accuracy)) << "</td>";
    if (flags.empty()) {
      h << "<td>&ndash;</td>";
    } else {
      h << "<td class=\"warn\" title=\"" << Esc(j.state_note) << "\">&#9888; " << Esc(flags)
        << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</tbody>\n</table>\n";

  bool flagged = false;
  for (const store::JobRow& j : report.jobs) flagged = flagged || !DeviceStateFlags(j).empty();
  if (flagged) {
    h << "<h2>Device state warnings</h2>\n<p>Jobs that started hot or ran throttled measured a "
         "device that was not at rest.</p>\n<ul>\n";
    for (const store::JobRow& j : report.jobs) {
      std::string flags = DeviceStateFlags(j);
      if (flags.empty()) continue;
      h << "<li class=\"warn\">&#9888; <b>" << Esc(j.model) << "</b> " << Esc(DelegateLabel(j))
        << " on " << Esc(j.device) << ": " << Esc(flags);
      if (!j.state_note.empty()) h << " (" << Esc(j.state_note) << ")";
      h << "</li>\n";
    }
    h << "</ul>\n";
  }

  if (counts.failed) {
    h << "<h2>Failures</h2>\n<ul>\n";
    for (const store::JobRow& j : report.jobs) {
      if (j.status == store::kJobOk || !store::IsFinalJobStatus(j.status)) continue;
      h << "<li><b>" << Esc(j.model) << "</b> " << Esc(DelegateLabel(j)) << " on " << Esc(j.device)
        << ": <code>" << Esc(j.status) << "</code> " << Esc(j.error) << "</li>\n";
    }
    h << "</ul>\n";
  }
  h << "</body>\n</html>\n";
  return h.str();
}

}  // namespace dfarm::reports
