// Constants of the agent protocol (agent/protocol/PROTOCOL.md) shared by dfarm-agent
// and AgentClient. Message ids come from the schema (dfarm_protocol.fbs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/protocol/dfarm_protocol_generated.h"
#include "agent/protocol/features.h"

namespace dfarm::agent {

// Bumped on any change a peer of the other version could misread. Peers of
// different versions refuse each other at hello.
inline constexpr uint32_t kProtocolVersion = 1;

// Largest frame (length prefix excluded) either side sends or accepts.
inline constexpr uint32_t kMaxFrameBytes = 4u << 20;
// Payload bytes per PutChunk.
inline constexpr size_t kPutChunkBytes = 1u << 20;

// Ids of frames the agent starts (its Pings) have this bit set; host request
// ids count up from 1 and never reach it.
inline constexpr uint64_t kAgentRequestIdBit = uint64_t{1} << 63;

// Bytes of an authentication challenge (HelloReply.auth_challenge, AuthProof.challenge).
inline constexpr size_t kAuthChallengeBytes = 32;

}  // namespace dfarm::agent
