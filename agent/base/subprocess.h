// Starting and stopping child processes: the one fork/exec of the host side
// (the local agent, an agent over stdio, test programs). After fork the child
// makes only async-signal-safe calls.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm {

struct SpawnOptions {
  // The child's standard streams: a descriptor of ours (dup'ed into place; we
  // keep ownership), or -1: stdin from /dev/null, stdout/stderr inherited.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Its own process group, so a terminal's Ctrl-C reaches us and not the child.
  bool own_process_group = false;
  // SIGTERM to the child when the thread that started it dies (prctl PDEATHSIG).
  bool terminate_with_parent = false;
  // Look argv[0] up in PATH when it holds no '/' (execvp); else it must be a path.
  bool search_path = false;
};

// Starts argv; returns its pid. Fails, naming argv[0], when argv is empty or
// fork fails. A program that cannot be executed exits 127 in the child.
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const SpawnOptions& options);

// Waits up to `grace` for `pid` to end by itself, then SIGKILL; reaps and
// returns the wait status (-1 when there was nothing to reap).
int ReapProcess(pid_t pid, std::chrono::milliseconds grace);

// SIGTERM, then SIGKILL once `grace` has passed, and reaps; returns the wait
// status (-1 when there was nothing to reap).
int StopProcess(pid_t pid, std::chrono::milliseconds grace);

// Reaps `pid` if it has ended; its wait status, or nothing while it runs.
bool TryReap(pid_t pid, int* status_out);

// "exited with code N" / "was killed by signal N (NAME)" for a wait status.
std::string DescribeWaitStatus(int status);

// Opens `path` for appending (created 0644); the error names the file.
Result<UniqueFd> OpenForAppend(const std::string& path);

}  // namespace dfarm
