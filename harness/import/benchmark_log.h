// Reads the text output of Google's TensorFlow Lite / LiteRT tools into our
// result schema (agent/runner/runner_values.h), so their logs can be imported
// (`dfarm import benchmark-log`) and compared with our runner's jobs:
//   benchmark_model  TensorFlow Lite's tools/benchmark binary, its older TF 1.x
//                    output ("Average inference timings in us: Warmup: ...,
//                    Init: ..., Inference: ..."), the TF 2.x one ("Inference
//                    timings in us: Init: ..., First inference: ..., Warmup
//                    (avg): ..., Inference (avg): ..." with "count=... first=...
//                    curr=... min=... max=... avg=... std=..." stat lines) with
//                    or without "INFO: "/"VERBOSE: " prefixes, and LiteRT's
//                    benchmark_litert_model ("Model initialization: X ms",
//                    "Inference (avg): X ms (N runs)", ...);
//   inference_diff   tools/evaluation/tasks/inference_diff's run_eval.
// Samples of each, with where they come from: harness/testdata/benchmark_logs/.
//
// What the figures become (runner::Metrics):
//   init_us         "Init:" (LiteRT: "Model initialization")
//   first_us        "First inference:" (the first warmup run; LiteRT: "Warmup (first)")
//   warmup_mean_us  "Warmup (avg):" (the warmup runs, the first one included)
//   mean_us         "Inference (avg):"; std_us/min_us/max_us/num_runs from the
//                   measured runs' stat line (count=, std=, min=, max=), or
//                   LiteRT's "Inference (min/max/std)" lines. Note that
//                   benchmark_model's std is the population standard deviation
//                   (ours is the sample one, n - 1).
//   p50_us/p90_us/p99_us stay 0: no version of these tools prints percentiles.
//   peak_rss_bytes  "Overall peak memory footprint (MB) via periodic monitoring"
//                   (--report_peak_memory_footprint); 0, which runner::Metrics
//                   reads as unknown (stored NULL, printed "-"), when the log
//                   has none. The "Memory footprint delta" figures are deltas,
//                   kept apart.
// The delegate comes from the log's own lines (TensorFlow Lite's and the
// tools'), in our names (delegates/delegate_names.h): XNNPACK (which TFLite
// 2.x creates and benchmark_model applies by default: "Created TensorFlow
// Lite XNNPACK delegate for CPU.") is "xnnpack", the GPU delegate (OpenCL,
// OpenGL, Metal) "gpu"; NNAPI and Hexagon "nnapi" and "hexagon", the names
// the tool runners' jobs use (agent::kToolDelegateNames); another (Core ML,
// an unknown delegate kernel) is "external" with the option kind:coreml or
// kind:KERNEL; an EXTERNAL delegate (a plugin library) is "external" without
// one.
// Lines the parser does not know are ignored; "#" lines at the very start of
// the text (a sample's origin) are skipped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner_json.h"  // runner::Metrics, runner::OutputAccuracy
#include "harness/run/runner_output.h"

