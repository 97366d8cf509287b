#include "agent/protocol/messages.h"

#include <cstring>
#include <optional>
#include <type_traits>

namespace dfarm::agent {

namespace {

// The elements of a vector of scalars, loaded one by one with memcpy: the
// verifier checks a vector's length prefix for 4-byte alignment, not its
// elements, so a peer's [ulong], [long] or [double] may start 4 bytes off the
// 8-byte boundary a plain load needs.
template <typename T>
std::vector<T> Scalars(const flatbuffers::Vector<T>* v) {
  static_assert(std::is_arithmetic_v<T>);
  std::vector<T> out;
  if (v == nullptr) return out;
  out.reserve(v->size());
  const uint8_t* p = v->Data();
  for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i, p += sizeof(T)) {
    T little;
    std::memcpy(&little, p, sizeof(T));
    out.push_back(flatbuffers::EndianScalar(little));
  }
  return out;
}

}  // namespace

std::vector<std::string> Strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::vector<std::string> out;
  if (v == nullptr) return out;
  for (const auto* s : *v) out.push_back(Str(s));
  return out;
}

flatbuffers::Offset<wire::HelloReply> BuildHelloReply(flatbuffers::FlatBufferBuilder& fbb,
                                                      const DeviceInfo& info,
                                                      const std::vector<uint8_t>* auth_challenge) {
  auto features = fbb.CreateVectorOfStrings(info.features);
  auto agent_version = fbb.CreateString(info.agent_version);
  auto os = fbb.CreateString(info.os);
  auto abi = fbb.CreateString(info.abi);
  auto cpu = fbb.CreateString(info.cpu);
  auto hostname = fbb.CreateString(info.hostname);
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> challenge;
  if (auth_challenge) challenge = fbb.CreateVector(*auth_challenge);
  auto os_release = fbb.CreateString(info.os_release);
  auto kernel_version = fbb.CreateString(info.kernel_version);
  auto freqs = fbb.CreateVector(info.core_max_freq_khz);
  std::vector<flatbuffers::Offset<wire::Property>> props;
  for (const auto& [key, value] : info.properties) {
    props.push_back(wire::CreatePropertyDirect(fbb, key.c_str(), value.c_str()));
  }
  auto properties = fbb.CreateVector(props);
  std::vector<flatbuffers::Offset<wire::OpenClDevice>> cl;
  for (const OpenClDeviceInfo& d : info.opencl_devices) {
    cl.push_back(wire::CreateOpenClDeviceDirect(
        fbb, d.platform.c_str(), d.name.c_str(), d.vendor.c_str(), d.driver_version.c_str(),
        d.opencl_version.c_str(), d.fp16, d.gpu, d.compute_units, d.global_memory_bytes));
  }
  auto opencl_devices = fbb.CreateVector(cl);
  return wire::CreateHelloReply(fbb, info.protocol_version, features, agent_version, os, abi, cpu,
                                info.cores, info.memory_bytes, hostname, challenge, os_release,
                                kernel_version, freqs, properties, opencl_devices);
}

DeviceInfo ReadHelloReply(const wire::HelloReply& reply) {
  DeviceInfo info;
  info.protocol_version = reply.protocol_version();
  info.features = Strings(reply.features());
  info.agent_version = Str(reply.agent_version());
  info.os = Str(reply.os());
  info.abi = Str(reply.abi());
  info.cpu = Str(reply.cpu());
  info.cores = reply.cores();
  info.memory_bytes = reply.memory_bytes();
  info.hostname = Str(reply.hostname());
  info.os_release = Str(reply.os_release());
  info.kernel_version = Str(reply.kernel_version());
  info.core_max_freq_khz = Scalars(reply.core_max_freq_khz());
  if (const auto* props = reply.properties()) {
    for (const auto* p : *props) info.properties[Str(p->key())] = Str(p->value());
  }
  if (const auto* cl = reply.opencl_devices()) {
    for (const auto* d : *cl) {
      info.opencl_devices.push_back({Str(d->platform()), Str(d->name()), Str(d->vendor()),
                                     Str(d->driver_version()), Str(d->opencl_version()), d->fp16(),
                                     d->gpu(), d->compute_units(), d->global_memory_bytes()});
    }
  }
  return info;
}

