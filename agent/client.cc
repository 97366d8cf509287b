#include "agent/client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/framing.h"
#include "agent/messages.h"
#include "agent/unique_fd.h"

namespace dfarm::agent {
namespace {

#ifndef DFARM_VERSION
#define DFARM_VERSION "0.0.0"
#endif

// Time a RunJob reply may take beyond the job's own timeout (spawn, kill, reply).
constexpr std::chrono::milliseconds kJobGrace{30'000};
// Bound for a single request that does no job (hello, have, one upload step).
constexpr std::chrono::milliseconds kMinIoTimeout{30'000};

Result<UniqueFd> ConnectTcp(const std::string& host, uint16_t port,
                            std::chrono::milliseconds timeout) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) return MakeError("cannot resolve agent address " + where + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(list, ::freeaddrinfo);
  Deadline deadline = DeadlineAfter(timeout);
  std::string last_error = "no address";
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                         ai->ai_protocol));
    if (!fd) {
      last_error = strerror(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = strerror(errno);
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      int n = ::poll(&p, 1, std::max<int>(0, static_cast<int>(left.count())));
      if (n <= 0) {
        last_error = n == 0 ? "timed out" : strerror(errno);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_error = strerror(err);
        continue;
      }
    }
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return MakeError("cannot connect to agent at " + where + ": " + last_error);
}

class TcpAgentClient final : public AgentClient {
 public:
  TcpAgentClient(UniqueFd fd, std::string where, std::chrono::milliseconds io_timeout)
      : fd_(std::move(fd)), where_(std::move(where)), io_timeout_(io_timeout) {}

  Result<void> Hello() {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<std::string> features(std::begin(kKnownFeatures), std::end(kKnownFeatures));
    auto f = fbb.CreateVectorOfStrings(features);
    auto name = fbb.CreateString("dfarm " DFARM_VERSION);
    auto host_info = fbb.CreateString("pid " + std::to_string(::getpid()));
    FinishFrame(fbb, NextId(), wire::CreateHello(fbb, kProtocolVersion, f, name, host_info));
    auto reply = Call(fbb, wire::Body::HelloReply, io_timeout_);
    if (!reply) return reply.error();
    device_ = ReadHelloReply(*reply->frame()->body_as_HelloReply());
    if (device_.protocol_version != kProtocolVersion) {
      return MakeError("agent at " + where_ + " speaks protocol version " +
                       std::to_string(device_.protocol_version) + ", this dfarm speaks " +
                       std::to_string(kProtocolVersion));
    }
    return Ok();
  }

  const DeviceInfo& device() const override { return device_; }

  Result<std::vector<bool>> Have(const std::vector<std::string>& sha256s) override {
    flatbuffers::FlatBufferBuilder fbb;
    auto list = fbb.CreateVectorOfStrings(sha256s);
    FinishFrame(fbb, NextId(), wire::CreateHaveRequest(fbb, list));
    auto reply = Call(fbb, wire::Body::HaveReply, io_timeout_);
    if (!reply) return reply.error();
    const auto* have = reply->frame()->body_as_HaveReply()->have();
    size_t n = have ? have->size() : 0;
    if (n != sha256s.size()) {
      return Fail("answered " + std::to_string(n) + " of " + std::to_string(sha256s.size()) +
                  " artifacts in HaveReply");
    }
    std::vector<bool> out;
    for (size_t i = 0; i < n; ++i) out.push_back(have->Get(i) != 0);
    return out;
  }

