#include "harness/devices/health.h"

#include <time.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "agent/base/sha256.h"
#include "agent/runner/runner_json.h"
#include "harness/spec/spec.h"

namespace dfarm::harness {
namespace {

// Seconds since the epoch of an ISO-8601 UTC time ("2024-05-01T12:34:56Z").
std::optional<int64_t> ParseIsoUtc(const std::string& at) {
  struct tm tm {};
  const char* end = ::strptime(at.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  return static_cast<int64_t>(::timegm(&tm));
}

bool IsHealthReason(const std::string& reason) { return reason.rfind("health check ", 0) == 0; }

HealthVerdict Failed(const std::string& why) { return {false, kHealthFailedPrefix + why}; }

// The outputs' sha256s joined by ","; an error names what the document lacks.
Result<std::string> OutputHashes(const agent::JobResult& r) {
  auto doc = runner_json::ParseRunnerJson(r.runner_json);
  if (!doc) return MakeError(doc.message());
  if (doc->outputs.empty()) return MakeError("the runner reported no outputs");
  std::string joined;
  for (const runner_json::TensorEntry& o : doc->outputs) {
    if (!o.sha256) {
      return MakeError("the runner reported no sha256 for output " + std::to_string(o.index) +
                       " (a runner build older than the health check)");
    }
    joined += (joined.empty() ? "" : ",") + *o.sha256;
  }
  return joined;
}

}  // namespace

HealthChecker::HealthChecker(HealthOptions options, std::function<Clock::time_point()> now,
                             std::function<void(const std::string&)> note)
    : options_(std::move(options)),
      now_(now ? std::move(now) : [] { return Clock::now(); }),
      note_(std::move(note)) {}

void HealthChecker::Note(const std::string& line) const {
  if (note_) note_(line);
}

HealthChecker::DeviceHealth HealthChecker::Get(const std::string& device) {
  std::lock_guard lock(mu_);
  return devices_[device];
}

Result<HealthVerdict> HealthChecker::Check(store::StorePool& db, const std::string& device,
                                           agent::AgentClient& client) {
  const std::string& abi = client.device().abi;
  std::string runner;
  if (abi == HostAbi()) {
    runner = options_.runner_path;
  } else if (abi == kArm64Abi) {
    runner = options_.arm64_runner_path;
  }
  if (runner.empty()) {
    return Failed("no runner build for ABI '" + abi + "' (for arm64-v8a: $DFARM_ARM64_RUNNER)");
  }
  std::string runner_sha, model_sha;
  if (auto r = client.PutArtifact(runner, &runner_sha); !r) {
    return MakeError("cannot push the runner " + runner + ": " + r.message());
  }
  if (auto r = client.PutArtifact(options_.model_path, &model_sha); !r) {
    return MakeError("cannot push the health model " + options_.model_path + ": " + r.message());
  }
  agent::JobSpec spec;
  spec.runner_sha256 = runner_sha;
  spec.model_sha256 = model_sha;
  spec.delegate = "cpu";
  spec.num_threads = 1;
  spec.warmup_runs = 0;
  spec.num_runs = 3;
  spec.timeout_ms = 60000;
  auto result = client.RunJob(spec);
  if (!result) return MakeError("cannot run the health model: " + result.message());
  const std::string model = std::filesystem::path(options_.model_path).filename().string();
  if (result->status != "ok") {
    return Failed(model + " ended " + result->status +
                  (result->error.empty() ? "" : ": " + result->error));
  }
  auto outputs = OutputHashes(*result);
  if (!outputs) return Failed(model + ": " + outputs.message());
  auto known = db.Call(&store::Store::RecordHealthGolden, model_sha, runner_sha, *outputs, device);
  if (!known) return known.error();
  const size_t n = static_cast<size_t>(std::count(outputs->begin(), outputs->end(), ',')) + 1;
  if (*known == *outputs) {
    return HealthVerdict{true, kHealthPassedPrefix + model + ", " + std::to_string(n) +
                                   " outputs match the known outputs"};
  }
  auto golden = db.Call(&store::Store::GetHealthGolden, model_sha, runner_sha);
  if (!golden) return golden.error();
  const std::string where =
      *golden ? " (recorded on " + (*golden)->device + " at " + (*golden)->recorded_at + ")" : "";
  return Failed(model + ": outputs differ from the known outputs" + where);
}

Result<HealthVerdict> HealthChecker::CheckAndCount(store::StorePool& db, const std::string& device,
                                                   agent::AgentClient& client,
                                                   const store::DeviceRow& row) {
  {
    std::lock_guard lock(mu_);
    devices_[device].last_attempt = now_();
  }
  auto verdict = Check(db, device, client);
  int errors = 0;
  {
    std::lock_guard lock(mu_);
    DeviceHealth& h = devices_[device];
    if (verdict) {
      h.last_check = now_();
      h.errors_in_a_row = 0;
    } else {
      errors = ++h.errors_in_a_row;
    }
  }
  if (verdict) return verdict;
  Note("device '" + device + "': health check error: " + verdict.message());
  if (errors < kHealthErrorsInARow || row.state == store::kDeviceQuarantined) {
    return verdict.error();
  }
  return Failed(verdict.message() + " (" + std::to_string(errors) + " checks in a row)");
}

Result<bool> HealthChecker::Record(store::StorePool& db, const store::DeviceRow& row,
                                   const std::string& state, const std::string& reason) {
  const Clock::time_point now = now_();
  Note("device '" + row.name + (state != row.state ? "' is now " + state + ": " : "': ") + reason);
  {
    std::lock_guard lock(mu_);
    auto last = recorded_at_.find(row.name);
    const bool same = state == row.state && reason == row.state_reason;
    if (same && last != recorded_at_.end() && now - last->second < options_.every) return true;
    recorded_at_[row.name] = now;
  }
  auto set = db.Call(&store::Store::SetDeviceStateBy, row.name, state, reason, store::kSetByHealth);
  if (set && !*set) Note("device '" + row.name + "': an operator's state holds; not changed");
  return set;
}

Result<void> HealthChecker::Seed(store::StorePool& db, const std::string& device) {
  auto events = db.Call(&store::Store::ListDeviceEvents, device);
  if (!events) return events.error();
  std::optional<Clock::time_point> last;
  for (auto e = events->rbegin(); e != events->rend(); ++e) {
    if (!IsHealthReason(e->reason)) continue;
    auto at = ParseIsoUtc(e->at);
    if (!at) break;
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    const std::chrono::seconds age(std::max<int64_t>(0, now_s - *at));
    if (age < options_.every) last = now_() - age;
    break;
  }
  std::lock_guard lock(mu_);
  DeviceHealth& h = devices_[device];
  h.seeded = true;
  if (last && !h.last_check) h.last_check = last;
  return Ok();
}

Result<bool> HealthChecker::ReadyQuarantined(store::StorePool& db, const std::string& device,
                                             agent::AgentClient& client,
                                             const store::DeviceRow& row) {
  const DeviceHealth h = Get(device);
  if (h.last_attempt && now_() - *h.last_attempt < options_.retry) return false;
  auto verdict = CheckAndCount(db, device, client, row);
  if (!verdict) return verdict.error();
  const char* state = verdict->passed ? store::kDeviceOk : store::kDeviceQuarantined;
  auto recorded = Record(db, row, state, verdict->reason);
  if (!recorded) return recorded.error();
  return verdict->passed && *recorded;
}

Result<bool> HealthChecker::ReadyOk(store::StorePool& db, const std::string& device,
                                    agent::AgentClient& client, const store::DeviceRow& row) {
  if (!Get(device).seeded) {
    if (auto r = Seed(db, device); !r) return r.error();
  }
  const DeviceHealth h = Get(device);
  if (h.last_check && now_() - *h.last_check < options_.every) return true;
  auto verdict = CheckAndCount(db, device, client, row);
  if (!verdict) return verdict.error();
  const char* state = verdict->passed ? store::kDeviceOk : store::kDeviceQuarantined;
  auto recorded = Record(db, row, state, verdict->reason);
  if (!recorded) return recorded.error();
  return verdict->passed && *recorded;
}

Result<bool> HealthChecker::Ready(store::StorePool& db, const std::string& device,
                                  agent::AgentClient& client) {
  auto found = db.Call(&store::Store::GetDevice, device);
  if (!found) return found.error();
  store::DeviceRow row;
  row.name = device;
  if (*found) row = **found;
  const bool quarantined = row.state == store::kDeviceQuarantined;
  // An operator's state holds until an operator lifts it: no check runs.
  if (options_.model_path.empty() || row.state_by == store::kSetByOperator) return !quarantined;
  return quarantined ? ReadyQuarantined(db, device, client, row) : ReadyOk(db, device, client, row);
}

}  // namespace dfarm::harness
