#include "agent/daemon/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "agent/daemon/device_info.h"
#include "agent/daemon/serial_worker.h"
#include "agent/protocol/features.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/protocol/status.h"

namespace dfarm::agent {
namespace {

using Clock = std::chrono::steady_clock;

// A peer that stops reading cannot hold a connection thread forever.
constexpr std::chrono::milliseconds kWriteTimeout{60'000};
// Once its first byte arrived, a frame must be complete within this time.
constexpr std::chrono::milliseconds kFrameReadTimeout{60'000};
// Connections served at once (each has a thread).
constexpr size_t kMaxConnections = 64;
// Threads at once, counting connections closed to make room that have not
// ended yet (one in an authentication delay ends after it).
constexpr size_t kMaxConnectionThreads = 2 * kMaxConnections;

std::mutex g_log_mutex;

}  // namespace

void AgentLog(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::fprintf(stderr, "dfarm-agent: %s\n", line.c_str());
  std::fflush(stderr);
}

Result<ListenAddress> ParseListenAddress(const std::string& text, bool have_token) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return MakeError("invalid listen address '" + text + "': expected HOST:PORT");
  }
  ListenAddress addr;
  addr.host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535) {
    return MakeError("invalid listen address '" + text + "': port '" + port +
                     "' is not a number in 0..65535");
  }
  addr.port = static_cast<uint16_t>(std::stoul(port));
  if (addr.host == "localhost") addr.host = "127.0.0.1";
  in_addr in{};
  if (::inet_pton(AF_INET, addr.host.c_str(), &in) != 1) {
    return MakeError("invalid listen address '" + text + "': '" + addr.host +
                     "' is not an IPv4 address");
  }
  if ((ntohl(in.s_addr) >> 24) != 127 && !have_token) {
    return MakeError("refusing to listen on " + addr.host +
                     ": non-loopback listeners need --token-file FILE (a shared secret that "
                     "peers must prove before any request)");
  }
  return addr;
}

Result<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  std::string token;
  if (!options.token_file.empty()) {
    auto t = ReadTokenFile(options.token_file);
    if (!t) return t.error();
    token = std::move(*t);
  }
  ListenAddress addr;
  if (!options.stdio) {
    auto parsed = ParseListenAddress(options.listen, !token.empty());
    if (!parsed) return parsed.error();
    addr = *parsed;
  }
  if (options.store_dir.empty()) return MakeError("no artifact store folder given (--store)");
  // Before the store is touched: opening it removes upload temp files, and
  // the leftover reaper kills runners, which only a dead agent's may be.
  auto lock = StoreLock::Acquire(options.store_dir, AgentLog);
  if (!lock) return lock.error();
  auto store = ArtifactStore::Open(options.store_dir, options.max_artifact_bytes);
  if (!store) return store.error();
  (*store)->SetQuota(options.quota_bytes);
  (*store)->SetLog(AgentLog);

  std::unique_ptr<Server> server(new Server());
  server->store_lock_.emplace(std::move(*lock));
  server->options_ = options;
  server->token_ = std::move(token);
  server->throttle_ = std::make_unique<AuthThrottle>(options.auth_failure_delay);
  server->store_ = std::move(*store);
  SupervisorOptions supervisor_options = options.supervisor;
  if (!supervisor_options.log) supervisor_options.log = AgentLog;
  server->supervisor_ = std::make_unique<Supervisor>(server->store_.get(), supervisor_options);
  // An agent that died (SIGKILL) could not stop what its runners started.
  auto reaped = server->supervisor_->ReapLeftoverRunners();
  if (!reaped) return reaped.error();
  for (const std::string& line : *reaped) AgentLog(line);
  for (const std::string& line : server->supervisor_->PruneBundles()) AgentLog(line);
  server->device_ = CollectDeviceInfo();
  server->device_.protocol_version = kProtocolVersion;
  for (auto f : kKnownFeatures) {
    if (f == kFeatureAuthHmac && server->token_.empty()) continue;
    // A partner runner is started by its driver, which cannot go through a prefix.
    if (f == kFeatureSteppedPairs && !options.supervisor.runner_prefix.empty()) continue;
    server->device_.features.emplace_back(f);
  }
  server->host_ = options.stdio ? "stdio" : addr.host;

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return MakeError(std::string("cannot create the stop pipe: ") + strerror(errno));
  }
  server->stop_read_.reset(pipe_fds[0]);
  server->stop_write_.reset(pipe_fds[1]);
  if (options.stdio) return server;

  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return MakeError(std::string("cannot create a socket: ") + strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(addr.port);
  ::inet_pton(AF_INET, addr.host.c_str(), &sa.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return MakeError("cannot listen on " + options.listen + ": " + strerror(errno));
  }
  if (::listen(fd.get(), static_cast<int>(kMaxConnections)) != 0) {
    return MakeError("cannot listen on " + options.listen + ": " + strerror(errno));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  server->port_ = ntohs(sa.sin_port);
  server->listen_fd_ = std::move(fd);
  return server;
}

Server::~Server() {
  Stop();
  ReapFinished(/*all=*/true);
}

std::string Server::address() const {
  return options_.stdio ? host_ : host_ + ":" + std::to_string(port_);
}

void Server::Stop() {
  if (store_lock_) store_lock_->MarkStopping();
  char c = 'x';
  ssize_t ignored = ::write(stop_write_.get(), &c, 1);
  (void)ignored;
}

void Server::ReapFinished(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(conns_mutex_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all || (*it)->done) {
        if (all) ::shutdown((*it)->fd.get(), SHUT_RDWR);
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void Server::Serve() {
  AgentLog("serving on " + address() + ", store " + store_->root());
  for (;;) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      AgentLog(std::string("poll failed: ") + strerror(errno));
      break;
    }
    if (fds[1].revents) break;
    if (!fds[0].revents) continue;
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int cfd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (cfd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        AgentLog(std::string("accept failed: ") + strerror(errno));
      }
      continue;
    }
    int one = 1;
    ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ReapFinished(/*all=*/false);
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    {
      std::lock_guard<std::mutex> lock(conns_mutex_);
      if (!MakeRoomFor(ip)) {
        ::close(cfd);
        continue;
      }
    }
    auto conn = std::make_unique<Connection>();
    conn->fd.reset(cfd);
    conn->id = next_conn_id_++;
    conn->peer_address = ip;
    conn->peer = std::string(ip) + ":" + std::to_string(ntohs(peer.sin_port));
    Connection* raw = conn.get();
    {
      std::lock_guard<std::mutex> lock(conns_mutex_);
      conns_.push_back(std::move(conn));
    }
    raw->thread = std::thread([this, raw] { HandleConnection(raw); });
  }
  AgentLog("stopping");
  listen_fd_.reset();
  supervisor_->Shutdown();
  ReapFinished(/*all=*/true);
}

