// dfarm show RUN [--job ID] [--db FILE] [--json]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/base/json_input.h"
#include "agent/runner/runner_json.h"
#include "harness/cli/commands.h"
#include "harness/run/terminal_text.h"
#include "reports/format.h"
#include "reports/report.h"
#include "reports/store/delegation.h"

namespace dfarm::cli {
namespace {

using nlohmann::json;

struct ShowOptions {
  std::string run;
  int64_t job = 0;  // 0: the whole run
  std::string db;
  bool json = false;
};

// {"partitions","delegated_nodes","cpu_nodes","folded_nodes","delegates"}, or null.
json PlacementSummaryJson(const store::JobRow& j) {
  if (!j.placement) return nullptr;
  return {
      {"partitions", j.placement->partitions}, {"delegated_nodes", j.placement->delegated_nodes},
      {"cpu_nodes", j.placement->cpu_nodes},   {"folded_nodes", j.placement->folded_nodes},
      {"delegates", j.placement->delegates},   {"main_reason", j.placement->main_reason}};
}

// A delegate job whose delegate took less than the whole graph
// (store::PartialDelegation), or null.
json PartialDelegationJson(const store::JobRow& j) {
  auto d = store::PartialDelegationOf(j);
  if (!d) return nullptr;
  return {{"delegate", d->delegate},
          {"delegated_nodes", d->delegated},
          {"nodes", d->nodes},
          {"reason", d->reason},
          {"label", d->Label()}};
}

// A stored device-state object, or null (unset, or unreadable text).
json StateJson(const std::optional<std::string>& text) {
  if (!text || !CheckJsonNesting(*text, "device state")) return nullptr;
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return doc.is_discarded() ? json(nullptr) : doc;
}

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", us / 1000.0);
  return buf;
}

std::string Figure(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// The top op types of a profiled job (spec benchmark.profile): op, count,
// total ms of one run, share. Nothing for a job without a profile.
int ShowProfile(store::Store& store, const store::JobRow& j, Context& ctx) {
  constexpr size_t kTop = 10;
  auto profile = store.GetProfile(j.id);
  if (!profile) {
    return ctx.Fail(profile.error());
  }
  if (!*profile) return kExitOk;
  const store::JobProfile& p = **profile;
  ctx.out << "profile over " << p.runs << " run(s), " << p.nodes.size()
          << " step(s); top op types:\nOP\tCOUNT\tTOTAL_MS\tPCT\n";
  for (size_t k = 0; k < p.by_op.size() && k < kTop; ++k) {
    const store::ProfileOp& o = p.by_op[k];
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f%%", o.pct);
    ctx.out << harness::TerminalSafe(o.op) << "\t" << o.count << "\t" << Ms(o.total_us) << "\t"
            << pct << "\n";
  }
  if (p.by_op.size() > kTop) {
    ctx.out << "(" << p.by_op.size() - kTop << " more op types: dfarm show --job " << j.id
            << " --json)\n";
  }
  ctx.out << "\n";
  return kExitOk;
}

// A sustained-mode job's curve (spec benchmark.sustained_s), unset for
// other jobs.
Result<std::optional<store::JobSustained>> SustainedOf(store::Store& store,
                                                       const store::JobRow& j) {
  auto curves = store.ListRunSustained(j.run_id);
  if (!curves) return curves.error();
  auto it = curves->find(j.id);
  if (it == curves->end()) return std::optional<store::JobSustained>();
  return std::optional<store::JobSustained>(std::move(it->second));
}

// The sustained curve in one line: first and last window, the slowest one.
int ShowSustained(store::Store& store, const store::JobRow& j, Context& ctx) {
  auto curve = SustainedOf(store, j);
  if (!curve) return ctx.Fail(curve.error());
  if (!*curve) return kExitOk;
  const std::optional<reports::SustainedSummary> s = reports::SummarizeCurve(**curve);
  if (!s) return kExitOk;
  char line[256];
  std::snprintf(line, sizeof line,
                "sustained %.1f s, %zu window(s) of %.0f ms: p50 %s ms at first, %s ms at last "
                "(%+.1f%%), slowest %s ms at %.1f s\n\n",
                s->secs, s->windows, s->window_ms, Ms(s->first_p50_us).c_str(),
                Ms(s->last_p50_us).c_str(), s->change_pct, Ms(s->slowest_p50_us).c_str(),
                s->slowest_t_s);
  ctx.out << line;
  return kExitOk;
}

// A job's task accuracy on its model's labelled set (spec "eval"); unset
// for other jobs.
Result<std::optional<store::TaskAccuracy>> TaskOf(store::Store& store, const store::JobRow& j) {
  auto all = store.ListRunTaskAccuracy(j.run_id);
  if (!all) return all.error();
  auto it = all->find(j.id);
  if (it == all->end()) return std::optional<store::TaskAccuracy>();
  return std::optional<store::TaskAccuracy>(std::move(it->second));
}

// "task accuracy on SET (N images): top-1 97.5% (94.2-99.2), top5 ...".
int ShowTask(store::Store& store, const store::JobRow& j, Context& ctx) {
  auto task = TaskOf(store, j);
  if (!task) return ctx.Fail(task.error());
  if (!*task) return kExitOk;
  ctx.out << "task accuracy (" << harness::TerminalSafe((*task)->task) << ") on "
          << harness::TerminalSafe((*task)->dataset) << ", " << (*task)->images << " images:";
  for (const store::TaskMetric& m : (*task)->metrics) {
    ctx.out << " " << harness::TerminalSafe(reports::TaskMetricLabel(m.name)) << " "
            << reports::TaskMetricText(m);
  }
  ctx.out << " (95% interval over the images)\n\n";
  return kExitOk;
}

// The GPU (first OpenCL device, GPUs first) of each device by name, as its
// agent reported it; devices without one are left out.
std::map<std::string, std::string> GpuDevices(store::Store& store) {
  std::map<std::string, std::string> out;
  auto devices = store.ListDevices();
  if (!devices) return out;  // a description only: never fails the command
  for (const store::DeviceRow& d : *devices) {
    std::string label = store::OpenClDeviceLabel(d.opencl);
    if (!label.empty()) out[d.name] = std::move(label);
  }
  return out;
}

// The delegate's own figures from the stored runner document (empty when
// it had none).
runner::DelegateStats DelegateStatsOf(store::Store& store, const store::JobRow& j) {
  auto detail = store.GetJobDetail(j.id);
  if (!detail) return {};
  auto doc = runner_json::ParseRunnerJson(detail->runner_json);
  return doc ? doc->delegate_stats : runner::DelegateStats{};
}

// The device's GPU, the init split and the delegate's stats.
void ShowInitAndGpu(store::Store& store, const store::JobRow& j, Context& ctx) {
  const std::map<std::string, std::string> gpus = GpuDevices(store);
  if (auto it = gpus.find(j.device); it != gpus.end()) {
    ctx.out << "gpu (OpenCL): " << harness::TerminalSafe(it->second) << "\n";
  }
  if (j.metrics) {
    const store::JobMetrics& m = *j.metrics;
    ctx.out << "init " << Ms(m.init_us) << " ms (cold "
            << (m.init_cold_us ? Ms(*m.init_cold_us) + " ms" : std::string("-")) << ", warm "
            << (m.init_warm_us ? Ms(*m.init_warm_us) + " ms" : std::string("-"))
            << "), first inference " << Ms(m.first_us) << " ms, mean " << Ms(m.mean_us) << " ms\n";
  }
  const runner::DelegateStats stats = DelegateStatsOf(store, j);
  if (stats.empty()) return;
  ctx.out << "delegate stats:";
  for (const auto& [name, value] : stats) {
    ctx.out << " " << harness::TerminalSafe(name) << " " << Figure(value);
  }
  ctx.out << "\n";
}

// The human drill-down of one job: its nodes and the device state flags.
int ShowJob(store::Store& store, const store::RunRow& run, const std::vector<store::JobRow>& jobs,
            int64_t job_id, Context& ctx) {
  for (const store::JobRow& j : jobs) {
    if (j.id != job_id) continue;
    ctx.out << "job " << j.id << " of run " << run.id << ": " << j.model << " " << j.delegate
            << (j.delegate_options.empty() ? "" : "(" + j.delegate_options + ")") << " on "
            << j.device << ": " << j.status;
    // What the agent and runner said is made safe for a terminal.
    if (!j.error.empty()) ctx.out << ": " << harness::TerminalSafe(j.error);
    ctx.out << "\n";
    if (const auto partial = store::PartialDelegationOf(j)) {
      ctx.out << "NOTE partly delegated: " << harness::TerminalSafe(partial->Label()) << "\n";
    }
    std::string flags = reports::DeviceStateFlags(j);
    if (!flags.empty()) {
      ctx.out << "WARNING device " << flags
              << (j.state_note.empty() ? "" : ": " + harness::TerminalSafe(j.state_note)) << "\n";
    }
    ShowInitAndGpu(store, j, ctx);
    auto accuracy = store.GetAccuracy(j.id);
    if (!accuracy) {
      return ctx.Fail(accuracy.error());
    }
    if (*accuracy) {
      ctx.out
          << "accuracy against " << (*accuracy)->reference
          << ":\nOUTPUT\tNAME\tCOMPARED\tMEAN_ABS\tSTD_ABS\tMAX_ABS\tRMSE\tNAN\tINF\tTOP1\tTOP5\n";
      auto agree = [](const std::optional<bool>& b) { return b ? (*b ? "yes" : "no") : "-"; };
      for (const store::OutputAccuracy& a : (*accuracy)->outputs) {
        ctx.out << a.index << "\t" << (a.name.empty() ? "-" : a.name) << "\t" << a.compared << "\t"
                << Figure(a.mean_abs_error) << "\t" << Figure(a.std_abs_error) << "\t"
                << Figure(a.max_abs_error) << "\t" << Figure(a.rmse) << "\t" << a.nan_count << "\t"
                << a.inf_count << "\t" << agree(a.top1_agree) << "\t" << agree(a.top5_agree)
                << "\n";
      }
      ctx.out << "\n";
    }
    if (int code = ShowProfile(store, j, ctx); code != kExitOk) return code;
    if (int code = ShowSustained(store, j, ctx); code != kExitOk) return code;
    if (int code = ShowTask(store, j, ctx); code != kExitOk) return code;
    auto placement = store.GetPlacement(j.id);
    if (!placement) {
      return ctx.Fail(placement.error());
    }
    if (!*placement) {
      ctx.out << "no placement recorded\n";
      return kExitOk;
    }
    ctx.out << "placement: " << harness::TerminalSafe(reports::PlacementLabel(j)) << ", "
            << (*placement)->partitions
            << " partition(s)\n\nNODE\tOP\tDELEGATE\tPARTITION\tREASON\n";
    for (const store::PlacementNode& n : (*placement)->nodes) {
      ctx.out << n.index << "\t" << harness::TerminalSafe(n.op) << "\t"
              << harness::TerminalSafe(n.delegate) << "\t"
              << (n.partition ? std::to_string(*n.partition) : "-") << "\t"
              << (n.folded           ? "folded at load"
                  : n.reason.empty() ? "-"
                                     : harness::TerminalSafe(n.reason))
              << "\n";
    }
    return kExitOk;
  }
  ctx.Fail(kExitUsage, "run " + std::to_string(run.id) + " has no job " + std::to_string(job_id));
  return kExitUsage;
}

// The run's job entry of `show --json` (the summary every job has).
// A job's runner: the spec's runner name ("" for the default
// runner), its kind ("dfarm" for jobs before schema 13), the build's sha256
// and the version the runner reported ("" when none).
json RunnerJson(const store::JobRow& j) {
  return {{"name", j.runner},
          {"kind", j.runner_kind.empty() ? std::string("dfarm") : j.runner_kind},
          {"sha256", j.runner_sha256},
          {"version", j.runner_version}};
}

json JobJson(store::Store& store, const store::JobRow& j) {
  auto samples = store.GetSamples(j.id);
  return {{"id", j.id},
          {"job_key", j.job_key},
          {"model", j.model},
          {"model_sha256", j.model_sha256},
          {"delegate", j.delegate},
          {"delegate_options", j.delegate_options},
          {"device", j.device},
          {"moved_from", j.moved_from},
          {"num_threads", j.num_threads},
          {"threads_used", j.metrics && j.metrics->threads_used > 0 ? json(j.metrics->threads_used)
                                                                    : json(nullptr)},
          {"attempts", j.attempts},
          {"status", j.status},
          {"error", j.error},
          {"wall_ms", j.wall_ms},
          {"num_samples", samples ? samples->size() : 0},
          {"metrics", j.metrics ? runner_json::MetricsJson(*j.metrics) : json(nullptr)},
          {"placement", PlacementSummaryJson(j)},
          {"partial_delegation", PartialDelegationJson(j)},
          {"started_hot", j.started_hot},
          {"throttled", j.throttled},
          {"noisy", j.noisy},
          {"energy_mj_estimated", j.energy_mj ? json(*j.energy_mj) : json(nullptr)},
          {"state_note", j.state_note},
          {"trial", j.trial},
          {"runner", RunnerJson(j)},
          {"runner_sha256", j.runner_sha256},
          {"inputs", j.inputs},
          {"pair", j.pair}};
}

// The job's telemetry rows in time order (before, the samples taken while
// the runner ran, after); unread figures are absent.
json TelemetryJson(std::vector<store::TelemetryRow> rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.unix_ms < b.unix_ms; });
  json out = json::array();
  for (const store::TelemetryRow& t : rows) {
    json row = json::object();
    row["phase"] = t.phase;
    row["unix_ms"] = t.unix_ms;
    if (t.hottest_temp_c) row["hottest_temp_c"] = *t.hottest_temp_c;
    if (t.load_avg_1m) row["load_avg_1m"] = *t.load_avg_1m;
    if (t.battery_temp_c) row["battery_temp_c"] = *t.battery_temp_c;
    if (t.battery_level_pct) row["battery_level_pct"] = *t.battery_level_pct;
    out.push_back(std::move(row));
  }
  return out;
}

