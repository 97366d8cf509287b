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
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace dfarm::store {

struct DeviceTraits;
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
  // A device name, or a device class as ClassCellDevice() writes it
  // ("class:pixel7"): the class of the device a job aimed at `any` or a
  // selector ran on (JobRow::device_class), or a gate policy's class.
  std::string device;
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

// The cell of a job: its identity fields and its model's file name; its
// device is the job's class (ClassCellDevice) when it has one, else its device.
Cell CellOf(const JobRow& job);

// ---- device classes ----------------------------------------------------------
//
// A device class makes one cell of the trials that ran on several devices: a
// job aimed at `any` or a selector records the class of the device that
// claimed it (JobRow::device_class), and its cell's device is that class.

// Device classes as a spec (and a gate policy) names them: class name ->
// device-name globs ("pixel7": ["adb:ABC*", "tcp://lab-p7-*"]).
using DeviceClasses = std::map<std::string, std::vector<std::string>>;

// How a cell's device names a class: "class:" + the class name.
inline constexpr const char* kDeviceClassPrefix = "class:";
std::string ClassCellDevice(const std::string& device_class);

// The device of the cell of a job that ran on `device` with class
// `device_class`: ClassCellDevice(device_class), or `device` when the class
// is "" (the rule CellOf, ClaimJob's cell_device and the gate follow).
std::string CellDevice(const std::string& device, const std::string& device_class);

// The class of device `d` for a job aimed at `any` or a selector: the first
// class of `classes` (in name order) with a glob that matches d.name; else
// one derived from what the device reported, "MODEL/ABI" (MODEL: its
// ro.product.model, else its CPU/SoC name; "Pixel 7/arm64-v8a").
std::string DeviceClassOf(const DeviceClasses& classes, const DeviceTraits& d);

// The first class of `classes` (in name order) with a glob matching device
// name `device`; "" when none does.
std::string MatchingDeviceClass(const DeviceClasses& classes, const std::string& device);

// '*' and '?' glob over the whole of `text`.
bool GlobMatch(const std::string& pattern, const std::string& text);

// The label without model and device, as a matrix row (model) x column
// (device) names the rest: "xnnpack[fp16:true] x2 (runner main)". Label()
// formats the same pieces the same way.
std::string ConfigLabel(const Cell& cell);

}  // namespace dfarm::store
