// What a job's result becomes in the store: the agent's JobResult
// classified and validated (ClassifyJobResult), the device state and energy
// figures taken from it, and the model named as the user knows it.
#pragma once

#include <optional>
#include <string>

#include "agent/protocol/types.h"
#include "harness/spec/matrix.h"  // SweepJob
#include "reports/store/store.h"

namespace dfarm::harness {

// Turns what the agent returned into what the store keeps. The job's class
// is the agent's (Supervisor::ClassifyExit); this only validates it: a status
// outside the list (docs/CONTRACTS.md) becomes "infra", and, from an agent
// built before it refused one itself, an "ok" without metrics "crashed".
// The runner's placement and the agent's device state (as DeviceStateToJson)
// and flags are kept too.
store::JobOutcome ClassifyJobResult(const agent::JobResult& r);
// The same for `job`, whose runner's "ok" must also be plausible
// (ImplausibleReport against what the job asked for: its runner kind, runs,
// sustained mode and model); an implausible one becomes "crashed", the
// error naming the field and its value.
// Its error names the job's model by the user's file name (NameModelFile).
store::JobOutcome ClassifyJobResult(const agent::JobResult& r, const SweepJob& job);

// `text` with the model named as the user knows it: the agent hands a runner
// the model as an artifact named by its sha256, so the runner's and the
// runtime's messages name "/.../artifacts/<sha256>" or "<sha256>"; each such
// path or hash becomes `file` ("face.tflite"). Unchanged when either is empty.
std::string NameModelFile(std::string text, const std::string& sha256, const std::string& file);

// The estimated energy of one inference in millijoules: the mean battery
// power |current_now| x voltage_now over the samples taken while the runner
// ran (else the before/after readings) times `mean_us`. Unset when no
// reading has both figures (no battery: a desktop, an emulator).
std::optional<double> EnergyPerInferenceMj(const agent::JobResult& r, double mean_us);

// The telemetry phase of the i-th (0-based) sample taken while the runner
// ran: "during:0001", ... (sortable, unique per job).
inline std::string DuringPhase(size_t i) {
  std::string n = std::to_string(i + 1);
  return "during:" + std::string(n.size() < 4 ? 4 - n.size() : 0, '0') + n;
}

// A device state as the store keeps it: a JSON object whose keys are
// agent::DeviceState's field names ("unix_ms", "cpus":[{"cpu","online",
// "cur_freq_khz","max_freq_khz","hw_max_freq_khz","governor"}],
// "thermal_zones":[{"zone","type","temp_c"}], "load_avg_1m", ...,
// "battery_level_pct", "battery_temp_c", "battery_current_ua"); a value the
// device did not expose is absent (an empty governor too).
std::string DeviceStateToJson(const agent::DeviceState& state);

// The hottest thermal zone's temperature; unset without one.
std::optional<double> HottestC(const agent::DeviceState& state);

// `s` on one line: each CR and LF becomes a space.
std::string OneLine(std::string s);

}  // namespace dfarm::harness
