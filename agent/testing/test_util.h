// Helpers shared by the agent's tests: a temp folder removed at the end,
// shell-script "runners" put into an artifact store, and the real dfarm-agent
// binary as a child process.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/sha256.h"
#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"
#include "agent/daemon/artifact_store.h"
#include "agent/testing/run_process.h"

namespace dfarm::agent::testing {

// How long the agent's tests wait for a frame, a reply or a child.
inline constexpr auto kTimeout = std::chrono::milliseconds(10000);

// A TCP connection to 127.0.0.1:port; an invalid fd when connect() fails.
inline UniqueFd RawConnect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fd.reset();
  return fd;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "dfarm_agent_test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string HashOf(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes.data(), bytes.size());
  return h.FinishHex();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Pids of the processes whose executable is `exe` (from /proc).
inline std::vector<pid_t> ProcessesOfExe(const std::string& exe) {
  namespace fs = std::filesystem;
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto target = fs::read_symlink(entry.path() / "exe", ec);
    if (!ec && target == fs::path(exe)) pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

// The names of what folder dir holds (none when it cannot be read).
inline std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// A runner that prints a valid ok document and echoes its argv to stderr.
inline const char* kOkRunner =
    "#!/bin/sh\n"
    "echo \"args: $*\" >&2\n"
    "echo '{\"status\":\"ok\",\"model\":\"m.tflite\",\"delegate\":\"cpu\",\"num_threads\":1,"
    "\"metrics\":{\"mean_us\":12.5,\"num_runs\":3},\"samples_us\":[12,13,12.5]}'\n";

#ifdef DFARM_BINARY_DIR
inline constexpr char kAgentBinary[] = DFARM_BINARY_DIR "/bin/dfarm-agent";

// dfarm-agent started as a child (its stderr appended to stderr_file when
// given); killed with SIGKILL on destruction. A `--listen` agent without
// `--token-file` gets `--insecure` (tests listen on 127.0.0.1 only; the
// agent refuses a tokenless listener without it, see agent_cli_test.cc).
class TestAgent {
 public:
  explicit TestAgent(std::vector<std::string> args, const std::string& stderr_file = "") {
    auto has = [&](const char* flag) {
      return std::find(args.begin(), args.end(), flag) != args.end();
    };
    if (has("--listen") && !has("--token-file") && !has("--insecure")) args.push_back("--insecure");
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) abort();
    UniqueFd out_w(out[1]);
    out_.reset(out[0]);
    UniqueFd err;
    if (!stderr_file.empty()) {
      if (auto opened = OpenForAppend(stderr_file)) err = std::move(*opened);
    }
    args.insert(args.begin(), kAgentBinary);
    SpawnOptions options;
    options.stdout_fd = out_w.get();
    options.stderr_fd = err.get();
    auto pid = SpawnProcess(args, options);
    if (!pid) abort();
    pid_ = *pid;
  }
  ~TestAgent() { Kill(); }

  pid_t pid() const { return pid_; }

  // The first stdout line, read byte by byte (the agent flushes it).
  std::string ReadLine() {
    std::string line;
    char c;
    pollfd p{out_.get(), POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0 && ::read(out_.get(), &c, 1) == 1 && c != '\n') line += c;
    return line;
  }

  // The port of a "listening on 127.0.0.1:<port>" line, 0 if there is none.
  uint16_t ReadPort() {
    std::string line = ReadLine();
    const std::string prefix = "listening on 127.0.0.1:";
    if (line.rfind(prefix, 0) != 0) return 0;
    return static_cast<uint16_t>(std::stoi(line.substr(prefix.size())));
  }

  // Sends SIGTERM and returns the exit status (or -1 after 10 s).
  int Terminate() {
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 1000; ++i) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  // Waits for the agent to exit by itself; its wait status, or -1 (and the
  // agent is killed) when it still runs after `within`.
  int WaitExit(std::chrono::milliseconds within) {
    for (auto end = std::chrono::steady_clock::now() + within;;) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      if (std::chrono::steady_clock::now() >= end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Kill();
    return -1;
  }

  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  UniqueFd out_;
};
#endif  // DFARM_BINARY_DIR

}  // namespace dfarm::agent::testing
