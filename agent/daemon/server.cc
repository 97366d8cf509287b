#include "agent/daemon/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/daemon/device_info.h"
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
  auto store = ArtifactStore::Open(options.store_dir, options.max_artifact_bytes);
  if (!store) return store.error();
  (*store)->SetQuota(options.quota_bytes);

  std::unique_ptr<Server> server(new Server());
  server->options_ = options;
  server->token_ = std::move(token);
  server->throttle_ = std::make_unique<AuthThrottle>(options.auth_failure_delay);
  server->store_ = std::move(*store);
  server->supervisor_ = std::make_unique<Supervisor>(server->store_.get(), options.supervisor);
  server->device_ = CollectDeviceInfo();
  server->device_.protocol_version = kProtocolVersion;
  for (auto f : kKnownFeatures) {
    if (f == kFeatureAuthHmac && server->token_.empty()) continue;
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
  if (::listen(fd.get(), 16) != 0) {
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
    {
      std::lock_guard<std::mutex> lock(conns_mutex_);
      if (conns_.size() >= kMaxConnections) {
        AgentLog("refusing a connection: " + std::to_string(kMaxConnections) +
                 " connections are open");
        ::close(cfd);
        continue;
      }
    }
    auto conn = std::make_unique<Connection>();
    conn->fd.reset(cfd);
    conn->id = next_conn_id_++;
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
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

// Per-connection protocol state.
struct Session {
  bool hello_done = false;
  bool authed = false;
  bool heartbeat = false;  // negotiated features
  bool put_resume = false;
  bool plugin = false;
  bool cancel = false;
  bool progress = false;
  bool device_state = false;
  std::vector<uint8_t> challenge;  // ours, when authentication is required
  bool put_active = false;
  std::string put_sha256;
  std::string put_error;  // first failure of the current upload
  std::unique_ptr<ArtifactStore::Upload> upload;
  uint64_t put_offset = 0;  // where a resumed upload started
  std::thread job_thread;
  std::atomic<bool> job_running{false};
  std::atomic<bool> cancel_job{false};
  std::atomic<bool> cancelled_by_host{false};
  uint64_t job_id = 0;  // the running job's RunJob request_id
  Clock::time_point job_start;
  Clock::time_point next_progress;
  // Held while sending JobProgress and while the job ends (job_running false,
  // "done", JobResult), so no "running" frame follows the JobResult.
  std::mutex progress_mutex;
  uint64_t next_ping_id = kAgentRequestIdBit | 1;
  Clock::time_point last_rx;
  Clock::time_point next_ping;
};

bool HasFeature(const std::vector<std::string>& features, std::string_view f) {
  return std::find(features.begin(), features.end(), f) != features.end();
}

std::vector<uint8_t> Bytes(const flatbuffers::Vector<uint8_t>* v) {
  return v ? std::vector<uint8_t>(v->begin(), v->end()) : std::vector<uint8_t>();
}

int64_t Ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

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
  Converse(conn->fd.get(), conn->fd.get(), who, conn->peer_address);
  ::shutdown(conn->fd.get(), SHUT_RDWR);
  conn->done = true;
}

void Server::ServeStream(int in_fd, int out_fd) {
  AgentLog("serving on stdio, store " + store_->root());
  Converse(in_fd, out_fd, "stdio", "stdio");
  AgentLog("stopping");
  supervisor_->Shutdown();
}

void Server::Converse(int in_fd, int out_fd, const std::string& who,
                      const std::string& peer_address) {
  Session s;
  std::mutex write_mutex;  // the job thread replies too
  const bool need_auth = !token_.empty();
  const auto heartbeat = options_.heartbeat_interval;
  const auto opened = Clock::now();
  s.last_rx = opened;
  AgentLog(who + ": opened");

  auto send = [&](flatbuffers::FlatBufferBuilder& fbb) {
    std::lock_guard<std::mutex> lock(write_mutex);
    auto r = WriteFrame(out_fd, fbb, kWriteTimeout);
    if (!r) AgentLog(who + ": cannot send a reply: " + r.message());
    return r.ok();
  };
  auto send_error = [&](uint64_t id, const std::string& message) {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, id, wire::CreateErrorReplyDirect(fbb, message.c_str()));
    return send(fbb);
  };
  auto send_progress = [&](uint64_t id, const char* phase) {
    flatbuffers::FlatBufferBuilder fbb;
    auto elapsed = static_cast<uint64_t>(std::max<int64_t>(0, Ms(Clock::now() - s.job_start)));
    FinishFrame(fbb, id, wire::CreateJobProgressDirect(fbb, phase, elapsed));
    return send(fbb);
  };
  auto auth_failed = [&](uint64_t id, const std::string& why) {
    auto [count, delay] = throttle_->RecordFailure(peer_address);
    AgentLog(who + ": authentication failed: " + why + " (failure " + std::to_string(count) +
             " from " + peer_address + "; its next attempt waits " + std::to_string(delay.count()) +
             " ms)");
    send_error(id, "authentication failed: " + why);
  };

  for (;;) {
    // Wait for a frame, Stop(), the authentication deadline or the next heartbeat.
    auto now = Clock::now();
    int64_t wait_ms = -1;
    if (need_auth && !s.authed) {
      auto left = Ms(opened + options_.auth_timeout - now);
      if (left <= 0) {
        AgentLog(who + ": did not authenticate within " +
                 std::to_string(options_.auth_timeout.count()) + " ms; closing");
        break;
      }
      wait_ms = left;
    }
    if (s.heartbeat && s.job_running && heartbeat.count() > 0) {
      if (now - s.last_rx > 3 * heartbeat) {
        AgentLog(who + ": the host was silent for " + std::to_string(Ms(now - s.last_rx)) +
                 " ms during a job; cancelling the job and closing");
        break;
      }
      if (now >= s.next_ping) {
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, s.next_ping_id++, wire::CreatePing(fbb));
        if (!send(fbb)) break;
        s.next_ping = now + heartbeat;
      }
      int64_t to_ping = std::max<int64_t>(1, Ms(s.next_ping - now));
      wait_ms = wait_ms < 0 ? to_ping : std::min(wait_ms, to_ping);
    } else if (s.job_running) {
      // Without heartbeats, still wake up now and then to notice a finished job.
      wait_ms = wait_ms < 0 ? 1000 : std::min<int64_t>(wait_ms, 1000);
    }
    if (s.progress && s.job_running) {
      std::lock_guard<std::mutex> lock(s.progress_mutex);
      if (s.job_running && now >= s.next_progress) {
        if (!send_progress(s.job_id, "running")) break;
        s.next_progress = now + options_.progress_interval;
      }
      int64_t to_progress = std::max<int64_t>(1, Ms(s.next_progress - now));
      wait_ms = wait_ms < 0 ? to_progress : std::min(wait_ms, to_progress);
    }
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(wait_ms, 1'000'000)));
    if (n < 0 && errno != EINTR) {
      AgentLog(who + ": poll failed: " + strerror(errno) + "; closing");
      break;
    }
    if (n > 0 && fds[1].revents) break;
    if (n <= 0 || !fds[0].revents) continue;

    auto received = ReadFrame(in_fd, kFrameReadTimeout);
    if (!received) {
      AgentLog(who + ": " + received.message() + "; closing the connection");
      break;
    }
    if (received->eof) break;
    s.last_rx = Clock::now();
    const wire::Frame& frame = *received->frame();
    const uint64_t id = frame.request_id();
    const wire::Body type = frame.body_type();

    if (!s.hello_done && type != wire::Body::Hello) {
      send_error(id, std::string("expected Hello as the first message, got ") + BodyName(frame));
      AgentLog(who + ": first message was " + BodyName(frame) + ", not Hello; closing");
      break;
    }
    if (s.hello_done && need_auth && !s.authed && type != wire::Body::AuthProof) {
      auth_failed(id, std::string("expected AuthProof after hello, got ") + BodyName(frame));
      break;
    }
    bool keep_going = true;
    switch (type) {
      case wire::Body::Hello: {
        const auto* hello = frame.body_as_Hello();
        if (s.hello_done) {
          keep_going = send_error(id, "Hello was already received on this connection");
          break;
        }
        if (hello->protocol_version() != kProtocolVersion) {
          std::string msg = "protocol version mismatch: the host speaks version " +
                            std::to_string(hello->protocol_version()) + ", dfarm-agent " +
                            device_.agent_version + " speaks version " +
                            std::to_string(kProtocolVersion);
          send_error(id, msg);
          AgentLog(who + ": " + msg + "; closing");
          keep_going = false;
          break;
        }
        DeviceInfo info = device_;
        std::vector<std::string> theirs = Strings(hello->features());
        info.features.clear();
        for (const auto& f : device_.features) {
          if (HasFeature(theirs, f)) info.features.push_back(f);
        }
        if (need_auth && !HasFeature(info.features, kFeatureAuthHmac)) {
          std::string msg =
              "dfarm-agent requires token authentication (feature auth_hmac), which the host "
              "does not speak";
          send_error(id, msg);
          AgentLog(who + ": " + msg + "; closing");
          keep_going = false;
          break;
        }
        s.heartbeat = HasFeature(info.features, kFeatureHeartbeat);
        s.put_resume = HasFeature(info.features, kFeaturePutResume);
        s.plugin = HasFeature(info.features, kFeaturePlugin);
        s.cancel = HasFeature(info.features, kFeatureCancel);
        s.progress = HasFeature(info.features, kFeatureProgress);
        s.device_state = HasFeature(info.features, kFeatureDeviceState);
        const std::vector<uint8_t>* challenge = nullptr;
        if (need_auth) {
          auto random = RandomBytes(kAuthChallengeBytes);
          if (!random) {
            send_error(id, random.message());
            AgentLog(who + ": " + random.message() + "; closing");
            keep_going = false;
            break;
          }
          s.challenge = std::move(*random);
          challenge = &s.challenge;
        }
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, BuildHelloReply(fbb, info, challenge));
        s.hello_done = true;
        AgentLog(who + ": hello from '" + Str(hello->client_name()) + "'");
        keep_going = send(fbb);
        break;
      }
      case wire::Body::AuthProof: {
        const auto* proof = frame.body_as_AuthProof();
        if (!need_auth || s.authed) {
          keep_going = send_error(id, "unexpected AuthProof: the connection needs none now");
          break;
        }
        auto wait = throttle_->Admit(peer_address);
        if (wait.count() > 0) {
          AgentLog(who + ": holding an authentication attempt from " + peer_address + " for " +
                   std::to_string(wait.count()) + " ms after earlier failures");
          if (!SleepUnlessStopped(wait)) {
            keep_going = false;
            break;
          }
        }
        std::vector<uint8_t> host_challenge = Bytes(proof->challenge());
        if (!MacEquals(HostProof(token_, s.challenge), Bytes(proof->mac()))) {
          auth_failed(id, "the host's proof does not match this agent's token");
          keep_going = false;
          break;
        }
        if (host_challenge.size() != kAuthChallengeBytes) {
          auth_failed(id, "the host's challenge has " + std::to_string(host_challenge.size()) +
                              " bytes, expected " + std::to_string(kAuthChallengeBytes));
          keep_going = false;
          break;
        }
        throttle_->RecordSuccess(peer_address);
        s.authed = true;
        AgentLog(who + ": authenticated");
        auto mac = AgentProof(token_, host_challenge, s.challenge);
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, wire::CreateAuthReply(fbb, fbb.CreateVector(mac)));
        keep_going = send(fbb);
        break;
      }
      case wire::Body::Ping: {
        if (!s.heartbeat) {
          keep_going = send_error(id, "unexpected Ping: feature heartbeat was not negotiated");
          break;
        }
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, wire::CreatePong(fbb));
        keep_going = send(fbb);
        break;
      }
      case wire::Body::Pong:
        break;  // liveness only (last_rx)
      case wire::Body::HaveRequest: {
        std::vector<uint8_t> have;
        for (const auto& sha : Strings(frame.body_as_HaveRequest()->sha256s())) {
          bool present = store_->Has(sha);
          if (present) store_->Touch(sha);
          have.push_back(present ? 1 : 0);
        }
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, wire::CreateHaveReply(fbb, fbb.CreateVector(have)));
        keep_going = send(fbb);
        break;
      }
      case wire::Body::PutBegin: {
        const auto* begin = frame.body_as_PutBegin();
        if (s.put_active) {
          send_error(
              id, "PutBegin while the upload of " + s.put_sha256.substr(0, 12) + " is still open");
          keep_going = false;
          break;
        }
        s.put_sha256 = Str(begin->sha256());
        s.put_error.clear();
        s.put_offset = 0;
        if (s.put_resume) {
          // Answered; a refused upload is not open.
          auto upload = store_->ResumeUpload(s.put_sha256, begin->size());
          flatbuffers::FlatBufferBuilder fbb;
          if (upload) {
            s.upload = std::move(*upload);
            s.put_active = true;
            s.put_offset = s.upload->bytes_received();
            FinishFrame(fbb, id, wire::CreatePutBeginReplyDirect(fbb, true, "", s.put_offset));
          } else {
            AgentLog(who + ": put " + s.put_sha256.substr(0, 12) + ": " + upload.message());
            FinishFrame(fbb, id,
                        wire::CreatePutBeginReplyDirect(fbb, false, upload.message().c_str(), 0));
          }
          keep_going = send(fbb);
          break;
        }
        s.put_active = true;
        auto upload = store_->BeginUpload(s.put_sha256, begin->size());
        if (upload) {
          s.upload = std::move(*upload);
        } else {
          s.put_error = upload.message();
        }
        break;
      }
      case wire::Body::PutChunk: {
        const auto* chunk = frame.body_as_PutChunk();
        if (!s.put_active) {
          send_error(id, "PutChunk without PutBegin");
          keep_going = false;
          break;
        }
        if (s.upload && s.put_error.empty()) {
          const auto* data = chunk->data();
          auto r = s.upload->Write(chunk->offset(), data ? data->data() : nullptr,
                                   data ? data->size() : 0);
          if (!r) {
            s.put_error = r.message();
            s.upload.reset();
          }
        }
        break;
      }
      case wire::Body::PutEnd: {
        if (!s.put_active) {
          send_error(id, "PutEnd without PutBegin");
          keep_going = false;
          break;
        }
        uint64_t received_bytes = s.upload ? s.upload->bytes_received() : 0;
        if (s.upload && s.put_error.empty()) {
          if (auto r = s.upload->Commit(); !r) s.put_error = r.message();
        }
        s.upload.reset();
        s.put_active = false;
        bool ok = s.put_error.empty();
        std::string resumed =
            s.put_offset > 0 ? ", resumed at " + std::to_string(s.put_offset) : "";
        AgentLog(who + ": put " + s.put_sha256.substr(0, 12) + " (" +
                 std::to_string(received_bytes) + " bytes" + resumed +
                 "): " + (ok ? "stored" : s.put_error));
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id,
                    wire::CreatePutReplyDirect(fbb, ok, s.put_error.c_str(), received_bytes));
        keep_going = send(fbb);
        break;
      }
      case wire::Body::RunJob: {
        if (s.job_running) {
          keep_going = send_error(id, "RunJob while another job of this connection is running");
          break;
        }
        if (s.job_thread.joinable()) s.job_thread.join();
        JobSpec job = ReadRunJob(*frame.body_as_RunJob());
        if (!job.plugin_sha256.empty() && !s.plugin) {
          keep_going = send_error(
              id, "RunJob names plugin_sha256 " + job.plugin_sha256.substr(0, 12) +
                      " but the host did not negotiate feature 'plugin' at hello; refusing the "
                      "job rather than running the delegate without its library");
          break;
        }
        AgentLog(who + ": job " + std::to_string(id) + ": runner " +
                 job.runner_sha256.substr(0, 12) + ", model " + job.model_sha256.substr(0, 12) +
                 ", delegate " + job.delegate +
                 (job.plugin_sha256.empty() ? "" : ", plugin " + job.plugin_sha256.substr(0, 12)));
        s.job_running = true;
        s.cancel_job = false;
        s.cancelled_by_host = false;
        s.job_id = id;
        s.job_start = Clock::now();
        s.next_ping = s.job_start + heartbeat;
        s.next_progress = s.job_start + options_.progress_interval;
        if (s.progress && !send_progress(id, "starting")) {
          s.job_running = false;
          keep_going = false;
          break;
        }
        // The reader keeps serving (Ping, Have, Put, CancelJob) while the job runs.
        s.job_thread = std::thread([this, &s, &send, &send_progress, &who, job, id] {
          JobResult result = supervisor_->Run(job, &s.cancel_job);
          if (s.cancelled_by_host && result.status == JobStatusName(JobStatus::kInfra)) {
            result.error = "cancelled by host";
          }
          AgentLog(who + ": job " + std::to_string(id) + ": " + result.status +
                   (result.error.empty() ? "" : " (" + result.error + ")") +
                   (result.state_note.empty() ? "" : " [" + result.state_note + "]"));
          flatbuffers::FlatBufferBuilder fbb;
          FinishFrame(fbb, id, BuildJobResult(fbb, result));
          std::lock_guard<std::mutex> lock(s.progress_mutex);
          s.job_running = false;  // before the reply: the host may send the next RunJob at once
          if (s.progress) send_progress(id, "done");
          send(fbb);
        });
        break;
      }
      case wire::Body::CancelJob: {
        if (!s.cancel) {
          keep_going = send_error(id, "unexpected CancelJob: feature cancel was not negotiated");
          break;
        }
        uint64_t target = frame.body_as_CancelJob()->job_request_id();
        // A job that already ended (its JobResult may be on the way) is not an error.
        if (s.job_running && s.job_id == target) {
          AgentLog(who + ": job " + std::to_string(target) + ": cancelled by the host");
          s.cancelled_by_host = true;
          s.cancel_job = true;
        }
        break;
      }
      case wire::Body::DeviceStateRequest: {
        if (!s.device_state) {
          keep_going = send_error(id,
                                  "unexpected DeviceStateRequest: feature device_state was not "
                                  "negotiated");
          break;
        }
        DeviceState state = CollectDeviceState(options_.supervisor.device_state_root);
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, wire::CreateDeviceStateReply(fbb, BuildDeviceState(fbb, state)));
        keep_going = send(fbb);
        break;
      }
      default:
        keep_going =
            send_error(id, std::string("unexpected message ") + BodyName(frame) + " from the host");
        break;
    }
    if (!keep_going) break;
  }
  if (s.job_thread.joinable()) {
    s.cancel_job = true;  // nobody is left to read its result
    s.job_thread.join();
  }
  AgentLog(who + ": closed");
}

}  // namespace dfarm::agent