// Adds the drill-down of `show --job ID --json` to `job`: every node, the
// device state and the raw evidence. Returns the exit code.
int AddJobDetailJson(store::Store& store, const store::JobRow& j, json& job, Context& ctx) {
  auto placement = store.GetPlacement(j.id);
  if (!placement) {
    return ctx.Fail(placement.error());
  }
  // Metrics, nodes and accuracy in the runner's keys (docs/CONTRACTS.md);
  // non-finite accuracy figures (nothing compared) are null.
  if (*placement) job["placement"]["nodes"] = runner_json::PlacementJson(**placement)["nodes"];
  auto detail = store.GetJobDetail(j.id);
  job["state_before"] = detail ? StateJson(detail->state_before_json) : json(nullptr);
  job["state_after"] = detail ? StateJson(detail->state_after_json) : json(nullptr);
  job["hot_threshold_c"] = detail ? detail->hot_threshold_c : 0.0;
  job["exit_code"] = detail ? detail->exit_code : -1;
  job["signal"] = detail ? detail->signal : 0;
  job["stderr_tail"] = detail ? detail->stderr_tail : "";
  // A stepped pair's side of this job (the runner document's "steps"); null when not stepped.
  job["steps"] = nullptr;
  if (detail) {
    if (auto doc = runner_json::ParseRunnerJson(detail->runner_json); doc && doc->steps) {
      job["steps"] = runner_json::StepsJson(*doc->steps);
    }
  }
  auto telemetry = store.GetTelemetry(j.id);
  if (!telemetry) return ctx.Fail(telemetry.error());
  job["telemetry"] = TelemetryJson(*telemetry);
  auto accuracy = store.GetAccuracy(j.id);
  if (!accuracy) {
    return ctx.Fail(accuracy.error());
  }
  job["accuracy"] = *accuracy ? runner_json::AccuracyJson(**accuracy) : json(nullptr);
  // Only for a profiled job (spec benchmark.profile).
  auto profile = store.GetProfile(j.id);
  if (!profile) {
    return ctx.Fail(profile.error());
  }
  if (*profile) job["profile"] = runner_json::ProfileJson(**profile);
  // Only for a sustained-mode job (spec benchmark.sustained_s).
  auto sustained = SustainedOf(store, j);
  if (!sustained) return ctx.Fail(sustained.error());
  if (*sustained) job["sustained"] = runner_json::SustainedJson(**sustained);
  // Only for a job of a model with an "eval".
  auto task = TaskOf(store, j);
  if (!task) return ctx.Fail(task.error());
  if (*task) job["task"] = reports::TaskAccuracyJson(**task);
  // The delegate's own figures, as the runner reported them.
  if (runner::DelegateStats stats = DelegateStatsOf(store, j); !stats.empty()) {
    job["delegate_stats"] = runner_json::DelegateStatsJson(stats);
  }
  return kExitOk;
}