flatbuffers::Offset<wire::RunJob> BuildRunJob(flatbuffers::FlatBufferBuilder& fbb,
                                              const JobSpec& job) {
  auto runner = fbb.CreateString(job.runner_sha256);
  auto model = fbb.CreateString(job.model_sha256);
  auto delegate = fbb.CreateString(job.delegate);
  auto options = fbb.CreateString(job.delegate_options);
  // Absent (not an empty string) when no plugin is named.
  flatbuffers::Offset<flatbuffers::String> plugin;
  if (!job.plugin_sha256.empty()) plugin = fbb.CreateString(job.plugin_sha256);
  flatbuffers::Offset<flatbuffers::String> accuracy;
  if (!job.accuracy_reference.empty()) accuracy = fbb.CreateString(job.accuracy_reference);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> inputs;
  if (!job.input_set_sha256s.empty()) inputs = fbb.CreateVectorOfStrings(job.input_set_sha256s);
  flatbuffers::Offset<flatbuffers::String> kind;
  if (!job.runner_kind.empty()) kind = fbb.CreateString(job.runner_kind);
  flatbuffers::Offset<flatbuffers::String> affinity;
  if (!job.cpu_affinity.empty()) affinity = fbb.CreateString(job.cpu_affinity);
  flatbuffers::Offset<flatbuffers::String> task;
  if (!job.task_outputs.empty()) task = fbb.CreateString(job.task_outputs);
  flatbuffers::Offset<flatbuffers::String> partner;
  if (!job.partner_runner_sha256.empty()) partner = fbb.CreateString(job.partner_runner_sha256);
  return wire::CreateRunJob(fbb, runner, model, delegate, options, job.num_threads, job.warmup_runs,
                            job.num_runs, job.timeout_ms, plugin, accuracy, inputs, kind,
                            job.profile, affinity, job.sustained_ms, task, partner,
                            job.partner_runner_sha256.empty() ? 0 : job.partner_seed);
}

JobSpec ReadRunJob(const wire::RunJob& msg) {
  JobSpec job;
  job.runner_sha256 = Str(msg.runner_sha256());
  job.model_sha256 = Str(msg.model_sha256());
  job.delegate = Str(msg.delegate());
  job.delegate_options = Str(msg.delegate_options());
  job.num_threads = msg.num_threads();
  job.warmup_runs = msg.warmup_runs();
  job.num_runs = msg.num_runs();
  job.timeout_ms = msg.timeout_ms();
  job.plugin_sha256 = Str(msg.plugin_sha256());
  job.accuracy_reference = Str(msg.accuracy_reference());
  if (const auto* sets = msg.input_sets()) {
    for (const auto* s : *sets) job.input_set_sha256s.push_back(Str(s));
  }
  job.runner_kind = Str(msg.runner_kind());
  job.profile = msg.profile();
  job.cpu_affinity = Str(msg.cpu_affinity());
  job.sustained_ms = msg.sustained_ms();
  job.task_outputs = Str(msg.task_outputs());
  job.partner_runner_sha256 = Str(msg.partner_runner_sha256());
  job.partner_seed = msg.partner_seed();
  return job;
}

namespace {

// An unset std::optional is an absent field (flatbuffers::nullopt). The two
// are the same type where flatbuffers uses std::optional.
template <typename T>
flatbuffers::Optional<T> ToWire(const std::optional<T>& v) {
  return v ? flatbuffers::Optional<T>(*v) : flatbuffers::Optional<T>(flatbuffers::nullopt);
}

template <typename T>
std::optional<T> FromWire(const flatbuffers::Optional<T>& v) {
  return v ? std::optional<T>(*v) : std::nullopt;
}

}  // namespace

flatbuffers::Offset<wire::DeviceState> BuildDeviceState(flatbuffers::FlatBufferBuilder& fbb,
                                                        const DeviceState& state) {
  std::vector<flatbuffers::Offset<wire::CpuState>> cpus;
  for (const auto& c : state.cpus) {
    auto governor = c.governor.empty() ? 0 : fbb.CreateString(c.governor);
    cpus.push_back(wire::CreateCpuState(fbb, c.cpu, ToWire(c.online), ToWire(c.cur_freq_khz),
                                        ToWire(c.max_freq_khz), ToWire(c.hw_max_freq_khz),
                                        governor));
  }
  auto cpus_vec = fbb.CreateVector(cpus);
  std::vector<flatbuffers::Offset<wire::ThermalZone>> zones;
  for (const auto& z : state.thermal_zones) {
    auto type = z.type.empty() ? 0 : fbb.CreateString(z.type);
    zones.push_back(wire::CreateThermalZone(fbb, z.zone, type, ToWire(z.temp_c)));
  }
  auto zones_vec = fbb.CreateVector(zones);
  return wire::CreateDeviceState(fbb, state.unix_ms, cpus_vec, zones_vec, ToWire(state.load_avg_1m),
                                 ToWire(state.load_avg_5m), ToWire(state.load_avg_15m),
                                 ToWire(state.battery_level_pct), ToWire(state.battery_temp_c),
                                 ToWire(state.battery_current_ua), ToWire(state.cpu_busy_pct),
                                 ToWire(state.battery_voltage_uv));
}

