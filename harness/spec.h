// The sweep spec (docs/CONTRACTS.md): which models to run with which
// delegates on which devices, and the benchmark settings. Parsing validates
// everything that can be checked on the host; a delegate name is not checked
// (the runner on the device reports delegates it lacks).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/result.h"

namespace dfarm::harness {

struct ModelSpec {
  std::string path;  // absolute, normalized
  std::string file;  // file name, "face_detection_short_range.tflite"
};

struct DelegateSpec {
  std::string name;                            // "cpu"
  std::map<std::string, std::string> options;  // sorted by key

  // "k1:v1;k2:v2" in key order, as the runner's --delegate-options takes it.
  std::string OptionsString() const;
};

struct BenchmarkSpec {
  uint32_t warmup_runs = 1;
  uint32_t num_runs = 50;
  uint32_t num_threads = 1;
  uint32_t timeout_s = 120;
};

struct SweepSpec {
  std::string name;  // defaults to the spec file's stem
  std::vector<ModelSpec> models;
  std::vector<DelegateSpec> delegates;  // default [{"name":"cpu"}]
  std::vector<std::string> devices;     // default ["local"]
  BenchmarkSpec benchmark;

  // The spec with defaults filled in and paths resolved, as stored with the run.
  std::string ToJson() const;
};

// Parses spec text. `spec_path` names the spec in messages ("spec 'q.json': ...")
// and its folder anchors relative model paths. Model files must exist.
Result<SweepSpec> ParseSpec(const std::string& text, const std::string& spec_path);

// Reads and parses the spec file at `path`.
Result<SweepSpec> LoadSpec(const std::string& path);

// Device names the spec accepts: "local", or "tcp://HOST:PORT" for an agent
// started elsewhere. Returns an empty string when `name` is valid, else why not.
std::string CheckDeviceName(const std::string& name);

}  // namespace dfarm::harness