// show --json: {"run":{...},"jobs":[...]}, only job `job_id` when it is not 0.
int PrintJson(store::Store& store, const store::RunRow& run, const std::vector<store::JobRow>& jobs,
              int64_t job_id, Context& ctx) {
  json spec = json::parse(run.spec_json, nullptr, /*allow_exceptions=*/false);
  json doc;
  doc["run"] = {{"id", run.id},
                {"name", run.name},
                {"created_at", run.created_at},
                {"finished_at", run.finished_at},
                {"status", run.status},
                {"spec", spec.is_discarded() ? json(run.spec_json) : spec},
                {"tags", run.tags},
                {"parent_run_id", run.parent_run_id}};
  doc["jobs"] = json::array();
  const std::map<std::string, std::string> gpus = GpuDevices(store);
  for (const store::JobRow& j : jobs) {
    if (job_id != 0 && j.id != job_id) continue;
    json job = JobJson(store, j);
    // The device's OpenCL device ("NAME (driver V)"), null without one.
    auto gpu = gpus.find(j.device);
    job["gpu_device"] = gpu != gpus.end() ? json(gpu->second) : json(nullptr);
    if (job_id != 0) {
      if (int code = AddJobDetailJson(store, j, job, ctx); code != kExitOk) return code;
    }
    doc["jobs"].push_back(std::move(job));
  }
  ctx.out << doc.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  return kExitOk;
}

