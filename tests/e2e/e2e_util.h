// Helpers for end-to-end tests that start the real binaries as child
// processes: dfarm (in the background, to kill it mid-sweep), dfarm-agent on
// 127.0.0.1 with a free port, and raw SQL counts over a store file.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"
#include "agent/client/agent_process.h"

namespace dfarm::e2e {

namespace fs = std::filesystem;

inline fs::path BinDir() { return fs::path(DFARM_BINARY_DIR) / "bin"; }

inline std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

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

}  // namespace dfarm::e2e
