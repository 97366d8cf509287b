#include "agent/client/client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "agent/base/sha256.h"
#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"
#include "agent/protocol/auth.h"
#include "agent/protocol/features.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/protocol/status.h"

namespace dfarm::agent {
namespace {

#ifndef DFARM_VERSION
#define DFARM_VERSION "0.0.0"
#endif

// Time a RunJob reply may take beyond the job's own timeout (spawn, kill, reply).
constexpr std::chrono::milliseconds kJobGrace{30'000};
// Bound for a single request that does no job (hello, have, one upload step).
constexpr std::chrono::milliseconds kMinIoTimeout{30'000};

using Clock = std::chrono::steady_clock;

int64_t Ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::vector<uint8_t> Bytes(const flatbuffers::Vector<uint8_t>* v) {
  return v ? std::vector<uint8_t>(v->begin(), v->end()) : std::vector<uint8_t>();
}

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
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
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

// One connection to one agent over a stream: a TCP socket, a socketpair to a
// spawned agent, or a pair of pipes.
// A sha256 a caller gave for the file at path (PutArtifactAs, PutArtifacts)
// must be one before anything is sent under it.
Result<void> CheckGivenSha256(const std::string& path, const std::string& sha256) {
  if (IsValidSha256(sha256)) return Ok();
  return MakeError("cannot push '" + path + "' as '" + sha256.substr(0, 80) +
                   "': not a sha256 (64 lowercase hex characters)");
}

class StreamAgentClient final : public AgentClient {
 public:
  StreamAgentClient(UniqueFd read_fd, UniqueFd write_fd, std::string where,
                    const ConnectOptions& options, pid_t child = -1)
      : read_fd_(std::move(read_fd)),
        write_fd_(std::move(write_fd)),
        where_(std::move(where)),
        io_timeout_(std::max(options.timeout, kMinIoTimeout)),
        token_(options.token),
        heartbeat_interval_(options.heartbeat_interval),
        child_(child) {}

  ~StreamAgentClient() override {
    read_fd_.reset();
    write_fd_.reset();
    if (child_ > 0) ReapChild(std::chrono::milliseconds(2000));
  }

  // Waits up to grace for the spawned agent to exit (SIGKILL after); its wait status.
  int ReapChild(std::chrono::milliseconds grace) {
    return ReapProcess(std::exchange(child_, -1), grace);
  }

  Result<void> Hello(std::chrono::milliseconds timeout) {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<std::string> features(std::begin(kKnownFeatures), std::end(kKnownFeatures));
    auto f = fbb.CreateVectorOfStrings(features);
    auto name = fbb.CreateString("dfarm " DFARM_VERSION);
    auto host_info = fbb.CreateString("pid " + std::to_string(::getpid()));
    FinishFrame(fbb, NextId(), wire::CreateHello(fbb, kProtocolVersion, f, name, host_info));
    auto reply = Call(fbb, wire::Body::HelloReply, timeout);
    if (!reply) return reply.error();
    const wire::HelloReply& hello = *reply->frame()->body_as_HelloReply();
    device_ = ReadHelloReply(hello);
    if (device_.protocol_version != kProtocolVersion) {
      return MakeError("agent at " + where_ + " speaks protocol version " +
                       std::to_string(device_.protocol_version) + ", this dfarm speaks " +
                       std::to_string(kProtocolVersion));
    }
    heartbeat_ = heartbeat_interval_.count() > 0 && HasFeature(device_.features, kFeatureHeartbeat);
    put_resume_ = HasFeature(device_.features, kFeaturePutResume);
    if (HasFeature(device_.features, kFeatureAuthHmac)) {
      return Authenticate(Bytes(hello.auth_challenge()), timeout);
    }
    if (!token_.empty()) {
      return Fail(
          "a token was given but the agent does not ask for one, so it cannot prove "
          "that it is the agent the token belongs to");
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
    return Push(path, *sha);
  }

  Result<uint64_t> PutArtifactAs(const std::string& path, const std::string& sha256,
                                 std::string* sha256_out) override {
    if (sha256_out) *sha256_out = sha256;
    if (auto r = CheckGivenSha256(path, sha256); !r) return r.error();
    auto sent = Push(path, sha256);
    if (!sent) return ExplainRefusal(path, sha256, sent.error(), sha256_out);
    return sent;
  }

  std::vector<Result<uint64_t>> PutArtifacts(const std::vector<ArtifactPush>& files,
                                             std::vector<std::string>* sha256s_out) override;

  Result<JobResult> RunJob(const JobSpec& job) override { return RunJob(job, RunJobOptions{}); }
  Result<JobResult> RunJob(const JobSpec& job, const RunJobOptions& options) override {
    if (!job.plugin_sha256.empty() && !HasFeature(device_.features, kFeaturePlugin)) {
      // Sent anyway, the field would be dropped and the runner given no plugin.
      return MakeError("agent at " + where_ + " does not speak feature 'plugin', so it cannot " +
                       "load delegate plugin " + job.plugin_sha256.substr(0, 12) +
                       " (update dfarm-agent on the device)");
    }
    if (!job.input_set_sha256s.empty() && !HasFeature(device_.features, kFeatureInputs)) {
      return MakeError("agent at " + where_ + " does not speak feature 'inputs', so it cannot " +
                       "run input sets (update dfarm-agent on the device)");
    }
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, NextId(), BuildRunJob(fbb, job));
    auto timeout = std::chrono::milliseconds(job.timeout_ms) + kJobGrace;
    CallHooks hooks{&options, HasFeature(device_.features, kFeatureCancel)};
    auto reply = Call(fbb, wire::Body::JobResult, timeout, &hooks);
    if (!reply) {
      if (hooks.dropped) {
        // The agent lacks "cancel": closing the connection made it kill the job.
        JobResult cancelled;
        cancelled.status = JobStatusName(JobStatus::kInfra);
        cancelled.error = "cancelled by host";
        return cancelled;
      }
      return reply.error();
    }
    return ReadJobResult(*reply->frame()->body_as_JobResult());
  }

  Result<DeviceState> QueryDeviceState() override {
    if (!HasFeature(device_.features, kFeatureDeviceState)) {
      return MakeError("agent at " + where_ +
                       " does not speak feature 'device_state' (update dfarm-agent on the "
                       "device)");
    }
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, NextId(), wire::CreateDeviceStateRequest(fbb));
    auto reply = Call(fbb, wire::Body::DeviceStateReply, io_timeout_);
    if (!reply) return reply.error();
    const auto* state = reply->frame()->body_as_DeviceStateReply()->state();
    if (!state) return Fail("DeviceStateReply without a state");
    return ReadDeviceState(*state);
  }

  const std::string& where() const { return where_; }
  pid_t child() const { return child_; }

 private:
  uint64_t NextId() { return ++last_id_; }

  Error Fail(const std::string& why) {
    broken_ = true;
    return MakeError("agent at " + where_ + ": " + why);
  }

  Result<void> Authenticate(const std::vector<uint8_t>& challenge,
                            std::chrono::milliseconds timeout) {
    if (token_.empty()) {
      return Fail(
          "the agent requires a token (feature auth_hmac) and none was given; pass "
          "the agent's token file");
    }
    if (challenge.size() != kAuthChallengeBytes) {
      return Fail("HelloReply carries a challenge of " + std::to_string(challenge.size()) +
                  " bytes, expected " + std::to_string(kAuthChallengeBytes));
    }
    auto ours = RandomBytes(kAuthChallengeBytes);
    if (!ours) return Fail(ours.message());
    flatbuffers::FlatBufferBuilder fbb;
    auto mac = fbb.CreateVector(HostProof(token_, challenge));
    auto ch = fbb.CreateVector(*ours);
    FinishFrame(fbb, NextId(), wire::CreateAuthProof(fbb, mac, ch));
    auto reply = Call(fbb, wire::Body::AuthReply, timeout);
    if (!reply) {
      broken_ = true;  // the agent closes the connection after a failed attempt
      return reply.error();
    }
    auto theirs = Bytes(reply->frame()->body_as_AuthReply()->mac());
    if (!MacEquals(AgentProof(token_, *ours, challenge), theirs)) {
      return Fail(
          "the agent's proof does not match the token: it is not the agent the token "
          "belongs to");
    }
    return Ok();
  }

  Result<void> Send(const flatbuffers::FlatBufferBuilder& fbb) {
    if (broken_) return MakeError("connection to agent at " + where_ + " is closed after an error");
    auto r = WriteFrame(write_fd_.get(), fbb, io_timeout_);
    if (!r) return Fail(r.message());
    return Ok();
  }

  // Sends a request and reads until its reply, which must carry the
  // request's id and be of type `want` (an ErrorReply becomes the error).
  // Meanwhile the agent's Pings are answered and, with heartbeats, the agent
  // is pinged; an agent silent for 3 heartbeat intervals is given up on.
  // What a RunJob's Call watches besides the reply.
  struct CallHooks {
    const RunJobOptions* options;
    bool can_cancel;  // feature "cancel"
    bool cancel_sent = false;
    bool dropped = false;  // set when the call ended by dropping the connection to cancel
  };

  Result<ReceivedFrame> Call(const flatbuffers::FlatBufferBuilder& fbb, wire::Body want,
                             std::chrono::milliseconds timeout, CallHooks* hooks = nullptr) {
    if (auto r = Send(fbb); !r) return r.error();
    return Await(last_id_, want, timeout, hooks);
  }

  // Reads until the reply to request id (as Call). PutReplies to pipelined
  // uploads (pending_puts_) that arrive meanwhile are kept there.
  Result<ReceivedFrame> Await(uint64_t id, wire::Body want, std::chrono::milliseconds timeout,
                              CallHooks* hooks = nullptr) {
    const std::atomic<bool>* cancel = hooks ? hooks->options->cancel : nullptr;
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    auto last_rx = start;
    auto next_ping = start + heartbeat_interval_;
    for (;;) {
      auto now = Clock::now();
      if (now >= deadline) {
        return Fail("no " + std::string(wire::EnumNameBody(want)) + " to request " +
                    std::to_string(id) + " within " + std::to_string(timeout.count()) + " ms");
      }
      int64_t wait_ms = Ms(deadline - now) + 1;
      if (heartbeat_) {
        if (now - last_rx > 3 * heartbeat_interval_) {
          return Fail("the agent sent nothing for " + std::to_string(Ms(now - last_rx)) +
                      " ms (3 heartbeats missed) while waiting for " + wire::EnumNameBody(want));
        }
        if (now >= next_ping) {
          flatbuffers::FlatBufferBuilder ping;
          FinishFrame(ping, NextId(), wire::CreatePing(ping));
          if (auto r = Send(ping); !r) return r.error();
          next_ping = now + heartbeat_interval_;
        }
        wait_ms = std::min<int64_t>(wait_ms, Ms(next_ping - now) + 1);
      }
      if (cancel && !hooks->cancel_sent && cancel->load()) {
        hooks->cancel_sent = true;
        if (!hooks->can_cancel) {
          hooks->dropped = true;
          return Fail(
              "job cancelled by the host; the agent does not speak feature 'cancel', so "
              "the connection was dropped");
        }
        flatbuffers::FlatBufferBuilder cancel_fbb;
        FinishFrame(cancel_fbb, NextId(), wire::CreateCancelJob(cancel_fbb, id));
        if (auto r = Send(cancel_fbb); !r) return r.error();
      }
      if (cancel && !hooks->cancel_sent) wait_ms = std::min<int64_t>(wait_ms, 50);
      pollfd p{read_fd_.get(), POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(wait_ms, 1'000'000)));
      if (n < 0 && errno != EINTR) return Fail(std::string("poll failed: ") + strerror(errno));
      if (n <= 0) continue;
      auto reply = ReadFrame(read_fd_.get(), io_timeout_);
      if (!reply) return Fail(reply.message());
      if (reply->eof) return Fail("connection closed by the agent");
      last_rx = Clock::now();
      const wire::Frame& frame = *reply->frame();
      if (frame.body_type() == wire::Body::Ping && heartbeat_) {
        flatbuffers::FlatBufferBuilder pong;
        FinishFrame(pong, frame.request_id(), wire::CreatePong(pong));
        if (auto r = Send(pong); !r) return r.error();
        continue;
      }
      if (frame.body_type() == wire::Body::Pong && heartbeat_) continue;
      if (frame.body_type() == wire::Body::JobProgress) {
        if (frame.request_id() == id && hooks && hooks->options->on_progress) {
          const auto* progress = frame.body_as_JobProgress();
          hooks->options->on_progress(JobProgress{Str(progress->phase()), progress->elapsed_ms()});
        }
        continue;
      }
      if (frame.body_type() == wire::Body::PutReply && frame.request_id() != id) {
        auto pending = pending_puts_.find(frame.request_id());
        if (pending != pending_puts_.end() && !pending->second) {
          const auto* put = frame.body_as_PutReply();
          pending->second = PutOutcome{put->ok(), Str(put->error())};
          continue;
        }
      }
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
  }

  // Pushes the file at path as artifact sha256 unless the agent has it; the
  // payload bytes sent. The agent checks the sha256 as it writes.
  Result<uint64_t> Push(const std::string& path, const std::string& sha256) {
    auto have = Have({sha256});
    if (!have) return have.error();
    if ((*have)[0]) return uint64_t{0};
    auto started = StartPut(path, sha256);
    if (!started) return started.error();
    return FinishPut(path, *started);
  }

  // After a push of the file at path under a sha256 the caller held failed
  // with `error` on a usable connection: when the file's bytes now hash to
  // something else, it changed since it was hashed (which is why the agent
  // refused it), and the error says so and *sha256_out gets the new hash.
  // The file is read again only here, so a push reads it once.
  Error ExplainRefusal(const std::string& path, const std::string& sha256, const Error& error,
                       std::string* sha256_out) {
    if (broken_) return error;
    auto actual = Sha256File(path);
    if (!actual || *actual == sha256) return error;
    if (sha256_out) *sha256_out = *actual;
    return MakeError("'" + path + "' changed since it was hashed: its bytes hash to " + *actual +
                     ", not " + sha256 + "; the agent stored nothing");
  }

  // The agent's PutReply to an upload.
  struct PutOutcome {
    bool ok = false;
    std::string error;
  };
  // An upload whose PutEnd is sent and whose PutReply is still to be read.
  struct PendingPut {
    uint64_t id = 0;  // the PutEnd's request id
    uint64_t sent = 0;
    std::string read_error;  // why the file could not be read whole ("" when it could)
  };

  // Sends one upload up to its PutEnd without waiting for the PutReply
  // (FinishPut reads it). An error before PutEnd was sent (the file cannot be
  // opened, the agent refused PutBegin, the connection broke) is returned.
  Result<PendingPut> StartPut(const std::string& path, const std::string& sha256) {
    UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st;
    if (!file || ::fstat(file.get(), &st) != 0) {
      return MakeError("cannot read '" + path + "': " + strerror(errno));
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    auto offset = BeginPut(path, sha256, size);
    if (!offset) return offset.error();
    PendingPut pending;
    pending.sent = size - *offset;
    if (*offset > 0 && ::lseek(file.get(), static_cast<off_t>(*offset), SEEK_SET) < 0) {
      pending.read_error = strerror(errno);
    }
    if (pending.read_error.empty()) {
      auto streamed = SendChunks(file.get(), *offset, size);
      if (!streamed) return streamed.error();
      pending.read_error = *streamed;
    }
    flatbuffers::FlatBufferBuilder fbb;
    pending.id = NextId();
    FinishFrame(fbb, pending.id, wire::CreatePutEnd(fbb));
    if (auto r = Send(fbb); !r) return r.error();
    pending_puts_.emplace(pending.id, std::nullopt);
    return pending;
  }

  // Reads the PutReply of an upload StartPut sent (or takes the one Await
  // kept); the payload bytes sent, or why the upload failed.
  Result<uint64_t> FinishPut(const std::string& path, const PendingPut& pending) {
    auto outcome = AwaitPutReply(pending.id);
    if (!outcome) return outcome.error();
    if (!pending.read_error.empty()) {
      return MakeError("cannot read '" + path + "': " + pending.read_error);
    }
    if (!outcome->ok) {
      return MakeError("agent at " + where_ + " refused '" + path + "': " + outcome->error);
    }
    return pending.sent;
  }

  // The PutReply to the PutEnd of request id: kept by Await, or read now.
  Result<PutOutcome> AwaitPutReply(uint64_t id) {
    auto it = pending_puts_.find(id);
    if (it != pending_puts_.end() && it->second) {
      PutOutcome kept = std::move(*it->second);
      pending_puts_.erase(it);
      return kept;
    }
    if (broken_) {
      pending_puts_.erase(id);
      return MakeError("connection to agent at " + where_ + " is closed after an error");
    }
    auto reply = Await(id, wire::Body::PutReply, io_timeout_);
    pending_puts_.erase(id);
    if (!reply) return reply.error();
    const auto* put = reply->frame()->body_as_PutReply();
    return PutOutcome{put->ok(), Str(put->error())};
  }

  // Sends PutBegin; the offset to send from (nonzero only when the agent,
  // with put_resume, already holds part of the artifact).
  Result<uint64_t> BeginPut(const std::string& path, const std::string& sha256, uint64_t size) {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, NextId(), wire::CreatePutBeginDirect(fbb, sha256.c_str(), size));
    if (!put_resume_) {
      if (auto r = Send(fbb); !r) return r.error();
      return uint64_t{0};
    }
    auto reply = Call(fbb, wire::Body::PutBeginReply, io_timeout_);
    if (!reply) return reply.error();
    const auto* begin = reply->frame()->body_as_PutBeginReply();
    if (!begin->ok()) {
      return MakeError("agent at " + where_ + " refused '" + path + "': " + Str(begin->error()));
    }
    if (begin->offset() > size) {
      return Fail("offered to resume '" + path + "' at offset " + std::to_string(begin->offset()) +
                  ", beyond its " + std::to_string(size) + " bytes");
    }
    return begin->offset();
  }

  // Sends bytes [offset, size) of the file as PutChunks, each read straight
  // into its frame (one builder, reused: no copy between the file and the
  // socket). Why the file could not be read ("" when it could); an error is
  // the connection's.
  Result<std::string> SendChunks(int fd, uint64_t offset, uint64_t size) {
    flatbuffers::FlatBufferBuilder fbb(
        static_cast<size_t>(std::min<uint64_t>(kPutChunkBytes, size - offset)) + 256);
    for (uint64_t sent = offset; sent < size;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kPutChunkBytes, size - sent));
      fbb.Clear();
      uint8_t* data = nullptr;
      auto vector = fbb.CreateUninitializedVector(want, &data);
      if (std::string why = ReadFull(fd, data, want); !why.empty()) return why;
      FinishFrame(fbb, NextId(), wire::CreatePutChunk(fbb, sent, vector));
      if (auto r = Send(fbb); !r) return r.error();
      sent += want;
    }
    return std::string();
  }

