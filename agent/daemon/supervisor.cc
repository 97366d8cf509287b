#include "agent/daemon/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "agent/base/json_input.h"
#include "agent/base/sha256.h"
#include "agent/base/unique_fd.h"
#include "agent/daemon/descendants.h"
#include "agent/daemon/tool_args.h"
#include "agent/protocol/bundle.h"
#include "agent/protocol/input_set.h"
#include "agent/protocol/job_limits.h"
#include "agent/protocol/runner_kinds.h"
#include "agent/protocol/status.h"
#include "agent/runner/runner_json.h"
#include "delegates/delegate_options.h"
#include "nlohmann/json.hpp"

namespace dfarm::agent {
namespace {

using Clock = std::chrono::steady_clock;

std::string OneLine(std::string s, size_t max = 400) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  size_t begin = text.find_last_of('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return OneLine(text.substr(begin, end + 1 - begin));
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The runner's delegate option that names a plugin library (docs/CONTRACTS.md).
constexpr std::string_view kPluginPathKey = "path";

// An "ok" stands only on a runner document that reads (the runner-JSON
// codec, as the harness reads it) and has metrics (docs/CONTRACTS.md); else
// the runner failed in a way it did not report, and the job is `crashed`.
// The messages are the ones the harness gave when it made this check.
void RefuseUnmeasuredOk(const std::string& stdout_text, JobResult* result) {
  if (result->status != JobStatusName(JobStatus::kOk)) return;
  auto doc = runner_json::ParseRunnerJson(stdout_text);
  if (doc && doc->metrics) return;
  result->status = JobStatusName(JobStatus::kCrashed);
  result->error = doc ? "runner reported ok without metrics"
                      : "runner reported ok but its JSON is unreadable: " + doc.message();
}

JobResult Infra(std::string error) {
  JobResult r;
  r.status = JobStatusName(JobStatus::kInfra);
  r.error = OneLine(std::move(error));
  return r;
}

// The executable a runner prefix's first word names: itself when it holds a
// '/', else the first executable match in PATH.
Result<std::string> FindInPath(const std::string& word) {
  if (word.find('/') != std::string::npos) {
    if (::access(word.c_str(), X_OK) == 0) return word;
    return MakeError("runner prefix: '" + word + "' is not an executable file");
  }
  const char* env = ::getenv("PATH");
  std::string path = env ? env : "/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + word;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return MakeError("runner prefix: '" + word + "' was not found in PATH");
}

// 1500 -> "1.5": milliseconds as the runner's seconds flags take them.
std::string FormatSeconds(uint32_t ms) {
  std::string text = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03u", ms % 1000);
    text += frac;
  }
  return text;
}

// RunJob.sustained_ms: a runner that speaks our contract, and time left
// before the timeout.
Result<void> CheckSustained(const JobSpec& job) {
  if (job.sustained_ms == 0) return Ok();
  if (!SpeaksRunnerContract(job.runner_kind)) {
    return MakeError("invalid job: runners of kind '" + OneLine(job.runner_kind, 80) +
                     "' have no sustained mode (RunJob.sustained_ms is for kinds 'dfarm' and "
                     "'tflite')");
  }
  if (job.sustained_ms > kMaxSustainedMs || job.sustained_ms >= job.timeout_ms) {
    return MakeError("invalid job: sustained_ms " + std::to_string(job.sustained_ms) +
                     " must be below timeout_ms " + std::to_string(job.timeout_ms) +
                     " and at most " + std::to_string(kMaxSustainedMs));
  }
  return Ok();
}

// RunJob.partner_runner_sha256: a sha256, for a runner of kind dfarm without
// sustained mode.
Result<void> CheckPartner(const JobSpec& job) {
  if (job.partner_runner_sha256.empty()) return Ok();
  if (!IsValidSha256(job.partner_runner_sha256)) {
    return MakeError("invalid job: partner_runner_sha256 '" +
                     OneLine(job.partner_runner_sha256, 80) +
                     "' is not a sha256 (64 lowercase hex digits)");
  }
  if (!job.runner_kind.empty() && job.runner_kind != kRunnerKindDfarm) {
    return MakeError("invalid job: runners of kind '" + OneLine(job.runner_kind, 80) +
                     "' cannot step a partner (partner_runner_sha256 is for kind 'dfarm' only)");
  }
  if (job.sustained_ms > 0) {
    return MakeError("invalid job: a stepped pair (partner_runner_sha256) has no sustained mode");
  }
  return Ok();
}

// A bad spec is the host's fault; reported as infra with the field named.
// The limits are agent/protocol/job_limits.h, which the host's spec parser
// checks too.
Result<void> CheckSpec(const JobSpec& job, uint32_t max_timeout_ms) {
  if (!job.runner_kind.empty() && !IsRunnerKind(job.runner_kind)) {
    std::string known;
    for (std::string_view k : kRunnerKinds) known += (known.empty() ? "" : ", ") + std::string(k);
    return MakeError("agent does not know runner kind '" + OneLine(job.runner_kind, 80) +
                     "' (known: " + known + ")");
  }
  const auto starts = [&job](const char* kind) { return job.task_outputs.rfind(kind, 0) == 0; };
  if (!job.task_outputs.empty() &&
      (!SpeaksRunnerContract(job.runner_kind) || job.task_outputs.size() > 64 ||
       !(starts("topk:") || starts("boxes:") || starts("anchors:") || starts("classmap:")))) {
    return MakeError("invalid job: task_outputs '" + OneLine(job.task_outputs, 80) +
                     "' must be topk:K[:OUTPUT], boxes:B,C,S,N[:MAX], anchors:B,S:... or "
                     "classmap:OUTPUT[:...] for a runner of kind 'dfarm' or 'tflite'");
  }
  if (job.profile && !RunnerKindProfiles(job.runner_kind)) {
    return MakeError("invalid job: runners of kind '" + OneLine(job.runner_kind, 80) +
                     "' cannot profile (RunJob.profile is for kind 'dfarm' only)");
  }
  if (!IsValidDelegateName(job.delegate)) {
    return MakeError("invalid job: delegate name '" + OneLine(job.delegate, 80) +
                     "' must be 1-64 characters of [A-Za-z0-9_.-]");
  }
  if (job.delegate_options.size() > kMaxDelegateOptionsBytes)
    return MakeError("invalid job: delegate_options over 4096 bytes");
  if (FindControlByte(job.delegate_options) != std::string_view::npos) {
    return MakeError("invalid job: delegate_options contain a control character");
  }
  // No path ever comes from the wire: a plugin is named by plugin_sha256 and
  // the agent adds its own store path (split as the runner splits options).
  for (const std::string& key : delegates::DelegateOptionKeys(job.delegate_options)) {
    if (key == kPluginPathKey) {
      return MakeError(
          job.plugin_sha256.empty()
              ? "invalid job: delegate_options name a 'path'; a delegate plugin is sent as an "
                "artifact (plugin_sha256), never as a device path"
              : "invalid job: delegate_options name a 'path' beside plugin_sha256; the agent "
                "passes the plugin's path itself");
    }
  }
  if (auto r = CheckPartner(job); !r) return r;
  if (job.input_set_sha256s.size() > kMaxInputSetsPerJob) {
    return MakeError("invalid job: " + std::to_string(job.input_set_sha256s.size()) +
                     " input sets (at most " + std::to_string(kMaxInputSetsPerJob) + ")");
  }
  for (const std::string& sha : job.input_set_sha256s) {
    if (!IsValidSha256(sha)) {
      return MakeError("invalid job: input set '" + OneLine(sha, 80) +
                       "' is not a sha256 (64 lowercase hex digits)");
    }
  }
  if (!job.accuracy_reference.empty() && job.accuracy_reference != "cpu" &&
      job.accuracy_reference != "layers") {
    return MakeError("invalid job: accuracy_reference '" + OneLine(job.accuracy_reference, 40) +
                     "' (the runner compares with 'cpu' or 'layers' only)");
  }
  if (job.num_threads == 0 || job.num_threads > kMaxNumThreads) {
    return MakeError("invalid job: num_threads " + std::to_string(job.num_threads) +
                     " is not in 1..1024");
  }
  if (job.num_runs == 0 || job.num_runs > kMaxNumRuns) {
    return MakeError("invalid job: num_runs " + std::to_string(job.num_runs) +
                     " is not in 1..10000000");
  }
  if (job.warmup_runs > kMaxWarmupRuns) {
    return MakeError("invalid job: warmup_runs " + std::to_string(job.warmup_runs) +
                     " is over 10000000");
  }
  if (job.timeout_ms == 0 || job.timeout_ms > max_timeout_ms) {
    return MakeError("invalid job: timeout_ms " + std::to_string(job.timeout_ms) +
                     " is not in 1.." + std::to_string(max_timeout_ms));
  }
  return CheckSustained(job);
}

// The line of a tool's log that says why it failed: the last one that starts
// with "ERROR:" or holds "Failed"; "" when none does.
std::string ToolErrorLine(const std::string& log) {
  size_t end = log.size();
  while (end > 0) {
    size_t begin = log.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    std::string line = OneLine(log.substr(begin, end - begin));
    if (line.rfind("ERROR:", 0) == 0 || line.find("Failed") != std::string::npos) return line;
    end = begin == 0 ? 0 : begin - 1;
  }
  return "";
}

// The agent's environment with lib_dir put first in LD_LIBRARY_PATH.
std::vector<std::string> EnvWithLibraryPath(const std::string& lib_dir) {
  constexpr std::string_view kKey = "LD_LIBRARY_PATH=";
  std::string value = lib_dir;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry = *e;
    if (entry.substr(0, kKey.size()) == kKey) {
      if (entry.size() > kKey.size()) value += ":" + std::string(entry.substr(kKey.size()));
    } else {
      env.emplace_back(entry);
    }
  }
  env.push_back(std::string(kKey) + value);
  return env;
}

// env (or, when unset, the agent's environment) with DFARM_JOB_MARK=mark in
// place of any mark it had: every process of the job inherits it unless it
// clears its environment, so an agent started after this one died finds them
// (RunnerRecords).
std::vector<std::string> EnvWithJobMark(const std::optional<std::vector<std::string>>& env,
                                        const std::string& mark) {
  std::vector<std::string> out;
  auto keep = [&](std::string_view entry) {
    if (entry.substr(0, kJobMarkVariable.size() + 1) != std::string(kJobMarkVariable) + "=") {
      out.emplace_back(entry);
    }
  };
  if (env) {
    for (const std::string& e : *env) keep(e);
  } else {
    for (char** e = environ; *e != nullptr; ++e) keep(*e);
  }
  out.push_back(std::string(kJobMarkVariable) + "=" + mark);
  return out;
}

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what is available from *fd into sink; closes *fd at EOF or error.
void Pump(UniqueFd* fd, const std::function<void(const char*, size_t)>& sink) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n > 0) {
      sink(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    fd->reset();
    return;
  }
}

