// Cell: all the trials of one model (by sha256), delegate, delegate options,
// thread count, runner, device and inputs. It is the unit every verdict, trend and
// matrix entry is about: the store lists cells and their jobs, the gate judges
// them, history follows them over runs, reports and the dashboard show them,
// and all of them print Label().
//
// The identity is the fields Identity() ties; ordering and equality follow
// it. A field added to the identity goes into Identity(), CellOf() and
// Label() (cell.cc) and into the store's cell queries (sql_store.cc).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace dfarm::store {

struct JobRow;

// The inputs of a job, as its cell's identity names them: the runner's
// seeded random inputs (what every job ran on before inputs were recorded),
// or real input sets by content.
inline constexpr const char* kSeededInputs = "seeded:1/dfarm";

// "sets:" and the first 16 hex digits of the sha256 over the sets' sha256s
// (in order, each followed by a newline); kSeededInputs when there are none.
std::string InputsId(const std::vector<std::string>& input_set_sha256s);

// An inputs id as a label shows it: "" for kSeededInputs (the default, so
// labels of runs on it read as before), "inputs 1a2b3c4d" for sets, the id
// itself otherwise.
std::string InputsLabel(const std::string& inputs);

// The default runner's name in a spec ("runners": [{"name": "default"}], or
// none). The store records it as "" (AddJobs), so such a runner's jobs are
// the default runner's cell, not a cell of their own.
inline constexpr const char* kDefaultRunnerName = "default";

struct Cell {
  // Identity, in this order:
  std::string model_sha256;      // lowercase hex
  std::string delegate;          // "cpu", "xnnpack", ...
  std::string delegate_options;  // "k1:v1;k2:v2", keys sorted, as stored
  uint32_t num_threads = 0;      // 0 in runs recorded before threads were
  std::string runner;            // the spec's runner name; "" = the default runner
  std::string device;            // a device name (the gate: its device class)
  // Shown, not compared: the model's file name (the newest job's).
  std::string model;
  // Identity, last in the order: what the jobs ran on (InputsId).
  std::string inputs = kSeededInputs;

  auto Identity() const {
    return std::tie(model_sha256, delegate, delegate_options, num_threads, runner, device, inputs);
  }
  friend bool operator==(const Cell& a, const Cell& b) { return a.Identity() == b.Identity(); }
  friend bool operator<(const Cell& a, const Cell& b) { return a.Identity() < b.Identity(); }

  // The one label every view prints:
  // "face.tflite (3bc182eb) xnnpack[fp16:true] x2 @local (runner main)": the
  // model's file name, the first 8 hex digits of its sha256 (no parenthesis
  // without one), the delegate, "[options]" when there are any, " xN" when
  // num_threads > 0, " @device", " (runner NAME)" for a runner other than
  // the default, and " on inputs 1a2b3c4d" for inputs other than the seeded
  // default (InputsLabel).
  std::string Label() const;
};

// The cell of a job: its identity fields and its model's file name.
Cell CellOf(const JobRow& job);

// The label without model and device, as a matrix row (model) x column
// (device) names the rest: "xnnpack[fp16:true] x2 (runner main)". Label()
// formats the same pieces the same way.
std::string ConfigLabel(const Cell& cell);

}  // namespace dfarm::store
