// Frames a peer may send that the FlatBuffers builder never makes: a vector
// of 8-byte scalars whose elements sit 4 bytes off an 8-byte boundary. The
// verifier checks only the alignment of a vector's length prefix (4 bytes),
// so such a frame verifies; the readers in messages.cc must load its
// elements without assuming alignment. Shared by the protocol's tests and the
// frame fuzzer's seeds (agent/fuzz/frame_seeds.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"

namespace dfarm::agent::testing {

// Finishes into `fbb` a HelloReply frame (request id 1) whose
// core_max_freq_khz holds `freqs`, each element at offset 4 modulo 8 in the
// finished buffer (the frame without its length prefix), which must then be
// read from an 8-byte aligned copy for the misalignment to hold.
inline void BuildMisalignedHelloReply(flatbuffers::FlatBufferBuilder& fbb,
                                      const std::vector<uint64_t>& freqs) {
  const size_t bytes = freqs.size() * sizeof(uint64_t);
  // A vector of 4-byte elements as far as alignment goes; 8-byte elements in it.
  fbb.StartVector(freqs.size(), sizeof(uint32_t));
  // The buffer is built from its end and finished at a multiple of 8 (the
  // table's ulong fields): elements that end at 4 modulo 8 from the end start there too.
  if ((fbb.GetSize() + bytes) % 8 == 0) fbb.Pad(4);
  std::vector<uint8_t> raw;
  for (uint64_t f : freqs) {
    for (int i = 0; i < 8; ++i) raw.push_back(static_cast<uint8_t>(f >> (8 * i)));
  }
  fbb.PushBytes(raw.data(), raw.size());
  flatbuffers::Offset<flatbuffers::Vector<uint64_t>> vec(fbb.EndVector(freqs.size()));
  auto features = fbb.CreateVectorOfStrings({"artifacts"});
  auto os = fbb.CreateString("Linux");
  auto reply = wire::CreateHelloReply(fbb, kProtocolVersion, features, /*agent_version=*/0, os,
                                      /*abi=*/0, /*cpu=*/0, /*cores=*/2,
                                      /*memory_bytes=*/uint64_t{1} << 33, /*hostname=*/0,
                                      /*auth_challenge=*/0, /*os_release=*/0,
                                      /*kernel_version=*/0, vec);
  FinishFrame(fbb, 1, reply);
}

}  // namespace dfarm::agent::testing