  // Reads exactly size bytes; why not ("" when it did).
  static std::string ReadFull(int fd, uint8_t* data, size_t size) {
    for (size_t done = 0; done < size;) {
      ssize_t n = ::read(fd, data + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return strerror(errno);
      if (n == 0) return "file shrank while uploading";
      done += static_cast<size_t>(n);
    }
    return "";
  }

  UniqueFd read_fd_, write_fd_;  // write_fd_ is empty when both are one fd
  std::string where_;
  std::chrono::milliseconds io_timeout_;
  std::string token_;
  std::chrono::milliseconds heartbeat_interval_;
  pid_t child_ = -1;
  DeviceInfo device_;
  uint64_t last_id_ = 0;
  bool broken_ = false;
  bool heartbeat_ = false;
  bool put_resume_ = false;
  // PutEnd request id -> its PutReply once read (unset: still to come).
  std::map<uint64_t, std::optional<PutOutcome>> pending_puts_;
};

// An error of PutArtifacts for the file at path: its message names the file.
Error NamingFile(const std::string& path, const Error& error) {
  if (error.message.find("'" + path + "'") != std::string::npos) return error;
  return Error{"cannot push '" + path + "': " + error.message, error.kind};
}

std::vector<Result<uint64_t>> StreamAgentClient::PutArtifacts(
    const std::vector<ArtifactPush>& files, std::vector<std::string>* sha256s_out) {
  const size_t n = files.size();
  std::vector<Result<uint64_t>> results(n, Result<uint64_t>(uint64_t{0}));
  std::vector<std::string> shas(n);
  // Each file's sha256: the one given, or its hash now.
  std::vector<size_t> asked;  // files to ask Have about, in order
  for (size_t i = 0; i < n; ++i) {
    const ArtifactPush& f = files[i];
    if (f.sha256.empty()) {
      auto sha = Sha256File(f.path);
      if (!sha) {
        results[i] = NamingFile(f.path, sha.error());
        continue;
      }
      shas[i] = *sha;
    } else {
      shas[i] = f.sha256;
      if (auto r = CheckGivenSha256(f.path, f.sha256); !r) {
        results[i] = r.error();
        continue;
      }
    }
    asked.push_back(i);
  }
  std::vector<std::string> names;
  for (size_t i : asked) names.push_back(shas[i]);
  auto have = names.empty() ? Result<std::vector<bool>>(std::vector<bool>()) : Have(names);
  // Each missing artifact once, every upload sent before any PutReply is read.
  struct Started {
    size_t index;
    PendingPut pending;
  };
  std::vector<Started> started;
  std::map<std::string, size_t> first;             // sha256 -> the file that pushes it
  std::vector<std::pair<size_t, size_t>> repeats;  // (file, the earlier file of its sha256)
  for (size_t k = 0; k < asked.size(); ++k) {
    const size_t i = asked[k];
    if (!have) {
      results[i] = NamingFile(files[i].path, have.error());
      continue;
    }
    if ((*have)[k]) continue;  // 0 bytes sent
    if (auto [it, inserted] = first.emplace(shas[i], i); !inserted) {
      repeats.emplace_back(i, it->second);
      continue;
    }
    auto pending = StartPut(files[i].path, shas[i]);
    if (!pending) {
      results[i] = NamingFile(files[i].path, pending.error());
      continue;
    }
    started.push_back({i, std::move(*pending)});
  }
  for (const Started& s : started) {
    const ArtifactPush& f = files[s.index];
    auto sent = FinishPut(f.path, s.pending);
    if (sent) {
      results[s.index] = std::move(sent);
    } else if (f.sha256.empty()) {
      results[s.index] = NamingFile(f.path, sent.error());
    } else {
      results[s.index] =
          NamingFile(f.path, ExplainRefusal(f.path, f.sha256, sent.error(), &shas[s.index]));
    }
  }
  for (auto [i, earlier] : repeats) {
    if (!results[earlier]) results[i] = NamingFile(files[i].path, results[earlier].error());
  }
  if (sha256s_out) *sha256s_out = std::move(shas);
  return results;
}

}  // namespace

Result<std::unique_ptr<AgentClient>> AgentClient::Connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
  ConnectOptions options;
  options.timeout = timeout;
  return Connect(host, port, options);
}

