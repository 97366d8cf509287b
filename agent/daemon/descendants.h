// Descendants: the processes a job leaves behind. A runner (or a tool it
// starts) may start processes that leave the job's process group and session
// (setsid, a daemon's double fork); killing the group misses them. An agent
// that is its descendants' subreaper (PR_SET_CHILD_SUBREAPER) adopts them
// when their parents die instead of losing them to init, so every process a
// job started stays below the agent and KillDescendants finds it.
#pragma once

#include <sys/types.h>

#include <vector>

#include "agent/base/result.h"

namespace dfarm::agent {

// Makes this process the subreaper of all its descendants (Linux 3.4+);
// the error says why not.
Result<void> BecomeSubreaper();

// SIGKILLs every process below this one (children, their children, ...,
// adopted orphans included) and reaps those that are or become this process's
// children, until none is left alive. For a process whose only children are
// one job's: call it with no other child of ours running (the supervisor
// calls it after a job ended, when nothing else of the agent runs). Returns
// the pids it killed.
std::vector<pid_t> KillDescendants();

}  // namespace dfarm::agent
