// Server: the dfarm-agent side of the protocol (agent/PROTOCOL.md). Listens
// on a loopback TCP address, serves each connection on its own thread and
// runs jobs one at a time through its Supervisor.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/artifact_store.h"
#include "agent/client.h"
#include "agent/result.h"
#include "agent/supervisor.h"
#include "agent/unique_fd.h"

namespace dfarm::agent {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // IPv4 HOST:PORT; port 0 picks a free one
  std::string store_dir;
  uint64_t max_artifact_bytes = ArtifactStore::kDefaultMaxArtifactBytes;
  SupervisorOptions supervisor;
};

struct ListenAddress {
  std::string host;  // dotted IPv4
  uint16_t port = 0;
};

// Parses "HOST:PORT" ("localhost" means 127.0.0.1) and refuses any address
// outside 127.0.0.0/8: non-loopback listeners need token auth (not yet).
Result<ListenAddress> ParseListenAddress(const std::string& text);

class Server {
 public:
  // Opens the store and binds the listening socket; Serve() then accepts.
  static Result<std::unique_ptr<Server>> Create(const ServerOptions& options);
  ~Server();

  // The bound address, "127.0.0.1:<port>" (the real port when asked for 0).
  std::string address() const;
  uint16_t port() const { return port_; }
  const DeviceInfo& device() const { return device_; }

  // Accepts and serves connections until Stop(); then kills a running job,
  // closes every connection and joins their threads.
  void Serve();

  // Asks Serve() to return. Async-signal-safe (one write to a pipe).
  void Stop();

 private:
  struct Connection {
    UniqueFd fd;
    uint64_t id = 0;
    std::string peer;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Server() = default;
  void HandleConnection(Connection* conn);
  void ReapFinished(bool all);

  std::unique_ptr<ArtifactStore> store_;
  std::unique_ptr<Supervisor> supervisor_;
  DeviceInfo device_;
  std::string host_;
  uint16_t port_ = 0;
  UniqueFd listen_fd_;
  UniqueFd stop_read_, stop_write_;
  std::mutex conns_mutex_;
  std::list<std::unique_ptr<Connection>> conns_;
  uint64_t next_conn_id_ = 1;
};

// One line to stderr, prefixed "dfarm-agent: ", whole even across threads.
void AgentLog(const std::string& line);

}  // namespace dfarm::agent
