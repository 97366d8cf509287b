// dfarm-agent: the on-device agent (agent/protocol/PROTOCOL.md). A thin shell over
// Server: parse flags, handle SIGTERM/SIGINT, print the listening line (TCP)
// or serve the protocol on stdin/stdout (--stdio). A TCP listener needs
// --token-file, or --insecure said outright (loopback only): without a token
// anyone who reaches the port runs code as this user.
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "agent/daemon/descendants.h"
#include "agent/daemon/server.h"

namespace {

using dfarm::agent::Server;
using dfarm::agent::ServerOptions;

// dfarm-agent's exit codes (listed in --help).
constexpr int kExitOk = 0;           // stopped by SIGTERM/SIGINT, or the stdio peer closed
constexpr int kExitCannotStart = 1;  // bad store, listen address, token file or stdio
constexpr int kExitUsage = 2;        // command-line error
constexpr int kExitStoreInUse = 3;   // another agent holds the store (StoreLock)

constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0  stopped (SIGTERM or SIGINT; with --stdio, the host closed the stream)\n"
    "  1  could not start (store folder, listen address, token file, stdio)\n"
    "  2  command-line error (also: a TCP listener with neither --token-file nor --insecure)\n"
    "  3  the store is in use: another dfarm-agent, alive, holds --store's lock\n"
    "     (DIR/agent.lock); one agent per store: a second one refuses at once, or\n"
    "     waits (up to 30 s) while the holder is stopping\n";

Server* g_server = nullptr;

void OnStopSignal(int) {
  if (g_server) g_server->Stop();
}

// A TCP listener without a token and without --insecure: a usage error that
// names the fixes. A non-loopback or malformed address is left to
// Server::Create, which refuses it (exit 1) even with --insecure.
bool ListensWithoutConsent(const ServerOptions& options, bool insecure) {
  return !options.stdio && options.token_file.empty() && !insecure &&
         dfarm::agent::ParseListenAddress(options.listen).ok();
}

// Parses the command line into *options and *insecure. Returns the exit code
// when the program should end now (--help, --version, a usage error), else
// nothing.
std::optional<int> ParseCommandLine(int argc, char** argv, ServerOptions* options, bool* insecure) {
  CLI::App app{"dfarm-agent: stores artifacts by sha256 and runs dfarm-runner jobs for a host",
               "dfarm-agent"};
  app.set_version_flag("--version", std::string("dfarm-agent ") + DFARM_VERSION);
  app.footer(kExitCodesHelp);
  uint64_t max_artifact_mib = options->max_artifact_bytes >> 20;
  uint64_t quota_mib = 0;
  int64_t heartbeat_ms = options->heartbeat_interval.count();
  int64_t hello_timeout_ms = options->hello_timeout.count();
  app.add_option("--listen", options->listen,
                 "HOST:PORT to listen on (port 0 picks a free port); needs --token-file, or "
                 "--insecure on a loopback address")
      ->capture_default_str();
  CLI::Option* token_file =
      app.add_option("--token-file", options->token_file,
                     "file holding a shared secret (at least 32 bytes, mode 0600) that every "
                     "peer must prove with HMAC-SHA256 before any request");
  app.add_flag("--insecure", *insecure,
               "listen on a loopback address without a token: anyone who can reach the port "
               "(any local process; on a phone, every app) can run code as this user. For "
               "tests and benches; dfarm's local devices use --stdio")
      ->excludes(token_file);
  app.add_flag("--stdio", options->stdio,
               "speak the protocol on stdin/stdout (for adb exec-out or ssh) instead of "
               "listening; logs go to stderr");
  app.add_option("--quota-mib", quota_mib,
                 "disk quota of the store in MiB; least recently used artifacts are evicted "
                 "(0: none)")
      ->capture_default_str();
  app.add_option("--heartbeat-ms", heartbeat_ms,
                 "while a job runs, ping the host this often; a host silent for 3 intervals "
                 "is gone")
      ->capture_default_str();
  app.add_option("--hello-timeout-ms", hello_timeout_ms,
                 "close a connection that has not completed hello (and, with a token, "
                 "authentication) this long after it opened")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  app.add_option("--store", options->store_dir,
                 "folder of the artifact store (created if missing); one agent per store: "
                 "a second agent on a store in use exits with code 3")
      ->required();
  app.add_option("--max-artifact-mib", max_artifact_mib, "largest artifact accepted, in MiB")
      ->capture_default_str();
  app.add_option("--hot-threshold-c", options->supervisor.hot_threshold_c,
                 "flag a job as started_hot when a thermal zone is above this many degrees C "
                 "just before it starts")
      ->capture_default_str();
  std::string runner_prefix;
  app.add_option("--runner-prefix", runner_prefix,
                 "space-separated words put before the runner on its command line, e.g. "
                 "\"qemu-aarch64 -L /usr/aarch64-linux-gnu\" for an agent under qemu-user "
                 "without binfmt_misc");
  std::string bundle_prefix;
  app.add_option("--bundle-prefix", bundle_prefix,
                 "space-separated words put before a runner bundle's own loader (or its "
                 "program, when it brings none), e.g. \"qemu-aarch64\": a bundle brings its "
                 "libc, so qemu-user needs no -L sysroot (default: --runner-prefix)");
  // Test-only: read the device state (sys/, proc/) under this folder instead of /.
  app.add_option("--sample-interval-ms", options->supervisor.sample_interval_ms,
                 "sample the device state (temperatures, frequencies, load) this often while a "
                 "runner runs, into the job's telemetry (0: only before and after)")
      ->capture_default_str();
  app.add_option("--device-state-root", options->supervisor.device_state_root)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dfarm-agent: %s\nrun 'dfarm-agent --help' for the options\n", e.what());
    return kExitUsage;
  }
  if (ListensWithoutConsent(*options, *insecure)) {
    std::fprintf(stderr,
                 "dfarm-agent: listening on %s without a token lets anyone who can reach the "
                 "port run code as this user: give --token-file FILE (a secret of at least 32 "
                 "bytes, mode 0600), or --stdio, or say --insecure\n"
                 "run 'dfarm-agent --help' for the options\n",
                 options->listen.c_str());
    return kExitUsage;
  }
  std::istringstream words(runner_prefix);
  for (std::string w; words >> w;) options->supervisor.runner_prefix.push_back(w);
  std::istringstream bundle_words(bundle_prefix);
  for (std::string w; bundle_words >> w;) options->supervisor.bundle_prefix.push_back(w);
  options->max_artifact_bytes = max_artifact_mib << 20;
  options->quota_bytes = quota_mib << 20;
  options->heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  options->hello_timeout = std::chrono::milliseconds(hello_timeout_ms);
  return std::nullopt;
}

