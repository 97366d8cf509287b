// The gate's policy: what `dfarm gate` judges and how strictly. A JSON file
// (docs/gate.md documents every field and the default policy); every field has
// a default, and an unknown key is an error naming it and the file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/cell.h"

namespace dfarm::gate {

// "latency": how trial medians of a cell are compared.
struct LatencyPolicy {
  double min_effect = 0.05;        // smallest relative change that counts (0.05 = 5%)
  double alpha = 0.05;             // false discovery rate over the compared cells (BH q-values)
  double confidence = 0.95;        // of the bootstrap interval of the ratio of medians
  int bootstrap_resamples = 2000;  // >= 100
  uint64_t seed = 1;               // of the bootstrap (verdicts are deterministic)
  std::string metric = "median";   // the trial statistic: "median" (of the trial's samples)
  // Trials flagged noisy (the device's CPUs busier than the spec's cooldown
  // allowed when they started) are left out of the latency comparison.
  bool exclude_noisy = true;
};

// One "accuracy" rule: thresholds for the outputs whose model file name and
// output name match the globs ('*', '?'). For each threshold the first rule
// that matches and sets it applies (rules are read in order, later rules fill
// what earlier ones leave unset). Unset: not judged.
struct AccuracyRule {
  std::string model = "*";
  std::string output = "*";
  std::string dtype = "*";  // "float" (no LSB figure) | "quantized" (max_abs_error_lsb set) | "*"
  // Against the CPU reference, the candidate alone (the worst over its trials).
  std::optional<double> max_abs_error;
  std::optional<double> mean_abs_error;
  std::optional<double> rmse;
  std::optional<double> max_abs_error_lsb;   // quantized outputs, in quantization steps
  std::optional<double> min_top1_agreement;  // fraction of trials whose top-1 agrees, 0..1
  std::optional<double> min_top5_agreement;
  // Signal to error in dB (the runner's snr_db / psnr_db): the lowest over the
  // trials that report one must not be below it. Unset by default.
  std::optional<double> min_snr_db;
  std::optional<double> min_psnr_db;
  std::optional<std::string> nan_inf;  // "fail" | "ignore": NaN/Inf in the delegate's output
  // Against the baseline cell's own figures: candidate / baseline, judged only
  // when the candidate's figure is also above `growth_floor` (tiny errors that
  // double stay tiny).
  std::optional<double> max_abs_error_growth;
  std::optional<double> mean_abs_error_growth;
  std::optional<double> rmse_growth;
  std::optional<double> growth_floor;
};

// "memory": growth of the cell's median over trials, candidate / baseline - 1.
struct MemoryPolicy {
  std::optional<double> max_peak_rss_growth = 0.10;
  std::optional<double> max_arena_growth = 0.10;
};

// "task": task accuracy on a labelled set (spec "eval"). Drops allowed, in
// percentage points of top-1 / top-5 (classification), mAP@[.5:.95]
// (detection) or mIoU (segmentation), each judged only on cells of its
// task, judged on the paired bootstrap
// interval of the drop over the same images: above the threshold across the
// whole interval fails, below it across the whole interval passes, an
// interval that straddles it is unknown. `max_*_drop` against the baseline
// cell, `max_*_drop_vs_cpu` against the same run's cpu cell (same model,
// inputs, device, runner and threads). Unset: not judged.
struct TaskPolicy {
  std::optional<double> max_top1_drop;
  std::optional<double> max_top5_drop;
  std::optional<double> max_top1_drop_vs_cpu;
  std::optional<double> max_top5_drop_vs_cpu;
  std::optional<double> max_map_drop;
  std::optional<double> max_map_drop_vs_cpu;
  std::optional<double> max_miou_drop;
  std::optional<double> max_miou_drop_vs_cpu;
  double confidence = 0.95;
  int bootstrap_resamples = 2000;
  uint64_t seed = 1;
};

struct PlacementPolicy {
  bool fallback_is_failure = true;  // a node delegated in the baseline runs on cpu now (not folded)
};

struct FailuresPolicy {
  bool ok_to_failed_is_failure = true;  // ok in the baseline, not ok now
  bool failed_alone_is_failure = true;  // a non-ok job in a cell judged alone (new, no baseline)
  bool missing_is_failure = false;      // a baseline cell the candidate does not have
};

struct Policy {
  std::string source = "<default>";  // the file it was read from, for messages
  LatencyPolicy latency;
  std::vector<AccuracyRule> accuracy;  // DefaultPolicy() has the documented rules
  MemoryPolicy memory;
  TaskPolicy task;
  PlacementPolicy placement;
  FailuresPolicy failures;
  // Device classes: name -> device-name globs. Devices in one class are matched
  // as one cell across runs ("pixel7": ["adb:ABC*", "adb:DEF*"]), whose
  // device is store::ClassCellDevice("pixel7"); a job that recorded a class
  // (JobRow::device_class) keeps it.
  store::DeviceClasses device_classes;
  // Not read from the file: `dfarm gate/compare --candidate-runner A
  // --baseline-runner B` judge runner A's jobs (of the candidate run) against
  // runner B's (of the baseline run, which may be the same run), cell by cell
  // across the two names ("default" names a spec's default runner). Empty:
  // every runner, matched by name.
  std::string candidate_runner, baseline_runner;
  // Not read from the file: `dfarm gate --paired` (true) / `--unpaired`
  // (false). Unset: paired when the candidate run is paired (spec "pairing")
  // and is its own baseline with the pairing's runners (or none named);
  // docs/gate.md, "Paired A/B".
  std::optional<bool> paired;
};

// The documented default policy (docs/gate.md).
Policy DefaultPolicy();

// Reads a policy document: fields absent keep DefaultPolicy()'s values; an
// "accuracy" list replaces the default rules unless "accuracy_defaults": true.
// Errors (kInvalidInput) name the file, the key and what is wrong.
Result<Policy> ParsePolicy(const std::string& json_text, const std::string& path_for_messages);
Result<Policy> LoadPolicy(const std::string& path);

// The policy as JSON (every field), for reports and `dfarm gate --format json`.
std::string PolicyToJson(const Policy& policy);

// '*' and '?' glob, the whole string (the store's, which device classes use too).
using store::GlobMatch;

}  // namespace dfarm::gate
