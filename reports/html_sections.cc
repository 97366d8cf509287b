// HTML report sections: accuracy, placement, jobs with noise flags,
// environment, failures. Every stored string goes through HtmlEscape.
#include "reports/html_sections.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "reports/format.h"

namespace dfarm::reports {
namespace {

const std::string kDash = "&ndash;";
// Above this many jobs the job table lists only those that need a look.
constexpr size_t kMaxJobRows = 500;

// The worst figures of one output over a cell's trials.
struct OutputWorst {
  std::string name;
  size_t trials = 0;
  std::optional<double> max_abs, mean_abs, rmse, lsb;
  int64_t nan = 0, inf = 0, ref_nan = 0, ref_inf = 0;
  std::optional<bool> top1, top5;  // all trials agree
};

void Worst(std::optional<double>& acc, double v) {
  if (!std::isnan(v)) acc = std::max(acc.value_or(v), v);
}

std::string Opt(const std::optional<double>& v) { return v ? Sig(*v) : kDash; }
std::string Agree(const std::optional<bool>& v) {
  if (!v) return kDash;
  return *v ? "yes" : "<span class=\"st-fail\">no</span>";
}

std::map<int64_t, OutputWorst> CellOutputs(const RunReport& report, const CellGroup& cell,
                                           std::string& reference) {
  std::map<int64_t, OutputWorst> outputs;
  for (size_t i : cell.jobs) {
    auto it = report.accuracy.find(report.jobs[i].id);
    if (it == report.accuracy.end()) continue;
    reference = it->second.reference;
    for (const store::OutputAccuracy& o : it->second.outputs) {
      OutputWorst& w = outputs[o.index];
      w.name = o.name;
      ++w.trials;
      Worst(w.max_abs, o.max_abs_error);
      Worst(w.mean_abs, o.mean_abs_error);
      Worst(w.rmse, o.rmse);
      if (o.max_abs_error_lsb) Worst(w.lsb, runner::ToDouble(*o.max_abs_error_lsb));
      w.nan = std::max(w.nan, o.nan_count);
      w.inf = std::max(w.inf, o.inf_count);
      w.ref_nan = std::max(w.ref_nan, o.reference_nan_count);
      w.ref_inf = std::max(w.ref_inf, o.reference_inf_count);
      if (o.top1_agree) w.top1 = w.top1.value_or(true) && *o.top1_agree;
      if (o.top5_agree) w.top5 = w.top5.value_or(true) && *o.top5_agree;
    }
  }
  return outputs;
}

// Delegated nodes blue, real fallbacks orange, folded grey; a cpu job's
// nodes are not fallbacks: slate.
std::string Bar(const store::JobRow& job) {
  const store::PlacementSummary& p = *job.placement;
  constexpr double kW = 220;
  const double total = static_cast<double>(std::max<int64_t>(1, p.nodes));
  const double fallback = static_cast<double>(p.cpu_nodes - p.folded_nodes);
  const double parts[3] = {static_cast<double>(p.delegated_nodes), std::max(0.0, fallback),
                           static_cast<double>(p.folded_nodes)};
  const bool cpu = job.delegate == "cpu";
  const char* colours[3] = {"#2b6cb0", cpu ? "#718096" : "#dd6b20", "#bbbbbb"};
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"222\" height=\"14\">";
  double x = 1;
  for (int k = 0; k < 3; ++k) {
    const double w = kW * parts[k] / total;
    if (w <= 0) continue;
    svg += "<rect x=\"" + Fixed(x, 1) + "\" y=\"1\" width=\"" + Fixed(w, 1) +
           "\" height=\"12\" fill=\"" + colours[k] + "\"/>";
    x += w;
  }
  return svg + "</svg>";
}

std::optional<double> LoadBefore(const RunReport& report, const store::JobRow& j) {
  auto it = report.telemetry.find(j.id);
  if (it == report.telemetry.end()) return std::nullopt;
  for (const store::TelemetryRow& t : it->second) {
    if (t.phase == "before" && t.load_avg_1m) return *t.load_avg_1m;
  }
  return std::nullopt;
}

std::string TelemetryText(const RunReport& report, const store::JobRow& j) {
  auto it = report.telemetry.find(j.id);
  if (it == report.telemetry.end()) return kDash;
  std::string text;
  for (const store::TelemetryRow& t : it->second) {
    if (t.phase != "before") continue;
    if (t.load_avg_1m) text += "load " + Fixed(*t.load_avg_1m, 2);
    if (t.hottest_temp_c) {
      text += (text.empty() ? "" : ", ") + Fixed(*t.hottest_temp_c, 0) + " &deg;C";
    }
  }
  return text.empty() ? kDash : text;
}

}  // namespace

void AccuracySection(std::ostringstream& h, const RunReport& report,
                     const std::vector<CellGroup>& cells) {
  h << "<h2>Accuracy</h2>\n";
  bool any = false;
  for (const CellGroup& cell : cells) {
    std::string reference;
    auto outputs = CellOutputs(report, cell, reference);
    if (outputs.empty()) continue;
    if (!any) {
      h << "<p>Each output against the reference, the worst over the cell's trials. LSB: "
           "quantized steps; NaN/Inf: the delegate's count (the reference's).</p>\n<table>\n"
           "<thead><tr><th>cell</th><th>reference</th><th>output</th><th>max abs error</th>"
           "<th>mean abs error</th><th>RMSE</th><th>LSB</th><th>NaN/Inf</th><th>top-1</th>"
           "<th>top-5</th></tr></thead>\n<tbody>\n";
      any = true;
    }
    const std::string label = HtmlEscape(cell.cell.Label());
    for (const auto& [index, w] : outputs) {
      const bool nonfinite = w.nan + w.inf > w.ref_nan + w.ref_inf;
      h << "<tr><td>" << label << "</td><td>" << HtmlEscape(reference) << "</td><td>"
        << HtmlEscape(w.name.empty() ? "#" + std::to_string(index) : w.name)
        << "</td><td class=\"num\">" << Opt(w.max_abs) << "</td><td class=\"num\">"
        << Opt(w.mean_abs) << "</td><td class=\"num\">" << Opt(w.rmse) << "</td><td class=\"num\">"
        << Opt(w.lsb) << "</td><td class=\"num" << (nonfinite ? " st-fail" : "") << "\">"
        << w.nan + w.inf << " (" << w.ref_nan + w.ref_inf << ")</td><td>" << Agree(w.top1)
        << "</td><td>" << Agree(w.top5) << "</td></tr>\n";
    }
  }
  if (any) {
    h << "</tbody>\n</table>\n";
  } else {
    h << "<p>No output was compared with a reference in this run.</p>\n";
  }
}

void PlacementSection(std::ostringstream& h, const RunReport& report,
                      const std::vector<CellGroup>& cells) {
  h << "<h2>Placement</h2>\n<p>Nodes run by the delegate (blue), real CPU fallbacks (orange), "
       "constants folded once at load (grey, not fallbacks); a cpu cell's nodes in "
       "slate.</p>\n<table>\n<thead><tr>"
       "<th>cell</th><th>placement</th><th></th></tr></thead>\n<tbody>\n";
  for (const CellGroup& cell : cells) {
    const store::JobRow* placed = nullptr;
    for (size_t i : cell.jobs) {
      if (report.jobs[i].placement) {
        placed = &report.jobs[i];
        break;
      }
    }
    h << "<tr><td>" << HtmlEscape(cell.cell.Label()) << "</td>";
    if (placed == nullptr) {
      h << "<td>" << kDash << "</td><td></td></tr>\n";
      continue;
    }
    h << "<td>" << HtmlEscape(PlacementLabel(*placed)) << "</td><td>" << Bar(*placed)
      << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
}

namespace {

constexpr size_t kTopOps = 3;
const char* const kOpColours[kTopOps] = {"#2b6cb0", "#38a169", "#d69e2e"};

// The top op types' shares of one run as a stacked bar (the rest grey).
std::string OpsBar(const std::vector<store::ProfileOp>& ops) {
  constexpr double kW = 220;
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"222\" height=\"14\">"
      "<rect x=\"1\" y=\"1\" width=\"220\" height=\"12\" fill=\"#e2e2e2\"/>";
  double x = 1;
  for (size_t k = 0; k < ops.size() && k < kTopOps; ++k) {
    const double w = kW * std::clamp(ops[k].pct, 0.0, 100.0) / 100.0;
    if (w <= 0 || x + w > kW + 1.5) continue;
    svg += "<rect x=\"" + Fixed(x, 1) + "\" y=\"1\" width=\"" + Fixed(w, 1) +
           "\" height=\"12\" fill=\"" + kOpColours[k] + "\"/>";
    x += w;
  }
  return svg + "</svg>";
}

}  // namespace

void ProfileSection(std::ostringstream& h, const RunReport& report,
                    const std::vector<CellGroup>& cells) {
  if (report.profiles.empty()) return;
  h << "<h2>Profiles</h2>\n<p>Time per op type in one run (<code>benchmark.profile</code>), "
       "averaged over a cell's profiled trials: the top "
    << kTopOps
    << " op types of each profiled cell, the rest grey. <code>dfarm show RUN --job ID</code> "
       "lists every op type and node.</p>\n<table>\n<thead><tr><th>cell</th><th>trials</th>";
  for (size_t k = 0; k < kTopOps; ++k) h << "<th>op " << k + 1 << "</th>";
  h << "<th></th></tr></thead>\n<tbody>\n";
  for (const CellGroup& cell : cells) {
    const size_t trials = CellProfiledTrials(report, cell);
    if (trials == 0) continue;
    const std::vector<store::ProfileOp> ops = CellProfileOps(report, cell);
    h << "<tr><td>" << HtmlEscape(cell.cell.Label()) << "</td><td class=\"num\">" << trials
      << "</td>";
    for (size_t k = 0; k < kTopOps; ++k) {
      if (k >= ops.size()) {
        h << "<td>" << kDash << "</td>";
        continue;
      }
      h << "<td class=\"op\"><span style=\"color:" << kOpColours[k] << "\">&#9632;</span> <b>"
        << HtmlEscape(ops[k].op) << "</b> " << Fixed(ops[k].pct, 1) << "%<br><small>"
        << Fixed(ops[k].total_us / 1000.0, 3) << " ms, " << ops[k].count << "&times;</small></td>";
    }
    h << "<td>" << OpsBar(ops) << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
}

namespace {

void JobRowHtml(std::ostringstream& h, const RunReport& report, const store::JobRow& j, bool busy) {
  h << "<tr><td>" << HtmlEscape(j.model) << "</td><td>" << HtmlEscape(DelegateLabel(j))
    << "</td><td>" << HtmlEscape(j.device) << "</td><td class=\"num\">" << j.trial
    << "</td><td class=\"" << HtmlStatusClass(j.status) << "\">" << HtmlEscape(j.status) << "</td>";
  if (j.metrics) {
    const store::JobMetrics& m = *j.metrics;
    for (double us : {m.init_us, m.first_us, m.mean_us, m.p50_us, m.p90_us, m.p99_us}) {
      h << "<td class=\"num\">" << Ms(us) << "</td>";
    }
    h << "<td class=\"num\">" << PeakRssMiB(m.peak_rss_bytes) << "</td>";
  } else {
    for (int k = 0; k < 7; ++k) h << "<td class=\"num\">" << kDash << "</td>";
  }
  const std::string accuracy = AccuracyLabel(report, j);
  const std::string flags = DeviceStateFlags(j);
  h << "<td class=\"num\">" << (accuracy.empty() ? kDash : HtmlEscape(accuracy)) << "</td>"
    << "<td" << (busy ? " class=\"warn\" title=\"a busy device\"" : "") << ">"
    << TelemetryText(report, j) << "</td>";
  if (flags.empty()) {
    h << "<td>" << kDash << "</td>";
  } else {
    h << "<td class=\"warn\" title=\"" << HtmlEscape(j.state_note) << "\">&#9888; "
      << HtmlEscape(flags) << "</td>";
  }
  h << "</tr>\n";
}

}  // namespace

void JobsSection(std::ostringstream& h, const RunReport& report,
                 const std::vector<CellGroup>& cells) {
  // A big run lists only the jobs that need a look (not ok, flagged, busy): the
  // file stays small; every job is in `--format csv`.
  const bool all = report.jobs.size() <= kMaxJobRows;
  h << "<h2>Jobs</h2>\n<p>Placement and accuracy per cell are above. Noise flags: the 1-minute "
       "load and the hottest zone before the job (the load is marked when it reached half the "
       "device's cores, at least 1), a device that started hot or ran throttled.</p>\n";
  if (!all) {
    h << "<p class=\"warn\">" << report.jobs.size() << " jobs: only those not ok or flagged "
      << "are listed; <code>dfarm report RUN --format csv</code> has every job.</p>\n";
  }
  h << "<div class=\"scroll\"><table class=\"jobs\">\n<thead><tr><th>model</th><th>delegate</th>"
       "<th>device</th><th>trial</th><th>status</th><th>init ms</th><th>first ms</th>"
       "<th>mean ms</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>peak RSS MiB</th>"
       "<th>max abs error vs cpu</th><th>before the job</th><th>device state</th></tr></thead>\n"
       "<tbody>\n";
  std::map<std::string, double> busy_load;  // device -> the load marked as busy
  for (const store::DeviceRow& d : report.devices) {
    busy_load[d.name] = std::max(1.0, 0.5 * static_cast<double>(d.cores));
  }
  for (const CellGroup& cell : cells) {
    for (size_t i : cell.jobs) {
      const store::JobRow& j = report.jobs[i];
      auto limit = busy_load.find(j.device);
      const std::optional<double> load = LoadBefore(report, j);
      const bool busy = load && *load >= (limit == busy_load.end() ? 1.0 : limit->second);
      if (all || busy || j.status != store::kJobOk || !DeviceStateFlags(j).empty()) {
        JobRowHtml(h, report, j, busy);
      }
    }
  }
  h << "</tbody>\n</table></div>\n";
  bool flagged = false;
  for (const store::JobRow& j : report.jobs) flagged = flagged || !DeviceStateFlags(j).empty();
  if (!flagged) return;
  h << "<h2>Device state warnings</h2>\n<p>Jobs that started hot or ran throttled measured a "
       "device that was not at rest.</p>\n<ul>\n";
  for (const store::JobRow& j : report.jobs) {
    const std::string flags = DeviceStateFlags(j);
    if (flags.empty()) continue;
    h << "<li class=\"warn\">&#9888; <b>" << HtmlEscape(j.model) << "</b> "
      << HtmlEscape(DelegateLabel(j)) << " on " << HtmlEscape(j.device) << ": "
      << HtmlEscape(flags);
    if (!j.state_note.empty()) h << " (" << HtmlEscape(j.state_note) << ")";
    h << "</li>\n";
  }
  h << "</ul>\n";
}

namespace {

void SettingsList(std::ostringstream& h, const std::string& title, const nlohmann::json& object) {
  if (!object.is_object() || object.empty()) return;
  h << "<h3>" << HtmlEscape(title) << "</h3>\n<dl>\n";
  for (const auto& [key, value] : object.items()) {
    h << "<dt>" << HtmlEscape(key) << "</dt><dd>"
      << HtmlEscape(value.is_string()
                        ? value.get<std::string>()
                        : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      << "</dd>\n";
  }
  h << "</dl>\n";
}

void RunnerTable(std::ostringstream& h, const RunReport& report) {
  // (runner name, sha256, kind, version) of the jobs that ran
  std::set<std::tuple<std::string, std::string, std::string, std::string>> used;
  for (const store::JobRow& j : report.jobs) {
    if (j.status != store::kJobQueued) {
      used.insert({j.runner, j.runner_sha256, j.runner_kind, j.runner_version});
    }
  }
  h << "<h3>Runner builds</h3>\n<table>\n<thead><tr><th>runner</th><th>kind</th><th>version</th>"
       "<th>sha256</th><th>host path</th></tr></thead>\n<tbody>\n";
  std::set<std::string> shown;
  for (const auto& [name, sha, kind, version] : used) {
    std::string path;
    for (const auto& [p, s] : report.runner_builds) {
      if (s == sha) path = p;
    }
    if (!sha.empty()) shown.insert(sha);
    h << "<tr><td>" << HtmlEscape(name.empty() ? "(default)" : name) << "</td><td>"
      << HtmlEscape(kind.empty() ? "dfarm" : kind) << "</td><td>"
      << (version.empty() ? kDash : HtmlEscape(version)) << "</td><td><code>"
      << (sha.empty() ? kDash : HtmlEscape(sha)) << "</code></td><td>" << HtmlEscape(path)
      << "</td></tr>\n";
  }
  for (const auto& [path, sha] : report.runner_builds) {
    if (shown.count(sha)) continue;
    h << "<tr><td>" << kDash << "</td><td>" << kDash << "</td><td>" << kDash << "</td><td><code>"
      << HtmlEscape(sha) << "</code></td><td>" << HtmlEscape(path) << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
}

}  // namespace

void EnvironmentSection(std::ostringstream& h, const RunReport& report) {
  h << "<h2>Environment</h2>\n<h3>Devices</h3>\n<table>\n<thead><tr><th>device</th><th>ABI</th>"
       "<th>OS</th><th>CPU</th><th>cores</th><th>memory GiB</th><th>host</th><th>agent</th>"
       "<th>last seen</th></tr></thead>\n<tbody>\n";
  for (const store::DeviceRow& d : report.devices) {
    h << "<tr><td>" << HtmlEscape(d.name) << "</td><td>" << HtmlEscape(d.abi) << "</td><td>"
      << HtmlEscape(d.os) << "</td><td>" << HtmlEscape(d.cpu) << "</td><td class=\"num\">"
      << d.cores << "</td><td class=\"num\">"
      << Fixed(static_cast<double>(d.memory_bytes) / (1024.0 * 1024 * 1024), 1) << "</td><td>"
      << HtmlEscape(d.hostname) << "</td><td>" << HtmlEscape(d.agent_version) << "</td><td>"
      << HtmlEscape(d.last_seen) << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
  RunnerTable(h, report);
  auto spec = nlohmann::json::parse(report.run.spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_object()) {
    SettingsList(h, "Benchmark settings", spec.value("benchmark", nlohmann::json::object()));
    SettingsList(h, "Cooldown", spec.value("cooldown", nlohmann::json::object()));
    SettingsList(h, "Scheduler", spec.value("scheduler", nlohmann::json::object()));
  }
  if (!report.run.spec_json.empty()) {
    const std::string pretty =
        spec.is_discarded() ? report.run.spec_json
                            : spec.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    h << "<details><summary>The sweep spec as stored</summary><pre>" << HtmlEscape(pretty)
      << "</pre></details>\n";
  }
}

void FailuresSection(std::ostringstream& h, const RunReport& report) {
  if (CountJobs(report.jobs).failed == 0) return;
  h << "<h2>Failures</h2>\n<ul>\n";
  for (const store::JobRow& j : report.jobs) {
    if (j.status == store::kJobOk || !store::IsFinalJobStatus(j.status)) continue;
    h << "<li><b>" << HtmlEscape(j.model) << "</b> " << HtmlEscape(DelegateLabel(j)) << " on "
      << HtmlEscape(j.device) << " (trial " << j.trial << "): <code>" << HtmlEscape(j.status)
      << "</code> " << HtmlEscape(j.error);
    auto tail = report.stderr_tails.find(j.id);
    if (tail != report.stderr_tails.end()) {
      h << "<pre>" << HtmlEscape(tail->second) << "</pre>";
    }
    h << "</li>\n";
  }
  h << "</ul>\n";
}

}  // namespace dfarm::reports
