#include "harness/agent_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <regex>

namespace dfarm::harness {
namespace {

constexpr size_t kStderrKeep = 4096;
constexpr auto kStopGrace = std::chrono::milliseconds(3000);

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

Result<std::unique_ptr<AgentProcess>> AgentProcess::Start(
    const std::string& agent_path, const std::string& store_dir,
    std::chrono::milliseconds timeout, const std::vector<std::string>& prefix,
    const std::vector<std::string>& extra_args) {
  auto fail = [&](const std::string& why) -> Error {
    return MakeError("cannot start agent '" + agent_path + "': " + why);
  };
  if (::access(agent_path.c_str(), X_OK) != 0) {
    return fail(Errno("not executable") + " (build dfarm-agent or set DFARM_AGENT)");
  }
  if (!prefix.empty() && ::access(prefix[0].c_str(), X_OK) != 0) {
    return fail(Errno(("'" + prefix[0] + "' to run it with is not executable").c_str()));
  }
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return fail(Errno("pipe"));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return fail(Errno("pipe"));
  }
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> args = prefix;
  for (const std::string& a : {agent_path, std::string("--listen"), std::string("127.0.0.1:0"),
                               std::string("--store"), store_dir}) {
    args.push_back(a);
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return fail(Errno("fork"));
  }
  if (pid == 0) {
    // Its own process group: a Ctrl-C at the terminal reaches dfarm, which
    // finishes the current job before stopping, and not the agent mid-job.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  std::unique_ptr<AgentProcess> p(new AgentProcess(pid, out[0], err[0]));

  std::unique_lock lock(p->mu_);
  bool ready = p->cv_.wait_for(lock, timeout, [&] { return p->port_ != 0 || p->eof_; });
  if (p->port_ != 0) return p;
  std::string tail = p->stderr_;
  lock.unlock();
  std::string why = ready ? "it exited before saying where it listens"
                          : "no 'listening on 127.0.0.1:<port>' line within " +
                                std::to_string(timeout.count()) + " ms";
  if (!tail.empty()) {
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
    size_t nl = tail.rfind('\n');
    why += "; its stderr ends: " + (nl == std::string::npos ? tail : tail.substr(nl + 1));
  }
  return fail(why);
}

AgentProcess::AgentProcess(pid_t pid, int out_fd, int err_fd)
    : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {
  reader_ = std::thread([this] { Drain(); });
}

AgentProcess::~AgentProcess() {
  Stop();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  reader_.join();
  ::close(out_fd_);
  ::close(err_fd_);
}

std::string AgentProcess::StderrTail() {
  std::lock_guard lock(mu_);
  return stderr_;
}

void AgentProcess::Drain() {
  static const std::regex kListening(R"(listening on 127\.0\.0\.1:(\d+))");
  bool out_open = true, err_open = true;
  char buf[4096];
  while (out_open || err_open) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    pollfd fds[2] = {{out_open ? out_fd_ : -1, POLLIN, 0}, {err_open ? err_fd_ : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, 100);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::lock_guard lock(mu_);
      if (i == 1) {
        stderr_.append(buf, static_cast<size_t>(got));
        if (stderr_.size() > kStderrKeep) stderr_.erase(0, stderr_.size() - kStderrKeep);
      } else if (port_ == 0) {
        stdout_.append(buf, static_cast<size_t>(got));
        std::smatch m;
        size_t nl;
        while (port_ == 0 && (nl = stdout_.find('\n')) != std::string::npos) {
          std::string line = stdout_.substr(0, nl);
          stdout_.erase(0, nl + 1);
          if (std::regex_search(line, m, kListening)) {
            unsigned long port = std::stoul(m[1].str());
            if (port > 0 && port <= 65535) port_ = static_cast<uint16_t>(port);
          }
        }
        if (port_ != 0) {
          stdout_.clear();
          cv_.notify_all();
        } else if (stdout_.size() > 65536) {
          stdout_.clear();  // a runaway line without a newline is not ours
        }
      }
    }
  }
  std::lock_guard lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

void AgentProcess::Stop() {
  if (reaped_) return;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      reaped_ = true;
      return;
    }
    ::usleep(20 * 1000);
  }
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

}  // namespace dfarm::harness
