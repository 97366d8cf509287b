// Writes a seed corpus for frame_fuzzer into a folder: one file per message
// type (a length-prefixed frame, as on the wire) and one stream of several
// frames. Usage: dfarm_frame_fuzzer_seeds DIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/protocol/status.h"
#include "agent/protocol/testing/misaligned_frames.h"

namespace dfarm::agent {
namespace {

std::string Prefixed(const flatbuffers::FlatBufferBuilder& fbb) {
  uint32_t n = fbb.GetSize();
  std::string out = {static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 24)};
  out.append(reinterpret_cast<const char*>(fbb.GetBufferPointer()), n);
  return out;
}

template <typename T>
std::string Frame(uint64_t id, flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<T> body) {
  FinishFrame(fbb, id, body);
  return Prefixed(fbb);
}

std::vector<std::pair<std::string, std::string>> Seeds() {
  std::vector<std::pair<std::string, std::string>> seeds;
  const std::string sha(64, 'a');
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto features = fbb.CreateVectorOfStrings({"artifacts", "run_job", "heartbeat", "x"});
    seeds.emplace_back("hello", Frame(1, fbb,
                                      wire::CreateHello(fbb, kProtocolVersion, features,
                                                        fbb.CreateString("dfarm"))));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    DeviceInfo info;
    info.protocol_version = kProtocolVersion;
    info.features = {"artifacts", "auth_hmac"};
    info.os = "Linux";
    info.core_max_freq_khz = {1800000, 2400000};
    info.properties["ro.product.model"] = "Pixel";
    std::vector<uint8_t> challenge(32, 7);
    seeds.emplace_back("hello_reply", Frame(1, fbb, BuildHelloReply(fbb, info, &challenge)));
  }
  {
    // A [ulong] whose elements are 4 bytes off the 8-byte boundary (verifies).
    flatbuffers::FlatBufferBuilder fbb;
    testing::BuildMisalignedHelloReply(fbb, {1800000, 2400000});
    seeds.emplace_back("hello_reply_misaligned_ulongs", Prefixed(fbb));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto shas = fbb.CreateVectorOfStrings({sha, "bad"});
    seeds.emplace_back("have", Frame(2, fbb, wire::CreateHaveRequest(fbb, shas)));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<uint8_t> data = {1, 2, 3, 4};
    seeds.emplace_back("put_chunk", Frame(3, fbb, wire::CreatePutChunkDirect(fbb, 0, &data)));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    JobSpec job;
    job.runner_sha256 = sha;
    job.model_sha256 = sha;
    job.delegate_options = "a:1;b:2";
    seeds.emplace_back("run_job", Frame(4, fbb, BuildRunJob(fbb, job)));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    JobResult r;
    r.status = JobStatusName(JobStatus::kOk);
    r.runner_json = "{\"status\":\"ok\"}";
    DeviceState s;
    s.cpus.push_back({0, true, 1000, 900, 2000, "schedutil"});
    s.thermal_zones.push_back({1, "cpu-thermal", 71.5});
    s.load_avg_1m = 0.5;
    s.battery_current_ua = -1;
    r.state_before = s;
    r.state_after = DeviceState{};
    r.started_hot = true;
    r.state_note = "started hot";
    seeds.emplace_back("job_result", Frame(4, fbb, BuildJobResult(fbb, r)));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<uint8_t> mac(32, 1);
    seeds.emplace_back("auth_proof", Frame(5, fbb, wire::CreateAuthProofDirect(fbb, &mac, &mac)));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    seeds.emplace_back("ping", Frame(6, fbb, wire::CreatePing(fbb)));
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    seeds.emplace_back("error", Frame(7, fbb, wire::CreateErrorReplyDirect(fbb, "no")));
  }
  std::string stream;
  for (const auto& [name, bytes] : seeds) stream += bytes;
  seeds.emplace_back("stream", stream);
  return seeds;
}

}  // namespace
}  // namespace dfarm::agent

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& [name, bytes] : dfarm::agent::Seeds()) {
    std::string path = std::string(argv[1]) + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out << bytes;
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
