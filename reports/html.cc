// Self-contained HTML report: inline CSS and SVG, no scripts, nothing
// fetched; every stored string escaped (Esc) for text and attributes alike.
// Sections: summary banner, gate verdicts (--baseline), speed-up heatmap,
// latency distributions, accuracy, placement, jobs with noise flags,
// environment, failures with their stderr tail.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "reports/format.h"
#include "reports/html_sections.h"
#include "reports/palette.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

std::string Esc(const std::string& raw) {
  const std::string s = Printable(raw, /*keep_lines=*/true);
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
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1500px; }
h1 { font-size: 1.5em; margin-bottom: .3em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dt { font-weight: 600; }
dd { margin: 0; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { border: 1px solid #ccc; padding: .3em .6em; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.st { font-weight: 600; }
.st-ok { color: #17692b; }
.st-fail { color: #a31515; }
.st-pending { color: #777; }
li code, td code { background: #f3f3f3; padding: 0 .3em; }
.warn { color: #8a5a00; font-weight: 600; }
.banner { padding: .8em 1em; border-radius: 6px; font-size: 1.1em; font-weight: 600; margin: .6em 0; }
.banner-green { background: #e3f4e6; border: 2px solid #2f8a43; color: #17692b; }
.banner-amber { background: #fff4d6; border: 2px solid #d99a00; color: #7a5200; }
.banner-red { background: #fde4e1; border: 2px solid #c62f24; color: #8d1a12; }
.banner div { font-weight: 400; font-size: .9em; }
table.heat td.hc { text-align: center; min-width: 7.5em; }
table.heat td.hc b { font-size: 1.15em; }
table.heat td.hc small { display: block; }
table.heat td.hc small.partial { color: #7a3b00; font-weight: 600; background: #fff0c2;
  border-radius: 3px; padding: 0 .3em; margin: .1em auto; width: fit-content; }
ol.partial { font-size: .9em; color: #5a3a00; }
table.heat th small { display: block; font-weight: 400; max-width: 18em; color: #555; }
.fail { background: repeating-linear-gradient(45deg, #fbd3cf, #fbd3cf 6px, #fff 6px, #fff 12px);
  color: #8d1a12; font-weight: 600; }
td.none { color: #aaa; text-align: center; }
td.op { white-space: nowrap; }
table.init tr.first td { border-top: 2px solid #888; }
table.init td.cost { white-space: nowrap; font-variant-numeric: tabular-nums; }
.dim { color: #777; }
.badge { display: inline-block; padding: 0 .5em; border-radius: 3px; font-weight: 600;
  font-size: .85em; }
pre { background: #f6f6f6; padding: .6em; max-height: 24em; overflow-y: auto; font-size: 12px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
table.jobs { font-size: 12px; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
svg .axis { stroke: #999; stroke-width: 1; }
svg .grid { stroke: #e4e4e4; stroke-width: 1; }
.legend span { display: inline-block; width: 3.2em; text-align: center; font-size: .85em;
  padding: .1em 0; }
)css";

const char* StatusClass(const std::string& status) {
  if (status == store::kJobOk || status == store::kRunFinished) return "st st-ok";
  if (status == store::kJobQueued || status == store::kJobRunning || status == store::kRunRunning ||
      status == store::kRunCancelled) {
    return "st st-pending";
  }
  // A job status that is not a failure (palette.h: unsupported, cancelled,
  // not_run) is grey like a pending one, as the dashboard draws it.
  if (ParseJobStatus(status) && !IsFailureStatus(status)) return "st st-pending";
  return "st st-fail";
}

const CellVerdict* VerdictOf(const RunReport& report, const CellGroup& cell) {
  if (!report.comparison) return nullptr;
  for (const CellVerdict& v : report.comparison->cells) {
    if (v.cell == cell.cell) return &v;
  }
  return nullptr;
}

std::string Badge(gate::Verdict verdict) {
  const std::string name = gate::VerdictName(verdict);
  return "<span class=\"badge v-" + name + "\">" + name + "</span>";
}

std::string StatusCounts(const std::vector<store::JobRow>& jobs) {
  std::map<std::string, size_t> by;
  for (const store::JobRow& j : jobs) {
    if (j.status != store::kJobOk) ++by[j.status];
  }
  std::string s;
  for (const auto& [status, n] : by)
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  return s;
}

void Banner(std::ostringstream& h, const RunReport& report) {
  const JobCounts c = CountJobs(report.jobs);
  const RunHealth health = HealthOf(report);
  const char* cls = health == RunHealth::kGreen   ? "banner-green"
                    : health == RunHealth::kAmber ? "banner-amber"
                                                  : "banner-red";
  const char* word = health == RunHealth::kGreen   ? "&#10004; passed"
                     : health == RunHealth::kAmber ? "&#9888; incomplete"
                                                   : "&#10008; failed";
  h << "<div class=\"banner " << cls << "\">" << word << ": run " << Esc(report.run.status) << ", "
    << c.total << " jobs: " << c.ok << " ok, " << c.failed << " failed";
  if (c.pending) h << ", " << c.pending << " not run";
  if (c.failed + c.pending > 0) h << " (" << Esc(StatusCounts(report.jobs)) << ")";
  if (report.comparison) {
    const Comparison& cmp = *report.comparison;
    std::map<std::string, size_t> by;
    for (const CellVerdict& v : cmp.cells) ++by[gate::VerdictName(v.verdict)];
    h << "<div>gate against run " << cmp.baseline_run;
    if (!cmp.baseline_name.empty()) h << " (" << Esc(cmp.baseline_name) << ")";
    h << ": <b>" << (cmp.passed ? "passed" : "failed") << "</b>";
    for (const auto& [verdict, n] : by) h << ", " << n << " " << Esc(verdict);
    h << "</div>";
  }
  h << "</div>\n";
}

void HtmlSummary(std::ostringstream& h, const RunReport& report) {
  const store::RunRow& run = report.run;
  JobCounts counts = CountJobs(report.jobs);
  h << "<h1>DelegateFarm run " << run.id << ": " << Esc(run.name) << "</h1>\n";
  Banner(h, report);
  h << "<dl>\n<dt>Run</dt><dd>" << run.id << "</dd>\n"
    << "<dt>Created</dt><dd>" << Esc(run.created_at) << "</dd>\n";
  if (!run.finished_at.empty()) h << "<dt>Finished</dt><dd>" << Esc(run.finished_at) << "</dd>\n";
  // The run's status word is green only when the whole run is (HealthOf).
  const RunHealth health = HealthOf(report);
  const char* status_class = health == RunHealth::kGreen   ? "st st-ok"
                             : health == RunHealth::kAmber ? "st warn"
                                                           : "st st-fail";
  h << "<dt>Status</dt><dd class=\"" << status_class << "\">" << Esc(run.status)
    << "</dd>\n<dt>Jobs</dt><dd>" << counts.total << " (" << counts.ok << " ok, " << counts.failed
    << " failed";
  if (counts.pending) h << ", " << counts.pending << " not run";
  h << ")</dd>\n";
  if (!run.tags.empty()) {
    std::string tags;
    for (const std::string& t : run.tags) tags += (tags.empty() ? "" : ", ") + t;
    h << "<dt>Tags</dt><dd>" << Esc(tags) << "</dd>\n";
  }
  if (run.parent_run_id) h << "<dt>Reruns for</dt><dd>run " << run.parent_run_id << "</dd>\n";
  h << "</dl>\n";
}

// A cell whose delegate left nodes on the CPU: a marker with a footnote
// number (its line in `footnotes`) under the figures, the whole label in the
// tooltip.
void PartialMarker(std::ostringstream& h, const store::PartialDelegation& partial,
                   const CellGroup& cell, std::vector<std::string>& footnotes) {
  footnotes.push_back(cell.cell.Label() + ": " + partial.Label());
  h << "<small class=\"partial\" title=\"" << Esc(partial.Label()) << "\">&#9888; "
    << Esc(partial.Count()) << "<sup>" << footnotes.size() << "</sup></small>";
}

void HeatCell(std::ostringstream& h, const RunReport& report, const std::vector<CellGroup>& cells,
              const CellGroup& cell, std::vector<std::string>& footnotes) {
  const store::JobRow& first = report.jobs[cell.jobs.front()];
  size_t ok = 0;
  std::string bad;
  for (size_t i : cell.jobs) {
    if (report.jobs[i].status == store::kJobOk) {
      ++ok;
    } else if (bad.empty()) {
      bad = report.jobs[i].status;
    }
  }
  const CellVerdict* v = VerdictOf(report, cell);
  const std::string verdict = v ? "<br>" + Badge(v->verdict) : "";
  if (ok == 0) {
    h << "<td class=\"hc fail\" title=\"" << Esc(cell.cell.Label()) << "\">" << Esc(bad) << verdict
      << "</td>";
    return;
  }
  auto median = CellMedianUs(report, cell);
  auto speedup = SpeedupVsCpu(report, cells, cell);
  const bool is_cpu = first.delegate == "cpu" && first.delegate_options.empty();
  const auto partial = CellPartialDelegation(report, cell);
  // A delegate that took no node ran the CPU path: no speed-up of its own.
  const bool none = partial && partial->TookNone();
  auto [bg, fg] = speedup && !is_cpu && !none
                      ? SpeedupColours(*speedup)
                      : std::pair<std::string, std::string>{"#eeeeee", "#222"};
  h << "<td class=\"hc\" style=\"background:" << bg << ";color:" << fg << "\" title=\""
    << Esc(cell.cell.Label() + (partial ? "\n" + partial->Label() : "")) << "\"><b>"
    << (is_cpu    ? "cpu ref"
        : none    ? "not delegated"
        : speedup ? Fixed(*speedup, 2) + "&times;"
                  : "n/a")
    << "</b><small>" << (median ? Ms(*median) + " ms p50" : "") << "</small>";
  if (partial) PartialMarker(h, *partial, cell, footnotes);
  if (cell.jobs.size() > 1) h << "<small>" << ok << "/" << cell.jobs.size() << " trials ok</small>";
  if (!bad.empty()) h << "<small>&#9888; " << Esc(bad) << "</small>";
  h << verdict << "</td>";
}

void Heatmap(std::ostringstream& h, const RunReport& report, const std::vector<CellGroup>& cells) {
  const CellMatrix matrix = LayoutMatrix(cells);
  h << "<h2>Speed-up vs cpu</h2>\n<p>Median latency of the cpu cell of the same model, device, "
       "threads and runner divided by the cell's (pooled samples of all trials).</p>\n"
       "<p class=\"legend\">";
  for (double s : {0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0}) {
    auto [bg, fg] = SpeedupColours(s);
    h << "<span style=\"background:" << bg << ";color:" << fg << "\">" << Sig(s)
      << "&times;</span>";
  }
  h << " <span class=\"fail\" style=\"width:auto;padding:.1em .5em\">failed</span></p>\n"
    << "<table class=\"heat\">\n<thead><tr><th>model</th><th>delegate config</th>";
  for (const std::string& d : matrix.devices) {
    // The device's GPU (OpenCL), when its agent reported one.
    const std::string gpu = GpuDeviceLabel(report, d);
    h << "<th>" << Esc(d) << (gpu.empty() ? "" : "<br><small>" + Esc(gpu) + "</small>") << "</th>";
  }
  h << "</tr></thead>\n<tbody>\n";
  const auto& rows = matrix.rows;
  std::vector<std::string> footnotes;  // cells whose delegate left nodes on the CPU
  for (size_t r = 0; r < rows.size(); ++r) {
    const MatrixRow& row = rows[r];
    h << "<tr>";
    if (r == 0 || rows[r - 1].model != row.model) {  // one model cell over its configs
      size_t span = 1;
      while (r + span < rows.size() && rows[r + span].model == row.model) ++span;
      h << "<td rowspan=\"" << span << "\">" << Esc(row.model) << "</td>";
    }
    h << "<td>" << Esc(row.config) << "</td>";
    for (int c : row.cells) {
      if (c < 0) {
        h << "<td class=\"none\">&ndash;</td>";
      } else {
        HeatCell(h, report, cells, cells[static_cast<size_t>(c)], footnotes);
      }
    }
    h << "</tr>\n";
  }
  h << "</tbody>\n</table>\n";
  if (footnotes.empty()) return;
  h << "<p class=\"warn\">&#9888; Partly delegated: these cells' latency is not their "
       "delegate's alone (nodes it did not take ran on the CPU; \"not delegated\": it took "
       "none).</p>\n<ol class=\"partial\">\n";
  for (const std::string& note : footnotes) h << "<li>" << Esc(note) << "</li>\n";
  h << "</ol>\n";
}

// A tick step of about range/5: 1, 2 or 5 times a power of ten.
double NiceStep(double range) {
  if (range <= 0) return 1;
  const double raw = range / 5;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

std::string Coord(double v) { return Fixed(v, 1); }

// One SVG per model: a box plot per cell (box p25-p75, line p50, whiskers
// p5-p95, dots min and max), milliseconds on a shared axis.
void DistributionChart(std::ostringstream& h, const std::vector<const CellGroup*>& cells) {
  constexpr double kLabelW = 480, kPlotW = 560, kRowH = 26, kTop = 8, kAxisH = 30;
  double axis_max = 0, p95_max = 0;
  for (const CellGroup* c : cells) {
    axis_max = std::max(axis_max, c->latency.max);
    p95_max = std::max(p95_max, c->latency.p95);
  }
  axis_max = std::min(axis_max, 2.5 * p95_max) / 1000.0;  // outliers clip at the edge
  const double step = NiceStep(axis_max);
  axis_max = std::max(step, std::ceil(axis_max / step) * step);
  const double height = kTop + kRowH * static_cast<double>(cells.size()) + kAxisH;
  auto x = [&](double us) { return kLabelW + kPlotW * std::min(us / 1000.0, axis_max) / axis_max; };
  h << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kLabelW + kPlotW + 110
    << "\" height=\"" << height << "\" role=\"img\">\n";
  const double bottom = kTop + kRowH * static_cast<double>(cells.size());
  for (double t = 0; t <= axis_max + step / 2; t += step) {
    const double tx = kLabelW + kPlotW * t / axis_max;
    h << "<line class=\"grid\" x1=\"" << Coord(tx) << "\" y1=\"" << kTop << "\" x2=\"" << Coord(tx)
      << "\" y2=\"" << bottom << "\"/><text x=\"" << Coord(tx) << "\" y=\"" << bottom + 16
      << "\" text-anchor=\"middle\">" << Sig(t) << "</text>\n";
  }
  h << "<text x=\"" << kLabelW + kPlotW + 30 << "\" y=\"" << bottom + 16 << "\">ms</text>\n";
  for (size_t r = 0; r < cells.size(); ++r) {
    const CellGroup& c = *cells[r];
    const SampleSummary& s = c.latency;
    const double cy = kTop + kRowH * (static_cast<double>(r) + 0.5);
    std::string label = c.cell.Label();
    if (label.size() > 74) label = label.substr(0, 72) + "…";
    h << "<text x=\"" << kLabelW - 8 << "\" y=\"" << cy + 4 << "\" text-anchor=\"end\">"
      << Esc(label) << "</text>\n";
    h << "<line class=\"axis\" x1=\"" << Coord(x(s.p05)) << "\" y1=\"" << cy << "\" x2=\""
      << Coord(x(s.p95)) << "\" y2=\"" << cy << "\"/>"
      << "<rect x=\"" << Coord(x(s.p25)) << "\" y=\"" << cy - 8 << "\" width=\""
      << Coord(std::max(1.0, x(s.p75) - x(s.p25))) << "\" height=\"16\" fill=\"#9cc3e6\" "
      << "stroke=\"#2b6cb0\"/><line x1=\"" << Coord(x(s.p50)) << "\" y1=\"" << cy - 8 << "\" x2=\""
      << Coord(x(s.p50)) << "\" y2=\"" << cy + 8 << "\" stroke=\"#123b63\" stroke-width=\"2\"/>";
    for (double v : {s.min, s.max}) {
      h << "<circle cx=\"" << Coord(x(v)) << "\" cy=\"" << cy << "\" r=\"2.5\" fill=\"#555\"/>";
    }
    h << "<text x=\"" << kLabelW + kPlotW + 8 << "\" y=\"" << cy + 4 << "\">" << Ms(s.p50)
      << " (n=" << s.count << ")</text>\n";
  }
  h << "</svg>\n";
}

void Distributions(std::ostringstream& h, const RunReport& report,
                   const std::vector<CellGroup>& cells) {
  std::vector<std::string> models;
  std::map<std::string, std::vector<const CellGroup*>> by_model;
  for (const CellGroup& c : cells) {
    if (c.latency.count == 0) continue;
    const std::string& m = report.jobs[c.jobs.front()].model;
    if (!by_model.count(m)) models.push_back(m);
    by_model[m].push_back(&c);
  }
  h << "<h2>Latency distributions</h2>\n";
  if (models.empty()) {
    h << "<p>No samples stored for this run.</p>\n";
    return;
  }
  h << "<p>The raw samples of each cell (all ok trials pooled): box p25&ndash;p75, bar the median, "
       "whiskers p5&ndash;p95, dots min and max; the median and the sample count on the right."
       "</p>\n";
  for (const std::string& m : models) {
    h << "<h3>" << Esc(m) << "</h3>\n";
    DistributionChart(h, by_model[m]);
  }
}

void ComparisonSection(std::ostringstream& h, const Comparison& c) {
  h << "<h2>Against the baseline (run " << c.baseline_run << ")</h2>\n";
  for (const std::string& n : c.notes) h << "<p class=\"warn\">" << Esc(n) << "</p>\n";
  h << "<table>\n<thead><tr><th>cell</th><th>verdict</th><th>latency</th><th>baseline ms</th>"
       "<th>candidate ms</th><th>change</th><th>95% CI of the ratio</th><th>p / q</th>"
       "<th>trials</th><th>findings</th></tr></thead>\n<tbody>\n";
  for (const CellVerdict& v : c.cells) {
    h << "<tr><td>" << Esc(v.cell.Label()) << "</td><td>" << Badge(v.verdict) << "</td><td>"
      << gate::VerdictName(v.latency_verdict) << (v.within_run_only ? " (within-run)" : "")
      << "</td>";
    if (v.ratio > 0) {
      h << "<td class=\"num\">" << Ms(v.baseline_median_us) << "</td><td class=\"num\">"
        << Ms(v.candidate_median_us) << "</td><td class=\"num\">" << (v.ratio >= 1 ? "+" : "")
        << Fixed((v.ratio - 1) * 100, 1) << "%</td><td class=\"num\">" << Fixed(v.ci_low, 3)
        << " &ndash; " << Fixed(v.ci_high, 3) << "</td><td class=\"num\">" << Sig(v.p_value)
        << " / " << Sig(v.q_value) << "</td>";
    } else {
      h << "<td>&ndash;</td><td>&ndash;</td><td>&ndash;</td><td>&ndash;</td><td>&ndash;</td>";
    }
    h << "<td class=\"num\">" << v.baseline_trials << " / " << v.candidate_trials << "</td><td>";
    for (const std::string& f : v.findings)
      h << "<span class=\"st-fail\">" << Esc(f) << "</span><br>";
    if (!v.passed.empty()) {
      h << "<details><summary>" << v.passed.size() << " within thresholds</summary>";
      for (const std::string& f : v.passed) h << Esc(f) << "<br>";
      h << "</details>";
    }
    h << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
}

}  // namespace

std::string HtmlEscape(const std::string& s) { return Esc(s); }
const char* HtmlStatusClass(const std::string& status) { return StatusClass(status); }

std::string RenderHtml(const RunReport& report) {
  const std::vector<CellGroup> cells =
      report.cells.empty() ? GroupCells(report.jobs) : report.cells;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<title>DelegateFarm run " << report.run.id << ": " << Esc(report.run.name)
    << "</title>\n<style>" << kCss << VerdictCss() << "</style>\n</head>\n<body>\n";
  HtmlSummary(h, report);
  if (report.comparison) ComparisonSection(h, *report.comparison);
  if (!cells.empty()) Heatmap(h, report, cells);
  Distributions(h, report, cells);
  DelegateInitSection(h, report, cells);
  AccuracySection(h, report, cells);
  PlacementSection(h, report, cells);
  ProfileSection(h, report, cells);
  SustainedSection(h, report, cells);
  TaskAccuracySection(h, report, cells);
  JobsSection(h, report, cells);
  EnvironmentSection(h, report);
  FailuresSection(h, report);
  h << "</body>\n</html>\n";
  return h.str();
}

}  // namespace dfarm::reports