namespace {

std::vector<uint8_t> Bytes(const flatbuffers::Vector<uint8_t>* v) {
  return v ? std::vector<uint8_t>(v->begin(), v->end()) : std::vector<uint8_t>();
}

int64_t Ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Lowers a poll wait (-1: none set yet) to at most ms.
void WakeWithin(int64_t* wait_ms, int64_t ms) {
  *wait_ms = *wait_ms < 0 ? ms : std::min(*wait_ms, ms);
}

}  // namespace

bool Server::MakeRoomFor(const std::string& peer_address) {
  // conns_ is in accept order: the first match is the oldest.
  auto oldest_pending = [this](const std::string* peer) -> Connection* {
    for (auto& c : conns_) {
      if (c->done || c->evicted || c->admitted) continue;
      if (peer == nullptr || c->peer_address == *peer) return c.get();
    }
    return nullptr;
  };
  auto evict = [](Connection* c, const std::string& why) {
    AgentLog("connection " + std::to_string(c->id) + " (" + c->peer +
             "): closing it, it has not completed hello: " + why);
    c->evicted = true;
    ::shutdown(c->fd.get(), SHUT_RDWR);  // its thread sees the end of the stream
  };
  if (conns_.size() >= kMaxConnectionThreads) {
    AgentLog("refusing a connection from " + peer_address + ": " + std::to_string(conns_.size()) +
             " connection threads have not ended yet");
    return false;
  }
  size_t open = 0, pending_from_peer = 0;
  for (auto& c : conns_) {
    if (c->done || c->evicted) continue;
    ++open;
    if (!c->admitted && c->peer_address == peer_address) ++pending_from_peer;
  }
  const size_t cap = options_.max_pending_per_peer;
  if (cap > 0 && pending_from_peer >= cap) {
    if (Connection* c = oldest_pending(&peer_address)) {
      evict(c, std::to_string(pending_from_peer) + " connections from " + peer_address +
                   " are waiting for hello, at most " + std::to_string(cap));
      --open;
    }
  }
  if (open < kMaxConnections) return true;
  if (Connection* c = oldest_pending(nullptr)) {
    evict(c, "all " + std::to_string(kMaxConnections) + " connection slots are taken");
    return true;
  }
  AgentLog("refusing a connection: " + std::to_string(kMaxConnections) + " connections are open");
  return false;
}

bool Server::SleepUnlessStopped(std::chrono::milliseconds d) {
  auto end = Clock::now() + d;
  for (;;) {
    auto left = Ms(end - Clock::now());
    if (left <= 0) return true;
    pollfd p{stop_read_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1'000'000)));
    if (n > 0) return false;
  }
}

void Server::HandleConnection(Connection* conn) {
  const std::string who = "connection " + std::to_string(conn->id) + " (" + conn->peer + ")";
  ServeConnection(conn->fd.get(), conn->fd.get(), who, conn->peer_address, &conn->admitted);
  ::shutdown(conn->fd.get(), SHUT_RDWR);
  conn->done = true;
}

