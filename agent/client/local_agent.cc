#include "agent/client/local_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace dfarm::agent {

Result<std::unique_ptr<LocalAgent>> LocalAgent::Start(const LocalAgentOptions& options) {
  const std::string& bin = options.agent_binary;
  if (::access(bin.c_str(), X_OK) != 0) {
    return MakeError("cannot start local agent '" + bin + "': " + strerror(errno));
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return MakeError(std::string("cannot start local agent: pipe: ") + strerror(errno));
  }
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd log;
  if (!options.log_file.empty()) {
    log.reset(::open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!log) {
      return MakeError("cannot open agent log '" + options.log_file + "': " + strerror(errno));
    }
  }
  std::vector<std::string> args = {bin, "--listen", "127.0.0.1:0", "--store", options.store_dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) return MakeError(std::string("cannot start local agent: fork: ") + strerror(errno));
  if (pid == 0) {
    ::dup2(out_w.get(), 1);
    if (log) ::dup2(log.get(), 2);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  out_w.reset();
  std::unique_ptr<LocalAgent> agent(new LocalAgent());
  agent->pid_ = pid;

  auto deadline = std::chrono::steady_clock::now() + options.start_timeout;
  std::string line;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out_r.get(), POLLIN, 0};
    int n = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return MakeError("local agent '" + bin + "' did not report its port within " +
                       std::to_string(options.start_timeout.count()) + " ms");
    }
    char c;
    ssize_t got = ::read(out_r.get(), &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int status = agent->Stop(std::chrono::milliseconds(0));
      return MakeError("local agent '" + bin + "' exited before listening (status " +
                       std::to_string(status) + "); see its stderr");
    }
    if (c == '\n') break;
    if (line.size() > 200) return MakeError("local agent '" + bin + "' printed an unexpected line");
    line += c;
  }
  const std::string prefix = "listening on 127.0.0.1:";
  if (line.rfind(prefix, 0) != 0) {
    return MakeError("local agent '" + bin + "' printed '" + line + "', expected '" + prefix +
                     "<port>'");
  }
  unsigned long port = 0;
  try {
    port = std::stoul(line.substr(prefix.size()));
  } catch (...) {
  }
  if (port == 0 || port > 65535) {
    return MakeError("local agent '" + bin + "' printed a bad port: '" + line + "'");
  }
  agent->port_ = static_cast<uint16_t>(port);
  agent->stdout_ = std::move(out_r);
  return agent;
}

LocalAgent::~LocalAgent() {
  if (pid_ > 0) Stop(std::chrono::milliseconds(2000));
}

int LocalAgent::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  int status = -1;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    pid_t w = ::waitpid(pid_, &status, WNOHANG);
    if (w == pid_ || (w < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  return status;
}

}  // namespace dfarm::agent
