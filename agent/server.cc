#include "agent/server.h"

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

#include "agent/device_info.h"
#include "agent/framing.h"
#include "agent/messages.h"

namespace dfarm::agent {
namespace {

// A peer that stops reading cannot hold a connection thread forever.
constexpr std::chrono::milliseconds kWriteTimeout{60'000};

std::mutex g_log_mutex;

}  // namespace

void AgentLog(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::fprintf(stderr, "dfarm-agent: %s\n", line.c_str());
  std::fflush(stderr);
}

Result<ListenAddress> ParseListenAddress(const std::string& text) {
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
  if ((ntohl(in.s_addr) >> 24) != 127) {
    return MakeError("refusing to listen on " + addr.host +
                     ": non-loopback listeners need --token-file (not yet supported)");
  }
  return addr;
}

Result<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  auto addr = ParseListenAddress(options.listen);
  if (!addr) return addr.error();
  if (options.store_dir.empty()) return MakeError("no artifact store folder given (--store)");
  auto store = ArtifactStore::Open(options.store_dir, options.max_artifact_bytes);
  if (!store) return store.error();

  std::unique_ptr<Server> server(new Server());
  server->store_ = std::move(*store);
  server->supervisor_ = std::make_unique<Supervisor>(server->store_.get(), options.supervisor);
  server->device_ = CollectDeviceInfo();
  server->device_.protocol_version = kProtocolVersion;
  for (auto f : kKnownFeatures) server->device_.features.emplace_back(f);
  server->host_ = addr->host;

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return MakeError(std::string("cannot create the stop pipe: ") + strerror(errno));
  }
  server->stop_read_.reset(pipe_fds[0]);
  server->stop_write_.reset(pipe_fds[1]);

  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return MakeError(std::string("cannot create a socket: ") + strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(addr->port);
  ::inet_pton(AF_INET, addr->host.c_str(), &sa.sin_addr);
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

std::string Server::address() const { return host_ + ":" + std::to_string(port_); }

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
    auto conn = std::make_unique<Connection>();
    conn->fd.reset(cfd);
    conn->id = next_conn_id_++;
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
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
  bool put_active = false;
  std::string put_sha256;
  std::string put_error;  // first failure of the current upload
  std::unique_ptr<ArtifactStore::Upload> upload;
};

}  // namespace

void Server::HandleConnection(Connection* conn) {
  const std::string who = "connection " + std::to_string(conn->id) + " (" + conn->peer + ")";
  const int fd = conn->fd.get();
  Session s;
  AgentLog(who + ": opened");

  auto send = [&](flatbuffers::FlatBufferBuilder& fbb) {
    auto r = WriteFrame(fd, fbb, kWriteTimeout);
    if (!r) AgentLog(who + ": cannot send a reply: " + r.message());
    return r.ok();
  };
  auto send_error = [&](uint64_t id, const std::string& message) {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, id, wire::CreateErrorReplyDirect(fbb, message.c_str()));
    return send(fbb);
  };

  for (;;) {
    auto received = ReadFrame(fd);
    if (!received) {
      AgentLog(who + ": " + received.message() + "; closing the connection");
      break;
    }
    if (received->eof) break;
    const wire::Frame& frame = *received->frame();
    const uint64_t id = frame.request_id();
    const wire::Body type = frame.body_type();

    if (!s.hello_done && type != wire::Body::Hello) {
      send_error(id, std::string("expected Hello as the first message, got ") + BodyName(frame));
      AgentLog(who + ": first message was " + BodyName(frame) + ", not Hello; closing");
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
          if (std::find(theirs.begin(), theirs.end(), f) != theirs.end()) info.features.push_back(f);
        }
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, BuildHelloReply(fbb, info));
        s.hello_done = true;
        AgentLog(who + ": hello from '" + Str(hello->client_name()) + "'");
        keep_going = send(fbb);
        break;
      }
      case wire::Body::HaveRequest: {
        std::vector<uint8_t> have;
        for (const auto& sha : Strings(frame.body_as_HaveRequest()->sha256s())) {
          have.push_back(store_->Has(sha) ? 1 : 0);
        }
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, wire::CreateHaveReply(fbb, fbb.CreateVector(have)));
        keep_going = send(fbb);
        break;
      }
      case wire::Body::PutBegin: {
        const auto* begin = frame.body_as_PutBegin();
        if (s.put_active) {
          send_error(id, "PutBegin while the upload of " + s.put_sha256.substr(0, 12) +
                             " is still open");
          keep_going = false;
          break;
        }
        s.put_active = true;
        s.put_sha256 = Str(begin->sha256());
        s.put_error.clear();
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
        AgentLog(who + ": put " + s.put_sha256.substr(0, 12) + " (" +
                 std::to_string(received_bytes) + " bytes): " + (ok ? "stored" : s.put_error));
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id,
                    wire::CreatePutReplyDirect(fbb, ok, s.put_error.c_str(), received_bytes));
        keep_going = send(fbb);
        break;
      }
      case wire::Body::RunJob: {
        JobSpec job = ReadRunJob(*frame.body_as_RunJob());
        AgentLog(who + ": job " + std::to_string(id) + ": runner " +
                 job.runner_sha256.substr(0, 12) + ", model " + job.model_sha256.substr(0, 12) +
                 ", delegate " + job.delegate);
        JobResult result = supervisor_->Run(job);
        AgentLog(who + ": job " + std::to_string(id) + ": " + result.status +
                 (result.error.empty() ? "" : " (" + result.error + ")"));
        flatbuffers::FlatBufferBuilder fbb;
        FinishFrame(fbb, id, BuildJobResult(fbb, result));
        keep_going = send(fbb);
        break;
      }
      default:
        keep_going = send_error(id, std::string("unexpected message ") + BodyName(frame) +
                                        " from the host");
        break;
    }
    if (!keep_going) break;
  }
  AgentLog(who + ": closed");
  ::shutdown(fd, SHUT_RDWR);
  conn->done = true;
}

}  // namespace dfarm::agent
