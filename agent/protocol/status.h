// The two status lists of a job (docs/CONTRACTS.md), each with its names in
// one place so runner, agent, harness, store and dashboard cannot drift:
//   RunnerStatus  how dfarm-runner ended: its exit code and its JSON "status";
//   JobStatus     the class the agent gives a finished job (what the store keeps).
// Header-only: the runner, the daemon and the host include it without linking
// the wire code.
#pragma once

#include <optional>
#include <string_view>

namespace dfarm {

// X(enumerator, JSON/store name, one-line meaning)
#define DFARM_JOB_STATUSES(X)                                                             \
  X(kOk, "ok", "the runner reported success with metrics")                                \
  X(kModelError, "model_error", "the model could not be loaded or prepared")              \
  X(kDelegateError, "delegate_error", "the delegate failed to create or run")             \
  X(kUnsupported, "unsupported", "the model uses an op or type not supported")            \
  X(kCrashed, "crashed", "the runner died, or reported nothing usable")                   \
  X(kTimeout, "timeout", "the runner ran past the job's timeout")                         \
  X(kInfra, "infra", "the device, agent or transport failed (retried)")                   \
  X(kCancelled, "cancelled", "its run was cancelled (dfarm cancel) before the job ended") \
  X(kNotRun, "not_run", "no live node of a farm served its device within the timeout")

enum class JobStatus {
#define DFARM_JOB_STATUS_ENUM(e, name, meaning) e,
  DFARM_JOB_STATUSES(DFARM_JOB_STATUS_ENUM)
#undef DFARM_JOB_STATUS_ENUM
};

constexpr const char* JobStatusName(JobStatus status) {
  switch (status) {
#define DFARM_JOB_STATUS_NAME(e, name, meaning) \
  case JobStatus::e:                            \
    return name;
    DFARM_JOB_STATUSES(DFARM_JOB_STATUS_NAME)
#undef DFARM_JOB_STATUS_NAME
  }
  return "infra";
}

// The status named `name`, or nothing when it names none of the list.
constexpr std::optional<JobStatus> ParseJobStatus(std::string_view name) {
#define DFARM_JOB_STATUS_PARSE(e, n, meaning) \
  if (name == n) return JobStatus::e;
  DFARM_JOB_STATUSES(DFARM_JOB_STATUS_PARSE)
#undef DFARM_JOB_STATUS_PARSE
  return std::nullopt;
}

// X(enumerator, exit code, JSON name, the JobStatus the agent classifies it as)
#define DFARM_RUNNER_STATUSES(X)                         \
  X(kOk, 0, "ok", kOk)                                   \
  X(kModelError, 1, "model_error", kModelError)          \
  X(kUsageError, 2, "usage_error", kInfra)               \
  X(kDelegateError, 3, "delegate_error", kDelegateError) \
  X(kUnsupported, 4, "unsupported", kUnsupported)        \
  X(kInternalError, 5, "internal_error", kCrashed)

namespace runner {

enum class RunnerStatus {
#define DFARM_RUNNER_STATUS_ENUM(e, code, name, job) e = code,
  DFARM_RUNNER_STATUSES(DFARM_RUNNER_STATUS_ENUM)
#undef DFARM_RUNNER_STATUS_ENUM
};

constexpr int ExitCode(RunnerStatus status) { return static_cast<int>(status); }

constexpr const char* RunnerStatusName(RunnerStatus status) {
  switch (status) {
#define DFARM_RUNNER_STATUS_NAME(e, code, name, job) \
  case RunnerStatus::e:                              \
    return name;
    DFARM_RUNNER_STATUSES(DFARM_RUNNER_STATUS_NAME)
#undef DFARM_RUNNER_STATUS_NAME
  }
  return "internal_error";
}

// The runner status whose exit code is `code`; nothing for any other code.
constexpr std::optional<RunnerStatus> RunnerStatusFromExitCode(int code) {
#define DFARM_RUNNER_STATUS_CODE(e, c, name, job) \
  if (code == c) return RunnerStatus::e;
  DFARM_RUNNER_STATUSES(DFARM_RUNNER_STATUS_CODE)
#undef DFARM_RUNNER_STATUS_CODE
  return std::nullopt;
}

// The job class of a runner that exited with `status`.
constexpr JobStatus JobStatusOf(RunnerStatus status) {
  switch (status) {
#define DFARM_RUNNER_STATUS_JOB(e, code, name, job) \
  case RunnerStatus::e:                             \
    return JobStatus::job;
    DFARM_RUNNER_STATUSES(DFARM_RUNNER_STATUS_JOB)
#undef DFARM_RUNNER_STATUS_JOB
  }
  return JobStatus::kCrashed;
}

}  // namespace runner
}  // namespace dfarm
