#include "harness/run/job_outcome.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "agent/protocol/features.h"
#include "agent/protocol/runner_kinds.h"
#include "harness/eval/task_accuracy.h"
#include "harness/import/benchmark_log.h"  // ToolRunnerOutput
#include "harness/run/runner_output.h"

namespace dfarm::harness {
namespace {

std::string LastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

std::optional<double> MeanBatteryPowerW(const std::vector<const agent::DeviceState*>& states) {
  double sum = 0;
  int n = 0;
  for (const agent::DeviceState* s : states) {
    if (!s->battery_current_ua || !s->battery_voltage_uv) continue;
    sum += std::fabs(static_cast<double>(*s->battery_current_ua)) * 1e-6 *
           static_cast<double>(*s->battery_voltage_uv) * 1e-6;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

// One device state as the store's telemetry row of `phase`.
store::TelemetryRow TelemetryOf(const std::string& phase, const agent::DeviceState& state) {
  store::TelemetryRow t;
  t.phase = phase;
  t.unix_ms = state.unix_ms;
  t.hottest_temp_c = HottestC(state);
  t.load_avg_1m = state.load_avg_1m;
  t.battery_temp_c = state.battery_temp_c;
  if (state.battery_level_pct) t.battery_level_pct = *state.battery_level_pct;
  return t;
}

// `task_outputs`, when given, gets the document's task outputs (unset when
// it had none), so that no caller reads the runner document twice.
store::JobOutcome ClassifyJobResultFor(const agent::JobResult& r, const RunnerExpectation& job,
                                       std::optional<runner::TaskOutputs>* task_outputs = nullptr);

}  // namespace

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::optional<double> HottestC(const agent::DeviceState& state) {
  std::optional<double> hottest;
  for (const agent::ThermalZoneState& z : state.thermal_zones) {
    if (z.temp_c && (!hottest || *z.temp_c > *hottest)) hottest = z.temp_c;
  }
  return hottest;
}

store::JobOutcome ClassifyJobResult(const agent::JobResult& r) {
  return ClassifyJobResultFor(r, RunnerExpectation{});
}

std::string NameModelFile(std::string text, const std::string& sha256, const std::string& file) {
  if (sha256.empty() || file.empty()) return text;
  for (size_t at = text.find(sha256); at != std::string::npos; at = text.find(sha256, at)) {
    size_t start = at;
    if (at > 0 && text[at - 1] == '/') {  // a path ending in the hash: the whole path
      const size_t before = text.find_last_of(" '\"(", at);
      start = before == std::string::npos ? 0 : before + 1;
    }
    text.replace(start, at + sha256.size() - start, file);
    at = start + file.size();
  }
  return text;
}

namespace {

// An ok job of a model with an "eval": its task accuracy from the runner's
// task_outputs. A runner that listed none, or other ones, leaves the job ok
// with no task accuracy and the reason in its note.
void ScoreTask(const EvalSpec& eval, const std::optional<runner::TaskOutputs>& outputs,
               store::JobOutcome& o) {
  std::string why = "the runner listed no task outputs (dfarm-runner --task-outputs)";
  if (outputs) {
    auto scored = ScoreTaskOutputs(eval, *outputs);
    if (scored) {
      o.task = std::move(*scored);
      return;
    }
    why = scored.message();
  }
  o.state_note += (o.state_note.empty() ? "" : "; ") + ("task accuracy not scored: " + why);
}

}  // namespace

store::JobOutcome ClassifyJobResult(const agent::JobResult& r, const SweepJob& job) {
  RunnerExpectation expect;
  expect.kind = job.runner_kind;
  expect.num_runs = job.benchmark.num_runs;
  expect.sustained = job.benchmark.sustained_s > 0;
  expect.model_file = job.model.file;
  expect.model_sha256 = job.model_sha256;
  std::optional<runner::TaskOutputs> task_outputs;
  store::JobOutcome o = ClassifyJobResultFor(r, expect, &task_outputs);
  o.error = NameModelFile(std::move(o.error), job.model_sha256, job.model.file);
  if (job.model.eval && o.status == store::kJobOk) ScoreTask(*job.model.eval, task_outputs, o);
  return o;
}

namespace {

// What a job's runner printed, read by its kind: a tool's log
// (ToolRunnerOutput), else the runner document.
Result<RunnerOutput> ReadRunnerOutput(const agent::JobResult& r, std::string_view kind) {
  if (agent::SpeaksRunnerContract(kind)) return ParseRunnerJson(r.runner_json);
  return ToolRunnerOutput(kind, r.runner_json);
}

store::JobOutcome ClassifyJobResultFor(const agent::JobResult& r, const RunnerExpectation& job,
                                       std::optional<runner::TaskOutputs>* task_outputs) {
  const std::string_view kind = job.kind;
  store::JobOutcome o;
  o.status = r.status;
  o.error = OneLine(r.error);
  o.exit_code = r.exit_code;
  o.signal = r.signal;
  o.wall_ms = r.wall_ms;
  o.runner_json = r.runner_json;
  o.stderr_tail = r.stderr_tail;
  if (r.state_before) o.state_before_json = DeviceStateToJson(*r.state_before);
  if (r.state_after) o.state_after_json = DeviceStateToJson(*r.state_after);
  for (const auto& [phase, state] :
       {std::pair{"before", &r.state_before}, std::pair{"after", &r.state_after}}) {
    if (*state) o.telemetry.push_back(TelemetryOf(phase, **state));
  }
  for (size_t i = 0; i < r.state_during.size(); ++i) {
    o.telemetry.push_back(TelemetryOf(DuringPhase(i), r.state_during[i]));
  }
  o.started_hot = r.started_hot;
  o.throttled = r.throttled;
  o.hot_threshold_c = r.hot_threshold_c;
  o.state_note = OneLine(r.state_note);
  auto parsed = ReadRunnerOutput(r, kind);
  if (parsed && !agent::SpeaksRunnerContract(kind) && parsed->status != store::kJobOk &&
      (o.status == store::kJobOk ||
       (o.status == JobStatusName(JobStatus::kCrashed) && r.signal == 0))) {
    // A tool exits 1 for every failure (the agent says crashed, or ok when it
    // exited 0 anyway); its failure line says what failed (BenchmarkLogStatus).
    o.status = parsed->status;
    o.error = OneLine(parsed->error);
  }
  if (parsed) {
    o.metrics = parsed->metrics;
    if (o.metrics) o.energy_mj = EnergyPerInferenceMj(r, o.metrics->mean_us);
    o.samples_us = parsed->samples_us;
    o.placement = parsed->placement;
    if (o.error.empty()) o.error = OneLine(parsed->error);
    o.accuracy = parsed->accuracy;
    o.runner_version = parsed->runtime_version;
    o.profile = parsed->profile;
    o.sustained = parsed->sustained;
    if (task_outputs != nullptr) *task_outputs = std::move(parsed->task_outputs);
    // A runner is a program the user brings: its "ok" must be possible, and
    // no figure of an impossible one is kept.
    if (o.status == store::kJobOk) {
      if (std::string why = ImplausibleReport(*parsed, job); !why.empty()) {
        o.status = JobStatusName(JobStatus::kCrashed);
        o.error = "runner reported ok, but its report is implausible: " + OneLine(why);
        o.metrics.reset();
        o.energy_mj.reset();
        o.samples_us.clear();
        o.accuracy.reset();
        o.profile.reset();
        o.sustained.reset();
      }
    }
  }
  // The agent classifies the job (Supervisor::ClassifyExit); what follows
  // validates what arrived over the wire.
  if (!store::IsFinalJobStatus(o.status)) {
    o.error = "agent reported unknown job status '" + o.status + "'" +
              (o.error.empty() ? "" : ": " + o.error);
    o.status = "infra";
  } else if (o.status == store::kJobOk && !o.metrics) {
    // A guard for agents built before the agent refused an unmeasured "ok"
    // itself (same check, same messages): a current agent never sends one,
    // and an "ok" the store keeps must have metrics for every report.
    o.status = "crashed";
    o.error = parsed ? "runner reported ok without metrics"
              : agent::SpeaksRunnerContract(kind)
                  ? "runner reported ok but its JSON is unreadable: " + parsed.message()
                  : "runner of kind '" + std::string(kind) +
                        "' exited 0 but its log is unreadable: " + parsed.message();
  }
  // A failure without an error line still names something.
  if (o.status != store::kJobOk && o.error.empty()) {
    o.error = OneLine(LastLine(r.stderr_tail));
    if (o.error.empty()) {
      o.error = r.signal ? "runner killed by signal " + std::to_string(r.signal)
                         : "runner exited with code " + std::to_string(r.exit_code);
    }
  }
  return o;
}

}  // namespace

std::string DeviceStateToJson(const agent::DeviceState& state) {
  using nlohmann::json;
  auto put = [](json& obj, const char* key, const auto& value) {
    if (value) obj[key] = *value;
  };
  json doc = json::object();
  doc["unix_ms"] = state.unix_ms;
  doc["cpus"] = json::array();
  for (const agent::CpuState& c : state.cpus) {
    json cpu = {{"cpu", c.cpu}};
    put(cpu, "online", c.online);
    put(cpu, "cur_freq_khz", c.cur_freq_khz);
    put(cpu, "max_freq_khz", c.max_freq_khz);
    put(cpu, "hw_max_freq_khz", c.hw_max_freq_khz);
    if (!c.governor.empty()) cpu["governor"] = c.governor;
    doc["cpus"].push_back(std::move(cpu));
  }
  doc["thermal_zones"] = json::array();
  for (const agent::ThermalZoneState& z : state.thermal_zones) {
    json zone = {{"zone", z.zone}, {"type", z.type}};
    put(zone, "temp_c", z.temp_c);
    doc["thermal_zones"].push_back(std::move(zone));
  }
  put(doc, "load_avg_1m", state.load_avg_1m);
  put(doc, "load_avg_5m", state.load_avg_5m);
  put(doc, "load_avg_15m", state.load_avg_15m);
  put(doc, "battery_level_pct", state.battery_level_pct);
  put(doc, "battery_temp_c", state.battery_temp_c);
  put(doc, "battery_current_ua", state.battery_current_ua);
  put(doc, "cpu_busy_pct", state.cpu_busy_pct);
  put(doc, "battery_voltage_uv", state.battery_voltage_uv);
  // Invalid UTF-8 in a zone type is replaced rather than thrown on.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<double> EnergyPerInferenceMj(const agent::JobResult& r, double mean_us) {
  std::vector<const agent::DeviceState*> states;
  for (const agent::DeviceState& s : r.state_during) states.push_back(&s);
  auto power = MeanBatteryPowerW(states);
  if (!power) {
    states.clear();
    for (const auto* s : {&r.state_before, &r.state_after}) {
      if (*s) states.push_back(&**s);
    }
    power = MeanBatteryPowerW(states);
  }
  if (!power || !(mean_us > 0)) return std::nullopt;
  return *power * mean_us * 1e-3;  // W x us = uJ; / 1000: mJ
}

}  // namespace dfarm::harness
