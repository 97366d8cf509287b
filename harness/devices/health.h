// Device health for `dfarm node`: a health check runs a known
// model with known outputs on a device, on a schedule and after a
// quarantine, and puts the device back ("ok") or keeps it out
// ("quarantined"), recording why in the store's devices row and its history
// (store::Store::SetDeviceState, ListDeviceEvents).
//
// The check: the health model on the cpu delegate, one thread, no warm-up,
// 3 runs, the runner's fixed default seed, a 60 s timeout, with the runner
// build for the device's ABI. It passes when the job ends ok and the sha256
// of every output (the runner's --json "outputs"[i].sha256) equals the known
// outputs for (model, runner build): the first device to pass records them
// (store::Store::RecordHealthGolden), every later check compares with them.
//
// HealthChecker::Ready, asked before each claim (NodeClaims::
// device_ready), decides from the device's state in the store:
// - quarantined: false until `retry` has passed since this checker's last
//   check of the device, errors too (none yet: at once); then it runs: pass sets
//   "ok" and returns true, a failure keeps it quarantined, naming why.
// - ok or no state: true, running the check first when it is due: `every`
//   since the last one. At node start the last one is the device's newest
//   "health check ..." event in the store, so a restarted node does not
//   check again at once; a device with none is due at once. A failure
//   quarantines it (false).
// - without a health model: quarantined stays out (false) until a user
//   releases it (`dfarm devices --release`), else true.
// - set by an operator (`dfarm devices --quarantine/--release`, store
//   kSetByOperator): no check runs; quarantined is false, released true,
//   until an operator lifts it (`dfarm devices --auto`). A check's verdict
//   never overrides it (Store::SetDeviceStateBy keeps an operator's state).
// Events: a failure is recorded when the state or reason changes, or when
// `every` passed since the last record, so a device that keeps failing its
// retries does not fill the history; every scheduled pass is recorded (at
// most one per `every`), as is the pass that brings a device back.
//
// Errors (the agent unreachable, a push or RunJob failing in transport, the
// health model unreadable on the host) are returned: the worker then
// reconnects and asks again. They do not quarantine the device at first (a
// dropped connection says nothing about the device); kHealthErrorsInARow
// of them in a row do, naming the last error.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "agent/base/result.h"
#include "agent/client/client.h"
#include "reports/store/store_pool.h"

namespace dfarm::harness {

struct HealthOptions {
  std::string model_path;         // the health model; "" = no health check
  std::string runner_path;        // the runner build for this host's ABI
  std::string arm64_runner_path;  // for arm64-v8a devices; "" = none
  std::chrono::seconds every{3600};
  std::chrono::seconds retry{60};
};

// Check errors in a row after which the device is quarantined.
inline constexpr int kHealthErrorsInARow = 3;

// What one health check concluded (an error is returned instead).
struct HealthVerdict {
  bool passed = false;
  std::string reason;  // "health check passed: ..." / "health check failed: ..."
};

// One per node, shared by its device workers (thread-safe; checks of
// different devices run concurrently).
class HealthChecker {
 public:
  using Clock = std::chrono::steady_clock;
  // `now` (tests): the steady clock; empty = Clock::now. `note`, optional:
  // one line per check and state change, for the node's log.
  explicit HealthChecker(HealthOptions options, std::function<Clock::time_point()> now = {},
                         std::function<void(const std::string&)> note = {});

  // Whether `device` may claim jobs now; may run the check on `client`.
  Result<bool> Ready(store::StorePool& db, const std::string& device, agent::AgentClient& client);

  // Runs the check now on `client` and records the known outputs when none
  // are; changes no state.
  Result<HealthVerdict> Check(store::StorePool& db, const std::string& device,
                              agent::AgentClient& client);

 private:
  struct DeviceHealth {
    std::optional<Clock::time_point> last_check;    // a verdict (or seeded at start)
    std::optional<Clock::time_point> last_attempt;  // a check begun, error or not
    bool seeded = false;                            // last_check read from the events once
    int errors_in_a_row = 0;
  };

  Result<bool> ReadyQuarantined(store::StorePool& db, const std::string& device,
                                agent::AgentClient& client, const store::DeviceRow& row);
  Result<bool> ReadyOk(store::StorePool& db, const std::string& device, agent::AgentClient& client,
                       const store::DeviceRow& row);
  // Runs the check, noting the time; an error counts toward quarantine.
  Result<HealthVerdict> CheckAndCount(store::StorePool& db, const std::string& device,
                                      agent::AgentClient& client, const store::DeviceRow& row);
  // False when an operator's state held (nothing recorded).
  Result<bool> Record(store::StorePool& db, const store::DeviceRow& row, const std::string& state,
                      const std::string& reason);
  // Seeds the device's last check from its newest health event in the store.
  Result<void> Seed(store::StorePool& db, const std::string& device);
  DeviceHealth Get(const std::string& device);
  void Note(const std::string& line) const;

  const HealthOptions options_;
  const std::function<Clock::time_point()> now_;
  const std::function<void(const std::string&)> note_;
  std::mutex mu_;
  std::map<std::string, DeviceHealth> devices_;  // guarded by mu_
  // When this checker last recorded each device's state.
  std::map<std::string, Clock::time_point> recorded_at_;  // guarded by mu_
};

// The reason prefix of every state a health check records.
inline constexpr const char* kHealthPassedPrefix = "health check passed: ";
inline constexpr const char* kHealthFailedPrefix = "health check failed: ";

}  // namespace dfarm::harness
