// The dfarm-runner --json document (docs/CONTRACTS.md) as plain values, with
// its one writer and its one reader: the runner writes it (runner.cc makes it
// from its RunOutcome in one function), the harness reads it (harness/
// runner_output.cc keeps what the store needs) and `dfarm show --json`
// writes stored sections with MetricsJson, PlacementJson and AccuracyJson.
// The measured values themselves are runner_values.h's, shared with the
// runner and the store. Keys and values are the contract: a document the
// runner wrote and this code read back writes the same bytes again.
//
// Library dfarm_runner_json: nlohmann_json and dfarm_result only (no runtime),
// so the host links it without the runtime under test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner_values.h"

namespace dfarm::runner_json {

// The measured values (runner_values.h), under the names the document uses.
using runner::Accuracy;
using runner::JobPlacement;
using runner::JobProfile;
using runner::JobSteps;
using runner::JobSustained;
using runner::LayerError;
using runner::Metrics;
using runner::Number;
using runner::OutputAccuracy;
using runner::PlacementNode;
using runner::ProfileNode;
using runner::ProfileOp;
using runner::SustainedWindow;
using runner::TaskClassMap;
using runner::TaskDetection;
using runner::TaskOutputs;
using runner::ToDouble;

// An entry of "inputs" / "outputs" (a runtime::Tensor's name, dtype and shape).
struct TensorEntry {
  int64_t index = 0;
  std::string name;
  std::string dtype;  // "float32"
  std::vector<int64_t> shape;
  // Outputs only: lowercase hex sha256 of the tensor's bytes after the last
  // measured run (a health check's known outputs); unset for inputs
  // and in documents from older runners.
  std::optional<std::string> sha256;
};

// "runtime": the runtime that ran the job, "dfarm" (dfarm-runner,
// its release) or "tflite" (dfarm-tflite-runner, TensorFlow Lite's
// TfLiteVersion()); unset in documents from runners before it.
struct RuntimeEntry {
  std::string kind;
  std::string version;
};

// The whole document. A failure document ("status" other than "ok") has only
// status and error; the other fields belong to ok documents.
struct Document {
  std::string status;  // a runner status name (agent/protocol/status.h): "ok", "model_error", ...
  std::string error;   // one line naming the fault; failure documents only
  std::string model;   // the model's file name
  std::string delegate;
  std::optional<RuntimeEntry> runtime;
  std::optional<int64_t> num_threads;   // --num-threads, as asked
  std::optional<int64_t> threads_used;  // the threads the delegate ran with
  std::optional<Metrics> metrics;
  std::vector<double> samples_us;
  std::vector<TensorEntry> inputs;
  std::vector<TensorEntry> outputs;
  std::optional<JobPlacement> placement;
  std::optional<Accuracy> accuracy;         // only with --accuracy-reference
  std::optional<JobProfile> profile;        // only with --profile
  std::optional<JobSustained> sustained;    // only with --sustained-secs
  std::optional<TaskOutputs> task_outputs;  // only with --task-outputs
  runner::DelegateStats delegate_stats;     // the delegate's Stats(); empty: no key
  std::optional<JobSteps> steps;            // only in a stepped pair
  // The driver of a stepped pair: its partner's whole document ("partner"),
  // as JSON text (compact), whatever its status; unset when the partner
  // printed no readable one (steps->partner_error says why).
  std::optional<std::string> partner;
};

// True when `doc` is an ok document (status "ok").
bool IsOk(const Document& doc);

// The document as JSON / as the one line the runner prints (compact; invalid
// UTF-8 in names replaced).
nlohmann::json ToJson(const Document& doc);
std::string WriteRunnerJson(const Document& doc);

// The sections of the document, for the host commands that write stored
// values in the runner's keys (`dfarm show --json`):
// "metrics": {"init_us",…,"arena_bytes"[,"init_cold_us"][,"init_warm_us"]};
// "peak_rss_bytes" is null when unknown (0 in Metrics).
nlohmann::json MetricsJson(const Metrics& metrics);
// "delegate_stats": {"programs_compiled":…,…}, in the stats' order of names
// as nlohmann sorts them (an object).
nlohmann::json DelegateStatsJson(const runner::DelegateStats& stats);
// "placement": {"partitions":…,"nodes":[{"index","op","delegate",…}]}.
nlohmann::json PlacementJson(const JobPlacement& placement);
// "accuracy": {"reference":…,"outputs":[{"index",…}]}.
nlohmann::json AccuracyJson(const Accuracy& accuracy);
// "profile": {"runs","nodes":[{"index","op","delegate","partition"?,"nodes"?,
// "mean_us"}],"by_op":[{"op","count","total_us","pct"}]}; "nodes" only when
// non-empty (a partition's DELEGATE entry, not a node timed inside it).
nlohmann::json ProfileJson(const JobProfile& profile);
// "sustained": {"secs","window_ms","windows":[{"t_ms","runs","mean_us","p50_us","max_us"}]}.
nlohmann::json SustainedJson(const JobSustained& sustained);
// "steps" (a stepped pair): {"role","starts_us"[,"order","partner_steps"][,"partner_error"]}.
nlohmann::json StepsJson(const JobSteps& steps);
// "task_outputs": {"kind":"topk","k","output","sets":[[index,...],...]},
// {"kind":"boxes","outputs":[B,C,S,N],"max","sets":[[[class,score,ymin,xmin,
// ymax,xmax],...],...]}, {"kind":"anchors","outputs":[B,S],"max","score",
// "offset","threshold","anchors","sets":[[[class,score,v0,v1,v2,v3,anchor],
// ...],...]} or {"kind":"classmap","output","activation",
// "sets":[{"height","width","rle":[value,count,...]},...]}.
nlohmann::json TaskOutputsJson(const TaskOutputs& task);
// One entry of "accuracy.layers" (`partition` only for a delegated partition).
nlohmann::json LayerErrorJson(const LayerError& layer);

// Reads a runner document. Fails, with a message beginning "runner JSON",
// when the text is not a JSON object or "status", "error" or a "metrics"
// figure has the wrong type. Lenient elsewhere, as the harness has always
// been: an absent field keeps its default, a non-number in "samples_us" is
// skipped, a malformed "placement" or "accuracy" section is left unset (the
// rest still counts), and malformed inputs, outputs or profile entries are
// left out.
Result<Document> ParseRunnerJson(std::string_view text);

// Reads only the "accuracy" section of a runner document, outputs sorted by
// index; unset when there is none. Unlike ParseRunnerJson, fails, naming the
// field, on a malformed section or an output listed twice.
Result<std::optional<Accuracy>> ParseRunnerAccuracy(std::string_view text);

}  // namespace dfarm::runner_json