void Server::ServeStream(int in_fd, int out_fd) {
  AgentLog("serving on stdio, store " + store_->root());
  ServeConnection(in_fd, out_fd, "stdio", "stdio", nullptr);
  AgentLog("stopping");
  supervisor_->Shutdown();
}

// The protocol on one connection. The reader (Serve) runs the timers, reads
// frames and hands each to the handler of its message type; a job runs on
// job_thread_, which replies through Send() too. Borrows the server and the fds.
class Server::ProtocolSession {
 public:
  ProtocolSession(Server* server, int in_fd, int out_fd, const std::string& who,
                  const std::string& peer_address, std::atomic<bool>* admitted)
      : server_(server),
        in_fd_(in_fd),
        out_fd_(out_fd),
        who_(who),
        peer_address_(peer_address),
        admitted_(admitted),
        need_auth_(!server->token_.empty()),
        heartbeat_(server->options_.heartbeat_interval),
        opened_(Clock::now()),
        last_rx_(opened_) {}

  // Serves frames until the peer closes the stream, Stop(), a timeout or a
  // fatal error; then cancels a running job and waits for it.
  void Serve();

 private:
  // Answers one message (request id `id`); false closes the connection.
  using Handler = bool (ProtocolSession::*)(uint64_t id, const wire::Frame& frame);
  static Handler HandlerFor(wire::Body type);

  // Timers, run before each wait; each lowers *wait_ms to its next deadline
  // and returns false to close the connection.
  bool RunTimers(int64_t* wait_ms);
  bool CheckHelloDeadline(Clock::time_point now, int64_t* wait_ms);
  bool Heartbeat(Clock::time_point now, int64_t* wait_ms);
  bool SendProgressIfDue(Clock::time_point now, int64_t* wait_ms);

  // Hello first, then (with a token) AuthProof, then the handler of its type.
  bool Handle(const wire::Frame& frame);

  bool OnHello(uint64_t id, const wire::Frame& frame);
  bool OnAuthProof(uint64_t id, const wire::Frame& frame);
  bool OnPing(uint64_t id, const wire::Frame& frame);
  bool OnPong(uint64_t id, const wire::Frame& frame);
  bool OnHaveRequest(uint64_t id, const wire::Frame& frame);
  bool OnPutBegin(uint64_t id, const wire::Frame& frame);
  bool OnPutChunk(uint64_t id, const wire::Frame& frame);
  bool OnPutEnd(uint64_t id, const wire::Frame& frame);
  bool OnRunJob(uint64_t id, const wire::Frame& frame);
  bool OnCancelJob(uint64_t id, const wire::Frame& frame);
  bool OnDeviceStateRequest(uint64_t id, const wire::Frame& frame);
  bool OnUnexpected(uint64_t id, const wire::Frame& frame);

  // PutBegin with feature put_resume: answered; a refused upload is not open.
  bool ResumeUpload(uint64_t id, uint64_t size);
  // On committer_: syncs and installs the upload (when it has not failed
  // already), logs and sends its PutReply.
  void CommitAndReply(uint64_t id, const std::string& sha256, uint64_t received_bytes,
                      uint64_t resumed_at, ArtifactStore::Upload* upload, std::string error);
  // Waits until this connection's uploads that ended before now are stored
  // or refused (their PutReplies sent).
  void WaitForCommits() { committer_.Drain(); }
  // The job thread: runs the job, then sends "done" and the JobResult.
  void RunJobAndReply(const JobSpec& job, uint64_t id);

  bool Send(flatbuffers::FlatBufferBuilder& fbb);
  bool SendError(uint64_t id, const std::string& message);
  bool SendProgress(uint64_t id, const char* phase);
  // Sends the error, logs it and closes (returns false).
  bool Refuse(uint64_t id, const std::string& message);
  void AuthFailed(uint64_t id, const std::string& why);

  // Features both sides named at hello.
  struct Features {
    bool heartbeat = false;
    bool put_resume = false;
    bool plugin = false;
    bool inputs = false;
    bool cancel = false;
    bool progress = false;
    bool device_state = false;
    bool runner_kinds = false;
    bool stepped_pairs = false;
  };
  // Why a RunJob needs a feature the host did not negotiate; "" when none.
  std::string MissingFeature(const JobSpec& job) const;

  Server* const server_;
  const int in_fd_;
  const int out_fd_;
  const std::string who_;              // for logs: "connection 3 (ip:port)" or "stdio"
  const std::string peer_address_;     // for the authentication throttle
  std::atomic<bool>* const admitted_;  // the listener's flag, or null (stdio)
  const bool need_auth_;
  const std::chrono::milliseconds heartbeat_;
  const Clock::time_point opened_;
  std::mutex write_mutex_;  // the job thread replies too