void InstallStopHandlers(Server* server) {
  g_server = server;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

// --stdio: the protocol gets private copies of stdin/stdout; fd 1 then points
// at stderr so a stray print cannot corrupt the stream, and fd 0 at /dev/null.
int ServeStdio(Server* server) {
  int in = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
  int out = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (in < 0 || out < 0) {
    std::fprintf(stderr, "dfarm-agent: --stdio needs open stdin and stdout\n");
    return kExitCannotStart;
  }
  ::dup2(2, 1);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) ::dup2(null_fd, 0), ::close(null_fd);
  server->ServeStream(in, out);
  ::close(in);
  ::close(out);
  return kExitOk;
}

int ServeTcp(Server* server, bool insecure) {
  if (insecure) {
    std::fprintf(stderr,
                 "dfarm-agent: warning: --insecure: no token on %s; anyone who can reach this "
                 "port can run code as this user (uid %u)\n",
                 server->address().c_str(), static_cast<unsigned>(::geteuid()));
  }
  // The harness reads this exact line to learn the port.
  std::printf("listening on %s\n", server->address().c_str());
  std::fflush(stdout);
  server->Serve();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  ServerOptions options;
  bool insecure = false;
  if (std::optional<int> exit_code = ParseCommandLine(argc, argv, &options, &insecure)) {
    return *exit_code;
  }

  // Writes to a closed peer are errors on the call, never a signal.
  ::signal(SIGPIPE, SIG_IGN);
  // Whatever a runner starts stays below the agent, even after setsid and
  // its parent's death, and is killed when its job ends.
  if (auto r = dfarm::agent::BecomeSubreaper(); r) {
    options.supervisor.kill_descendants = true;
  } else {
    std::fprintf(stderr,
                 "dfarm-agent: %s; what a runner starts outside its process group may outlive "
                 "its job\n",
                 r.message().c_str());
  }

  auto server = Server::Create(options);
  if (!server) {
    std::fprintf(stderr, "dfarm-agent: %s\n", server.message().c_str());
    return server.error().kind == dfarm::ErrorKind::kConflict ? kExitStoreInUse : kExitCannotStart;
  }
  InstallStopHandlers(server->get());
  int exit_code = options.stdio ? ServeStdio(server->get()) : ServeTcp(server->get(), insecure);
  g_server = nullptr;
  server->reset();
  return exit_code;
}
