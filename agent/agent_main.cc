// dfarm-agent: the on-device agent (agent/PROTOCOL.md). A thin shell over
// Server: parse flags, handle SIGTERM/SIGINT, print the listening line.
#include <signal.h>

#include <cstdio>

#include "CLI/CLI.hpp"
#include "agent/server.h"

namespace {

dfarm::agent::Server* g_server = nullptr;

void OnStopSignal(int) {
  if (g_server) g_server->Stop();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dfarm-agent: stores artifacts by sha256 and runs dfarm-runner jobs for a host"};
  dfarm::agent::ServerOptions options;
  uint64_t max_artifact_mib = options.max_artifact_bytes >> 20;
  app.add_option("--listen", options.listen,
                 "HOST:PORT to listen on; loopback only for now, port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--store", options.store_dir, "folder of the artifact store (created if missing)")
      ->required();
  app.add_option("--max-artifact-mib", max_artifact_mib, "largest artifact accepted, in MiB")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.max_artifact_bytes = max_artifact_mib << 20;

  // Writes to a closed peer are errors on the call, never a signal.
  ::signal(SIGPIPE, SIG_IGN);

  auto server = dfarm::agent::Server::Create(options);
  if (!server) {
    std::fprintf(stderr, "dfarm-agent: %s\n", server.message().c_str());
    return 1;
  }
  g_server = server->get();
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);

  // The harness reads this exact line to learn the port.
  std::printf("listening on %s\n", (*server)->address().c_str());
  std::fflush(stdout);

  (*server)->Serve();
  g_server = nullptr;
  server->reset();
  return 0;
}
