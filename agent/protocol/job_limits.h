// The limits an agent puts on a job (JobSpec, types.h): the one list of them.
// The agent refuses a job outside them (agent/daemon/supervisor.cc CheckSpec,
// as infra: the host sent it); the host's sweep spec parser
// (harness/spec/spec.cc) refuses the same at its edge, naming the spec's field,
// so that no such job reaches a device, is retried and quarantines it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dfarm::agent {

// JobSpec::delegate: 1 to kMaxDelegateNameChars characters of [A-Za-z0-9_.-].
inline constexpr size_t kMaxDelegateNameChars = 64;
// JobSpec::delegate_options: at most this many bytes, none a control
// character (below 0x20).
inline constexpr size_t kMaxDelegateOptionsBytes = 4096;
// JobSpec::num_threads in 1..kMaxNumThreads, num_runs in 1..kMaxNumRuns,
// warmup_runs in 0..kMaxWarmupRuns.
inline constexpr uint32_t kMaxNumThreads = 1024;
inline constexpr uint32_t kMaxNumRuns = 10'000'000;
inline constexpr uint32_t kMaxWarmupRuns = 10'000'000;
// JobSpec::timeout_ms in 1..the agent's maximum; this one unless the agent
// was started with another (SupervisorOptions::max_timeout_ms).
inline constexpr uint32_t kDefaultMaxTimeoutMs = 24u * 3600 * 1000;
// JobSpec::sustained_ms: 0 (off) or 1..kMaxSustainedMs, and below timeout_ms.
inline constexpr uint32_t kMaxSustainedMs = 12u * 3600 * 1000;

constexpr bool IsDelegateNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Whether `name` is a delegate name a job may carry.
constexpr bool IsValidDelegateName(std::string_view name) {
  if (name.empty() || name.size() > kMaxDelegateNameChars) return false;
  for (char c : name) {
    if (!IsDelegateNameChar(c)) return false;
  }
  return true;
}

// The index of the first control character (a byte below 0x20) in `s`, or
// std::string_view::npos when it has none.
constexpr size_t FindControlByte(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) < 0x20) return i;
  }
  return std::string_view::npos;
}

}  // namespace dfarm::agent
