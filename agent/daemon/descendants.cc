#include "agent/daemon/descendants.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "agent/base/regular_file.h"

namespace dfarm::agent {
namespace {

namespace fs = std::filesystem;

struct ProcEntry {
  pid_t ppid = 0;
  char state = '?';
};

// pid -> (ppid, state) of every process now, from /proc/PID/stat.
std::map<pid_t, ProcEntry> ProcessTable() {
  std::map<pid_t, ProcEntry> table;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (auto stat = ReadProcStat(pid)) table[pid] = ProcEntry{stat->ppid, stat->state};
  }
  return table;
}

// The processes below `root` in table.
std::vector<pid_t> Below(pid_t root, const std::map<pid_t, ProcEntry>& table) {
  std::vector<pid_t> out;
  for (const auto& [pid, e] : table) {
    std::set<pid_t> seen;
    for (pid_t up = e.ppid; up > 1 && seen.insert(up).second;) {
      if (up == root) {
        out.push_back(pid);
        break;
      }
      auto it = table.find(up);
      if (it == table.end()) break;
      up = it->second.ppid;
    }
  }
  return out;
}

}  // namespace

Result<void> BecomeSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return MakeError(std::string("cannot become the subreaper of the runners' processes: ") +
                     strerror(errno));
  }
  return Ok();
}

std::vector<pid_t> KillDescendants() {
  const pid_t self = ::getpid();
  std::set<pid_t> killed;
  // Each round kills what is below us now and reaps our children; the
  // children of a killed process are ours in a later round (we are their
  // subreaper). Bounded, against a fork bomb outrunning us forever.
  for (int round = 0; round < 1000; ++round) {
    const auto table = ProcessTable();
    std::vector<pid_t> below = Below(self, table);
    bool alive = false;
    for (pid_t pid : below) {
      const ProcEntry& e = table.at(pid);
      if (e.state != 'Z') {
        alive = true;
        ::kill(pid, SIGKILL);
        killed.insert(pid);
      }
      if (e.ppid == self) {
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
    }
    if (!alive && below.empty()) break;
    if (!alive) {
      // Only zombies of our descendants are left: their parents reap them or
      // die; give them a moment.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return {killed.begin(), killed.end()};
}

}  // namespace dfarm::agent