// This agent's part of its job marks: its pid and the time it started, so no
// two agents (also on other stores, or across reboots) mark jobs alike.
std::string JobMarkPrefix() {
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return std::to_string(::getpid()) + "." + std::to_string(now.tv_sec) + "." +
         std::to_string(now.tv_nsec);
}

}  // namespace

Supervisor::Supervisor(ArtifactStore* store, SupervisorOptions options)
    : store_(store),
      options_(options),
      runner_records_(store->root() + "/run"),
      job_mark_prefix_(JobMarkPrefix()),
      bundles_(store->root()) {}

std::vector<std::string> Supervisor::PruneBundles() {
  std::lock_guard<std::timed_mutex> lock(job_mutex_);
  return bundles_.Prune([this](const std::string& sha) { return store_->Has(sha); });
}

Result<std::vector<std::string>> Supervisor::ReapLeftoverRunners() {
  return runner_records_.ReapLeftovers();
}

std::vector<std::string> Supervisor::RunnerArgs(const JobSpec& job, const std::string& model_path,
                                                const std::string& plugin_path,
                                                const std::vector<std::string>& input_dirs) {
  std::vector<std::string> args = {"--model", model_path, "--delegate", job.delegate};
  std::string options = job.delegate_options;
  if (!plugin_path.empty()) {
    if (!options.empty() && options.back() != ';') options += ';';
    options += delegates::FormatDelegateOptions({{std::string(kPluginPathKey), plugin_path}});
  }
  if (!options.empty()) {
    args.push_back("--delegate-options");
    args.push_back(std::move(options));
  }
  for (const auto& [flag, value] :
       {std::pair{"--num-threads", job.num_threads}, std::pair{"--warmup-runs", job.warmup_runs},
        std::pair{"--num-runs", job.num_runs}}) {
    args.push_back(flag);
    args.push_back(std::to_string(value));
  }
  if (!job.accuracy_reference.empty()) {
    args.push_back("--accuracy-reference");
    args.push_back(job.accuracy_reference);
  }
  for (const std::string& dir : input_dirs) {
    args.push_back("--inputs");
    args.push_back(dir);
  }
  if (job.profile) args.push_back("--profile");
  if (!job.task_outputs.empty()) {
    args.push_back("--task-outputs");
    args.push_back(job.task_outputs);
  }
  if (job.sustained_ms > 0) {
    args.push_back("--sustained-secs");
    args.push_back(FormatSeconds(job.sustained_ms));
  }
  args.push_back("--json");
  return args;
}