DeviceState ReadDeviceState(const wire::DeviceState& msg) {
  DeviceState state;
  state.unix_ms = msg.unix_ms();
  if (const auto* cpus = msg.cpus()) {
    for (const auto* c : *cpus) {
      CpuState cpu;
      cpu.cpu = c->cpu();
      cpu.online = FromWire(c->online());
      cpu.cur_freq_khz = FromWire(c->cur_freq_khz());
      cpu.max_freq_khz = FromWire(c->max_freq_khz());
      cpu.hw_max_freq_khz = FromWire(c->hw_max_freq_khz());
      cpu.governor = Str(c->governor());
      state.cpus.push_back(std::move(cpu));
    }
  }
  if (const auto* zones = msg.thermal_zones()) {
    for (const auto* z : *zones) {
      state.thermal_zones.push_back({z->zone(), Str(z->type()), FromWire(z->temp_c())});
    }
  }
  state.load_avg_1m = FromWire(msg.load_avg_1m());
  state.load_avg_5m = FromWire(msg.load_avg_5m());
  state.load_avg_15m = FromWire(msg.load_avg_15m());
  state.battery_level_pct = FromWire(msg.battery_level_pct());
  state.battery_temp_c = FromWire(msg.battery_temp_c());
  state.battery_current_ua = FromWire(msg.battery_current_ua());
  state.cpu_busy_pct = FromWire(msg.cpu_busy_pct());
  state.battery_voltage_uv = FromWire(msg.battery_voltage_uv());
  return state;
}

// CreateString(std::string) keeps embedded NUL bytes a runner may print.
flatbuffers::Offset<wire::JobResult> BuildJobResult(flatbuffers::FlatBufferBuilder& fbb,
                                                    const JobResult& r) {
  auto status = fbb.CreateString(r.status);
  auto error = fbb.CreateString(r.error);
  auto json = fbb.CreateString(r.runner_json);
  auto tail = fbb.CreateString(r.stderr_tail);
  flatbuffers::Offset<wire::DeviceState> before, after;
  if (r.state_before) before = BuildDeviceState(fbb, *r.state_before);
  if (r.state_after) after = BuildDeviceState(fbb, *r.state_after);
  auto note = r.state_note.empty() ? 0 : fbb.CreateString(r.state_note);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::DeviceState>>> during;
  if (!r.state_during.empty()) {
    std::vector<flatbuffers::Offset<wire::DeviceState>> samples;
    for (const DeviceState& s : r.state_during) samples.push_back(BuildDeviceState(fbb, s));
    during = fbb.CreateVector(samples);
  }
  return wire::CreateJobResult(fbb, status, error, r.exit_code, r.signal, json, tail, r.wall_ms,
                               before, after, r.started_hot, r.throttled, r.hot_threshold_c, note,
                               during);
}

JobResult ReadJobResult(const wire::JobResult& msg) {
  JobResult r;
  r.status = Str(msg.status());
  r.error = Str(msg.error());
  r.exit_code = msg.exit_code();
  r.signal = msg.signal();
  r.runner_json = Str(msg.runner_json());
  r.stderr_tail = Str(msg.stderr_tail());
  r.wall_ms = msg.wall_ms();
  if (const auto* before = msg.state_before()) r.state_before = ReadDeviceState(*before);
  if (const auto* after = msg.state_after()) r.state_after = ReadDeviceState(*after);
  r.started_hot = msg.started_hot();
  r.throttled = msg.throttled();
  r.hot_threshold_c = msg.hot_threshold_c();
  r.state_note = Str(msg.state_note());
  if (const auto* during = msg.state_during()) {
    for (size_t i = 0; i < during->size() && i < kMaxStateSamples; ++i) {
      r.state_during.push_back(ReadDeviceState(*during->Get(i)));
    }
  }
  return r;
}

const char* BodyName(const wire::Frame& frame) { return wire::EnumNameBody(frame.body_type()); }

}  // namespace dfarm::agent