// The DELEGATE column: "xnnpack(threads:2) x2", and "(ran on 1)" when the
// runner says the delegate ran on fewer threads than the job asked for (cpu
// and plugins run on one); a delegate's own threads option shows in its label
// already.
std::string TableDelegate(const store::JobRow& j) {
  std::string delegate = j.delegate;
  if (!j.delegate_options.empty()) delegate += "(" + j.delegate_options + ")";
  if (j.num_threads > 1) delegate += " x" + std::to_string(j.num_threads);
  if (j.metrics && j.metrics->threads_used > 0 &&
      j.metrics->threads_used < static_cast<int64_t>(j.num_threads)) {
    delegate += " (ran on " + std::to_string(j.metrics->threads_used) + ")";
  }
  return delegate;
}

// Whether the run's jobs are trials of their cells (spec benchmark.repeats > 1).
bool HasTrials(const store::RunRow& run, const std::vector<store::JobRow>& jobs) {
  json spec = json::parse(run.spec_json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_discarded() && spec.is_object() && spec.contains("benchmark") &&
      spec["benchmark"].is_object() && spec["benchmark"].contains("repeats") &&
      spec["benchmark"]["repeats"].is_number_integer() &&
      spec["benchmark"]["repeats"].get<int64_t>() > 1) {
    return true;
  }
  return std::any_of(jobs.begin(), jobs.end(), [](const store::JobRow& j) { return j.trial > 0; });
}

