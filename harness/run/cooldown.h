// Cooldown before a job: a pause, then waiting until the device's hottest
// thermal zone and its CPU load are within the spec's limits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "agent/base/result.h"
#include "agent/client/client.h"
#include "harness/spec/spec.h"  // CooldownSpec

namespace dfarm::harness {

// What WaitForCooldown uses; tests inject a fake clock and temperatures.
struct CooldownSource {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::milliseconds)> sleep;
  // The device's hottest thermal zone in degrees C; unset when it exposes
  // none; an error when it cannot be asked (e.g. an agent without feature
  // "device_state").
  std::function<Result<std::optional<double>>()> hottest_c;
  // The device's CPU busy share (0..100) now; unset when it cannot say
  // (an agent before cpu_busy_pct). May be empty: the load rule is skipped.
  std::function<Result<std::optional<double>>()> busy_pct;
  std::function<bool()> cancelled;  // may be empty
};

struct CooldownOutcome {
  int64_t waited_ms = 0;  // by the clock, pause included
  bool checked = false;   // the temperature rule was applied
  bool gave_up = false;   // max_wait_s passed with the device still too hot or too busy
  bool noisy = false;     // gave up with the CPUs busier than max_cpu_busy_pct
  std::optional<double> last_temp_c;
  std::optional<double> last_busy_pct;
  std::string note;  // one line when the rule was skipped or gave up; else empty
};

// Polled this often while waiting for the device to cool down.
inline constexpr std::chrono::milliseconds kCooldownPoll{1000};

// Sleeps spec.pause_ms; then, when spec.max_temp_c > 0 and/or
// spec.max_cpu_busy_pct > 0, polls hottest_c / busy_pct every kCooldownPoll
// until each is within its limit or max_wait_s have passed (then the job runs
// anyway: gave_up, noisy when the load rule failed, and a note with the
// readings). A device without thermal zones, or an agent that cannot say,
// skips that rule with a note naming why.
CooldownOutcome WaitForCooldown(const CooldownSpec& spec, const CooldownSource& source);

// A CooldownSource over an agent connection (DeviceStateRequest) and the real
// steady clock; sleeps end early when *cancel turns true. Borrows both.
CooldownSource AgentCooldownSource(agent::AgentClient& client, const std::atomic<bool>* cancel);

}  // namespace dfarm::harness
