#include "agent/protocol/framing.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "flatbuffers/flatbuffers.h"

namespace dfarm::agent {
namespace {

constexpr size_t kPrefixBytes = 4;

// Milliseconds until deadline for poll(): -1 for none, 0 when past.
int PollTimeout(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left.count()) + 1;
}

// Waits until fd is ready for events; false with an error on timeout.
Result<void> WaitReady(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int timeout = PollTimeout(deadline);
    int n = ::poll(&p, 1, timeout);
    if (n > 0) return Ok();
    if (n == 0) return MakeError(std::string("timed out ") + what);
    if (errno != EINTR)
      return MakeError(std::string("poll failed ") + what + ": " + strerror(errno));
  }
}

// write() to a pipe whose reader is gone raises SIGPIPE; this keeps it from
// killing the process (EPIPE is returned instead), whatever its disposition.
ssize_t WriteWithoutSigpipe(int fd, const uint8_t* data, size_t size) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t n = ::write(fd, data, size);
  int err = errno;
  if (n < 0 && err == EPIPE && !sigismember(&old, SIGPIPE)) {
    timespec zero{0, 0};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

}  // namespace

const wire::Frame* ReceivedFrame::frame() const {
  return eof ? nullptr : wire::GetFrame(bytes.data());
}

Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) return Deadline::max();
  return std::chrono::steady_clock::now() + timeout;
}

Result<const wire::Frame*> VerifyFrame(const uint8_t* data, size_t size) {
  if (size < 8) return MakeError("bad frame: " + std::to_string(size) + " bytes is too short");
  if (!flatbuffers::BufferHasIdentifier(data, wire::FrameIdentifier())) {
    return MakeError("bad frame: not a DelegateFarm frame (identifier is not \"" +
                     std::string(wire::FrameIdentifier()) + "\")");
  }
  flatbuffers::Verifier verifier(data, size);
  if (!wire::VerifyFrameBuffer(verifier)) {
    return MakeError("bad frame: " + std::to_string(size) + " bytes fail the FlatBuffers verifier");
  }
  const wire::Frame* frame = wire::GetFrame(data);
  if (frame->body_type() == wire::Body::NONE || frame->body() == nullptr) {
    return MakeError("bad frame: frame " + std::to_string(frame->request_id()) +
                     " has no message (unknown message type from a newer peer?)");
  }
  return frame;
}

Result<void> WriteAll(int fd, const uint8_t* data, size_t size, Deadline deadline) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == ENOTSOCK) n = WriteWithoutSigpipe(fd, data + done, size - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto r = WaitReady(fd, POLLOUT, deadline, "writing a frame"); !r) return r;
      continue;
    }
    return MakeError(std::string("write failed: ") + strerror(errno));
  }
  return Ok();
}

Result<size_t> ReadExact(int fd, uint8_t* data, size_t size, Deadline deadline) {
  size_t done = 0;
  while (done < size) {
    if (auto r = WaitReady(fd, POLLIN, deadline, "reading a frame"); !r) return r.error();
    ssize_t n = ::read(fd, data + done, size - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) break;  // EOF
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return MakeError(std::string("read failed: ") + strerror(errno));
  }
  return done;
}

Result<ReceivedFrame> ReadFrame(int fd, std::chrono::milliseconds timeout) {
  Deadline deadline = DeadlineAfter(timeout);
  uint8_t prefix[kPrefixBytes];
  auto got = ReadExact(fd, prefix, kPrefixBytes, deadline);
  if (!got) return got.error();
  ReceivedFrame out;
  if (*got == 0) {
    out.eof = true;
    return out;
  }
  if (*got < kPrefixBytes) {
    return MakeError("truncated frame: stream ended after " + std::to_string(*got) +
                     " of 4 length bytes");
  }
  uint32_t length = uint32_t{prefix[0]} | uint32_t{prefix[1]} << 8 | uint32_t{prefix[2]} << 16 |
                    uint32_t{prefix[3]} << 24;
  if (length > kMaxFrameBytes) {
    return MakeError("bad frame: length " + std::to_string(length) + " exceeds the limit of " +
                     std::to_string(kMaxFrameBytes) + " bytes");
  }
  out.bytes.resize(length);
  got = ReadExact(fd, out.bytes.data(), length, deadline);
  if (!got) return got.error();
  if (*got < length) {
    return MakeError("truncated frame: stream ended after " + std::to_string(*got) + " of " +
                     std::to_string(length) + " bytes");
  }
  if (auto v = VerifyFrame(out.bytes.data(), out.bytes.size()); !v) return v.error();
  return out;
}

Result<void> WriteFrame(int fd, const uint8_t* data, size_t size,
                        std::chrono::milliseconds timeout) {
  if (size > kMaxFrameBytes) {
    return MakeError("frame of " + std::to_string(size) + " bytes exceeds the limit of " +
                     std::to_string(kMaxFrameBytes) + " bytes");
  }
  Deadline deadline = DeadlineAfter(timeout);
  uint32_t n = static_cast<uint32_t>(size);
  uint8_t prefix[kPrefixBytes] = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
                                  static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 24)};
  if (auto r = WriteAll(fd, prefix, kPrefixBytes, deadline); !r) return r;
  return WriteAll(fd, data, size, deadline);
}

Result<void> WriteFrame(int fd, const flatbuffers::FlatBufferBuilder& fbb,
                        std::chrono::milliseconds timeout) {
  return WriteFrame(fd, fbb.GetBufferPointer(), fbb.GetSize(), timeout);
}

}  // namespace dfarm::agent