  bool hello_done_ = false;
  bool authed_ = false;
  // Hello, and with a token authentication, are done (sets *admitted_).
  bool Admitted() const { return hello_done_ && (!need_auth_ || authed_); }
  void MarkAdmittedIfDone() {
    if (admitted_ && Admitted()) *admitted_ = true;
  }
  // How long the next frame may take: kFrameReadTimeout, or less before the hello deadline.
  std::chrono::milliseconds FrameReadTimeout() const;
  Features features_;
  std::vector<uint8_t> challenge_;  // ours, when authentication is required

  bool put_active_ = false;
  std::string put_sha256_;
  std::string put_error_;  // first failure of the current upload
  std::unique_ptr<ArtifactStore::Upload> upload_;
  uint64_t put_offset_ = 0;  // where a resumed upload started

  std::thread job_thread_;
  std::atomic<bool> job_running_{false};
  std::atomic<bool> cancel_job_{false};
  std::atomic<bool> cancelled_by_host_{false};
  uint64_t job_id_ = 0;  // the running job's RunJob request_id
  Clock::time_point job_start_;
  Clock::time_point next_progress_;
  // Held while sending JobProgress and while the job ends (job_running_ false,
  // "done", JobResult), so no "running" frame follows the JobResult.
  std::mutex progress_mutex_;

  uint64_t next_ping_id_ = kAgentRequestIdBit | 1;
  Clock::time_point last_rx_;
  Clock::time_point next_ping_;

  // The runner and plugins this connection's jobs named, pinned until it
  // closes: the host pushes them once per connection and never asks again, so
  // a quota eviction must not take them between its jobs.
  static constexpr size_t kMaxKeptArtifacts = 64;
  std::map<std::string, std::unique_ptr<ArtifactPin>> kept_;

  // Uploads whose PutEnd was read are synced, installed and answered here, in
  // PutEnd order, while the reader takes the next frames. Last member: its
  // destructor runs what is queued while the rest of the session still exists.
  std::mutex committing_mutex_;
  std::multiset<std::string> committing_;  // sha256s queued on committer_
  std::atomic<bool> reply_failed_{false};  // a PutReply could not be sent
  SerialWorker committer_;
};

void Server::ProtocolSession::Serve() {
  AgentLog(who_ + ": opened");
  for (;;) {
    // Wait for a frame, Stop(), the authentication deadline or the next timer.
    int64_t wait_ms = -1;
    if (!RunTimers(&wait_ms)) break;
    pollfd fds[2] = {{in_fd_, POLLIN, 0}, {server_->stop_read_.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(wait_ms, 1'000'000)));
    if (n < 0 && errno != EINTR) {
      AgentLog(who_ + ": poll failed: " + strerror(errno) + "; closing");
      break;
    }
    if (n > 0 && fds[1].revents) break;
    if (n <= 0 || !fds[0].revents) continue;

    auto received = ReadFrame(in_fd_, FrameReadTimeout());
    if (!received) {
      const std::string deadline =
          Admitted() ? ""
                     : " before completing hello (deadline " +
                           std::to_string(server_->options_.hello_timeout.count()) + " ms)";
      AgentLog(who_ + ": " + received.message() + deadline + "; closing the connection");
      break;
    }
    if (received->eof) break;
    last_rx_ = Clock::now();
    if (!Handle(*received->frame()) || reply_failed_) break;
  }
  // Uploads the host finished are stored even when it has gone.
  WaitForCommits();
  // The stdio agent ends with its one connection: a successor on the store
  // (its host restarted) waits for the lock from now on instead of refusing.
  if (server_->options_.stdio && server_->store_lock_) server_->store_lock_->MarkStopping();
  if (job_thread_.joinable()) {
    cancel_job_ = true;  // nobody is left to read its result
    job_thread_.join();
  }
  AgentLog(who_ + ": closed");
}

bool Server::ProtocolSession::RunTimers(int64_t* wait_ms) {
  const auto now = Clock::now();
  return CheckHelloDeadline(now, wait_ms) && Heartbeat(now, wait_ms) &&
         SendProgressIfDue(now, wait_ms);
}

std::chrono::milliseconds Server::ProtocolSession::FrameReadTimeout() const {
  if (Admitted()) return kFrameReadTimeout;
  auto left = Ms(opened_ + server_->options_.hello_timeout - Clock::now());
  return std::chrono::milliseconds(std::clamp<int64_t>(left, 1, kFrameReadTimeout.count()));
}

bool Server::ProtocolSession::CheckHelloDeadline(Clock::time_point now, int64_t* wait_ms) {
  if (Admitted()) return true;
  const auto timeout = server_->options_.hello_timeout;
  auto left = Ms(opened_ + timeout - now);
  if (left <= 0) {
    AgentLog(who_ + (hello_done_ ? ": did not authenticate within " : ": sent no hello within ") +
             std::to_string(timeout.count()) + " ms; closing");
    return false;
  }
  WakeWithin(wait_ms, left);
  return true;
}

