// The device state recorded beside every job: CPU frequencies and
// governors, thermal zone temperatures, load average and, on Android, the
// battery, read from sysfs/procfs before and after the runner. Nothing here
// fails: a file that is missing or unparsable is an unset field.
#pragma once

#include <chrono>
#include <string>

#include "agent/base/result.h"
#include "agent/protocol/types.h"

namespace dfarm::agent {

// Default of dfarm-agent --hot-threshold-c.
inline constexpr double kDefaultHotThresholdC = 70.0;

// Reads the state under root: "/" on a device; tests pass a folder holding a
// fake sys/ and proc/ tree. Reads only these paths below root:
//   sys/devices/system/cpu/cpuN/{online,cpufreq/scaling_cur_freq,
//       cpufreq/scaling_max_freq,cpufreq/cpuinfo_max_freq,cpufreq/scaling_governor}
//   sys/class/thermal/thermal_zoneN/{type,temp}
//   proc/loadavg
//   proc/stat (its first "cpu" line, twice, busy_window apart: cpu_busy_pct)
//   sys/class/power_supply/battery/{capacity,temp,current_now,voltage_now}
// Thermal temperatures are millidegrees C by the kernel's ABI; a value under
// 1000 in magnitude is taken as whole degrees (some vendor drivers report so).
// Battery temp is in tenths of a degree C.
// With a busy_window above 0 the call takes that long: cpu_busy_pct is the
// share of CPU time not idle between the two readings of proc/stat.
DeviceState CollectDeviceState(
    const std::string& root = "/",
    std::chrono::milliseconds busy_window = std::chrono::milliseconds(0));

// The window the agent reads cpu_busy_pct over before each job and for a
// DeviceStateRequest.
inline constexpr std::chrono::milliseconds kBusyWindow{100};

// The CPUs `spec` names on a device in `state` (its cpus and their
// hw_max_freq_khz): "big" the online CPUs of the highest cpuinfo_max_freq,
// "little" those of the lowest (all CPUs when none reports a frequency),
// else a list of CPU numbers and ranges, "0-3,6", each below 1024. Errors
// name the fault ("cpu_affinity 'big': the device lists no CPU").
Result<std::vector<int>> ResolveCpuAffinity(const std::string& spec, const DeviceState& state);

// Whether state shows a thermal zone above threshold_c. When it does and why
// is not null, *why names the hottest zone ("thermal zone 3 (cpu-thermal) at
// 78.0 C").
bool IsHot(const DeviceState& state, double threshold_c, std::string* why = nullptr);

// Whether state shows a CPU whose scaling_max_freq is below its
// cpuinfo_max_freq (CPUs lacking either are not judged). *why names the first
// ("cpu2 capped at 1200000 of 2400000 kHz").
bool IsThrottled(const DeviceState& state, std::string* why = nullptr);

// Sets started_hot (state_before), throttled (state_before or state_after),
// hot_threshold_c and state_note of result from its snapshots.
void FlagDeviceState(double hot_threshold_c, JobResult* result);

}  // namespace dfarm::agent
