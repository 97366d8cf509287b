// The dfarm-runner command line (docs/CONTRACTS.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::runner {

struct RunnerOptions {
  std::string model;
  std::string delegate = "cpu";
  // Parsed from --delegate-options 'k1:v1;k2:v2'.
  std::vector<std::pair<std::string, std::string>> delegate_options;
  uint32_t num_threads = 1;
  uint32_t warmup_runs = 1;
  uint32_t num_runs = 50;
  uint32_t seed = 1;
  // The measured runs go on until both num_runs runs and min_secs seconds
  // are done (like benchmark_model's --min_secs); 0: num_runs runs only.
  double min_secs = 0;
  // Sustained mode: the measured runs go on for this many seconds
  // (--num-runs is then not a count), and the job's "sustained" section gives
  // the latency curve in windows; 0: off.
  double sustained_secs = 0;
  // "cpu": compare the outputs with the single-thread reference kernels on
  // the same inputs after the measured runs; empty: no comparison.
  std::string accuracy_reference;
  // Time each node (a delegated partition as one step) over num_runs extra runs.
  bool profile = false;
  // --inputs, once per input set: folders of input_<i>.bin. The measured
  // runs use set 0; the accuracy comparison runs every set and aggregates
  // (docs/CONTRACTS.md). Empty: seeded random inputs.
  std::vector<std::string> inputs_dirs;
  std::string dump_outputs_dir;  // empty: no dump
  // --task-outputs: after the measured runs, every input set runs once more
  // and the JSON's "task_outputs" (runner::TaskOutputs) lists what the host
  // scores against a labelled set's labels. task_kind "": off; "topk":
  // output task_output's task_top_k highest values; "boxes": the detection
  // post-process outputs task_boxes (boxes, classes, scores, count), at most
  // task_max_boxes per set; "classmap": output task_output's class per
  // pixel (task_activation "logits" or "probabilities"); "anchors": the
  // candidates of raw box regressors and class scores task_boxes (B, S):
  // scores after task_activation ("sigmoid", "softmax", "raw") of at least
  // task_threshold for classes from task_class_offset on, at most
  // task_max_boxes per set.
  std::string task_kind;
  uint32_t task_top_k = 0;
  uint32_t task_output = 0;
  std::vector<uint32_t> task_boxes;
  uint32_t task_max_boxes = 100;
  std::string task_activation = "logits";
  uint32_t task_class_offset = 0;
  double task_threshold = 0;
  bool json = false;
  // --init-only (internal): load and AllocateTensors() only, then
  // report init_us and the delegate's stats; the runner starts itself so for
  // a delegate's second start (init_warm_us, serialization_dir).
  bool init_only = false;
  // Stepped pairs (agent/runner/stepped_pair.h). --partner-runner PATH: this
  // runner drives a partner runner, PATH started with partner_args, taking
  // turns with it run by run in an order seeded by partner_seed
  // (--partner-seed); its document goes under "partner". --step-fds R,W: this
  // runner is such a partner, stepped over those descriptors. -1: not.
  std::string partner_runner;
  uint32_t partner_seed = 1;
  // This runner's own arguments (argv[1..]) less --partner-runner,
  // --partner-seed and --dump-outputs; filled by ParseCommandLine when
  // --partner-runner is given.
  std::vector<std::string> partner_args;
  int step_read_fd = -1;
  int step_write_fd = -1;
};

// What parsing the command line decided.
struct ParsedCommandLine {
  enum class Action { kRun, kHelp, kVersion, kUsageError } action = Action::kRun;
  RunnerOptions options;
  std::string help;   // kHelp: the help text; kVersion: "dfarm-runner X.Y.Z\n"
  std::string error;  // kUsageError: one line
  bool json = false;  // --json was given (known even when parsing failed)
};

ParsedCommandLine ParseCommandLine(int argc, const char* const* argv);

// The --help footer: each exit code and its status name (DFARM_RUNNER_STATUSES).
std::string ExitCodesHelp();

// "k1:v1;k2:v2" -> {{"k1","v1"},{"k2","v2"}}; empty entries are skipped.
// An entry without ':' or with an empty key is an error naming it.
Result<std::vector<std::pair<std::string, std::string>>> ParseDelegateOptions(
    const std::string& text);

}  // namespace dfarm::runner