bool Server::ProtocolSession::Heartbeat(Clock::time_point now, int64_t* wait_ms) {
  if (!job_running_) return true;
  if (!features_.heartbeat || heartbeat_.count() <= 0) {
    // Without heartbeats, still wake up now and then to notice a finished job.
    WakeWithin(wait_ms, 1000);
    return true;
  }
  if (now - last_rx_ > 3 * heartbeat_) {
    AgentLog(who_ + ": the host was silent for " + std::to_string(Ms(now - last_rx_)) +
             " ms during a job; cancelling the job and closing");
    return false;
  }
  if (now >= next_ping_) {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, next_ping_id_++, wire::CreatePing(fbb));
    if (!Send(fbb)) return false;
    next_ping_ = now + heartbeat_;
  }
  WakeWithin(wait_ms, std::max<int64_t>(1, Ms(next_ping_ - now)));
  return true;
}

bool Server::ProtocolSession::SendProgressIfDue(Clock::time_point now, int64_t* wait_ms) {
  if (!features_.progress || !job_running_) return true;
  std::lock_guard<std::mutex> lock(progress_mutex_);
  if (job_running_ && now >= next_progress_) {
    if (!SendProgress(job_id_, "running")) return false;
    next_progress_ = now + server_->options_.progress_interval;
  }
  WakeWithin(wait_ms, std::max<int64_t>(1, Ms(next_progress_ - now)));
  return true;
}

Server::ProtocolSession::Handler Server::ProtocolSession::HandlerFor(wire::Body type) {
  static const auto kHandlers = [] {
    std::array<Handler, static_cast<size_t>(wire::Body::MAX) + 1> table;
    table.fill(&ProtocolSession::OnUnexpected);
    auto set = [&table](wire::Body body, Handler handler) {
      table[static_cast<size_t>(body)] = handler;
    };
    set(wire::Body::Hello, &ProtocolSession::OnHello);
    set(wire::Body::AuthProof, &ProtocolSession::OnAuthProof);
    set(wire::Body::Ping, &ProtocolSession::OnPing);
    set(wire::Body::Pong, &ProtocolSession::OnPong);
    set(wire::Body::HaveRequest, &ProtocolSession::OnHaveRequest);
    set(wire::Body::PutBegin, &ProtocolSession::OnPutBegin);
    set(wire::Body::PutChunk, &ProtocolSession::OnPutChunk);
    set(wire::Body::PutEnd, &ProtocolSession::OnPutEnd);
    set(wire::Body::RunJob, &ProtocolSession::OnRunJob);
    set(wire::Body::CancelJob, &ProtocolSession::OnCancelJob);
    set(wire::Body::DeviceStateRequest, &ProtocolSession::OnDeviceStateRequest);
    return table;
  }();
  // A body type from a newer schema is unexpected too.
  const auto index = static_cast<size_t>(type);
  return index < kHandlers.size() ? kHandlers[index] : &ProtocolSession::OnUnexpected;
}

bool Server::ProtocolSession::Handle(const wire::Frame& frame) {
  const uint64_t id = frame.request_id();
  const wire::Body type = frame.body_type();
  if (!hello_done_ && type != wire::Body::Hello) {
    SendError(id, std::string("expected Hello as the first message, got ") + BodyName(frame));
    AgentLog(who_ + ": first message was " + BodyName(frame) + ", not Hello; closing");
    return false;
  }
  if (hello_done_ && need_auth_ && !authed_ && type != wire::Body::AuthProof) {
    AuthFailed(id, std::string("expected AuthProof after hello, got ") + BodyName(frame));
    return false;
  }
  return (this->*HandlerFor(type))(id, frame);
}

bool Server::ProtocolSession::OnHello(uint64_t id, const wire::Frame& frame) {
  const auto* hello = frame.body_as_Hello();
  if (hello_done_) return SendError(id, "Hello was already received on this connection");
  const DeviceInfo& device = server_->device_;
  if (hello->protocol_version() != kProtocolVersion) {
    return Refuse(id, "protocol version mismatch: the host speaks version " +
                          std::to_string(hello->protocol_version()) + ", dfarm-agent " +
                          device.agent_version + " speaks version " +
                          std::to_string(kProtocolVersion));
  }
  DeviceInfo info = device;
  std::vector<std::string> theirs = Strings(hello->features());
  info.features.clear();
  for (const auto& f : device.features) {
    if (HasFeature(theirs, f)) info.features.push_back(f);
  }
  if (need_auth_ && !HasFeature(info.features, kFeatureAuthHmac)) {
    return Refuse(id,
                  "dfarm-agent requires token authentication (feature auth_hmac), which the host "
                  "does not speak");
  }
  features_.heartbeat = HasFeature(info.features, kFeatureHeartbeat);
  features_.put_resume = HasFeature(info.features, kFeaturePutResume);
  features_.plugin = HasFeature(info.features, kFeaturePlugin);
  features_.inputs = HasFeature(info.features, kFeatureInputs);
  features_.cancel = HasFeature(info.features, kFeatureCancel);
  features_.progress = HasFeature(info.features, kFeatureProgress);
  features_.device_state = HasFeature(info.features, kFeatureDeviceState);
  features_.runner_kinds = HasFeature(info.features, kFeatureRunnerKinds);
  features_.stepped_pairs = HasFeature(info.features, kFeatureSteppedPairs);
  const std::vector<uint8_t>* challenge = nullptr;
  if (need_auth_) {
    auto random = RandomBytes(kAuthChallengeBytes);
    if (!random) return Refuse(id, random.message());
    challenge_ = std::move(*random);
    challenge = &challenge_;
  }
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, BuildHelloReply(fbb, info, challenge));
  hello_done_ = true;
  MarkAdmittedIfDone();
  AgentLog(who_ + ": hello from '" + Str(hello->client_name()) + "'");
  return Send(fbb);
}

