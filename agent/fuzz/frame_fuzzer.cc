// libFuzzer target for frame decoding (agent/protocol/PROTOCOL.md, Framing): the input
// is a byte stream as a peer would send it (length-prefixed frames, one after
// another). Every frame is read with ReadFrame, exactly as the agent and the
// client do, and every verified frame is read field by field with the same
// conversions both sides use, so the verifier must have made each access safe.
// Built only with -DDFARM_BUILD_FUZZERS=ON and clang; see agent/fuzz/README.md.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"

namespace dfarm::agent {
namespace {

size_t g_sink = 0;  // keeps the reads from being optimised away

void Touch(const std::string& s) { g_sink += s.size(); }
void Touch(const std::vector<std::string>& v) {
  for (const auto& s : v) Touch(s);
}
template <typename T>
void TouchBytes(const flatbuffers::Vector<T>* v) {
  if (v == nullptr) return;
  for (auto x : *v) g_sink += static_cast<size_t>(x);
}
void Touch(const DeviceState& s) {
  for (const auto& c : s.cpus) {
    g_sink += c.cpu + c.cur_freq_khz.value_or(0) + c.online.value_or(false) + c.governor.size();
  }
  for (const auto& z : s.thermal_zones) g_sink += z.zone + z.type.size() + (z.temp_c ? 1 : 0);
  g_sink += s.battery_level_pct.value_or(0) + (s.load_avg_1m ? 1 : 0);
}

// Reads every field of the frame's message.
void TouchFrame(const wire::Frame& frame) {
  g_sink += frame.request_id();
  Touch(BodyName(frame));
  switch (frame.body_type()) {
    case wire::Body::Hello: {
      const auto* m = frame.body_as_Hello();
      g_sink += m->protocol_version();
      Touch(Strings(m->features()));
      Touch(Str(m->client_name()));
      Touch(Str(m->host_info()));
      break;
    }
    case wire::Body::HelloReply: {
      const auto* m = frame.body_as_HelloReply();
      DeviceInfo info = ReadHelloReply(*m);
      Touch(info.features);
      for (const auto& [k, v] : info.properties) Touch(k), Touch(v);
      TouchBytes(m->auth_challenge());
      break;
    }
    case wire::Body::HaveRequest:
      Touch(Strings(frame.body_as_HaveRequest()->sha256s()));
      break;
    case wire::Body::HaveReply:
      TouchBytes(frame.body_as_HaveReply()->have());
      break;
    case wire::Body::PutBegin:
      Touch(Str(frame.body_as_PutBegin()->sha256()));
      break;
    case wire::Body::PutChunk:
      TouchBytes(frame.body_as_PutChunk()->data());
      break;
    case wire::Body::PutReply:
      Touch(Str(frame.body_as_PutReply()->error()));
      break;
    case wire::Body::PutBeginReply:
      Touch(Str(frame.body_as_PutBeginReply()->error()));
      break;
    case wire::Body::RunJob: {
      JobSpec job = ReadRunJob(*frame.body_as_RunJob());
      Touch(job.runner_sha256), Touch(job.delegate_options);
      break;
    }
    case wire::Body::JobResult: {
      JobResult r = ReadJobResult(*frame.body_as_JobResult());
      Touch(r.status), Touch(r.runner_json), Touch(r.state_note);
      if (r.state_before) Touch(*r.state_before);
      if (r.state_after) Touch(*r.state_after);
      break;
    }
    case wire::Body::ErrorReply:
      Touch(Str(frame.body_as_ErrorReply()->message()));
      break;
    case wire::Body::AuthProof:
      TouchBytes(frame.body_as_AuthProof()->mac());
      TouchBytes(frame.body_as_AuthProof()->challenge());
      break;
    case wire::Body::AuthReply:
      TouchBytes(frame.body_as_AuthReply()->mac());
      break;
    default:
      break;
  }
}

void FuzzOne(const uint8_t* data, size_t size) {
  // The stream path: the input as the bytes of a connection (a memfd, so
  // ReadFrame's poll/read loop runs unchanged and ends at EOF).
  static int fd = ::memfd_create("dfarm_frame_fuzzer", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size) ||
      ::lseek(fd, 0, SEEK_SET) != 0) {
    std::abort();
  }
  for (int frames = 0; frames < 64; ++frames) {
    auto got = ReadFrame(fd, std::chrono::milliseconds(1000));
    if (!got.ok()) {
      Touch(got.message());
      break;
    }
    if (got->eof) break;
    TouchFrame(*got->frame());
  }
  // The verifier alone on the first frame's bytes (trailing bytes included),
  // copied to an aligned buffer as ReadFrame does (VerifyFrame's contract).
  if (size >= 4) {
    std::vector<uint8_t> bytes(data + 4, data + size);
    auto frame = VerifyFrame(bytes.data(), bytes.size());
    if (frame.ok()) TouchFrame(**frame);
  }
}

}  // namespace
}  // namespace dfarm::agent

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dfarm::agent::FuzzOne(data, size);
  return 0;
}