Result<std::unique_ptr<AgentClient>> AgentClient::Connect(const std::string& host, uint16_t port,
                                                          const ConnectOptions& options) {
  auto fd = ConnectTcp(host, port, options.timeout);
  if (!fd) return fd.error();
  int dup = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return MakeError(std::string("cannot duplicate a socket: ") + strerror(errno));
  auto client = std::make_unique<StreamAgentClient>(std::move(*fd), UniqueFd(dup),
                                                    host + ":" + std::to_string(port), options);
  if (auto r = client->Hello(std::max(options.timeout, kMinIoTimeout)); !r) return r.error();
  return std::unique_ptr<AgentClient>(std::move(client));
}

Result<std::unique_ptr<AgentClient>> AgentClient::ConnectFds(int read_fd, int write_fd,
                                                             const std::string& name,
                                                             const ConnectOptions& options) {
  UniqueFd in(read_fd);
  UniqueFd out(write_fd == read_fd ? ::fcntl(read_fd, F_DUPFD_CLOEXEC, 0) : write_fd);
  if (!in || !out) return MakeError("cannot talk to agent at " + name + ": bad file descriptor");
  // Non-blocking writes, so the write timeout holds on pipes as on sockets.
  ::fcntl(out.get(), F_SETFL, ::fcntl(out.get(), F_GETFL) | O_NONBLOCK);
  auto client = std::make_unique<StreamAgentClient>(std::move(in), std::move(out), name, options);
  if (auto r = client->Hello(std::max(options.timeout, kMinIoTimeout)); !r) return r.error();
  return std::unique_ptr<AgentClient>(std::move(client));
}