bool Server::ProtocolSession::OnAuthProof(uint64_t id, const wire::Frame& frame) {
  const auto* proof = frame.body_as_AuthProof();
  if (!need_auth_ || authed_) {
    return SendError(id, "unexpected AuthProof: the connection needs none now");
  }
  auto wait = server_->throttle_->Admit(peer_address_);
  if (wait.count() > 0) {
    AgentLog(who_ + ": holding an authentication attempt from " + peer_address_ + " for " +
             std::to_string(wait.count()) + " ms after earlier failures");
    if (!server_->SleepUnlessStopped(wait)) return false;
  }
  std::vector<uint8_t> host_challenge = Bytes(proof->challenge());
  if (!MacEquals(HostProof(server_->token_, challenge_), Bytes(proof->mac()))) {
    AuthFailed(id, "the host's proof does not match this agent's token");
    return false;
  }
  if (host_challenge.size() != kAuthChallengeBytes) {
    AuthFailed(id, "the host's challenge has " + std::to_string(host_challenge.size()) +
                       " bytes, expected " + std::to_string(kAuthChallengeBytes));
    return false;
  }
  server_->throttle_->RecordSuccess(peer_address_);
  authed_ = true;
  MarkAdmittedIfDone();
  AgentLog(who_ + ": authenticated");
  auto mac = AgentProof(server_->token_, host_challenge, challenge_);
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, wire::CreateAuthReply(fbb, fbb.CreateVector(mac)));
  return Send(fbb);
}

bool Server::ProtocolSession::OnPing(uint64_t id, const wire::Frame&) {
  if (!features_.heartbeat) {
    return SendError(id, "unexpected Ping: feature heartbeat was not negotiated");
  }
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, wire::CreatePong(fbb));
  return Send(fbb);
}

bool Server::ProtocolSession::OnPong(uint64_t, const wire::Frame&) {
  return true;  // liveness only (last_rx_)
}

bool Server::ProtocolSession::OnHaveRequest(uint64_t id, const wire::Frame& frame) {
  WaitForCommits();  // an artifact this connection finished uploading is in place
  std::vector<uint8_t> have;
  for (const auto& sha : Strings(frame.body_as_HaveRequest()->sha256s())) {
    bool present = server_->store_->Has(sha);
    if (present) server_->store_->Touch(sha);
    have.push_back(present ? 1 : 0);
  }
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, wire::CreateHaveReply(fbb, fbb.CreateVector(have)));
  return Send(fbb);
}

bool Server::ProtocolSession::OnPutBegin(uint64_t id, const wire::Frame& frame) {
  const auto* begin = frame.body_as_PutBegin();
  if (put_active_) {
    SendError(id, "PutBegin while the upload of " + put_sha256_.substr(0, 12) + " is still open");
    return false;
  }
  put_sha256_ = Str(begin->sha256());
  bool committing;
  {
    std::lock_guard<std::mutex> lock(committing_mutex_);
    committing = committing_.count(put_sha256_) > 0;
  }
  if (committing) WaitForCommits();  // the same artifact again: see how the last one ended
  put_error_.clear();
  put_offset_ = 0;
  if (features_.put_resume) return ResumeUpload(id, begin->size());
  put_active_ = true;
  auto upload = server_->store_->BeginUpload(put_sha256_, begin->size());
  if (upload) {
    upload_ = std::move(*upload);
  } else {
    put_error_ = upload.message();
  }
  return true;
}

bool Server::ProtocolSession::ResumeUpload(uint64_t id, uint64_t size) {
  auto upload = server_->store_->ResumeUpload(put_sha256_, size);
  flatbuffers::FlatBufferBuilder fbb;
  if (upload) {
    upload_ = std::move(*upload);
    put_active_ = true;
    put_offset_ = upload_->bytes_received();
    FinishFrame(fbb, id, wire::CreatePutBeginReplyDirect(fbb, true, "", put_offset_));
  } else {
    AgentLog(who_ + ": put " + put_sha256_.substr(0, 12) + ": " + upload.message());
    FinishFrame(fbb, id, wire::CreatePutBeginReplyDirect(fbb, false, upload.message().c_str(), 0));
  }
  return Send(fbb);
}