// A job's runtime build as `show` names it: "NAME@SHA12" ("default" for the
// default runner; the sha256's first 12 digits, "?" when the run predates it).
std::string RunnerLabel(const store::JobRow& j) {
  return (j.runner.empty() ? std::string("default") : j.runner) + "@" +
         (j.runner_sha256.empty() ? std::string("?") : j.runner_sha256.substr(0, 12));
}

// Whether the run's jobs ran more than one runtime build (an A/B sweep, or
// one runner's builds for two ABIs): then `show` has a RUNNER column.
bool HasSeveralRunners(const std::vector<store::JobRow>& jobs) {
  return std::any_of(jobs.begin(), jobs.end(), [&](const store::JobRow& j) {
    return RunnerLabel(j) != RunnerLabel(jobs.front());
  });
}

// After the jobs: each job's task accuracy (spec "eval"), when any has one.
int PrintTaskTable(store::Store& store, const reports::RunReport& report, Context& ctx) {
  auto all = store.ListRunTaskAccuracy(report.run.id);
  if (!all) return ctx.Fail(all.error());
  if (all->empty()) return kExitOk;
  // Classification alone keeps its TOP-1/TOP-K columns; with other tasks
  // each row names its metrics.
  const bool topk = std::all_of(all->begin(), all->end(),
                                [](const auto& t) { return t.second.task == "classification"; });
  ctx.out << "\ntask accuracy (percent, 95% interval over the images):\n"
          << (topk ? "JOB\tSET\tIMAGES\tTOP-1\tTOP-K\n" : "JOB\tTASK\tSET\tIMAGES\tMETRICS\n");
  for (const store::JobRow& j : report.jobs) {
    auto it = all->find(j.id);
    if (it == all->end()) continue;
    const store::TaskAccuracy& t = it->second;
    const auto named = [](const store::TaskMetric& m) {
      return harness::TerminalSafe(reports::TaskMetricLabel(m.name)) + " " +
             reports::TaskMetricText(m);
    };
    ctx.out << j.id << "\t";
    if (!topk) ctx.out << harness::TerminalSafe(t.task) << "\t";
    ctx.out << harness::TerminalSafe(t.dataset) << "\t" << t.images << "\t";
    if (topk) {
      ctx.out << (t.metrics.empty() ? "-" : reports::TaskMetricText(t.metrics[0])) << "\t"
              << (t.metrics.size() > 1 ? named(t.metrics[1]) : std::string("-")) << "\n";
      continue;
    }
    std::string metrics;
    for (const store::TaskMetric& m : t.metrics)
      metrics += (metrics.empty() ? "" : ", ") + named(m);
    ctx.out << (metrics.empty() ? "-" : metrics) << "\n";
  }
  return kExitOk;
}

