// One flat row per job for scripts and spreadsheets: JSON ({"run":{...},
// "jobs":[rows]}) and CSV (RFC 4180). The columns are a contract
// (docs/CONTRACTS.md, "Reports"): add at the end, never rename.
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/format.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

using Row = nlohmann::ordered_json;

// A number that JSON can hold; NaN and Inf become null.
nlohmann::ordered_json Real(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

void AddMetrics(Row& row, const store::JobRow& j) {
  const char* keys[] = {"init_us", "first_us",       "warmup_mean_us", "num_runs",    "mean_us",
                        "std_us",  "min_us",         "max_us",         "p50_us",      "p90_us",
                        "p99_us",  "peak_rss_bytes", "arena_bytes",    "threads_used"};
  if (!j.metrics) {
    for (const char* k : keys) row[k] = nullptr;
    return;
  }
  const store::JobMetrics& m = *j.metrics;
  row["init_us"] = Real(m.init_us);
  row["first_us"] = Real(m.first_us);
  row["warmup_mean_us"] = Real(m.warmup_mean_us);
  row["num_runs"] = m.num_runs;
  row["mean_us"] = Real(m.mean_us);
  row["std_us"] = Real(m.std_us);
  row["min_us"] = Real(m.min_us);
  row["max_us"] = Real(m.max_us);
  row["p50_us"] = Real(m.p50_us);
  row["p90_us"] = Real(m.p90_us);
  row["p99_us"] = Real(m.p99_us);
  row["peak_rss_bytes"] = m.peak_rss_bytes > 0 ? Row::value_type(m.peak_rss_bytes) : nullptr;
  row["arena_bytes"] = m.arena_bytes;
  row["threads_used"] = m.threads_used;
}

void AddPlacement(Row& row, const store::JobRow& j) {
  if (!j.placement) {
    for (const char* k : {"partitions", "nodes", "delegated_nodes", "cpu_nodes", "folded_nodes",
                          "placement_delegates"}) {
      row[k] = nullptr;
    }
    return;
  }
  const store::PlacementSummary& p = *j.placement;
  row["partitions"] = p.partitions;
  row["nodes"] = p.nodes;
  row["delegated_nodes"] = p.delegated_nodes;
  row["cpu_nodes"] = p.cpu_nodes;
  row["folded_nodes"] = p.folded_nodes;
  row["placement_delegates"] = p.delegates;
}

void AddTelemetry(Row& row, const RunReport& report, const store::JobRow& j) {
  row["load_avg_1m_before"] = nullptr;
  row["hottest_temp_c_before"] = nullptr;
  auto it = report.telemetry.find(j.id);
  if (it == report.telemetry.end()) return;
  for (const store::TelemetryRow& t : it->second) {
    if (t.phase != "before") continue;
    if (t.load_avg_1m) row["load_avg_1m_before"] = Real(*t.load_avg_1m);
    if (t.hottest_temp_c) row["hottest_temp_c_before"] = Real(*t.hottest_temp_c);
  }
}

// Worst figures over the outputs; top-k "all agree" (null when no output has one).
void AddAccuracy(Row& row, const RunReport& report, const store::JobRow& j) {
  auto it = report.accuracy.find(j.id);
  const char* keys[] = {"accuracy_reference", "accuracy_outputs", "max_abs_error",
                        "max_mean_abs_error", "max_rmse",         "max_abs_error_lsb",
                        "nonfinite",          "top1_agree",       "top5_agree"};
  for (const char* k : keys) row[k] = nullptr;
  if (it == report.accuracy.end()) return;
  const store::Accuracy& a = it->second;
  row["accuracy_reference"] = a.reference;
  row["accuracy_outputs"] = a.outputs.size();
  std::optional<double> mean, rmse, lsb;
  std::optional<bool> top1, top5;
  bool nonfinite = false;
  for (const store::OutputAccuracy& o : a.outputs) {
    if (!std::isnan(o.mean_abs_error))
      mean = std::max(mean.value_or(o.mean_abs_error), o.mean_abs_error);
    if (!std::isnan(o.rmse)) rmse = std::max(rmse.value_or(o.rmse), o.rmse);
    if (o.max_abs_error_lsb) {
      double v = runner::ToDouble(*o.max_abs_error_lsb);
      lsb = std::max(lsb.value_or(v), v);
    }
    nonfinite =
        nonfinite || o.nan_count + o.inf_count > o.reference_nan_count + o.reference_inf_count;
    if (o.top1_agree) top1 = top1.value_or(true) && *o.top1_agree;
    if (o.top5_agree) top5 = top5.value_or(true) && *o.top5_agree;
  }
  if (auto worst = MaxAbsError(a)) row["max_abs_error"] = Real(*worst);
  if (mean) row["max_mean_abs_error"] = Real(*mean);
  if (rmse) row["max_rmse"] = Real(*rmse);
  if (lsb) row["max_abs_error_lsb"] = Real(*lsb);
  row["nonfinite"] = nonfinite;
  if (top1) row["top1_agree"] = *top1;
  if (top5) row["top5_agree"] = *top5;
}

Row JobTableRow(const RunReport& report, const store::JobRow& j) {
  Row row;
  row["run_id"] = report.run.id;
  row["job_id"] = j.id;
  row["job_key"] = j.job_key;
  row["model"] = j.model;
  row["model_sha256"] = j.model_sha256;
  row["delegate"] = j.delegate;
  row["delegate_options"] = j.delegate_options;
  row["num_threads"] = j.num_threads;
  row["runner"] = j.runner;
  row["runner_sha256"] = j.runner_sha256;
  row["runner_kind"] = j.runner_kind;
  row["runner_version"] = j.runner_version;
  row["trial"] = j.trial;
  row["device"] = j.device;
  row["moved_from"] = j.moved_from;
  row["status"] = j.status;
  row["error"] = j.error;
  row["attempts"] = j.attempts;
  row["wall_ms"] = Real(j.wall_ms);
  AddMetrics(row, j);
  AddPlacement(row, j);
  row["started_hot"] = j.started_hot;
  row["throttled"] = j.throttled;
  row["noisy"] = j.noisy;
  row["energy_mj_estimated"] = j.energy_mj ? Row(*j.energy_mj) : Row(nullptr);
  row["state_note"] = j.state_note;
  AddTelemetry(row, report, j);
  AddAccuracy(row, report, j);
  // Per-op profiles: "CONV_2D 62.1%, DELEGATE 30.0%, ADD 5.2%".
  auto profile = report.profiles.find(j.id);
  row["top_ops"] = profile == report.profiles.end()
                       ? nlohmann::ordered_json(nullptr)
                       : nlohmann::ordered_json(TopOpsLabel(profile->second.by_op));
  // Cold and warm init (null when the runner gave none) and the
  // device's GPU as its agent reported it ("" without OpenCL).
  auto optional = [](const std::optional<double>& v) { return v ? Real(*v) : Row(nullptr); };
  row["init_cold_us"] = j.metrics ? optional(j.metrics->init_cold_us) : Row(nullptr);
  row["init_warm_us"] = j.metrics ? optional(j.metrics->init_warm_us) : Row(nullptr);
  row["gpu_device"] = GpuDeviceLabel(report, j.device);
  // What the job ran on: part of its cell's identity (store::InputsId).
  row["inputs"] = j.inputs;
  return row;
}

// RFC 4180: a field with a comma, quote, CR or LF is quoted, quotes doubled.
std::string CsvField(const nlohmann::ordered_json& v) {
  std::string s;
  if (v.is_null()) return s;
  if (v.is_string()) {
    s = v.get<std::string>();
  } else {
    s = v.dump();
  }
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

const std::vector<std::string>& TableColumns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> names;
    const Row row = JobTableRow(RunReport{}, store::JobRow{});
    for (const auto& [key, value] : row.items()) {
      names.push_back(key);
    }
    return names;
  }();
  return columns;
}

std::string RenderJson(const RunReport& report) {
  const store::RunRow& r = report.run;
  Row run = {{"id", r.id},
             {"name", r.name},
             {"status", r.status},
             {"created_at", r.created_at},
             {"finished_at", r.finished_at},
             {"parent_run_id", r.parent_run_id},
             {"tags", r.tags}};
  nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
  for (const store::JobRow& j : report.jobs) jobs.push_back(JobTableRow(report, j));
  Row doc = {{"run", std::move(run)}, {"jobs", std::move(jobs)}};
  // Invalid UTF-8 in a stored string (a runner's error) is replaced, not fatal.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string RenderCsv(const RunReport& report) {
  std::ostringstream out;
  const std::vector<std::string>& columns = TableColumns();
  for (size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << columns[i];
  out << "\r\n";
  for (const store::JobRow& j : report.jobs) {
    Row row = JobTableRow(report, j);
    for (size_t i = 0; i < columns.size(); ++i) {
      out << (i ? "," : "") << CsvField(row[columns[i]]);
    }
    out << "\r\n";
  }
  return out.str();
}

}  // namespace dfarm::reports
