#include "agent/client/agent_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "agent/base/subprocess.h"

namespace dfarm::agent {
namespace {

constexpr size_t kStderrKeep = 4096;
constexpr size_t kStdoutLineMax = 65536;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string LastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

Result<void> CheckExecutable(const AgentProcessOptions& o) {
  if (::access(o.agent_binary.c_str(), X_OK) != 0) {
    return MakeError(Errno("not executable") + " (build dfarm-agent or set DFARM_AGENT)");
  }
  if (!o.prefix.empty() && ::access(o.prefix[0].c_str(), X_OK) != 0) {
    return MakeError(Errno("'" + o.prefix[0] + "' to run it with is not executable"));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<AgentProcess>> AgentProcess::Start(const AgentProcessOptions& o) {
  auto fail = [&](const std::string& why) -> Error {
    return MakeError("cannot start agent '" + o.agent_binary + "': " + why);
  };
  if (auto ok = CheckExecutable(o); !ok) return fail(ok.message());
  UniqueFd log;
  if (!o.log_file.empty()) {
    auto opened = OpenForAppend(o.log_file);
    if (!opened) return fail(opened.message());
    log = std::move(*opened);
  }
  // Ours: the stream to the agent (kStdio) or its stdout (kListen); theirs
  // becomes its stdout, and its stdin too with kStdio.
  const bool stdio = o.transport == AgentTransport::kStdio;
  int ends[2], err[2];
  if (stdio ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0
            : ::pipe2(ends, O_CLOEXEC) != 0) {
    return fail(Errno(stdio ? "socketpair" : "pipe"));
  }
  UniqueFd ours(ends[0]), theirs(ends[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return fail(Errno("pipe"));
  UniqueFd err_r(err[0]), err_w(err[1]);

  std::vector<std::string> argv = o.prefix;
  argv.push_back(o.agent_binary);
  if (stdio) {
    argv.push_back("--stdio");
  } else {
    argv.insert(argv.end(), {"--listen", "127.0.0.1:0"});
  }
  argv.insert(argv.end(), {"--store", o.store_dir});
  argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
  SpawnOptions spawn;
  spawn.stdin_fd = stdio ? theirs.get() : -1;
  spawn.stdout_fd = theirs.get();
  spawn.stderr_fd = err_w.get();
  spawn.own_process_group = true;
  spawn.terminate_with_parent = true;
  auto pid = SpawnProcess(argv, spawn);
  if (!pid) return fail(pid.message());
  theirs.reset();
  err_w.reset();
  if (stdio) {
    std::unique_ptr<AgentProcess> p(
        new AgentProcess(*pid, UniqueFd(), std::move(err_r), std::move(log)));
    p->stream_ = std::move(ours);
    return p;
  }
  std::unique_ptr<AgentProcess> p(
      new AgentProcess(*pid, std::move(ours), std::move(err_r), std::move(log)));

  std::unique_lock lock(p->mu_);
  bool ended = p->cv_.wait_for(lock, o.start_timeout, [&] { return p->port_ != 0 || p->eof_; });
  if (p->port_ != 0) return p;
  std::string tail = LastLine(p->stderr_);
  lock.unlock();
  std::string why;
  if (ended) {
    int status = p->Stop(std::chrono::milliseconds(500));
    why = "it exited before listening (" +
          (status == -1 ? std::string("status unknown") : DescribeWaitStatus(status)) + ")";
  } else {
    why = "no 'listening on 127.0.0.1:<port>' line within " +
          std::to_string(o.start_timeout.count()) + " ms";
  }
  if (!tail.empty()) why += "; its stderr ends: " + tail;
  return fail(why);
}

AgentProcess::AgentProcess(pid_t pid, UniqueFd out, UniqueFd err, UniqueFd log)
    : pid_(pid), out_(std::move(out)), err_(std::move(err)), log_(std::move(log)) {
  reader_ = std::thread([this] { Drain(); });
}

AgentProcess::~AgentProcess() {
  Stop();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  reader_.join();
}

std::string AgentProcess::StderrTail() {
  std::lock_guard lock(mu_);
  return stderr_;
}

bool AgentProcess::OnStdout(const char* data, size_t size) {
  static const std::regex kListening(R"(listening on 127\.0\.0\.1:(\d+))");
  stdout_.append(data, size);
  size_t nl;
  while (port_ == 0 && (nl = stdout_.find('\n')) != std::string::npos) {
    std::string line = stdout_.substr(0, nl);
    stdout_.erase(0, nl + 1);
    std::smatch m;
    if (std::regex_search(line, m, kListening)) {
      unsigned long port = std::stoul(m[1].str());
      if (port > 0 && port <= 65535) port_ = static_cast<uint16_t>(port);
    }
  }
  if (port_ != 0) {
    stdout_.clear();
    return true;
  }
  if (stdout_.size() > kStdoutLineMax) stdout_.clear();  // a runaway line is not ours
  return false;
}

void AgentProcess::Drain() {
  bool out_open = static_cast<bool>(out_), err_open = true;  // no stdout pipe with kStdio
  char buf[4096];
  while (out_open || err_open) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    pollfd fds[2] = {{out_open ? out_.get() : -1, POLLIN, 0},
                     {err_open ? err_.get() : -1, POLLIN, 0}};
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
      size_t size = static_cast<size_t>(got);
      if (i == 1 && log_) {
        ssize_t ignored = ::write(log_.get(), buf, size);  // best effort, like a terminal
        (void)ignored;
      }
      std::lock_guard lock(mu_);
      if (i == 1) {
        stderr_.append(buf, size);
        if (stderr_.size() > kStderrKeep) stderr_.erase(0, stderr_.size() - kStderrKeep);
      } else if (port_ == 0 && OnStdout(buf, size)) {
        cv_.notify_all();
      }
    }
  }
  std::lock_guard lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

int AgentProcess::Stop(std::chrono::milliseconds grace) {
  if (reaped_) return wait_status_;
  return Reaped(StopProcess(pid_, grace));
}

std::string AgentProcess::ExitReport(std::chrono::milliseconds grace) {
  // An agent that broke the hello by exiting has ended by now or within
  // grace; one still running after it is killed (and says so).
  int status = reaped_ ? wait_status_ : Reaped(ReapProcess(pid_, grace));
  std::string report =
      " (it " + (status == -1 ? std::string("ended, status unknown") : DescribeWaitStatus(status)) +
      ")";
  std::string tail;
  {
    std::lock_guard lock(mu_);
    tail = LastLine(stderr_);
  }
  if (!tail.empty()) report += "; its stderr ends: " + tail;
  return report;
}

int AgentProcess::Reaped(int wait_status) {
  reaped_ = true;
  wait_status_ = wait_status;
  // Let the reader take what the agent wrote last (into the log, the tail).
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::seconds(1), [&] { return eof_; });
  return wait_status_;
}

}  // namespace dfarm::agent