  Result<uint64_t> PutArtifact(const std::string& path, std::string* sha256_out) override {
    auto sha = Sha256File(path);
    if (!sha) return sha.error();
    if (sha256_out) *sha256_out = *sha;
    auto have = Have({*sha});
    if (!have) return have.error();
    if ((*have)[0]) return uint64_t{0};

    UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st;
    if (!file || ::fstat(file.get(), &st) != 0) {
      return MakeError("cannot read '" + path + "': " + strerror(errno));
    }
    uint64_t size = static_cast<uint64_t>(st.st_size);
    {
      flatbuffers::FlatBufferBuilder fbb;
      FinishFrame(fbb, NextId(), wire::CreatePutBeginDirect(fbb, sha->c_str(), size));
      if (auto r = Send(fbb); !r) return r.error();
    }
    std::vector<uint8_t> buf(kPutChunkBytes);
    uint64_t sent = 0;
    std::string read_error;
    while (sent < size) {
      ssize_t n = ::read(file.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        read_error = n == 0 ? "file shrank while uploading" : strerror(errno);
        break;
      }
      flatbuffers::FlatBufferBuilder fbb(static_cast<size_t>(n) + 256);
      auto data = fbb.CreateVector(buf.data(), static_cast<size_t>(n));
      FinishFrame(fbb, NextId(), wire::CreatePutChunk(fbb, sent, data));
      if (auto r = Send(fbb); !r) return r.error();
      sent += static_cast<uint64_t>(n);
    }
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, NextId(), wire::CreatePutEnd(fbb));
    auto reply = Call(fbb, wire::Body::PutReply, io_timeout_);
    if (!reply) return reply.error();
    if (!read_error.empty()) return MakeError("cannot read '" + path + "': " + read_error);
    const auto* put = reply->frame()->body_as_PutReply();
    if (!put->ok()) {
      return MakeError("agent at " + where_ + " refused '" + path + "': " + Str(put->error()));
    }
    return sent;
  }

  Result<JobResult> RunJob(const JobSpec& job) override {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, NextId(), BuildRunJob(fbb, job));
    auto timeout = std::chrono::milliseconds(job.timeout_ms) + kJobGrace;
    auto reply = Call(fbb, wire::Body::JobResult, timeout);
    if (!reply) return reply.error();
    return ReadJobResult(*reply->frame()->body_as_JobResult());
  }

 private:
  uint64_t NextId() { return ++last_id_; }

  Error Fail(const std::string& why) {
    broken_ = true;
    return MakeError("agent at " + where_ + ": " + why);
  }

  Result<void> Send(const flatbuffers::FlatBufferBuilder& fbb) {
    if (broken_) return MakeError("connection to agent at " + where_ + " is closed after an error");
    auto r = WriteFrame(fd_.get(), fbb, io_timeout_);
    if (!r) return Fail(r.message());
    return Ok();
  }

  // Sends a request and reads its reply, which must carry the request's id
  // and be of type `want` (an ErrorReply becomes the error).
  Result<ReceivedFrame> Call(const flatbuffers::FlatBufferBuilder& fbb, wire::Body want,
                             std::chrono::milliseconds timeout) {
    if (auto r = Send(fbb); !r) return r.error();
    const uint64_t id = last_id_;
    auto reply = ReadFrame(fd_.get(), timeout);
    if (!reply) return Fail(reply.message());
    if (reply->eof) return Fail("connection closed by the agent");
    const wire::Frame& frame = *reply->frame();
    if (frame.body_type() == wire::Body::ErrorReply) {
      std::string message = Str(frame.body_as_ErrorReply()->message());
      return MakeError("agent at " + where_ + ": " + message);
    }
    if (frame.request_id() != id || frame.body_type() != want) {
      return Fail(std::string("unexpected reply ") + BodyName(frame) + " to request " +
                  std::to_string(id) + " (expected " + wire::EnumNameBody(want) + ")");
    }
    return reply;
  }

  UniqueFd fd_;
  std::string where_;
  std::chrono::milliseconds io_timeout_;
  DeviceInfo device_;
  uint64_t last_id_ = 0;
  bool broken_ = false;
};

}  // namespace

Result<std::unique_ptr<AgentClient>> AgentClient::Connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
  auto fd = ConnectTcp(host, port, timeout);
  if (!fd) return fd.error();
  auto client = std::make_unique<TcpAgentClient>(std::move(*fd), host + ":" + std::to_string(port),
                                                 std::max(timeout, kMinIoTimeout));
  if (auto r = client->Hello(); !r) return r.error();
  return std::unique_ptr<AgentClient>(std::move(client));
}

}  // namespace dfarm::agent