// show RUN: the run's line and one job a line under a header (with a TRIAL
// column when the run has repeats, a RUNNER column when it ran several
// runtime builds).
int PrintTable(store::Store& store, const store::RunRow& run, std::vector<store::JobRow> jobs,
               Context& ctx) {
  // The table's accuracy column (reports::AccuracyLabel) needs each job's comparison.
  auto accuracy = reports::LoadAccuracy(store, jobs);
  if (!accuracy) {
    return ctx.Fail(accuracy.error());
  }
  const bool trials = HasTrials(run, jobs);
  const bool runners = HasSeveralRunners(jobs);
  const reports::RunReport report{run, std::move(jobs), std::move(*accuracy)};
  // Names are the user's (a spec's "name", --run-name, a model's file name)
  // and may hold anything: printed safely, like the agent's text.
  ctx.out << "run " << run.id << " '" << harness::TerminalSafe(run.name) << "' " << run.status
          << ", created " << run.created_at;
  if (!run.finished_at.empty()) ctx.out << ", finished " << run.finished_at;
  for (const std::string& t : run.tags) ctx.out << ", tag " << harness::TerminalSafe(t);
  ctx.out << "\n\nJOB" << (trials ? "\tTRIAL" : "") << (runners ? "\tRUNNER" : "")
          << "\tMODEL\tDELEGATE\tDEVICE\tSTATUS\tMEAN_MS\tP90_MS\tPEAK_RSS_MIB\tPLACEMENT"
             "\tDEVICE_STATE\tMAX_ERR_VS_CPU\n";
  for (const store::JobRow& j : report.jobs) {
    ctx.out << j.id;
    if (trials) ctx.out << "\t" << j.trial;
    if (runners) ctx.out << "\t" << harness::TerminalSafe(RunnerLabel(j));
    ctx.out << "\t" << harness::TerminalSafe(j.model) << "\t"
            << harness::TerminalSafe(TableDelegate(j)) << "\t" << harness::TerminalSafe(j.device)
            << "\t" << j.status;
    if (j.metrics) {
      // Google's tools report no percentiles (0) and peak memory only when
      // asked: "-", not a 0 ms p90 or 0.0 MiB.
      // A delegate that left nodes on the CPU says so beside the latency.
      const auto partial = store::PartialDelegationOf(j);
      ctx.out << "\t" << Ms(j.metrics->mean_us)
              << (partial ? " [" + harness::TerminalSafe(partial->Label()) + "]" : "") << "\t"
              << (j.metrics->p90_us > 0 ? Ms(j.metrics->p90_us) : std::string("-")) << "\t"
              << reports::PeakRssMiB(j.metrics->peak_rss_bytes);
    } else {
      ctx.out << "\t-\t-\t-";
    }
    std::string placement = harness::TerminalSafe(reports::PlacementLabel(j));
    std::string flags = reports::DeviceStateFlags(j);
    const std::string error = reports::AccuracyLabel(report, j);
    ctx.out << "\t" << (placement.empty() ? "-" : placement) << "\t"
            << (flags.empty() ? "-" : "WARNING " + flags) << "\t" << (error.empty() ? "-" : error);
    if (!j.error.empty()) ctx.out << "\t" << harness::TerminalSafe(j.error);
    ctx.out << "\n";
  }
  return PrintTaskTable(store, report, ctx);
}