bool Server::ProtocolSession::OnPutChunk(uint64_t id, const wire::Frame& frame) {
  const auto* chunk = frame.body_as_PutChunk();
  if (!put_active_) {
    SendError(id, "PutChunk without PutBegin");
    return false;
  }
  if (upload_ && put_error_.empty()) {
    const auto* data = chunk->data();
    auto r =
        upload_->Write(chunk->offset(), data ? data->data() : nullptr, data ? data->size() : 0);
    if (!r) {
      put_error_ = r.message();
      upload_.reset();
    }
  }
  return true;
}

bool Server::ProtocolSession::OnPutEnd(uint64_t id, const wire::Frame&) {
  if (!put_active_) {
    SendError(id, "PutEnd without PutBegin");
    return false;
  }
  put_active_ = false;
  const uint64_t received_bytes = upload_ ? upload_->bytes_received() : 0;
  std::shared_ptr<ArtifactStore::Upload> upload(std::move(upload_));
  {
    std::lock_guard<std::mutex> lock(committing_mutex_);
    committing_.insert(put_sha256_);
  }
  // Even a refused upload's reply is queued, so PutReplies keep PutEnd order.
  committer_.Post([this, id, sha256 = put_sha256_, received_bytes, offset = put_offset_, upload,
                   error = put_error_]() mutable {
    CommitAndReply(id, sha256, received_bytes, offset, upload.get(), std::move(error));
    upload.reset();
    std::lock_guard<std::mutex> lock(committing_mutex_);
    committing_.erase(committing_.find(sha256));
  });
  return true;
}

void Server::ProtocolSession::CommitAndReply(uint64_t id, const std::string& sha256,
                                             uint64_t received_bytes, uint64_t resumed_at,
                                             ArtifactStore::Upload* upload, std::string error) {
  if (upload && error.empty()) {
    if (auto r = upload->Commit(); !r) error = r.message();
  }
  const bool ok = error.empty();
  std::string resumed = resumed_at > 0 ? ", resumed at " + std::to_string(resumed_at) : "";
  AgentLog(who_ + ": put " + sha256.substr(0, 12) + " (" + std::to_string(received_bytes) +
           " bytes" + resumed + "): " + (ok ? "stored" : error));
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, wire::CreatePutReplyDirect(fbb, ok, error.c_str(), received_bytes));
  if (!Send(fbb)) reply_failed_ = true;
}

std::string Server::ProtocolSession::MissingFeature(const JobSpec& job) const {
  if (!job.plugin_sha256.empty() && !features_.plugin) {
    return "RunJob names plugin_sha256 " + job.plugin_sha256.substr(0, 12) +
           " but the host did not negotiate feature 'plugin' at hello; refusing the job rather "
           "than running the delegate without its library";
  }
  if (!job.input_set_sha256s.empty() && !features_.inputs) {
    return "RunJob names " + std::to_string(job.input_set_sha256s.size()) +
           " input sets but the host did not negotiate feature 'inputs' at hello; refusing the "
           "job rather than running it on random inputs";
  }
  if (!job.runner_kind.empty() && !features_.runner_kinds) {
    return "RunJob names runner kind '" + job.runner_kind.substr(0, 64) +
           "' but the host did not negotiate feature 'runner_kinds' at hello; refusing the job "
           "rather than guessing its command line";
  }
  if (!job.partner_runner_sha256.empty() && !features_.stepped_pairs) {
    return "RunJob names partner_runner_sha256 " + job.partner_runner_sha256.substr(0, 12) +
           " but the host did not negotiate feature 'stepped_pairs' at hello (or this agent "
           "starts its runners through --runner-prefix); refusing the job rather than running "
           "the runner without its partner";
  }
  return "";
}

bool Server::ProtocolSession::OnRunJob(uint64_t id, const wire::Frame& frame) {
  if (job_running_) {
    return SendError(id, "RunJob while another job of this connection is running");
  }
  if (job_thread_.joinable()) job_thread_.join();
  WaitForCommits();  // the job may name what this connection just uploaded
  JobSpec job = ReadRunJob(*frame.body_as_RunJob());
  if (std::string missing = MissingFeature(job); !missing.empty()) return SendError(id, missing);
  std::vector<const std::string*> named = {&job.runner_sha256, &job.plugin_sha256,
                                           &job.partner_runner_sha256};
  for (const std::string& sha : job.input_set_sha256s) named.push_back(&sha);
  for (const std::string* sha : named) {
    if (IsValidSha256(*sha) && !kept_.count(*sha) && kept_.size() < kMaxKeptArtifacts) {
      kept_.emplace(*sha, std::make_unique<ArtifactPin>(server_->store_.get(), *sha));
    }
  }
  AgentLog(who_ + ": job " + std::to_string(id) + ": runner " + job.runner_sha256.substr(0, 12) +
           (job.runner_kind.empty() ? "" : " (" + job.runner_kind.substr(0, 64) + ")") +
           (job.partner_runner_sha256.empty()
                ? ""
                : " stepped with partner " + job.partner_runner_sha256.substr(0, 12)) +
           ", model " + job.model_sha256.substr(0, 12) + ", delegate " + job.delegate +
           (job.plugin_sha256.empty() ? "" : ", plugin " + job.plugin_sha256.substr(0, 12)) +
           (job.input_set_sha256s.empty()
                ? ""
                : ", " + std::to_string(job.input_set_sha256s.size()) + " input sets") +
           (job.cpu_affinity.empty() ? "" : ", cpus " + job.cpu_affinity.substr(0, 64)));
  job_running_ = true;
  cancel_job_ = false;
  cancelled_by_host_ = false;
  job_id_ = id;
  job_start_ = Clock::now();
  next_ping_ = job_start_ + heartbeat_;
  next_progress_ = job_start_ + server_->options_.progress_interval;
  if (features_.progress && !SendProgress(id, "starting")) {
    job_running_ = false;
    return false;
  }
  // The reader keeps serving (Ping, Have, Put, CancelJob) while the job runs.
  job_thread_ = std::thread([this, job = std::move(job), id] { RunJobAndReply(job, id); });
  return true;
}

