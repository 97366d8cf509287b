// The outcome classes of dfarm-runner, with their exit codes and JSON names
// (docs/CONTRACTS.md). One list, so codes and names cannot drift.
#pragma once

namespace dfarm::runner {

#define DFARM_RUNNER_STATUSES(X)         \
  X(kOk, 0, "ok")                        \
  X(kModelError, 1, "model_error")       \
  X(kUsageError, 2, "usage_error")       \
  X(kDelegateError, 3, "delegate_error") \
  X(kUnsupported, 4, "unsupported")      \
  X(kInternalError, 5, "internal_error")

enum class RunnerStatus {
#define DFARM_RUNNER_STATUS_ENUM(e, code, name) e = code,
  DFARM_RUNNER_STATUSES(DFARM_RUNNER_STATUS_ENUM)
#undef DFARM_RUNNER_STATUS_ENUM
};

constexpr int ExitCode(RunnerStatus status) { return static_cast<int>(status); }

constexpr const char* RunnerStatusName(RunnerStatus status) {
  switch (status) {
#define DFARM_RUNNER_STATUS_NAME(e, code, name) \
  case RunnerStatus::e:                         \
    return name;
    DFARM_RUNNER_STATUSES(DFARM_RUNNER_STATUS_NAME)
#undef DFARM_RUNNER_STATUS_NAME
  }
  return "internal_error";
}

}  // namespace dfarm::runner
