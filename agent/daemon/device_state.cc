#include "agent/daemon/device_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <thread>

#include "agent/base/unique_fd.h"

namespace dfarm::agent {
namespace {

// Bounds against a strange tree: more entries than this are not read.
constexpr uint32_t kMaxCpus = 4096;
constexpr uint32_t kMaxThermalZones = 1024;

std::string Join(const std::string& root, const std::string& rel) {
  std::string base = root.empty() ? "/" : root;
  if (base.back() != '/') base += '/';
  return base + rel;
}

// The file's first 4 KiB with surrounding whitespace removed; unset when it
// cannot be opened or read (a missing file, EIO from a sleeping sensor).
std::optional<std::string> ReadValue(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  char buf[4096];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;
  std::string s(buf, static_cast<size_t>(n));
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

template <typename T>
std::optional<T> ParseNumber(std::string_view s) {
  T value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return std::nullopt;
  }
  return value;
}

template <typename T>
std::optional<T> ReadNumber(const std::string& path) {
  auto text = ReadValue(path);
  if (!text) return std::nullopt;
  return ParseNumber<T>(*text);
}

// The N of the entries of dir named prefix + N, sorted.
std::vector<uint32_t> NumberedEntries(const std::string& dir, std::string_view prefix,
                                      uint32_t max) {
  std::vector<uint32_t> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    auto n = ParseNumber<uint32_t>(std::string_view(name).substr(prefix.size()));
    if (n && *n < max) out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// The first line of /proc/stat, "cpu  user nice system idle iowait irq
// softirq steal ...", in clock ticks: idle + iowait, and the sum of all.
struct CpuTimes {
  uint64_t idle = 0;
  uint64_t total = 0;
};

std::optional<CpuTimes> ReadCpuTimes(const std::string& path) {
  std::ifstream in(path);
  std::string label;
  if (!(in >> label) || label != "cpu") return std::nullopt;
  CpuTimes t;
  uint64_t v = 0;
  // user nice system idle iowait irq softirq steal; guest time is already
  // counted in user and nice.
  for (int field = 0; field < 8 && in >> v; ++field) {
    t.total += v;
    if (field == 3 || field == 4) t.idle += v;
  }
  if (t.total == 0) return std::nullopt;
  return t;
}

}  // namespace

DeviceState CollectDeviceState(const std::string& root, std::chrono::milliseconds busy_window) {
  DeviceState state;
  if (busy_window.count() > 0) {
    const std::optional<CpuTimes> first = ReadCpuTimes(Join(root, "proc/stat"));
    std::this_thread::sleep_for(busy_window);
    const std::optional<CpuTimes> second = ReadCpuTimes(Join(root, "proc/stat"));
    if (first && second && second->total > first->total) {
      const double idle = static_cast<double>(second->idle - first->idle);
      const double total = static_cast<double>(second->total - first->total);
      state.cpu_busy_pct = std::clamp(100.0 * (1.0 - idle / total), 0.0, 100.0);
    }
  }
  state.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();

  const std::string cpu_dir = Join(root, "sys/devices/system/cpu/");
  for (uint32_t n : NumberedEntries(cpu_dir, "cpu", kMaxCpus)) {
    const std::string dir = cpu_dir + "cpu" + std::to_string(n) + "/";
    CpuState cpu;
    cpu.cpu = n;
    if (auto online = ReadNumber<int>(dir + "online")) cpu.online = *online != 0;
    cpu.cur_freq_khz = ReadNumber<uint64_t>(dir + "cpufreq/scaling_cur_freq");
    cpu.max_freq_khz = ReadNumber<uint64_t>(dir + "cpufreq/scaling_max_freq");
    cpu.hw_max_freq_khz = ReadNumber<uint64_t>(dir + "cpufreq/cpuinfo_max_freq");
    cpu.governor = ReadValue(dir + "cpufreq/scaling_governor").value_or("");
    state.cpus.push_back(std::move(cpu));
  }

  const std::string thermal_dir = Join(root, "sys/class/thermal/");
  for (uint32_t n : NumberedEntries(thermal_dir, "thermal_zone", kMaxThermalZones)) {
    const std::string dir = thermal_dir + "thermal_zone" + std::to_string(n) + "/";
    ThermalZoneState zone;
    zone.zone = n;
    zone.type = ReadValue(dir + "type").value_or("");
    if (auto raw = ReadNumber<int64_t>(dir + "temp")) {
      zone.temp_c = (*raw >= 1000 || *raw <= -1000) ? static_cast<double>(*raw) / 1000.0
                                                    : static_cast<double>(*raw);
    }
    state.thermal_zones.push_back(std::move(zone));
  }

  // "0.52 0.58 0.59 1/467 12345"
  if (auto text = ReadValue(Join(root, "proc/loadavg"))) {
    std::string_view rest = *text;
    std::optional<double>* fields[] = {&state.load_avg_1m, &state.load_avg_5m, &state.load_avg_15m};
    for (auto* field : fields) {
      size_t space = rest.find(' ');
      *field = ParseNumber<double>(rest.substr(0, space));
      if (space == std::string_view::npos) break;
      rest = rest.substr(space + 1);
    }
  }

  const std::string battery = Join(root, "sys/class/power_supply/battery/");
  state.battery_level_pct = ReadNumber<int32_t>(battery + "capacity");
  if (auto tenths = ReadNumber<int64_t>(battery + "temp")) {
    state.battery_temp_c = static_cast<double>(*tenths) / 10.0;
  }
  state.battery_current_ua = ReadNumber<int64_t>(battery + "current_now");
  state.battery_voltage_uv = ReadNumber<int64_t>(battery + "voltage_now");
  return state;
}

namespace {

// "0-3,6" -> {0,1,2,3,6}; nothing on a syntax error.
std::optional<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t dash = item.find('-');
    auto lo = ParseNumber<int>(item.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : ParseNumber<int>(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi >= 1024) return std::nullopt;
    for (int c = *lo; c <= *hi; ++c) cpus.push_back(c);
  }
  if (cpus.empty()) return std::nullopt;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace

Result<std::vector<int>> ResolveCpuAffinity(const std::string& spec, const DeviceState& state) {
  const std::string what = "cpu_affinity '" + spec + "'";
  if (spec != "big" && spec != "little") {
    auto cpus = ParseCpuList(spec);
    if (!cpus) {
      return MakeError(what + ": expected big, little or CPU numbers and ranges such as 0-3,6");
    }
    return *cpus;
  }
  std::vector<const CpuState*> online;
  for (const CpuState& c : state.cpus) {
    if (c.online.value_or(true)) online.push_back(&c);
  }
  if (online.empty()) return MakeError(what + ": the device lists no CPU");
  std::optional<uint64_t> pick;
  for (const CpuState* c : online) {
    if (!c->hw_max_freq_khz) continue;
    if (!pick || (spec == "big" ? *c->hw_max_freq_khz > *pick : *c->hw_max_freq_khz < *pick)) {
      pick = c->hw_max_freq_khz;
    }
  }
  std::vector<int> cpus;
  for (const CpuState* c : online) {
    if (!pick || c->hw_max_freq_khz == pick) cpus.push_back(static_cast<int>(c->cpu));
  }
  return cpus;
}

bool IsHot(const DeviceState& state, double threshold_c, std::string* why) {
  const ThermalZoneState* hottest = nullptr;
  for (const auto& zone : state.thermal_zones) {
    if (zone.temp_c && *zone.temp_c > threshold_c &&
        (hottest == nullptr || *zone.temp_c > *hottest->temp_c)) {
      hottest = &zone;
    }
  }
  if (hottest != nullptr && why != nullptr) {
    *why = "thermal zone " + std::to_string(hottest->zone) +
           (hottest->type.empty() ? "" : " (" + hottest->type + ")") + " at " +
           Fixed1(*hottest->temp_c) + " C";
  }
  return hottest != nullptr;
}

bool IsThrottled(const DeviceState& state, std::string* why) {
  for (const auto& cpu : state.cpus) {
    if (cpu.max_freq_khz && cpu.hw_max_freq_khz && *cpu.max_freq_khz < *cpu.hw_max_freq_khz) {
      if (why != nullptr) {
        *why = "cpu" + std::to_string(cpu.cpu) + " capped at " + std::to_string(*cpu.max_freq_khz) +
               " of " + std::to_string(*cpu.hw_max_freq_khz) + " kHz";
      }
      return true;
    }
  }
  return false;
}

void FlagDeviceState(double hot_threshold_c, JobResult* result) {
  result->hot_threshold_c = hot_threshold_c;
  result->started_hot = false;
  result->throttled = false;
  std::vector<std::string> notes;
  std::string why;
  if (result->state_before && IsHot(*result->state_before, hot_threshold_c, &why)) {
    result->started_hot = true;
    notes.push_back("started hot: " + why + " > " + Fixed1(hot_threshold_c) + " C");
  }
  if (result->state_before && IsThrottled(*result->state_before, &why)) {
    result->throttled = true;
    notes.push_back("throttled before the job: " + why);
  } else if (result->state_after && IsThrottled(*result->state_after, &why)) {
    result->throttled = true;
    notes.push_back("throttled after the job: " + why);
  }
  result->state_note.clear();
  for (const auto& note : notes) {
    result->state_note += (result->state_note.empty() ? "" : "; ") + note;
  }
}

}  // namespace dfarm::agent
