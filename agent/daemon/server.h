// Server: the dfarm-agent side of the protocol (agent/protocol/PROTOCOL.md). Listens
// on a TCP address (loopback unless a token file is given) or serves one
// stream pair (stdio), serves each connection on its own thread and runs jobs
// one at a time through its Supervisor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"
#include "agent/daemon/artifact_store.h"
#include "agent/daemon/store_lock.h"
#include "agent/daemon/supervisor.h"
#include "agent/protocol/auth.h"
#include "agent/protocol/types.h"

namespace dfarm::agent {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // IPv4 HOST:PORT; port 0 picks a free one
  std::string store_dir;
  uint64_t max_artifact_bytes = ArtifactStore::kDefaultMaxArtifactBytes;
  SupervisorOptions supervisor;
  // Peers must prove this file's token (HMAC-SHA256, feature auth_hmac).
  // Required for a non-loopback listener; empty: no authentication.
  std::string token_file;
  // Serve one connection on ServeStream's fds instead of listening (listen is ignored).
  bool stdio = false;
  uint64_t quota_bytes = 0;  // store disk quota with LRU eviction; 0: none
  // While a job runs on a connection that negotiated "heartbeat", the agent
  // pings the host this often and gives up on a host silent for 3 intervals.
  std::chrono::milliseconds heartbeat_interval{10'000};
  // Every connection (TCP or stdio, with or without a token) must complete
  // hello, and with a token authentication, within this time; else it is
  // closed. Also bounds the reading of any frame before then.
  std::chrono::milliseconds hello_timeout{10'000};
  // Connections from one peer address (IP) that have not completed hello
  // (and authentication) yet, at most; one more closes the oldest of them.
  // 0: no cap. Sessions past hello are never closed to make room.
  size_t max_pending_per_peer = 8;
  // Failed authentications: the next attempt from that address waits
  // auth_failure_delay * 2^(failures-1), at most 10 s.
  std::chrono::milliseconds auth_failure_delay{200};
  // With feature "progress": a JobProgress "running" frame this often while a job runs.
  std::chrono::milliseconds progress_interval{1'000};
};

struct ListenAddress {
  std::string host;  // dotted IPv4
  uint16_t port = 0;
};

// Parses "HOST:PORT" ("localhost" means 127.0.0.1). An address outside
// 127.0.0.0/8 is refused unless have_token: non-loopback listeners need
// token authentication (--token-file).
Result<ListenAddress> ParseListenAddress(const std::string& text, bool have_token = false);

class Server {
 public:
  // Locks the store (StoreLock: one agent per store, held until the server
  // is destroyed), opens it, kills what a dead predecessor's runners left
  // and binds the listening socket; Serve() then accepts. Fails with
  // ErrorKind::kConflict when another agent holds the store.
  static Result<std::unique_ptr<Server>> Create(const ServerOptions& options);
  ~Server();

  // The bound address, "127.0.0.1:<port>" (the real port when asked for 0).
  std::string address() const;
  uint16_t port() const { return port_; }
  const DeviceInfo& device() const { return device_; }

  // Accepts and serves connections until Stop(); then kills a running job,
  // closes every connection and joins their threads. Not for a stdio server.
  void Serve();

  // Serves one connection that reads in_fd and writes out_fd (the stdio
  // transport) until the peer closes it or Stop(); then kills a running job.
  // The fds stay owned by the caller.
  void ServeStream(int in_fd, int out_fd);

  // Asks Serve() to return. Async-signal-safe (one write to a pipe).
  void Stop();

 private:
  struct Connection {
    UniqueFd fd;
    uint64_t id = 0;
    std::string peer;          // "ip:port"
    std::string peer_address;  // "ip", for the authentication throttle
    std::thread thread;
    std::atomic<bool> done{false};
    // Hello (and authentication, with a token) completed: the session holds its slot.
    std::atomic<bool> admitted{false};
    // Closed by the listener to make room (MakeRoomFor); its thread may still end.
    std::atomic<bool> evicted{false};
  };

  Server() = default;
  void HandleConnection(Connection* conn);
  // One connection's protocol state and message handlers (server.cc).
  class ProtocolSession;
  // Serves the protocol on one connection (hello, authentication, then one
  // handler per request) until the peer closes it, Stop() or a fatal error.
  // who names the connection in logs; peer_address keys the auth throttle;
  // *admitted (may be null) is set once hello and authentication are done.
  void ServeConnection(int in_fd, int out_fd, const std::string& who,
                       const std::string& peer_address, std::atomic<bool>* admitted);
  // Before accepting a connection from peer_address (conns_mutex_ held):
  // closes the oldest connection of that peer without hello when it has
  // max_pending_per_peer of them, and the oldest of any peer when all
  // kMaxConnections slots are taken. False (refuse the new one) when every
  // slot is held by a session past hello, or too many closed ones linger.
  bool MakeRoomFor(const std::string& peer_address);
  // Sleeps for d unless Stop() comes first; false if it did.
  bool SleepUnlessStopped(std::chrono::milliseconds d);
  void ReapFinished(bool all);

  // Declared first: released last, after the supervisor has stopped the runners.
  std::optional<StoreLock> store_lock_;
  ServerOptions options_;
  std::string token_;  // empty: no authentication
  std::unique_ptr<AuthThrottle> throttle_;
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