Result<std::unique_ptr<AgentClient>> AgentClient::Spawn(const std::vector<std::string>& argv,
                                                        const ConnectOptions& options,
                                                        const std::string& stderr_file) {
  if (argv.empty()) return MakeError("cannot start an agent: empty command line");
  const std::string name = "stdio:" + argv[0];
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return MakeError("cannot start agent '" + argv[0] + "': socketpair: " + strerror(errno));
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  UniqueFd log;
  if (!stderr_file.empty()) {
    auto opened = OpenForAppend(stderr_file);
    if (!opened)
      return MakeError("cannot open agent log '" + stderr_file + "': " + strerror(errno));
    log = std::move(*opened);
  }
  SpawnOptions spawn;
  spawn.stdin_fd = theirs.get();
  spawn.stdout_fd = theirs.get();
  spawn.stderr_fd = log.get();
  spawn.search_path = true;
  auto spawned = SpawnProcess(argv, spawn);
  if (!spawned) return spawned.error();
  pid_t pid = *spawned;
  theirs.reset();
  int dup = ::fcntl(ours.get(), F_DUPFD_CLOEXEC, 0);
  auto client =
      std::make_unique<StreamAgentClient>(std::move(ours), UniqueFd(dup), name, options, pid);
  if (auto r = client->Hello(options.timeout); !r) {
    // Say how the process ended when it is what broke the hello.
    int status = -1;
    if (TryReap(pid, &status)) {
      return MakeError(r.message() + " (agent command '" + argv[0] + "' " +
                       DescribeWaitStatus(status) + ")");
    }
    return r.error();
  }
  return std::unique_ptr<AgentClient>(std::move(client));
}

}  // namespace dfarm::agent
