// What dfarm-runner measures, as plain values: its metrics, where each node
// of the model ran, and its outputs against a reference run. One definition
// for every side: the runner computes into them (runner.h), runner_json.h
// writes and reads them as the --json document (docs/CONTRACTS.md), and the
// results database keeps them (reports/store/store.h). The standard library
// only, so any layer above agent/runner may include this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dfarm::runner {

// Latency statistics of the measured runs, in microseconds.
struct LatencyStats {
  double mean_us = 0;
  double std_us = 0;  // sample standard deviation (n - 1); 0 for one sample
  double min_us = 0;
  double max_us = 0;
  // Percentiles by linear interpolation between the closest ranks (like
  // numpy.percentile's default), so p50 of an even count is the midpoint.
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
};

// "metrics": the latency statistics of the measured runs, and the job's other
// timings and memory. Timings are wall-clock (steady clock), in microseconds:
//   init_us         Model::Load (read + verify) + Interpreter + AllocateTensors()
//   first_us        the first Invoke()
//   warmup_mean_us  mean of the warmup_runs Invoke()s after the first (0 when none)
// and the statistics cover the num_runs measured Invoke()s that follow.
// init_cold_us / init_warm_us split init for a delegate that
// compiles programs (gpu): cold is an init that compiled them (the first
// init_us, when the delegate's stats count programs_compiled > 0), warm one
// that loaded every program from its serialization cache (programs_loaded > 0,
// programs_compiled 0: the first init_us, or a second init the runner makes
// after the timed runs when the options carry serialization_dir). Unset when
// the job has no such figure.
struct Metrics : LatencyStats {
  double init_us = 0;
  double first_us = 0;
  double warmup_mean_us = 0;
  int64_t num_runs = 0;
  int64_t peak_rss_bytes = 0;  // the process's peak resident set; 0 when unknown
  int64_t arena_bytes = 0;     // the interpreter's tensor arena
  std::optional<double> init_cold_us = std::nullopt;
  std::optional<double> init_warm_us = std::nullopt;
};

// "delegate_stats": the delegate's own figures by name
// (runtime::Delegate::Stats() after AllocateTensors()), in its order; empty
// (no key in the document) when the delegate has none.
using DelegateStats = std::vector<std::pair<std::string, double>>;

// Where one node of the model ran (an entry of "placement.nodes").
struct PlacementNode {
  int64_t index = 0;
  std::string op;                    // "CONV_2D"
  std::string delegate;              // the delegate that ran it ("example") or "cpu"
  std::optional<int64_t> partition;  // delegated nodes only
  bool folded = false;               // evaluated once at load from constant inputs
  std::string reason;                // why it fell back to the CPU; empty otherwise
};

// A job's whole placement ("placement"): delegated partitions and one entry
// per model node, by node index. runtime::Placement is the interpreter's own
// record that the runner reports as this.
struct JobPlacement {
  int64_t partitions = 0;
  std::vector<PlacementNode> nodes;
};

// A number kept as it was made or read, an integer or a real, so that it is
// written back the same way: the runner computes max_abs_error_lsb as an
// integer and writes one; the store keeps a REAL, which `dfarm show --json`
// writes as one.
using Number = std::variant<int64_t, double>;
inline double ToDouble(const Number& n) {
  return std::visit([](auto v) { return static_cast<double>(v); }, n);
}