void Server::ProtocolSession::RunJobAndReply(const JobSpec& job, uint64_t id) {
  JobResult result = server_->supervisor_->Run(job, &cancel_job_);
  if (cancelled_by_host_ && result.status == JobStatusName(JobStatus::kInfra)) {
    result.error = "cancelled by host";
  }
  AgentLog(who_ + ": job " + std::to_string(id) + ": " + result.status +
           (result.error.empty() ? "" : " (" + result.error + ")") +
           (result.state_note.empty() ? "" : " [" + result.state_note + "]"));
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, BuildJobResult(fbb, result));
  std::lock_guard<std::mutex> lock(progress_mutex_);
  job_running_ = false;  // before the reply: the host may send the next RunJob at once
  if (features_.progress) SendProgress(id, "done");
  Send(fbb);
}

bool Server::ProtocolSession::OnCancelJob(uint64_t id, const wire::Frame& frame) {
  if (!features_.cancel) {
    return SendError(id, "unexpected CancelJob: feature cancel was not negotiated");
  }
  uint64_t target = frame.body_as_CancelJob()->job_request_id();
  // A job that already ended (its JobResult may be on the way) is not an error.
  if (job_running_ && job_id_ == target) {
    AgentLog(who_ + ": job " + std::to_string(target) + ": cancelled by the host");
    cancelled_by_host_ = true;
    cancel_job_ = true;
  }
  return true;
}

bool Server::ProtocolSession::OnDeviceStateRequest(uint64_t id, const wire::Frame&) {
  if (!features_.device_state) {
    return SendError(id, "unexpected DeviceStateRequest: feature device_state was not negotiated");
  }
  DeviceState state =
      CollectDeviceState(server_->options_.supervisor.device_state_root, kBusyWindow);
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, wire::CreateDeviceStateReply(fbb, BuildDeviceState(fbb, state)));
  return Send(fbb);
}

bool Server::ProtocolSession::OnUnexpected(uint64_t id, const wire::Frame& frame) {
  return SendError(id, std::string("unexpected message ") + BodyName(frame) + " from the host");
}

bool Server::ProtocolSession::Send(flatbuffers::FlatBufferBuilder& fbb) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  auto r = WriteFrame(out_fd_, fbb, kWriteTimeout);
  if (!r) AgentLog(who_ + ": cannot send a reply: " + r.message());
  return r.ok();
}

bool Server::ProtocolSession::SendError(uint64_t id, const std::string& message) {
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, id, wire::CreateErrorReplyDirect(fbb, message.c_str()));
  return Send(fbb);
}

bool Server::ProtocolSession::SendProgress(uint64_t id, const char* phase) {
  flatbuffers::FlatBufferBuilder fbb;
  auto elapsed = static_cast<uint64_t>(std::max<int64_t>(0, Ms(Clock::now() - job_start_)));
  FinishFrame(fbb, id, wire::CreateJobProgressDirect(fbb, phase, elapsed));
  return Send(fbb);
}

bool Server::ProtocolSession::Refuse(uint64_t id, const std::string& message) {
  SendError(id, message);
  AgentLog(who_ + ": " + message + "; closing");
  return false;
}

void Server::ProtocolSession::AuthFailed(uint64_t id, const std::string& why) {
  auto [count, delay] = server_->throttle_->RecordFailure(peer_address_);
  AgentLog(who_ + ": authentication failed: " + why + " (failure " + std::to_string(count) +
           " from " + peer_address_ + "; its next attempt waits " + std::to_string(delay.count()) +
           " ms)");
  SendError(id, "authentication failed: " + why);
}

void Server::ServeConnection(int in_fd, int out_fd, const std::string& who,
                             const std::string& peer_address, std::atomic<bool>* admitted) {
  ProtocolSession session(this, in_fd, out_fd, who, peer_address, admitted);
  session.Serve();
}

}  // namespace dfarm::agent
