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
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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
    int p[2] = {-1, -1};
    if (stdout_pipe && ::pipe2(p, O_CLOEXEC) != 0) return Child();
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      auto redirect = [](const std::string& f, int fd) {
        int o = ::open(f.empty() ? "/dev/null" : f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o >= 0) ::dup2(o, fd);
      };
      if (stdout_pipe) {
        ::dup2(p[1], STDOUT_FILENO);
      } else {
        redirect(out_file, STDOUT_FILENO);
      }
      redirect(err_file, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (stdout_pipe) {
      ::close(p[1]);
      *stdout_pipe = p[0];
    }
    Child c;
    c.pid_ = pid;
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

// A real dfarm-agent listening on 127.0.0.1 with a free port.
struct Agent {
  Child child;
  uint16_t port = 0;
  std::string uri() const { return "tcp://127.0.0.1:" + std::to_string(port); }
};

inline Agent StartAgent(const fs::path& store_dir, const fs::path& log) {
  Agent a;
  int fd = -1;
  a.child = Child::Spawn({(BinDir() / "dfarm-agent").string(), "--listen", "127.0.0.1:0",
                          "--store", store_dir.string()},
                         "", log.string(), &fd);
  if (fd < 0) return a;
  std::string text;
  char buf[256];
  static const std::regex kLine(R"(listening on 127\.0\.0\.1:(\d+))");
  std::smatch m;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (std::regex_search(text, m, kLine)) {
      a.port = static_cast<uint16_t>(std::stoi(m[1].str()));
      break;
    }
  }
  // Keep the pipe's read end open for the agent's lifetime: leak it on purpose
  // (closed at exit), so the agent never writes to a closed pipe.
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
