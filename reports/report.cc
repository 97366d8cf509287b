#include "reports/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <tuple>

#include "reports/format.h"

namespace dfarm::reports {

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", us / 1000.0);
  return buf;
}

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string PeakRssMiB(int64_t bytes) { return bytes > 0 ? MiB(bytes) : "-"; }

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Sig(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string Md(const std::string& s) {
  std::string out;
  for (char c : Printable(s)) {
    if (c == '|' || c == '\\' || c == '`' || c == '*' || c == '<' || c == '>' || c == '[' ||
        c == ']' || c == '_' || c == '~') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::string Printable(const std::string& s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (keep_lines && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += ' ';
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) < 0xa0) {
      out += ' ';  // a C1 control (U+0080..U+009F) in UTF-8
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string DelegateLabel(const store::JobRow& job) {
  return job.delegate_options.empty() ? job.delegate
                                      : job.delegate + " (" + job.delegate_options + ")";
}

std::string PlacementLabel(const store::JobRow& job) {
  if (!job.placement) return "";
  const store::PlacementSummary& p = *job.placement;
  // Folded nodes ran once at load, never at Invoke(): not fallbacks, so not in the fraction.
  const int64_t run = p.nodes - p.folded_nodes;
  // A tool's log that says its delegate took nothing without counting the nodes.
  if (p.nodes == 0 && p.delegated_nodes == 0) return "none delegated";
  std::string label = p.delegated_nodes == 0 ? "all " + std::to_string(run) + " on cpu"
                                             : std::to_string(p.delegated_nodes) + "/" +
                                                   std::to_string(run) + " on " + p.delegates;
  if (p.folded_nodes > 0) {
    label += " (+" + std::to_string(p.folded_nodes) + " constants folded at load)";
  }
  return label;
}

std::string AccuracyLabel(const RunReport& report, const store::JobRow& job) {
  auto it = report.accuracy.find(job.id);
  return it == report.accuracy.end() ? "" : AccuracyLabel(it->second);
}

std::optional<double> MaxAbsError(const store::Accuracy& accuracy) {
  std::optional<double> worst;
  for (const store::OutputAccuracy& o : accuracy.outputs) {
    if (!std::isnan(o.max_abs_error) && (!worst || o.max_abs_error > *worst)) {
      worst = o.max_abs_error;
    }
  }
  return worst;
}

std::string AccuracyLabel(const store::Accuracy& accuracy) {
  const store::OutputAccuracy* worst = nullptr;
  for (const store::OutputAccuracy& o : accuracy.outputs) {
    if (o.nan_count + o.inf_count > o.reference_nan_count + o.reference_inf_count) {
      return "NaN/Inf";
    }
    if (std::isnan(o.max_abs_error)) continue;
    if (worst == nullptr || o.max_abs_error > worst->max_abs_error) worst = &o;
  }
  if (worst == nullptr) return "";
  char buf[64];
  if (worst->max_abs_error_lsb) {
    std::snprintf(buf, sizeof buf, "%.3g (%.3g LSB)", worst->max_abs_error,
                  runner::ToDouble(*worst->max_abs_error_lsb));
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", worst->max_abs_error);
  }
  return buf;
}

std::string DeviceStateFlags(const store::JobRow& job) {
  std::string flags;
  for (const auto& [set, name] : {std::pair{job.noisy, "noisy"}, std::pair{job.started_hot, "hot"},
                                  std::pair{job.throttled, "throttled"}}) {
    if (set) flags += (flags.empty() ? "" : ", ") + std::string(name);
  }
  return flags;
}

JobCounts CountJobs(const std::vector<store::JobRow>& jobs) {
  JobCounts c;
  for (const store::JobRow& j : jobs) {
    ++c.total;
    if (j.status == store::kJobOk) {
      ++c.ok;
    } else if (store::IsFinalJobStatus(j.status)) {
      ++c.failed;
    } else {
      ++c.pending;
    }
  }
  return c;
}

namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// The last `max_lines` lines of `text`, at most `max_chars` characters.
std::string Tail(const std::string& text, size_t max_lines, size_t max_chars) {
  size_t start = text.size() > max_chars ? text.size() - max_chars : 0;
  size_t lines = 0;
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  for (size_t i = end; i > start; --i) {
    if (text[i - 1] == '\n' && ++lines == max_lines) {
      start = i;
      break;
    }
  }
  return text.substr(start, end - start);
}

// Samples (summarised, per job and pooled per cell), telemetry and stderr tails.
Result<void> LoadJobEvidence(store::Reader& store, RunReport& r) {
  r.cells = GroupCells(r.jobs);
  for (CellGroup& cell : r.cells) {
    std::vector<double> pooled;
    for (size_t i : cell.jobs) {
      const store::JobRow& j = r.jobs[i];
      auto telemetry = store.GetTelemetry(j.id);
      if (!telemetry) return telemetry.error();
      if (!telemetry->empty()) r.telemetry[j.id] = std::move(*telemetry);
      if (j.status != store::kJobOk) {
        if (!store::IsFinalJobStatus(j.status)) continue;
        auto detail = store.GetJobDetail(j.id);
        if (detail && !detail->stderr_tail.empty()) {
          r.stderr_tails[j.id] = Tail(detail->stderr_tail, 30, 4000);
        }
        continue;
      }
      auto samples = store.GetSamples(j.id);
      if (!samples) return samples.error();
      if (samples->empty()) continue;
      pooled.insert(pooled.end(), samples->begin(), samples->end());
      r.samples[j.id] = Summarize(std::move(*samples));
    }
    cell.latency = Summarize(std::move(pooled));
  }
  return Ok();
}

Result<void> LoadEnvironment(store::Reader& store, RunReport& r) {
  auto devices = store.ListDevices();
  if (!devices) return devices.error();
  std::set<std::string> used;
  for (const store::JobRow& j : r.jobs) used.insert(j.device);
  for (store::DeviceRow& d : *devices) {
    if (used.count(d.name)) r.devices.push_back(std::move(d));
  }
  auto runners = store.ListRunRunners(r.run.id);
  if (!runners) return runners.error();
  r.runner_builds = std::move(*runners);
  return Ok();
}

}  // namespace

SampleSummary Summarize(std::vector<double> samples_us) {
  SampleSummary s;
  if (samples_us.empty()) return s;
  std::sort(samples_us.begin(), samples_us.end());
  s.count = samples_us.size();
  s.min = samples_us.front();
  s.max = samples_us.back();
  s.p05 = Quantile(samples_us, 0.05);
  s.p25 = Quantile(samples_us, 0.25);
  s.p50 = Quantile(samples_us, 0.50);
  s.p75 = Quantile(samples_us, 0.75);
  s.p95 = Quantile(samples_us, 0.95);
  double sum = 0;
  for (double v : samples_us) sum += v;
  s.mean = sum / static_cast<double>(s.count);
  return s;
}

std::vector<CellGroup> GroupCells(const std::vector<store::JobRow>& jobs) {
  std::vector<CellGroup> cells;
  std::map<store::Cell, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) {
    store::Cell cell = store::CellOf(jobs[i]);
    auto [it, added] = index.emplace(cell, cells.size());
    if (added) cells.push_back(CellGroup{cell, {}, {}});
    cells[it->second].cell.model = cell.model;  // the newest job's (jobs are in id order)
    cells[it->second].jobs.push_back(i);
  }
  // Trials run shuffled: list cells by model, the cpu reference first, then
  // in Cell order (delegate, options, threads, runner, device); a cell's jobs
  // by trial.
  auto order = [](const CellGroup& c) {
    return std::tuple<const std::string&, const std::string&, bool, const store::Cell&>(
        c.cell.model, c.cell.model_sha256, c.cell.delegate != "cpu", c.cell);
  };
  std::stable_sort(cells.begin(), cells.end(),
                   [&](const CellGroup& a, const CellGroup& b) { return order(a) < order(b); });
  for (CellGroup& c : cells) {
    std::stable_sort(c.jobs.begin(), c.jobs.end(),
                     [&](size_t a, size_t b) { return jobs[a].trial < jobs[b].trial; });
  }
  return cells;
}

CellMatrix LayoutMatrix(const std::vector<CellGroup>& cells) {
  CellMatrix m;
  std::map<std::string, size_t> column;
  std::map<std::pair<std::string, std::string>, size_t> row_of;
  for (size_t i = 0; i < cells.size(); ++i) {
    const store::Cell& c = cells[i].cell;
    auto [col, new_device] = column.emplace(c.device, m.devices.size());
    if (new_device) m.devices.push_back(c.device);
    std::pair<std::string, std::string> key{c.model, store::ConfigLabel(c)};
    auto [row, new_row] = row_of.emplace(key, m.rows.size());
    if (new_row) m.rows.push_back(MatrixRow{key.first, key.second, {}});
    std::vector<int>& by_device = m.rows[row->second].cells;
    if (by_device.size() <= col->second) by_device.resize(col->second + 1, -1);
    by_device[col->second] = static_cast<int>(i);
  }
  for (MatrixRow& r : m.rows) r.cells.resize(m.devices.size(), -1);
  return m;
}

std::pair<std::string, std::string> SpeedupColours(double speedup) {
  double t = std::clamp(std::log2(speedup) / 2.0, -1.0, 1.0);
  const double to[3] = {t >= 0 ? 33.0 : 192.0, t >= 0 ? 102.0 : 86.0, t >= 0 ? 172.0 : 33.0};
  t = std::fabs(t);
  char bg[16];
  std::snprintf(bg, sizeof bg, "#%02x%02x%02x", static_cast<int>(255 + (to[0] - 255) * t),
                static_cast<int>(255 + (to[1] - 255) * t),
                static_cast<int>(255 + (to[2] - 255) * t));
  return {bg, t > 0.55 ? "#fff" : "#222"};
}

std::optional<double> CellMedianUs(const RunReport& report, const CellGroup& cell) {
  if (cell.latency.count > 0) return cell.latency.p50;
  std::vector<double> p50s;
  for (size_t i : cell.jobs) {
    const store::JobRow& j = report.jobs[i];
    // Google's tools print no percentiles (p50 0): their mean stands in.
    if (j.status == store::kJobOk && j.metrics) {
      p50s.push_back(j.metrics->p50_us > 0 ? j.metrics->p50_us : j.metrics->mean_us);
    }
  }
  if (p50s.empty()) return std::nullopt;
  return Summarize(std::move(p50s)).p50;
}

std::optional<store::PartialDelegation> CellPartialDelegation(const RunReport& report,
                                                              const CellGroup& cell) {
  std::vector<const store::JobRow*> ok;
  for (size_t i : cell.jobs) {
    if (report.jobs[i].status == store::kJobOk) ok.push_back(&report.jobs[i]);
  }
  return store::PartialDelegationOf(ok);
}

std::optional<double> SpeedupVsCpu(const RunReport& report, const std::vector<CellGroup>& cells,
                                   const CellGroup& cell) {
  auto mine = CellMedianUs(report, cell);
  if (!mine || *mine <= 0) return std::nullopt;
  store::Cell cpu_cell = cell.cell;  // the same cell on the cpu delegate, without options
  cpu_cell.delegate = "cpu";
  cpu_cell.delegate_options.clear();
  for (const CellGroup& other : cells) {
    if (other.cell != cpu_cell) continue;
    auto cpu = CellMedianUs(report, other);
    if (!cpu) return std::nullopt;
    return *cpu / *mine;
  }
  return std::nullopt;
}

RunHealth HealthOf(const RunReport& report) {
  JobCounts counts = CountJobs(report.jobs);
  if (report.run.status == store::kRunFailed || counts.failed > 0) return RunHealth::kRed;
  if (report.comparison && !report.comparison->passed) return RunHealth::kRed;
  if (report.run.status != store::kRunFinished || counts.pending > 0 || counts.total == 0) {
    return RunHealth::kAmber;
  }
  if (report.comparison) {
    for (const CellVerdict& v : report.comparison->cells) {
      if (v.verdict == gate::Verdict::kUnknown || v.verdict == gate::Verdict::kMissing) {
        return RunHealth::kAmber;
      }
    }
  }
  return RunHealth::kGreen;
}

Result<RunReport> LoadRunReport(store::Reader& store, int64_t run_id) {
  auto run = store.GetRun(run_id);
  if (!run) return run.error();
  auto jobs = store.ListJobs(run_id);
  if (!jobs) return jobs.error();
  auto accuracy = LoadAccuracy(store, *jobs);
  if (!accuracy) return accuracy.error();
  RunReport r;
  r.run = std::move(*run);
  r.jobs = std::move(*jobs);
  r.accuracy = std::move(*accuracy);
  if (auto e = LoadJobEvidence(store, r); !e) return e.error();
  if (auto e = LoadEnvironment(store, r); !e) return e.error();
  auto profiles = store.ListRunProfiles(run_id);
  if (!profiles) return profiles.error();
  r.profiles = std::move(*profiles);
  auto sustained = store.ListRunSustained(run_id);
  if (!sustained) return sustained.error();
  r.sustained = std::move(*sustained);
  auto task = store.ListRunTaskAccuracy(run_id);
  if (!task) return task.error();
  r.task = std::move(*task);
  return r;
}

Result<std::map<int64_t, store::Accuracy>> LoadAccuracy(store::Reader& store,
                                                        const std::vector<store::JobRow>& jobs) {
  std::map<int64_t, store::Accuracy> by_job;
  for (const store::JobRow& j : jobs) {
    auto accuracy = store.GetAccuracy(j.id);
    if (!accuracy) return accuracy.error();
    if (*accuracy) by_job[j.id] = std::move(**accuracy);
  }
  return by_job;
}

Result<void> WriteText(const std::string& text, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return MakeError("cannot write report '" + path + "'");
  out << text;
  out.close();
  if (!out) return MakeError("cannot write report '" + path + "': write failed");
  return Ok();
}

Result<void> WriteReport(const RunReport& report, Format format, const std::string& path) {
  return WriteText(Render(report, format), path);
}

}  // namespace dfarm::reports