void Supervisor::Classify(int exit_code, int signal, const std::string& stdout_text,
                          const std::string& stderr_tail, JobResult* result) {
  using runner::RunnerStatus;
  result->exit_code = exit_code;
  result->signal = signal;
  std::string json_status, json_error;
  // A document nested past the limit is as unreadable as no document.
  nlohmann::json doc;
  if (CheckJsonNesting(stdout_text, "runner JSON")) {
    doc = nlohmann::json::parse(stdout_text, nullptr, /*allow_exceptions=*/false);
  }
  if (doc.is_object()) {
    if (auto it = doc.find("status"); it != doc.end() && it->is_string()) json_status = *it;
    if (auto it = doc.find("error"); it != doc.end() && it->is_string()) json_error = *it;
  }
  std::string detail = !json_error.empty() ? OneLine(json_error) : LastLine(stderr_tail);
  auto with_detail = [&](std::string what) { return detail.empty() ? what : what + ": " + detail; };
  const std::string code = std::to_string(exit_code);
  if (signal > 0) {
    result->status = JobStatusName(JobStatus::kCrashed);
    result->error = with_detail("runner killed by signal " + std::to_string(signal) + " (" +
                                SignalName(signal) + ")");
    return;
  }
  std::optional<RunnerStatus> runner_status = runner::RunnerStatusFromExitCode(exit_code);
  if (!runner_status) {
    result->status = JobStatusName(JobStatus::kCrashed);
    result->error = with_detail("runner exited with unexpected code " + code);
    return;
  }
  result->status = JobStatusName(runner::JobStatusOf(*runner_status));
  switch (*runner_status) {
    case RunnerStatus::kOk:
      if (json_status == runner::RunnerStatusName(RunnerStatus::kOk)) {
        result->error.clear();
      } else {
        result->status = JobStatusName(JobStatus::kCrashed);
        result->error = "runner exited 0 without reporting success";
      }
      return;
    case RunnerStatus::kUsageError:
      result->error = with_detail("runner rejected its command line (exit code " + code + ")");
      return;
    case RunnerStatus::kInternalError:
      result->error = with_detail("runner internal error (exit code " + code + ")");
      return;
    case RunnerStatus::kModelError:
    case RunnerStatus::kDelegateError:
    case RunnerStatus::kUnsupported:
      result->error =
          json_error.empty() ? with_detail("runner exited with code " + code) : OneLine(json_error);
      return;
  }
}

