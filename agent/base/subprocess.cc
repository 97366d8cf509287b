#include "agent/base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace dfarm {

Result<pid_t> SpawnProcess(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return MakeError("cannot start a process: empty command line");
  // Everything the child needs is built before fork.
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return MakeError("cannot start '" + argv[0] + "': fork: " + strerror(errno));
  if (pid == 0) {
    if (options.own_process_group) ::setpgid(0, 0);
    if (options.terminate_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);
    }
    int in = options.stdin_fd >= 0 ? options.stdin_fd : ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, STDIN_FILENO);
    if (options.stdout_fd >= 0) ::dup2(options.stdout_fd, STDOUT_FILENO);
    if (options.stderr_fd >= 0) ::dup2(options.stderr_fd, STDERR_FILENO);
    if (options.search_path) {
      ::execvp(cargv[0], cargv.data());
    } else {
      ::execv(cargv[0], cargv.data());
    }
    ::_exit(127);
  }
  return pid;
}

bool TryReap(pid_t pid, int* status_out) {
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r != pid) return false;
  *status_out = status;
  return true;
}

int ReapProcess(pid_t pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return -1;
  int status = -1;
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) return status;
    if (w < 0 && errno != EINTR) return -1;  // not our child, or already reaped
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

int StopProcess(pid_t pid, std::chrono::milliseconds grace) {
  if (pid <= 0) return -1;
  ::kill(pid, SIGTERM);
  return ReapProcess(pid, grace);
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  return "ended with wait status " + std::to_string(status);
}

Result<UniqueFd> OpenForAppend(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) return MakeError("cannot open '" + path + "' for appending: " + strerror(errno));
  return fd;
}

}  // namespace dfarm
