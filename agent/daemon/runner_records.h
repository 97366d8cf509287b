// RunnerRecords: one small file per running runner in the store's private
// run folder (<store>/run/<pid>), so that an agent started after one that
// died (SIGKILL, a crash) finds and kills what the dead one left behind.
//
// The runner itself dies with its agent (the supervisor gives it a
// parent-death signal), but what the runner started stays alive in the
// runner's session, and a runner can outlive an agent killed in the moment
// before that signal was armed. A record names the runner and the agent by
// pid and start time (/proc/PID/stat), so a pid the kernel has since given
// to another process is never killed, and a record of an agent that still
// runs is left alone (but see StoreLock: the reaper runs only with the store's
// lock held, so every recorded agent is dead). A record is one line:
// "runner PID START_TICKS agent PID START_TICKS [mark MARK]": MARK is the
// value of DFARM_JOB_MARK in the environment of the job's processes, which
// finds those that left the runner's session (setsid) too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::agent {

// A process told apart from a later one with the same pid.
struct ProcessStamp {
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/PID/stat field 22: clock ticks after boot
  bool operator==(const ProcessStamp&) const = default;
};

// The environment variable that marks every process of one job.
inline constexpr std::string_view kJobMarkVariable = "DFARM_JOB_MARK";

// The stamp of process pid now, or nothing when there is none.
std::optional<ProcessStamp> StampOf(pid_t pid);

class RunnerRecords {
 public:
  // Records live in dir (created 0700 when missing). agent: the process that
  // owns the runners recorded here; nothing means this process.
  explicit RunnerRecords(std::string dir, std::optional<ProcessStamp> agent = std::nullopt);

  const std::string& dir() const { return dir_; }

  // Records a runner this agent just started (its stamp is read now) and the
  // job mark its environment holds (may be empty). The error names the file;
  // the runner keeps running either way.
  Result<void> Add(pid_t runner, const std::string& mark = "");
  // Forgets a runner that ended (was reaped).
  void Remove(pid_t runner);

  // For each record of an agent that no longer runs: SIGKILL to its runner
  // when the pid still is that runner, and to every process of the runner's
  // session (it called setsid) started no earlier than the runner and owned
  // by this user, and to every process of this user whose environment holds
  // the record's job mark; then the record is removed. Records of live agents
  // stay. Call it with the store's lock held (StoreLock).
  // Returns one line per record handled, for the log. Fails only when dir
  // cannot be created.
  Result<std::vector<std::string>> ReapLeftovers();

 private:
  std::string PathOf(pid_t runner) const;

  std::string dir_;
  std::optional<ProcessStamp> agent_;  // this process's stamp, when readable
};

}  // namespace dfarm::agent