void Supervisor::ClassifyTool(int exit_code, int signal, const std::string& log,
                              JobResult* result) {
  result->exit_code = exit_code;
  result->signal = signal;
  if (signal > 0) {
    result->status = JobStatusName(JobStatus::kCrashed);
    std::string last = LastLine(log);
    result->error = "tool killed by signal " + std::to_string(signal) + " (" + SignalName(signal) +
                    ")" + (last.empty() ? "" : ": " + last);
    return;
  }
  if (exit_code == 0) {
    result->status = JobStatusName(JobStatus::kOk);
    result->error.clear();
    return;
  }
  result->status = JobStatusName(JobStatus::kCrashed);
  result->error = ToolErrorLine(log);
  if (result->error.empty()) result->error = "tool exited with code " + std::to_string(exit_code);
}

void Supervisor::Shutdown() {
  std::lock_guard<std::mutex> lock(pid_mutex_);
  shut_down_ = true;
  if (running_pgid_ > 0) {
    ::kill(running_pgid_, SIGKILL);  // setsid() may not have run yet
    ::kill(-running_pgid_, SIGKILL);
  }
}

JobResult Supervisor::Run(const JobSpec& job) { return Run(job, nullptr); }

std::vector<std::string> Supervisor::RunnerArgv(const std::vector<std::string>& prefix,
                                                const std::string& runner_path,
                                                std::vector<std::string> args) {
  std::vector<std::string> argv;
  if (prefix.empty()) {
    argv.push_back("dfarm-runner");
  } else {
    argv = prefix;
    argv.push_back(runner_path);
  }
  argv.insert(argv.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  return argv;
}

JobResult Supervisor::Run(const JobSpec& job, const std::atomic<bool>* cancel) {
  // Pinned while queued and running, so a quota eviction cannot take them.
  ArtifactPin runner_pin(store_, job.runner_sha256), model_pin(store_, job.model_sha256);
  std::optional<ArtifactPin> plugin_pin, partner_pin;
  if (!job.plugin_sha256.empty()) plugin_pin.emplace(store_, job.plugin_sha256);
  if (!job.partner_runner_sha256.empty()) partner_pin.emplace(store_, job.partner_runner_sha256);
  std::vector<std::unique_ptr<ArtifactPin>> input_pins;
  for (const std::string& sha : job.input_set_sha256s) {
    input_pins.push_back(std::make_unique<ArtifactPin>(store_, sha));
  }
  std::unique_lock<std::timed_mutex> lock(job_mutex_, std::defer_lock);
  if (cancel == nullptr) {
    lock.lock();
  } else {
    while (!lock.try_lock_for(std::chrono::milliseconds(50))) {
      if (cancel->load()) return Infra("job cancelled before it started");
    }
  }
  return RunLocked(job, cancel);
}

// The runner's command line and the file to execute, built before fork.
struct Supervisor::Launch {
  std::vector<std::string> args;  // argv, without the terminating null
  std::string exec_path;
  std::optional<std::vector<std::string>> env;  // the runner's environment; unset: the agent's
  bool merge_stderr = false;                    // stderr into the stdout pipe (tools)
  std::vector<int> cpus;                        // pin the runner to these CPUs; empty: don't
};

// The pipes of a runner child: its stdout, its stderr, and the exec-status
// pipe on which the child reports a failed execv (errno); plus /dev/null for
// its stdin. The parent closes the write ends once the child runs.
struct Supervisor::ChildPipes {
  UniqueFd out_r, out_w, err_r, err_w, exec_r, exec_w, dev_null;

  static Result<ChildPipes> Open() {
    ChildPipes p;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + strerror(errno));
    p.out_r.reset(fds[0]), p.out_w.reset(fds[1]);
    if (::pipe2(fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + strerror(errno));
    p.err_r.reset(fds[0]), p.err_w.reset(fds[1]);
    if (::pipe2(fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + strerror(errno));
    p.exec_r.reset(fds[0]), p.exec_w.reset(fds[1]);
    p.dev_null.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    return p;
  }
};

namespace {

// The child between fork and exec: only async-signal-safe calls. agent is
// the pid of the agent that forked it.
// envp null: the agent's environment.
[[noreturn]] void ExecRunner(pid_t agent, const char* path, char* const* argv, char* const* envp,
                             int dev_null, int out_w, int err_w, int exec_w, const cpu_set_t* cpus,
                             const char* work_dir, int go_r, int go_w) {
  // Nothing runs before the agent has recorded this runner (RunnerRecords): it
  // sends one byte once the record is written; EOF means it died first.
  ::close(go_w);
  char go = 0;
  ssize_t got;
  do {
    got = ::read(go_r, &go, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) ::_exit(127);
  ::setsid();  // own process group: a timeout kills the runner and its children
  if ((cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0) ||
      ::chdir(work_dir) != 0) {
    int err = errno;
    ssize_t ignored = ::write(exec_w, &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  // Dies with the agent's thread that started it (it waits for the runner),
  // also under a --runner-prefix (qemu-user runs the runner in its own
  // process, and the setting survives exec). An agent that died before the
  // setting took effect is seen here as a changed parent.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent) ::_exit(127);
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  if (dev_null >= 0) ::dup2(dev_null, 0);
  ::dup2(out_w, 1);
  ::dup2(err_w, 2);
  ::syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
  if (envp != nullptr) {
    ::execve(path, argv, envp);
  } else {
    ::execv(path, argv);
  }
  int err = errno;
  ssize_t ignored = ::write(exec_w, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// Blocks until exec succeeded (EOF through CLOEXEC, returns 0) or the child
// reports why not (returns its errno).
int WaitForExec(int exec_r) {
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(exec_r, &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(sizeof exec_errno) ? exec_errno : 0;
}

// What a runner writes: stdout up to max_stdout bytes (more is dropped and
// noted), the last stderr_tail bytes of stderr.
struct RunnerOutput {
  size_t max_stdout = 0;
  size_t stderr_tail = 0;
  std::string out, err;
  bool out_truncated = false;

  // Read what the fd holds now; each closes *fd at its EOF.
  void ReadStdout(UniqueFd* fd) {
    Pump(fd, [this](const char* data, size_t n) {
      size_t room = max_stdout - out.size();
      if (n > room) out_truncated = true;
      out.append(data, std::min(n, room));
    });
  }
  void ReadStderr(UniqueFd* fd) {
    Pump(fd, [this](const char* data, size_t n) {
      err.append(data, n);
      if (err.size() > 2 * stderr_tail) err.erase(0, err.size() - stderr_tail);
    });
  }
  // The runner has ended: reads what is left, then keeps the stderr tail only.
  void Finish(UniqueFd* out_r, UniqueFd* err_r) {
    if (*out_r) ReadStdout(out_r);
    if (*err_r) ReadStderr(err_r);
    if (err.size() > stderr_tail) err.erase(0, err.size() - stderr_tail);
  }
};

enum class WaitEnd { kExited, kTimedOut, kCancelled };

// Collects the runner's output until it exits (observed without reaping, so
// its process group id cannot be reused before the stragglers it left there
// are killed), the deadline passes or *cancel becomes true (cancel may be null).
// Calls `sample` every `interval` while the runner runs (interval 0: never),
// until `sample` returns false (it is full).
struct Sampler {
  std::chrono::milliseconds interval{0};
  std::function<bool()> sample;
  Clock::time_point next = Clock::time_point::max();

  void Start() {
    if (interval.count() > 0 && sample) next = Clock::now() + interval;
  }
  // Milliseconds until the next sample (a poll's wait is cut to it).
  int64_t DueInMs() const {
    if (next == Clock::time_point::max()) return std::numeric_limits<int32_t>::max();
    return std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count());
  }
  void Tick() {
    if (next == Clock::time_point::max() || Clock::now() < next) return;
    next = sample() ? Clock::now() + interval : Clock::time_point::max();
  }
};

WaitEnd WaitForRunner(pid_t pid, Clock::time_point deadline, const std::atomic<bool>* cancel,
                      UniqueFd* out_r, UniqueFd* err_r, RunnerOutput* output, Sampler* sampler) {
  sampler->Start();
  SetNonBlocking(out_r->get());
  SetNonBlocking(err_r->get());
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  for (;;) {
    pollfd fds[3];
    nfds_t n = 0;
    int out_i = -1, err_i = -1;
    if (*out_r) out_i = n, fds[n++] = {out_r->get(), POLLIN, 0};
    if (*err_r) err_i = n, fds[n++] = {err_r->get(), POLLIN, 0};
    if (pidfd) fds[n++] = {pidfd.get(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    int wait_ms = static_cast<int>(std::max<int64_t>(0, left.count() + 1));
    if (!pidfd) wait_ms = std::min(wait_ms, 10);  // no pidfd: poll for the exit
    if (cancel) wait_ms = std::min(wait_ms, 50);
    wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, sampler->DueInMs() + 1));
    if (::poll(fds, n, wait_ms) > 0) {
      if (out_i >= 0 && fds[out_i].revents) output->ReadStdout(out_r);
      if (err_i >= 0 && fds[err_i].revents) output->ReadStderr(err_r);
    }
    siginfo_t info{};
    if (::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      return WaitEnd::kExited;
    }
    if (Clock::now() >= deadline) return WaitEnd::kTimedOut;
    if (cancel && cancel->load()) return WaitEnd::kCancelled;
    sampler->Tick();
  }
}

}  // namespace

std::string Supervisor::InputsFolder() const { return store_->root() + "/inputs"; }

std::string Supervisor::WorkFolder() const { return store_->root() + "/work"; }

Result<std::vector<std::string>> Supervisor::UnpackInputSets(const JobSpec& job) const {
  std::vector<std::string> dirs;
  if (job.input_set_sha256s.empty()) return dirs;
  std::error_code ec;
  std::filesystem::remove_all(InputsFolder(), ec);  // a previous job's, left by a crash
  if (::mkdir(InputsFolder().c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create '" + InputsFolder() + "': " + strerror(errno));
  }
  for (size_t k = 0; k < job.input_set_sha256s.size(); ++k) {
    const std::string& sha = job.input_set_sha256s[k];
    auto packed = store_->PathOf(sha);
    if (!packed) return MakeError("input set " + std::to_string(k) + ": " + packed.message());
    std::string dir = InputsFolder() + "/set_" + std::to_string(k);
    if (auto r = UnpackInputSetFile(*packed, dir); !r) {
      return MakeError("input set " + std::to_string(k) + " (" + sha.substr(0, 12) +
                       "): " + r.message());
    }
    dirs.push_back(std::move(dir));
  }
  return dirs;
}

Result<std::vector<std::string>> Supervisor::ProgramArgs(const JobSpec& job,
                                                         const std::string& model_path,
                                                         const std::string& plugin_path) const {
  if (!SpeaksRunnerContract(job.runner_kind)) {
    auto args = ToolArgs(job, model_path, plugin_path);
    if (!args)
      return MakeError("invalid job: runner kind '" + job.runner_kind + "': " + args.message());
    return args;
  }
  auto input_dirs = UnpackInputSets(job);
  if (!input_dirs) return input_dirs.error();
  return RunnerArgs(job, model_path, plugin_path, *input_dirs);
}

Result<Supervisor::Launch> Supervisor::BundleLaunch(const JobSpec& job,
                                                    const std::string& runner_path,
                                                    std::vector<std::string> args) {
  auto bundle = bundles_.Unpack(job.runner_sha256, runner_path);
  if (!bundle) {
    return MakeError("runner bundle " + job.runner_sha256.substr(0, 12) + ": " + bundle.message());
  }
  const std::string& dir = bundle->dir;
  const BundleLayout& layout = bundle->layout;
  const std::string lib_dir = layout.library_dir.empty() ? "" : dir + "/" + layout.library_dir;
  Launch launch;
  launch.args = options_.bundle_prefix.empty() ? options_.runner_prefix : options_.bundle_prefix;
  const bool prefixed = !launch.args.empty();
  if (!layout.loader.empty()) {
    launch.args.push_back(dir + "/" + layout.loader);
    if (!lib_dir.empty()) launch.args.insert(launch.args.end(), {"--library-path", lib_dir});
  } else if (!lib_dir.empty()) {
    launch.env = EnvWithLibraryPath(lib_dir);
  }
  launch.args.push_back(dir + "/" + layout.exec);
  launch.args.insert(launch.args.end(), std::make_move_iterator(args.begin()),
                     std::make_move_iterator(args.end()));
  launch.exec_path = launch.args[0];
  if (prefixed) {
    auto found = FindInPath(launch.args[0]);
    if (!found) return found.error();
    launch.exec_path = *found;
  }
  return launch;
}

Result<Supervisor::Launch> Supervisor::PlainLaunch(const JobSpec& job,
                                                   const std::string& runner_path,
                                                   std::vector<std::string> args) const {
  if (auto r = store_->MakeExecutable(job.runner_sha256); !r) return r.error();
  Launch launch;
  launch.args = RunnerArgv(options_.runner_prefix, runner_path, std::move(args));
  launch.exec_path = runner_path;
  if (!options_.runner_prefix.empty()) {
    auto found = FindInPath(options_.runner_prefix[0]);
    if (!found) return found.error();
    launch.exec_path = *found;
  } else if (!SpeaksRunnerContract(job.runner_kind)) {
    launch.args[0] = job.runner_kind;  // not "dfarm-runner"
  }
  return launch;
}

// A stepped pair's flags: --partner-runner <store path> --partner-seed N.
// Both builds plain executables (the driver execs its partner itself, so
// neither a bundle's loader nor --runner-prefix can come between).
Result<std::vector<std::string>> Supervisor::PartnerArgs(const JobSpec& job,
                                                         const std::string& runner_path) const {
  if (!options_.runner_prefix.empty()) {
    return MakeError(
        "invalid job: this agent starts runners through --runner-prefix, which a "
        "partner runner (partner_runner_sha256) cannot use");
  }
  auto partner = store_->PathOf(job.partner_runner_sha256);
  if (!partner) return MakeError("partner runner: " + partner.message());
  if (IsBundleFile(runner_path) || IsBundleFile(*partner)) {
    return MakeError(
        "invalid job: a stepped pair's runners must be plain executables, not "
        "bundles (runner " +
        job.runner_sha256.substr(0, 12) + ", partner " + job.partner_runner_sha256.substr(0, 12) +
        ")");
  }
  if (auto r = store_->MakeExecutable(job.partner_runner_sha256); !r) return r.error();
  return std::vector<std::string>{"--partner-runner", *partner, "--partner-seed",
                                  std::to_string(job.partner_seed)};
}

Result<Supervisor::Launch> Supervisor::PrepareLaunch(const JobSpec& job) {
  auto runner = store_->PathOf(job.runner_sha256);
  if (!runner) return MakeError("runner: " + runner.message());
  auto model = store_->PathOf(job.model_sha256);
  if (!model) return MakeError("model: " + model.message());
  std::string plugin_path;
  if (!job.plugin_sha256.empty()) {
    auto plugin = store_->PathOf(job.plugin_sha256);
    if (!plugin) return MakeError("plugin: " + plugin.message());
    if (!delegates::IsWritableOption(kPluginPathKey, *plugin)) {
      return MakeError("plugin: the store path '" + *plugin +
                       "' contains ';', which cannot be passed in --delegate-options");
    }
    plugin_path = *plugin;
  }
  auto args = ProgramArgs(job, *model, plugin_path);
  if (!args) return args.error();
  if (!job.partner_runner_sha256.empty()) {
    auto partner = PartnerArgs(job, *runner);
    if (!partner) return partner.error();
    args->insert(args->end(), partner->begin(), partner->end());
  }
  auto launch = IsBundleFile(*runner) ? BundleLaunch(job, *runner, std::move(*args))
                                      : PlainLaunch(job, *runner, std::move(*args));
  if (launch) launch->merge_stderr = !SpeaksRunnerContract(job.runner_kind);
  return launch;
}

Result<int> Supervisor::Spawn(Launch& launch, ChildPipes* pipes) {
  // Everything the child needs is built before fork (only async-signal-safe
  // calls happen between fork and exec).
  std::vector<char*> argv;
  for (auto& a : launch.args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string mark = job_mark_prefix_ + "." + std::to_string(++jobs_started_);
  std::vector<std::string> env = EnvWithJobMark(launch.env, mark);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int err_w = launch.merge_stderr ? pipes->out_w.get() : pipes->err_w.get();
  // A relative program (a --runner-prefix found beside the agent) still
  // names the same file from the job's working directory.
  std::error_code ec;
  const std::string exec_path = launch.exec_path.find('/') != std::string::npos
                                    ? std::filesystem::absolute(launch.exec_path, ec).string()
                                    : launch.exec_path;
  const char* path = exec_path.c_str();
  const std::string work_dir = WorkFolder();
  std::filesystem::remove_all(work_dir, ec);  // the previous job's files
  if (::mkdir(work_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create the job's working directory '" + work_dir +
                     "': " + strerror(errno));
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : launch.cpus) CPU_SET(c, &cpus);
  const pid_t agent = ::getpid();
  int go[2];  // a socket pair, so that the byte to a runner already gone raises no SIGPIPE
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
    return MakeError(std::string("cannot make the runner's start socket: ") + strerror(errno));
  }
  UniqueFd go_r(go[0]), go_w(go[1]);
  pid_t pid = ::fork();
  if (pid < 0) return MakeError(std::string("cannot fork the runner: ") + strerror(errno));
  if (pid == 0) {
    ExecRunner(agent, path, argv.data(), envp.data(), pipes->dev_null.get(), pipes->out_w.get(),
               err_w, pipes->exec_w.get(), launch.cpus.empty() ? nullptr : &cpus, work_dir.c_str(),
               go_r.get(), go_w.get());
  }
  go_r.reset();
  // Best effort: without its record the runner still dies with the agent;
  // only what it starts itself could be left behind. The runner waits for
  // the record (ExecRunner), so an agent killed now leaves nothing unrecorded.
  (void)runner_records_.Add(pid, mark);
  ssize_t sent;
  do {
    sent = ::send(go_w.get(), "g", 1, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  go_w.reset();
  {
    std::lock_guard<std::mutex> lock(pid_mutex_);
    running_pgid_ = pid;
    if (shut_down_) ::kill(pid, SIGKILL);  // setsid() may not have run yet
  }
  pipes->out_w.reset();
  pipes->err_w.reset();
  pipes->exec_w.reset();
  return pid;
}

int Supervisor::KillAndReap(int pid, bool kill_group) {
  if (kill_group) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (options_.kill_descendants) {
    // What left the runner's process group (setsid) and was adopted by us.
    std::vector<pid_t> left = KillDescendants();
    if (!left.empty() && options_.log) {
      std::string pids;
      for (pid_t p : left) pids += (pids.empty() ? "" : ", ") + std::to_string(p);
      options_.log("runner " + std::to_string(pid) + " left " + std::to_string(left.size()) +
                   " process(es) behind outside its process group; killed " + pids);
    }
  }
  runner_records_.Remove(pid);
  std::lock_guard<std::mutex> lock(pid_mutex_);
  running_pgid_ = 0;
  return status;
}

JobResult Supervisor::WithDeviceState(std::optional<DeviceState> before, JobResult result) const {
  if (options_.record_device_state) {
    result.state_before = std::move(before);
    result.state_after = CollectDeviceState(options_.device_state_root);
    FlagDeviceState(options_.hot_threshold_c, &result);
  }
  return result;
}

JobResult Supervisor::RunLocked(const JobSpec& job, const std::atomic<bool>* cancel) {
  for (const std::string& line :
       bundles_.Prune([this](const std::string& sha) { return store_->Has(sha); })) {
    if (options_.log) options_.log(line);
  }
  JobResult result = RunUnpacked(job, cancel);
  if (!job.input_set_sha256s.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(InputsFolder(), ec);
  }
  return result;
}

JobResult Supervisor::RunUnpacked(const JobSpec& job, const std::atomic<bool>* cancel) {
  {
    std::lock_guard<std::mutex> lock(pid_mutex_);
    if (shut_down_) return Infra("the agent is shutting down");
  }
  if (cancel && cancel->load()) return Infra("job cancelled before it started");
  if (auto bad = CheckSpec(job, options_.max_timeout_ms); !bad) return Infra(bad.message());
  auto launch = PrepareLaunch(job);
  if (!launch) return Infra(launch.message());
  auto pipes = ChildPipes::Open();
  if (!pipes) return Infra(pipes.message());

  std::optional<DeviceState> state_before;
  if (options_.record_device_state) {
    state_before = CollectDeviceState(options_.device_state_root, kBusyWindow);
  }
  if (!job.cpu_affinity.empty()) {
    auto cpus = ResolveCpuAffinity(
        job.cpu_affinity,
        state_before ? *state_before : CollectDeviceState(options_.device_state_root));
    if (!cpus) return Infra("invalid job: " + cpus.message());
    launch->cpus = std::move(*cpus);
  }
  auto start = Clock::now();
  auto pid = Spawn(*launch, &*pipes);
  if (!pid) return Infra(pid.message());
  if (int exec_errno = WaitForExec(pipes->exec_r.get()); exec_errno != 0) {
    KillAndReap(*pid, /*kill_group=*/false);
    return WithDeviceState(std::move(state_before),
                           Infra("cannot start runner " + job.runner_sha256.substr(0, 12) + ": " +
                                 strerror(exec_errno)));
  }

  RunnerOutput output;
  output.max_stdout = options_.max_stdout_bytes;
  output.stderr_tail = options_.stderr_tail_bytes;
  std::vector<DeviceState> during;
  Sampler sampler;
  if (options_.record_device_state) {
    // A long (sustained) job: samples spread over all of it.
    sampler.interval = std::chrono::milliseconds(std::max<uint64_t>(
        options_.sample_interval_ms,
        options_.sample_interval_ms == 0
            ? 0
            : (uint64_t{job.sustained_ms} + kMaxStateSamples - 1) / kMaxStateSamples));
    sampler.sample = [this, &during] {
      if (during.size() >= kMaxStateSamples) return false;
      during.push_back(CollectDeviceState(options_.device_state_root));
      return true;
    };
  }
  WaitEnd how = WaitForRunner(*pid, start + std::chrono::milliseconds(job.timeout_ms), cancel,
                              &pipes->out_r, &pipes->err_r, &output, &sampler);
  auto end = Clock::now();
  int status = KillAndReap(*pid, /*kill_group=*/true);
  output.Finish(&pipes->out_r, &pipes->err_r);

  JobResult result;
  result.state_during = std::move(during);
  result.wall_ms = std::chrono::duration<double, std::milli>(end - start).count();
  result.runner_json = output.out;
  result.stderr_tail = output.err;
  if (launch->merge_stderr) {  // a tool's log is all in runner_json; its tail here too
    const size_t tail = std::min(output.out.size(), options_.stderr_tail_bytes);
    result.stderr_tail = output.out.substr(output.out.size() - tail);
  }
  switch (how) {
    case WaitEnd::kCancelled:
      result.status = JobStatusName(JobStatus::kInfra);
      result.error = "job cancelled: the host went away";
      result.exit_code = -1;
      result.signal = SIGKILL;
      break;
    case WaitEnd::kTimedOut:
      result.status = JobStatusName(JobStatus::kTimeout);
      result.error =
          "runner exceeded the timeout of " + std::to_string(job.timeout_ms) + " ms and was killed";
      result.exit_code = -1;
      result.signal = SIGKILL;
      break;
    case WaitEnd::kExited:
      ClassifyExit(status, output.out_truncated, launch->merge_stderr, &result);
      break;
  }
  return WithDeviceState(std::move(state_before), std::move(result));
}

void Supervisor::ClassifyExit(int wait_status, bool stdout_truncated, bool tool,
                              JobResult* result) const {
  const int exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  const int signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  if (tool) {
    ClassifyTool(exit_code, signal, result->runner_json, result);
  } else {
    Classify(exit_code, signal, result->runner_json, result->stderr_tail, result);
  }
  if (stdout_truncated && result->status == JobStatusName(JobStatus::kOk)) {
    result->status = JobStatusName(JobStatus::kCrashed);
    result->error =
        "runner wrote more than " + std::to_string(options_.max_stdout_bytes) + " bytes to stdout";
  }
  if (!tool) RefuseUnmeasuredOk(result->runner_json, result);
}

}  // namespace dfarm::agent
