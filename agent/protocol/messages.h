// Conversions between the wire tables (dfarm_protocol.fbs) and the value
// types of agent/protocol/types.h, shared by the agent and the client so the two
// cannot disagree on a field.
#pragma once

#include <string>
#include <vector>

#include "agent/protocol/protocol.h"
#include "agent/protocol/types.h"

namespace dfarm::agent {

// A missing string field reads as "".
inline std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }
std::vector<std::string> Strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v);

// auth_challenge: set when the agent requires authentication (feature auth_hmac).
flatbuffers::Offset<wire::HelloReply> BuildHelloReply(
    flatbuffers::FlatBufferBuilder& fbb, const DeviceInfo& info,
    const std::vector<uint8_t>* auth_challenge = nullptr);
DeviceInfo ReadHelloReply(const wire::HelloReply& reply);

flatbuffers::Offset<wire::RunJob> BuildRunJob(flatbuffers::FlatBufferBuilder& fbb,
                                              const JobSpec& job);
JobSpec ReadRunJob(const wire::RunJob& msg);

flatbuffers::Offset<wire::DeviceState> BuildDeviceState(flatbuffers::FlatBufferBuilder& fbb,
                                                        const DeviceState& state);
DeviceState ReadDeviceState(const wire::DeviceState& msg);

flatbuffers::Offset<wire::JobResult> BuildJobResult(flatbuffers::FlatBufferBuilder& fbb,
                                                    const JobResult& result);
JobResult ReadJobResult(const wire::JobResult& msg);

// The message name of a frame's body, for logs and errors ("RunJob").
const char* BodyName(const wire::Frame& frame);

}  // namespace dfarm::agent
