// Helpers for end-to-end tests that start the real binaries as child
// processes: dfarm (in the background, to kill it mid-sweep), dfarm-agent on
// 127.0.0.1 with a free port, and raw SQL counts over a store file. Slurp()
// and Outcome come from e2e_shell.h.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/sha256.h"
#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"
#include "agent/client/agent_process.h"
#include "tests/e2e/e2e_shell.h"

namespace dfarm::e2e {

namespace fs = std::filesystem;

inline fs::path BinDir() { return fs::path(DFARM_BINARY_DIR) / "bin"; }

// A child process; killed (SIGKILL) and reaped on destruction if still there.
class Child {
 public:
  Child() = default;
  Child(Child&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  Child& operator=(Child&& o) noexcept {
    std::swap(pid_, o.pid_);
    return *this;
  }
  ~Child() { Kill(SIGKILL); }

  // Starts argv[0] with stdout/stderr to the given files (empty: /dev/null)
  // in its own process group. stdout_fd_out, when set, gets a pipe instead.
  static Child Spawn(const std::vector<std::string>& args, const std::string& out_file,
                     const std::string& err_file, int* stdout_pipe = nullptr) {
    auto open_out = [](const std::string& f) {
      return UniqueFd(::open(f.empty() ? "/dev/null" : f.c_str(),
                             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    };
    int p[2] = {-1, -1};
    if (stdout_pipe && ::pipe2(p, O_CLOEXEC) != 0) return Child();
    UniqueFd out = stdout_pipe ? UniqueFd(p[1]) : open_out(out_file);
    UniqueFd err = open_out(err_file);
    SpawnOptions options;
    options.stdout_fd = out.get();
    options.stderr_fd = err.get();
    options.own_process_group = true;
    auto pid = SpawnProcess(args, options);
    if (stdout_pipe) *stdout_pipe = p[0];
    Child c;
    if (pid) c.pid_ = *pid;
    return c;
  }

  pid_t pid() const { return pid_; }

  // Sends `sig` and reaps; returns the wait status (-1 if nothing to reap).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    return Wait();
  }
  int Wait() {
    if (pid_ <= 0) return -1;
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

// Runs argv to the end with stdout/stderr in out_file/err_file, and reads
// them back.
inline Outcome RunToEnd(const std::vector<std::string>& argv, const fs::path& out_file,
                        const fs::path& err_file) {
  Child c = Child::Spawn(argv, out_file.string(), err_file.string());
  const int status = c.Wait();
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = Slurp(out_file);
  o.err = Slurp(err_file);
  return o;
}

// A real dfarm-agent listening on 127.0.0.1 with a free port (port 0 when it
// did not start).
struct Agent {
  std::unique_ptr<agent::AgentProcess> process;
  uint16_t port = 0;
  std::string uri() const { return "tcp://127.0.0.1:" + std::to_string(port); }
  // The device vanishes: SIGKILL, no goodbye.
  void Kill() {
    if (process) ::kill(process->pid(), SIGKILL);
  }
};

inline Agent StartAgent(const fs::path& store_dir, const fs::path& log) {
  agent::AgentProcessOptions options;
  options.agent_binary = (BinDir() / "dfarm-agent").string();
  options.store_dir = store_dir.string();
  options.extra_args = {"--insecure"};  // tests on 127.0.0.1; dfarm's own devices use --stdio
  options.log_file = log.string();
  Agent a;
  auto started = agent::AgentProcess::Start(options);
  if (!started) return a;
  a.process = std::move(*started);
  a.port = a.process->port();
  return a;
}

// One integer from a SQL query over the store file (read-only connection).
inline int64_t QueryInt(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  int64_t v = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
      v = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return v;
}

// Polls `pred` every 10 ms until it holds or `timeout` passes.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

inline constexpr const char* kFinal =
    "('ok','model_error','delegate_error','unsupported','crashed','timeout','infra')";

// Rows of text from a SQL query over the store file (read-only connection);
// NULL reads as "NULL".
inline std::vector<std::vector<std::string>> QueryRows(const std::string& db,
                                                       const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
      while (sqlite3_step(s) == SQLITE_ROW) {
        std::vector<std::string> row;
        for (int i = 0; i < sqlite3_column_count(s); ++i) {
          const unsigned char* t = sqlite3_column_text(s, i);
          row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
        }
        rows.push_back(std::move(row));
      }
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return rows;
}

// Live processes (not zombies) whose command line names `dir` (a test's temp
// dir: its agents' stores, the runners in them, dfarm's --db), other than this
// process, the pids in `keep` and their children: what a fault left behind.
inline std::vector<std::string> StrayProcesses(const fs::path& dir, const std::set<pid_t>& keep) {
  std::vector<std::string> stray;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == ::getpid() || keep.count(pid)) continue;
    std::string cmdline = Slurp(entry.path() / "cmdline");
    if (cmdline.find(dir.string()) == std::string::npos) continue;
    // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces.
    std::string stat = Slurp(entry.path() / "stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (state == 'Z' || ppid == ::getpid() || keep.count(ppid)) continue;
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    stray.push_back("pid " + name + " (parent " + std::to_string(ppid) + "): " + cmdline);
  }
  return stray;
}

// The invariants every fault test ends with, as a list of what is
// broken (empty: all hold) for run `run_id` in store `db`:
// - every job is in exactly one terminal state (or still queued when the run
//   was cancelled), and no job was recorded twice (same key, same move);
// - results rows only for finished jobs, one for each job that ended ok;
// - no wrong `ok`: an ok job has metrics (mean, num_runs, its samples) and the
//   model sha256 of the file it names;
// - no job left non-terminal in a run recorded finished or failed;
// - with `healthy` (the test's devices and runners were sound, whatever it did
//   to the farm around them), no wrong failure: no job ended infra, crashed or
//   timeout;
// - no stray process naming `dir` (see StrayProcesses) once 3 s have passed.
inline std::string CheckRunInvariants(const std::string& db, int64_t run_id, const fs::path& dir,
                                      const std::set<pid_t>& keep = {}, bool cancelled = false,
                                      bool healthy = false) {
  std::ostringstream bad;
  const std::string run = "j.run_id = " + std::to_string(run_id);
  const std::string final_or = cancelled ? std::string(kFinal).insert(1, "'queued',") : kFinal;
  for (const auto& row : QueryRows(db, "SELECT j.id, j.job_key, j.status FROM jobs j WHERE " + run +
                                           " AND j.status NOT IN " + final_or)) {
    bad << "job " << row[0] << " (" << row[1] << ") is '" << row[2] << "', not terminal\n";
  }
  for (const auto& row : QueryRows(db,
                                   "SELECT r.status, j.id, j.status FROM runs r JOIN jobs j ON "
                                   "j.run_id = r.id WHERE r.id = " +
                                       std::to_string(run_id) +
                                       " AND r.status IN ('finished', 'failed') AND j.status "
                                       "NOT IN " +
                                       kFinal)) {
    bad << "run " << run_id << " is '" << row[0] << "' yet job " << row[1] << " is '" << row[2]
        << "'\n";
  }
  if (healthy) {
    for (const auto& row : QueryRows(db, "SELECT j.id, j.status, j.error FROM jobs j WHERE " + run +
                                             " AND j.status IN ('infra', 'crashed', 'timeout')")) {
      bad << "wrong failure: job " << row[0] << " is '" << row[1] << "' on a healthy device and "
          << "runner: " << row[2] << "\n";
    }
  }
  for (const auto& row :
       QueryRows(db, "SELECT j.job_key, j.moved_from, count(*) FROM jobs j WHERE " + run +
                         " GROUP BY j.job_key, j.moved_from HAVING count(*) > 1")) {
    bad << "job " << row[0] << " (moved from '" << row[1] << "') recorded " << row[2] << " times\n";
  }
  for (const auto& row : QueryRows(db,
                                   "SELECT j.id, j.status FROM results r JOIN jobs j ON j.id = "
                                   "r.job_id WHERE " +
                                       run + " AND j.status NOT IN " + kFinal)) {
    bad << "job " << row[0] << " is '" << row[1] << "' yet has a result\n";
  }
  if (QueryRows(db, "SELECT j.id FROM jobs j WHERE " + run).empty()) {
    bad << "run " << run_id << " has no jobs in " << db << "\n";
  }
  const auto ok = QueryRows(
      db,
      "SELECT j.id, j.model_path, j.model_sha256, r.job_id IS NOT NULL, r.mean_us IS NOT NULL, "
      "coalesce(r.num_runs, 0), (SELECT count(*) FROM samples s WHERE s.job_id = j.id) "
      "FROM jobs j LEFT JOIN results r ON r.job_id = j.id WHERE " +
          run + " AND j.status = 'ok'");
  if (static_cast<int64_t>(ok.size()) !=
      QueryInt(db, "SELECT count(*) FROM jobs j WHERE " + run + " AND j.status = 'ok'")) {
    bad << "the ok jobs of run " << run_id << " could not be read\n";
  }
  for (const auto& row : ok) {
    const std::string& id = row[0];
    if (row[3] != "1") bad << "ok job " << id << " has no result\n";
    if (row[4] != "1" || row[5] == "0") bad << "ok job " << id << " has no metrics\n";
    if (row[5] != row[6]) {
      bad << "ok job " << id << " ran " << row[5] << " times but has " << row[6] << " samples\n";
    }
    auto sha = agent::Sha256File(row[1]);
    if (!sha || *sha != row[2]) {
      bad << "ok job " << id << " has model sha256 " << row[2] << ", not that of " << row[1]
          << "\n";
    }
  }
  // Two scans in a row must come back empty: a scan that reads a process's
  // command line while it execs sees an empty one, and misses it.
  std::vector<std::string> stray;
  int empty_scans = 0;
  WaitFor(
      [&] {
        stray = StrayProcesses(dir, keep);
        empty_scans = stray.empty() ? empty_scans + 1 : 0;
        return empty_scans >= 2;
      },
      std::chrono::seconds(3));
  for (const std::string& s : stray) bad << "stray process " << s << "\n";
  return bad.str();
}

}  // namespace dfarm::e2e