// One output compared with the reference's (an entry of "accuracy.outputs"):
// the inference_diff figures of TFLite's evaluation tools, plus NaN/Inf
// counts and top-k agreement for class scores.
struct OutputAccuracy {
  int64_t index = 0;  // the output's index among the model's outputs
  std::string name;   // the output tensor's name
  // Elements where both sides are finite; the error figures cover only these.
  int64_t compared = 0;
  // Absolute error |delegate - reference| in real units (quantized tensors
  // dequantized with their own scale and zero point). NaN when nothing was
  // compared (null in the document, NULL in the store).
  double mean_abs_error = 0;
  double std_abs_error = 0;  // population standard deviation of the absolute error
  double max_abs_error = 0;
  double rmse = 0;
  int64_t nan_count = 0;            // NaNs in the delegate's output
  int64_t inf_count = 0;            // +-Inf in the delegate's output
  int64_t reference_nan_count = 0;  // NaNs in the reference's output
  int64_t reference_inf_count = 0;
  // Set when both tensors are int8/uint8 with the same per-tensor scale: the
  // largest difference in quantized steps (LSB), over the compared elements.
  std::optional<Number> max_abs_error_lsb;
  // Set for outputs that look like class scores (shape [1, N], N >= 2):
  // top1_agree: both argmaxes are the same class; top5_agree: the reference's
  // top-1 class is among the delegate's top min(5, N).
  std::optional<bool> top1_agree;
  std::optional<bool> top5_agree;
  // Set with top1_agree/top5_agree when the runner compared input sets
  // (Accuracy::sets): the fraction of sets whose top-1 / top-5 agreed; then
  // top1_agree/top5_agree say whether every set agreed.
  std::optional<double> top1_agreement;
  std::optional<double> top5_agreement;
  // Signal to error in decibels, over the compared elements:
  //   snr_db  = 10 * log10(sum(reference^2) / sum(error^2))
  //   psnr_db = 20 * log10((max(reference) - min(reference)) / rmse)
  // Unset (no key in the document, NULL in the store) when the figure is not
  // a finite number: nothing compared, the error exactly 0 (an infinite
  // ratio), or no signal (a reference all zero for snr_db, a constant one
  // for psnr_db).
  std::optional<double> snr_db;
  std::optional<double> psnr_db;
  // What snr_db and psnr_db are made of, for AggregateOutputAccuracy to
  // combine sets (with rmse for the error): over the compared elements, the
  // sum of reference^2 and the reference's range. The runner's own; neither
  // the document nor the store keeps them.
  double reference_sum_sq = 0;
  double reference_min = 0;
  double reference_max = 0;
};

// "profile" (--profile, spec benchmark.profile): the document's and the
// store's form of the runner's runner::Profile (profile.h, which carries
// runtime types). One step of the interpreter is a node, or a delegated
// partition timed as a whole; a partition whose delegate times its nodes is
// followed by one entry per node (`partition` set, `nodes` empty, the node's
// own op).
struct ProfileNode {
  int64_t index = 0;                 // the node (a partition's first node)
  std::string op;                    // "CONV_2D"; "DELEGATE" for a delegated partition
  std::string delegate;              // "cpu" or the delegate's name
  std::optional<int64_t> partition;  // a delegated partition, or a node timed inside one
  std::vector<int64_t> nodes;        // a partition's nodes (its DELEGATE entry); empty otherwise
  double mean_us = 0;                // the step's mean over the profile's runs
};
struct ProfileOp {
  std::string op;
  int64_t count = 0;    // steps (or ops) of this type
  double total_us = 0;  // their time in one run
  double pct = 0;       // share of the run's time, 0..100
};
struct JobProfile {
  int64_t runs = 0;                // runs the times are the mean of
  std::vector<ProfileNode> nodes;  // in execution order
  std::vector<ProfileOp> by_op;    // by descending total_us
};

// "sustained" (--sustained-secs, spec benchmark.sustained_s): the
// latency curve of a sustained-mode job, the measured runs cut into windows
// of equal length by the time each run started.
struct SustainedWindow {
  double t_ms = 0;     // the window's start, ms after the first measured run
  int64_t runs = 0;    // runs that started in it (windows without runs are left out)
  double mean_us = 0;  // their latency
  double p50_us = 0;
  double max_us = 0;
};
struct JobSustained {
  double secs = 0;                       // how long the measured runs went on, as asked
  double window_ms = 0;                  // the windows' length
  std::vector<SustainedWindow> windows;  // in time order
};

// "steps": the timed runs of a stepped pair (agent/runner/stepped_pair.h),
// whose two runner processes take turns run by run. role "driver" (the
// runner given --partner-runner) or "partner" (--step-fds); starts_us: when
// each of samples_us began, in microseconds of CLOCK_MONOTONIC (one clock for
// every process of the machine, so the two lists merge in time order). The
// driver also gives order: one letter per timed run of either process in the
// order they ran, "A" its own, "B" its partner's; partner_steps: the
// partner's runs it stepped; partner_error: why the partner did not run
// beside it to the end (not started, died, no readable result), absent when
// it did.
struct JobSteps {
  std::string role;
  std::vector<double> starts_us;
  std::string order;
  int64_t partner_steps = 0;
  std::string partner_error;
};