namespace dfarm::harness {

// One "count=N first=F curr=C min=A max=B avg=M std=S" line of benchmark_model
// (microseconds): the statistics of one series of runs (warmup or measured).
struct BenchmarkRunStats {
  int64_t count = 0;
  double first_us = 0;
  double curr_us = 0;
  double min_us = 0;
  double max_us = 0;
  double avg_us = 0;
  double std_us = 0;
};

// One row of the "Summary by node type" table of --enable_op_profiling, for
// the regular (measured) runs.
struct BenchmarkOpTypeProfile {
  std::string node_type;  // "CONV_2D", or an XNNPACK operator "Convolution (NHWC, QC8) GEMM"
  int64_t count = 0;      // nodes of this type
  double avg_ms = 0;      // per run, all nodes of the type together
  double avg_pct = 0;     // share of a run
  double cdf_pct = 0;
  double mem_kb = 0;
  int64_t times_called = 0;
};

// A "Replacing N [out of M] node(s) with delegate (KERNEL) node, yielding K
// partitions" line (TfLite's delegate kernel log), or Hexagon's "Hexagon
// delegate: 0 nodes delegated out of M nodes." (N 0, K 0), after which TfLite
// prints no Replacing line.
struct BenchmarkDelegation {
  std::string kernel;           // "TfLiteXNNPackDelegate"
  int64_t delegated_nodes = 0;  // N
  int64_t total_nodes = 0;      // M; 0 when the line (older versions) does not say
  int64_t partitions = 0;       // K
};

struct BenchmarkLog {
  // "tflite" (TF 2.x and later), "tflite-1.x" (the "Average inference
  // timings" line) or "litert" (benchmark_litert_model).
  std::string format;
  std::string graph;  // "Graph: [...]", else "Loaded model ...": the model path as given
  // The flags echo, "Name: [value]" lines, in order ("Num threads", "4").
  std::vector<std::pair<std::string, std::string>> flags;
  runner::Metrics metrics;
  std::optional<BenchmarkRunStats> warmup;     // the warmup runs' stat line
  std::optional<BenchmarkRunStats> inference;  // the measured runs' stat line
  // "Memory footprint delta from the start of the tool (MB): init=X overall=Y"
  // (LiteRT: "Init footprint" / "Overall footprint"), in MB.
  std::optional<double> init_footprint_mb;
  std::optional<double> overall_footprint_mb;
  std::optional<double> peak_memory_mb;
  // The delegate ("xnnpack", "gpu", "nnapi", "hexagon", "external"; above): a
  // "Use X: [1]" / "External delegate path" flag, else an "Explicitly applied
  // X delegate" line, else the first Replacing line's kernel, else a creation
  // line ("Created TensorFlow Lite delegate for GPU.", "NNAPI delegate
  // created.", ...; XNNPACK's only when no other delegate was created). Empty
  // when the log names none: TensorFlow Lite's own CPU kernels.
  std::string delegate;
  // {"kind": ...} when `delegate` is "external" for a delegate that has no
  // name of its own here (Core ML, an unknown kernel); empty otherwise.
  std::map<std::string, std::string> delegate_options;
  // "completely" | "partially" | "not": the "... will be completely/partially
  // executed by the delegate" / "will not be executed" line; also "not" when
  // the delegate took no node (a default XNNPACK whose application TFLite
  // ignored as failed, Hexagon's "0 nodes delegated"); empty when the log
  // says nothing.
  std::string delegate_execution;
  std::vector<BenchmarkDelegation> delegations;    // in log order
  std::vector<BenchmarkOpTypeProfile> op_profile;  // the regular runs' summary, in table order
  int64_t nodes_executed = 0;                      // "Number of nodes executed" of the regular runs
  // The run failed: the first "Failed to ..." line, else "Benchmarking
  // failed."; empty when it did not. A failed log may have no timings.
  std::string failure;
};

// Parses benchmark_model's (or LiteRT's) output. Fails, naming what is
// missing, when the text has neither an inference timing (the "Inference
// timings in us" / "Average inference timings in us" line, a measured runs'
// stat line, LiteRT's "Inference (avg)") nor a failure line.
Result<BenchmarkLog> ParseBenchmarkModelLog(std::string_view text);

// The job status a failed log means (agent/protocol/status.h names):
// "delegate_error" for a failure naming a delegate, "model_error" for one
// loading, building or allocating the model, else "crashed". "ok" when the
// log has no failure.
std::string BenchmarkLogStatus(const BenchmarkLog& log);

// One latency line of inference_diff: "avg=X(us), std_dev=Y(us)".
struct InferenceDiffLatency {
  double avg_us = 0;
  double std_us = 0;
};

struct InferenceDiffLog {
  int64_t num_runs = 0;            // "Num evaluation runs"
  InferenceDiffLatency reference;  // single-thread CPU
  InferenceDiffLatency test;       // the delegate / the user's settings
  // One per "OutputDiff[i]: avg_error=A, std_dev=S" line, by output index.
  // What the tool computes (inference_profiler_stage.cc): for each run, the
  // mean over the output's elements of |test - reference| (raw values:
  // quantized outputs are NOT dequantized); then over the runs, A = the mean
  // of those per-run means and S = their standard deviation across runs
  // (tensorflow::Stat, population). So mean_abs_error = A is comparable with
  // ours (a mean absolute error, in raw units for quantized outputs), but
  // std_abs_error = S is the spread of the per-run mean between runs, NOT
  // the spread of the per-element error that our runner reports. compared
  // stays 0 (the tool does not say), name stays empty.
  std::vector<runner::OutputAccuracy> outputs;
  // The test run's delegate from TensorFlow Lite's lines ("GPU delegate is
  // created.", "Created TensorFlow Lite XNNPACK delegate for CPU.", ...), as
  // BenchmarkLog::delegate / delegate_options; empty when none is named.
  std::string delegate;
  std::map<std::string, std::string> delegate_options;
};

// Parses inference_diff's output. Fails, naming what is missing, when the
// text has no "Test run latency" line or no "OutputDiff[i]" line.
Result<InferenceDiffLog> ParseInferenceDiffLog(std::string_view text);

// What the store keeps of a parsed log, the same as a runner document gives
// (ToolRunnerOutput below): status, metrics (threads_used from the log's
// flag echo), placement from the delegation lines (unset when the log has
// none); for inference_diff, accuracy from the OutputDiff lines with
// reference "cpu".
RunnerOutput BenchmarkRunnerOutput(const BenchmarkLog& log);
RunnerOutput InferenceDiffRunnerOutput(const InferenceDiffLog& log);

// What a job of a tool runner (runner kind "benchmark_model" or
// "inference_diff"; the agent returns the tool's whole log, stdout and stderr
// together, in JobResult::runner_json) becomes in the store: the same
// RunnerOutput a dfarm-runner document gives (status "ok" or the failure's
// class, metrics, placement from the delegation lines, accuracy from
// inference_diff's OutputDiff lines with reference "cpu"). A log the parser
// cannot read fails, naming what is missing.
Result<RunnerOutput> ToolRunnerOutput(std::string_view kind, std::string_view log);

}  // namespace dfarm::harness
