#include "agent/daemon/runner_records.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <sstream>

#include "agent/base/regular_file.h"

namespace dfarm::agent {
namespace {

namespace fs = std::filesystem;

bool IsNumber(const std::string& s) {
  return !s.empty() && s.size() < 12 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool OwnedByUs(pid_t pid) {
  struct stat st {};
  return ::stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid == ::geteuid();
}

// Live (not zombie) processes of this user in `session` started no earlier
// than start_ticks.
std::vector<pid_t> SessionMembers(pid_t session, uint64_t start_ticks) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsNumber(name)) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    auto stat = ReadProcStat(pid);
    if (!stat || stat->session != session || stat->state == 'Z') continue;
    if (stat->start_ticks < start_ticks || !OwnedByUs(pid)) continue;
    pids.push_back(pid);
  }
  return pids;
}

// Live processes of this user (not this one) whose environment holds
// kJobMarkVariable=mark.
std::vector<pid_t> MarkedProcesses(const std::string& mark) {
  std::vector<pid_t> pids;
  if (mark.empty()) return pids;
  const std::string entry = std::string(kJobMarkVariable) + "=" + mark;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator("/proc", ec)) {
    const std::string name = dir.path().filename().string();
    if (!IsNumber(name)) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid() || !OwnedByUs(pid)) continue;
    const std::string env = ReadProcFile((dir.path() / "environ").string());
    for (size_t pos = 0; pos < env.size();) {
      size_t end = env.find('\0', pos);
      if (end == std::string::npos) end = env.size();
      if (env.compare(pos, end - pos, entry) == 0) {
        auto stat = ReadProcStat(pid);
        if (stat && stat->state != 'Z') pids.push_back(pid);
        break;
      }
      pos = end + 1;
    }
  }
  return pids;
}

struct Record {
  ProcessStamp runner, agent;
  std::string mark;  // the job's DFARM_JOB_MARK; empty in records of older agents
};

std::string FormatRecord(const Record& r) {
  return "runner " + std::to_string(r.runner.pid) + " " + std::to_string(r.runner.start_ticks) +
         " agent " + std::to_string(r.agent.pid) + " " + std::to_string(r.agent.start_ticks) +
         (r.mark.empty() ? "" : " mark " + r.mark) + "\n";
}

std::optional<Record> ParseRecord(const std::string& text) {
  std::istringstream in(text);
  std::string runner_word, agent_word;
  Record r;
  in >> runner_word >> r.runner.pid >> r.runner.start_ticks >> agent_word >> r.agent.pid >>
      r.agent.start_ticks;
  if (!in || runner_word != "runner" || agent_word != "agent" || r.runner.pid <= 1 ||
      r.agent.pid <= 0) {
    return std::nullopt;
  }
  std::string mark_word;
  if (in >> mark_word >> r.mark && mark_word != "mark") r.mark.clear();
  return r;
}

std::string JoinPids(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

}  // namespace

std::optional<ProcessStamp> StampOf(pid_t pid) {
  auto stat = ReadProcStat(pid);
  if (!stat) return std::nullopt;
  return ProcessStamp{pid, stat->start_ticks};
}

RunnerRecords::RunnerRecords(std::string dir, std::optional<ProcessStamp> agent)
    : dir_(std::move(dir)), agent_(agent ? agent : StampOf(::getpid())) {}

std::string RunnerRecords::PathOf(pid_t runner) const {
  return dir_ + "/" + std::to_string(runner);
}

Result<void> RunnerRecords::Add(pid_t runner, const std::string& mark) {
  auto stamp = StampOf(runner);
  if (!stamp) return MakeError("cannot record runner " + std::to_string(runner) + ": it is gone");
  if (!agent_) return MakeError("cannot record runner: this agent's /proc/self/stat is unreadable");
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create the run folder '" + dir_ + "': " + strerror(errno));
  }
  const std::string path = PathOf(runner), temp = path + ".tmp";
  const std::string text = FormatRecord({*stamp, *agent_, mark});
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError("cannot write '" + temp + "': " + strerror(errno));
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int write_errno = errno;
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    int err = written ? errno : write_errno;
    ::unlink(temp.c_str());
    return MakeError("cannot write '" + path + "': " + strerror(err));
  }
  return Ok();
}

void RunnerRecords::Remove(pid_t runner) { ::unlink(PathOf(runner).c_str()); }

Result<std::vector<std::string>> RunnerRecords::ReapLeftovers() {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create the run folder '" + dir_ + "': " + strerror(errno));
  }
  std::vector<std::string> lines;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsNumber(name)) continue;
    auto record = ParseRecord(ReadProcFile(entry.path().string()));
    if (!record) {
      lines.push_back("removed the unreadable runner record '" + entry.path().string() + "'");
      fs::remove(entry.path(), ec);
      continue;
    }
    if (StampOf(record->agent.pid) == record->agent) continue;  // its agent still runs
    std::vector<pid_t> killed;
    auto now = StampOf(record->runner.pid);
    if (!now || *now == record->runner) {
      // The pid still is the runner, or is free; a reused pid means the
      // runner's session is empty (a session keeps its leader's pid taken).
      killed = SessionMembers(record->runner.pid, record->runner.start_ticks);
      auto leader = ReadProcStat(record->runner.pid);
      if (now && leader && leader->state != 'Z' && OwnedByUs(now->pid) &&
          std::find(killed.begin(), killed.end(), now->pid) == killed.end()) {
        killed.push_back(now->pid);  // killed before its setsid()
      }
    }
    // Marked processes are the job's whatever their session (setsid) or pid.
    for (pid_t pid : MarkedProcesses(record->mark)) {
      if (std::find(killed.begin(), killed.end(), pid) == killed.end()) killed.push_back(pid);
    }
    for (pid_t pid : killed) ::kill(pid, SIGKILL);
    std::string who = "runner " + std::to_string(record->runner.pid) + " of agent " +
                      std::to_string(record->agent.pid) + ", which is gone,";
    lines.push_back(killed.empty() ? who + " left nothing behind"
                                   : who + " left behind " + std::to_string(killed.size()) +
                                         " process(es); killed " + JoinPids(killed));
    fs::remove(entry.path(), ec);
  }
  return lines;
}

}  // namespace dfarm::agent
