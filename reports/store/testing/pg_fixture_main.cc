// dfarm-test-pg: one PostgreSQL server shared by a CTest run (the fixture
// `dfarm_pg`, cmake/testing.cmake), so that each test creates a database on
// it instead of starting a server of its own.
//   dfarm-test-pg start FILE   starts a server in a process of its own and
//                              writes "PORT PID" to FILE once it accepts
//                              connections; exit 0. Without PostgreSQL here
//                              (or with DFARM_SKIP_POSTGRES=1) it says so,
//                              writes nothing and exits 0: each test then
//                              starts, or skips, as it would alone.
//   dfarm-test-pg stop FILE    stops that server, waits until it is gone and
//                              removes FILE; exit 0 also when FILE is absent.
// Exit codes: 0 done, 1 the server did not start or stop, 2 bad command line.
// The server process ends by itself after kMaxLifetime, so an interrupted
// CTest run leaves no server behind for long.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "reports/store/testing/pg_server.h"

namespace {

namespace fs = std::filesystem;
using dfarm::store::testing::PgServer;
using dfarm::store::testing::PgServerAvailable;
using dfarm::store::testing::ReadSharedServerFile;

constexpr auto kMaxLifetime = std::chrono::hours(4);
constexpr auto kStartDeadline = std::chrono::seconds(180);
constexpr auto kStopDeadline = std::chrono::seconds(60);

// The server's process: starts it, reports "ok PORT" or "error MESSAGE" on
// `report`, then holds it until SIGTERM, SIGINT or kMaxLifetime.
[[noreturn]] void Serve(int report, const std::string& file) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  auto server = PgServer::Start();
  std::string line =
      server ? "ok " + std::to_string((*server)->port()) : "error " + server.message();
  if (server) {
    const std::string tmp = file + ".tmp";
    std::ofstream(tmp) << (*server)->port() << " " << ::getpid() << "\n";
    std::error_code ec;
    fs::rename(tmp, file, ec);
    if (ec) line = "error cannot write '" + file + "': " + ec.message();
  }
  line += "\n";
  (void)!::write(report, line.data(), line.size());
  ::close(report);
  if (line.rfind("ok ", 0) == 0) {
    const timespec limit{std::chrono::duration_cast<std::chrono::seconds>(kMaxLifetime).count(), 0};
    (void)sigtimedwait(&stop, nullptr, &limit);
    std::error_code ec;
    fs::remove(file, ec);
  }
  if (server) (*server).reset();  // stops the server and removes its folder
  std::_Exit(0);
}

int Start(const std::string& file) {
  const char* skip = std::getenv("DFARM_SKIP_POSTGRES");
  std::string why;
  if ((skip != nullptr && std::string(skip) == "1") || !PgServerAvailable(&why)) {
    std::fprintf(stderr, "dfarm-test-pg: no shared server (%s); each test decides alone\n",
                 why.empty() ? "DFARM_SKIP_POSTGRES=1" : why.c_str());
    return 0;
  }
  int port = 0;
  pid_t old = 0;
  if (ReadSharedServerFile(file, &port, &old) && ::kill(old, 0) == 0) {
    std::fprintf(stderr, "dfarm-test-pg: '%s' names a live server (pid %d); stop it first\n",
                 file.c_str(), static_cast<int>(old));
    return 1;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("dfarm-test-pg: pipe");
    return 1;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("dfarm-test-pg: fork");
    return 1;
  }
  if (child == 0) {
    ::close(fds[0]);
    ::setsid();
    // CTest waits for the end of a test's output: the server keeps none of it.
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; null >= 0 && fd <= 2; ++fd) ::dup2(null, fd);
    if (null > 2) ::close(null);
    Serve(fds[1], file);
  }
  ::close(fds[1]);
  std::string reply;
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) reply.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  if (reply.rfind("ok ", 0) != 0) {
    std::fprintf(stderr, "dfarm-test-pg: the shared PostgreSQL server did not start: %s",
                 reply.empty() ? "its process ended without a word\n" : reply.c_str() + 6);
    return 1;
  }
  std::printf("dfarm-test-pg: shared PostgreSQL server on 127.0.0.1:%s", reply.c_str() + 3);
  return 0;
}

int Stop(const std::string& file) {
  int port = 0;
  pid_t pid = 0;
  if (!ReadSharedServerFile(file, &port, &pid)) {
    std::printf("dfarm-test-pg: no shared server ('%s' absent)\n", file.c_str());
    return 0;
  }
  if (::kill(pid, SIGTERM) != 0) {
    std::error_code ec;
    fs::remove(file, ec);  // the process is gone already
    return 0;
  }
  // The server's process removes FILE before it stops the server, so wait for
  // the process itself (not our child: poll until it is gone or a zombie).
  const auto deadline = std::chrono::steady_clock::now() + kStopDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st {};
    const std::string proc = "/proc/" + std::to_string(pid) + "/stat";
    std::ifstream in(proc);
    std::string stat_line;
    const bool gone = !std::getline(in, stat_line) || stat_line.find(") Z ") != std::string::npos ||
                      ::stat(proc.c_str(), &st) != 0;
    if (gone) {
      std::printf("dfarm-test-pg: shared PostgreSQL server on 127.0.0.1:%d stopped\n", port);
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "dfarm-test-pg: the server's process %d did not end within 60 s\n",
               static_cast<int>(pid));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: dfarm-test-pg start|stop FILE\n";
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("%s", usage.c_str());
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("dfarm-test-pg %s (test only)\n", DFARM_VERSION);
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "%s", usage.c_str());
    return 2;
  }
  const std::string verb = argv[1];
  if (verb == "start") return Start(argv[2]);
  if (verb == "stop") return Stop(argv[2]);
  std::fprintf(stderr, "dfarm-test-pg: unknown command '%s'\n%s", argv[1], usage.c_str());
  return 2;
}
