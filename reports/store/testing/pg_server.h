// PgServer: a real, throwaway PostgreSQL server for tests and benchmarks.
// Start() runs initdb into a fresh folder under the temp dir and starts
// `postgres` on a free 127.0.0.1 port; the destructor stops it (immediate
// shutdown) and removes the folder. As root the server runs as the `postgres`
// system user (PostgreSQL refuses root); otherwise as the current user.
// See reports/store/testing/README.md.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::store::testing {

struct PgServerOptions {
  int max_connections = 100;
  // More IPv4 addresses to listen on besides 127.0.0.1, each "ADDRESS/PREFIX":
  // the server listens on ADDRESS and trusts clients from that network, e.g.
  // "10.231.7.1/24" on a veth to another network namespace. The addresses
  // must exist when Start() runs.
  std::vector<std::string> extra_listen;
};

class PgServer {
 public:
  // initdb (-A trust, -U dfarm, --no-sync, -E UTF8, --locale=C) into
  // $TMPDIR/dfarm-pg-<our pid>-XXXXXX/data, then postgres on a free loopback
  // port (a few tries when the port is taken in between), its unix socket in
  // the data dir, fsync=off; returns once it accepts connections. The server
  // is our child and gets SIGQUIT when the thread that called Start() ends
  // (also when the test crashes), so call it from the thread that owns the
  // PgServer. Errors name the step that failed and end with the log's tail.
  static Result<std::unique_ptr<PgServer>> Start(const PgServerOptions& options = {});

  // A server another process started and owns (dfarm-test-pg, the suite's
  // shared server) on 127.0.0.1:`port`: this handle creates and drops
  // databases there and never stops it.
  static std::unique_ptr<PgServer> Attach(int port);
  // Attach() to the CTest run's shared server: the one the file
  // $DFARM_TEST_PG_FILE names, while the process holding it lives; null when
  // there is none.
  static std::unique_ptr<PgServer> AttachToRun();

  // Immediate shutdown (SIGQUIT to the postmaster), waits for it, removes the folder.
  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  // The folder holding data/ and the logs; gone after destruction.
  const std::string& dir() const { return dir_; }
  // "postgresql://dfarm@127.0.0.1:PORT/DATABASE"
  std::string Url(const std::string& database = "postgres") const;
  // CREATE DATABASE `name` (fresh and empty, for one test); returns its Url.
  // `name` must match [a-z0-9_]+ (kInvalidInput otherwise).
  Result<std::string> CreateDatabase(const std::string& name);
  // DROP DATABASE `name` WITH (FORCE): its connections are ended first.
  Result<void> DropDatabase(const std::string& name);

 private:
  PgServer(std::string dir, pid_t pid, int port) : dir_(std::move(dir)), pid_(pid), port_(port) {}

  std::string dir_;
  pid_t pid_ = -1;  // the postmaster, our child
  int port_ = 0;
};

// Whether a server can be started here: the binaries (newest
// /usr/lib/postgresql/*/bin, or $DFARM_PG_BINDIR) and, as root, the `postgres`
// user and setpriv. `why` (optional) says what is missing.
bool PgServerAvailable(std::string* why);

// The shared server's file (dfarm-test-pg writes it): "PORT PID", PID the
// process holding the server. False when `file` is absent or malformed.
bool ReadSharedServerFile(const std::string& file, int* port, pid_t* pid);

}  // namespace dfarm::store::testing