int Run(const ShowOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) {
    return ctx.Fail(store.error());
  }
  auto id = ResolveRun(**store, o.run);
  if (!id) {
    return ctx.Fail(id.error());
  }
  auto run = (*store)->GetRun(*id);
  if (!run) {
    return ctx.Fail(run.error());
  }
  auto jobs = (*store)->ListJobs(*id);
  if (!jobs) {
    return ctx.Fail(jobs.error());
  }
  if (o.job != 0 && std::none_of(jobs->begin(), jobs->end(),
                                 [&o](const store::JobRow& j) { return j.id == o.job; })) {
    ctx.Fail(kExitUsage, "run " + std::to_string(run->id) + " has no job " + std::to_string(o.job));
    return kExitUsage;
  }
  if (o.json) return PrintJson(**store, *run, *jobs, o.job, ctx);
  if (o.job != 0) return ShowJob(**store, *run, *jobs, o.job, ctx);
  return PrintTable(**store, *run, std::move(*jobs), ctx);
}

}  // namespace

void AddShowCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* cmd = app.add_subcommand("show", "Show one run and its jobs");
  cmd->add_option("RUN", o->run, "run id (see 'dfarm runs'), 'last', or tag:NAME")->required();
  cmd->add_option("--job", o->job,
                  "drill down into one job of the run: every node's placement and the device "
                  "state before and after")
      ->check(CLI::PositiveNumber);
  AddDbOption(*cmd, o->db);
  cmd->add_flag("--json", o->json, "print {\"run\":{...},\"jobs\":[...]}");
  cmd->footer(
      "Exit codes: 0 ok, 2 usage error (a bad argument, no such run or job), 3 no database, "
      "or it cannot be read.");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