// "task_outputs" (--task-outputs): for task accuracy on a labelled set, per
// input set (in --inputs order) what the host scores against the labels.
//   kind "topk" (topk:K[:OUTPUT]): the indices of output OUTPUT's K highest
//     values (dequantized), highest first; equal values in index order.
//   kind "boxes" (boxes:B,C,S,N[:MAX]): the first min(count, MAX) rows of a
//     detection post-process's outputs (boxes [1,N,4] ymin,xmin,ymax,xmax,
//     classes [1,N], scores [1,N], count [1]), as the model wrote them.
//   kind "anchors" (anchors:B,S:SCORE:OFFSET:THRESHOLD[:MAX]): the candidates
//     of a model ending in raw box regressors B ([1,N,K] or [N,K], K >= 4)
//     and class scores S ([1,N,C], [N,C] or [1,N]): each (anchor, class)
//     with class >= OFFSET whose score after SCORE ("sigmoid", "softmax"
//     over the anchor's C values, or "raw") is at least THRESHOLD, with
//     the anchor's first four box values as the model wrote them; at most
//     MAX (default 100) per set, the highest scores (ties: the lower
//     anchor, then class), in that order. The host decodes them against
//     its anchors (the eval decoder "ssd_anchors").
//   kind "classmap" (classmap:OUTPUT[:logits|probabilities]): the class of
//     each pixel of output OUTPUT ([1,H,W,C], [H,W,C] with H > 1, [1,H,W] or [H,W]):
//     the argmax over C (ties: the lower class), or for one channel 1 where
//     the value is above 0 (logits) or 0.5 (probabilities); run-length coded.
struct TaskDetection {
  int64_t class_index = 0;  // the classes output's value, rounded; anchors: the score's index
  double score = 0;
  // boxes: the box; anchors: the box output's first four values in order.
  double ymin = 0, xmin = 0, ymax = 0, xmax = 0;
  int64_t anchor = -1;  // anchors: the anchor's index in the box output; else -1
};
struct TaskClassMap {
  int64_t height = 0;
  int64_t width = 0;
  // Row-major runs: value, count, value, count, ... (counts sum to H*W).
  std::vector<int64_t> rle;
};
struct TaskOutputs {
  std::string kind = "topk";
  int64_t k = 0;
  int64_t output = 0;                                  // topk, classmap
  std::vector<std::vector<int64_t>> sets;              // topk
  std::vector<int64_t> box_outputs;                    // boxes: B, C, S, N; anchors: B, S
  int64_t max_boxes = 0;                               // boxes, anchors: MAX
  std::vector<std::vector<TaskDetection>> detections;  // boxes, anchors: per set
  // classmap: "logits" | "probabilities"; anchors: SCORE
  std::string activation;
  int64_t class_offset = 0;        // anchors: OFFSET
  double threshold = 0;            // anchors: THRESHOLD
  int64_t anchors = 0;             // anchors: N, the box output's anchors (of the last set)
  std::vector<TaskClassMap> maps;  // classmap, per set
};

// One entry of "accuracy.layers" (--accuracy-reference layers): a
// tensor a step of the job's run wrote (a CPU node's outputs; a delegated
// partition's outputs, at its first node), compared with the same tensor in
// the reference run on the same inputs (input set 0), dequantized.
struct LayerError {
  int64_t node = 0;        // the node that wrote it (a partition: its first node)
  std::string op;          // that node's op ("CONV_2D")
  std::string delegate;    // "cpu" or the delegate's name
  int64_t partition = -1;  // the delegated partition; -1 on the CPU
  int64_t tensor = 0;      // the tensor's index in the model
  std::string name;        // the tensor's name
  double max_abs_error = 0;
  double mean_abs_error = 0;
};

// "accuracy": the reference run's name and the outputs by index.
struct Accuracy {
  std::string reference;  // "cpu"
  std::vector<OutputAccuracy> outputs;
  // The number of input sets compared (--inputs given N times): the figures
  // of each output aggregate over all of them (max of the maxima, mean and
  // rmse over all compared elements, counts summed). Unset with the seeded
  // random inputs (one comparison).
  std::optional<int64_t> sets = std::nullopt;
  // Reference "layers": every tensor written outside a partition, in
  // execution order; empty (no key) otherwise.
  std::vector<LayerError> layers = {};
};

}  // namespace dfarm::runner
