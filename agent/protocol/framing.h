// Length-prefixed FlatBuffer frames over a stream socket (agent/protocol/PROTOCOL.md):
// a 4-byte little-endian length, then that many bytes holding one verified
// dfarm.wire.Frame. Nothing here throws or aborts on bad input: a short read,
// an oversize length or bytes that fail the FlatBuffers Verifier are errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/protocol.h"

namespace dfarm::agent {

// A frame read off the wire. frame() points into bytes and lives as long as
// this object; it is null only when eof is set.
struct ReceivedFrame {
  std::vector<uint8_t> bytes;
  bool eof = false;  // the peer closed the stream cleanly between frames
  const wire::Frame* frame() const;
};

// No deadline: wait as long as it takes.
inline constexpr std::chrono::milliseconds kNoTimeout{-1};

// Checks that data is one whole, well-formed Frame with a body; returns the
// root (pointing into data) or an error saying what is wrong. data must be
// 8-byte aligned (a std::vector's or a FlatBufferBuilder's buffer is): the
// verifier checks alignment relative to data, and the accessors then load
// 8-byte fields directly.
Result<const wire::Frame*> VerifyFrame(const uint8_t* data, size_t size);

// Reads one frame from fd. timeout bounds the whole frame (kNoTimeout: none).
// EOF before the first byte of a frame is ReceivedFrame{eof = true}; EOF
// inside a frame is an error ("truncated frame").
Result<ReceivedFrame> ReadFrame(int fd, std::chrono::milliseconds timeout = kNoTimeout);

// Writes the length prefix and the frame bytes (for fbb: its finished buffer,
// see FinishFrame). Fails on an oversize frame without writing anything.
Result<void> WriteFrame(int fd, const uint8_t* data, size_t size,
                        std::chrono::milliseconds timeout = kNoTimeout);
Result<void> WriteFrame(int fd, const flatbuffers::FlatBufferBuilder& fbb,
                        std::chrono::milliseconds timeout = kNoTimeout);

// Builds Frame{request_id, body} into fbb and finishes it.
template <typename T>
void FinishFrame(flatbuffers::FlatBufferBuilder& fbb, uint64_t request_id,
                 flatbuffers::Offset<T> body) {
  auto frame = wire::CreateFrame(fbb, request_id, wire::BodyTraits<T>::enum_value, body.Union());
  wire::FinishFrameBuffer(fbb, frame);
}

// Low-level I/O used by the framing and tests: write all / read exactly n
// bytes, honouring an absolute deadline. ReadExact returns the number of
// bytes read before EOF (< n only at EOF).
using Deadline = std::chrono::steady_clock::time_point;
Deadline DeadlineAfter(std::chrono::milliseconds timeout);
Result<void> WriteAll(int fd, const uint8_t* data, size_t size, Deadline deadline);
Result<size_t> ReadExact(int fd, uint8_t* data, size_t size, Deadline deadline);

}  // namespace dfarm::agent
