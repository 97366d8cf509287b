// The dfarm-runner --json document (docs/CONTRACTS.md) as plain values, with
// its one writer and its one reader: the runner writes it (runner.cc converts
// its RunReport in one function), the harness reads it (harness/
// runner_output.cc turns it into the store's types) and `dfarm show --json`
// writes a stored accuracy section with AccuracyJson. Keys and values are
// the contract: a document the runner wrote and this code read back writes
// the same bytes again.
//
// Library dfarm_runner_json: nlohmann_json and dfarm_result only (no runtime),
// so the host links it without the runtime under test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::runner_json {

// "metrics": times in microseconds.
struct Metrics {
  double init_us = 0;
  double first_us = 0;
  double warmup_mean_us = 0;
  double mean_us = 0;
  double std_us = 0;
  double min_us = 0;
  double max_us = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  int64_t num_runs = 0;
  int64_t peak_rss_bytes = 0;
  int64_t arena_bytes = 0;
};

// An entry of "inputs" / "outputs".
struct Tensor {
  int64_t index = 0;
  std::string name;
  std::string dtype;  // "float32"
  std::vector<int64_t> shape;
};

// An entry of "placement.nodes".
struct PlacementNode {
  int64_t index = 0;
  std::string op;                    // "CONV_2D"
  std::string delegate;              // the delegate that ran it, or "cpu"
  std::optional<int64_t> partition;  // delegated nodes only
  bool folded = false;               // written only when true
  std::string reason;                // written only when not empty
};

// "placement": nodes by index.
struct Placement {
  int64_t partitions = 0;
  std::vector<PlacementNode> nodes;
};

// A number kept as the document had it, an integer or a real, so that it is
// written back the same way (the runner writes max_abs_error_lsb as an
// integer; the store keeps a REAL, which `dfarm show --json` writes as one).
using Number = std::variant<int64_t, double>;
double ToDouble(const Number& n);

// An entry of "accuracy.outputs". A figure over no compared element is NaN
// here and null in the document.
struct OutputAccuracy {
  int64_t index = 0;
  std::string name;
  int64_t compared = 0;
  double mean_abs_error = 0;
  double std_abs_error = 0;
  double max_abs_error = 0;
  double rmse = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t reference_nan_count = 0;
  int64_t reference_inf_count = 0;
  std::optional<Number> max_abs_error_lsb;  // quantized outputs only
  std::optional<bool> top1_agree;           // [1,N] outputs with N >= 2 only
  std::optional<bool> top5_agree;
};

// "accuracy": outputs by index.
struct Accuracy {
  std::string reference;  // "cpu"
  std::vector<OutputAccuracy> outputs;
};

// "profile".
struct ProfileNode {
  int64_t index = 0;
  std::string op;
  std::string delegate;
  std::optional<int64_t> partition;  // a delegated partition: then `nodes` is written too
  std::vector<int64_t> nodes;
  double mean_us = 0;
};
struct OpProfile {
  std::string op;
  int64_t count = 0;
  double total_us = 0;
  double pct = 0;
};
struct Profile {
  int64_t runs = 0;
  std::vector<ProfileNode> nodes;
  std::vector<OpProfile> by_op;
};

// The whole document. A failure document ("status" other than "ok") has only
// status and error; the other fields belong to ok documents.
struct Document {
  std::string status;  // a runner status name (agent/protocol/status.h): "ok", "model_error", ...
  std::string error;   // one line naming the fault; failure documents only
  std::string model;   // the model's file name
  std::string delegate;
  std::optional<int64_t> num_threads;   // --num-threads, as asked
  std::optional<int64_t> threads_used;  // the threads the delegate ran with
  std::optional<Metrics> metrics;
  std::vector<double> samples_us;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::optional<Placement> placement;
  std::optional<Accuracy> accuracy;  // only with --accuracy-reference
  std::optional<Profile> profile;    // only with --profile
};

// True when `doc` is an ok document (status "ok").
bool IsOk(const Document& doc);

// The document as JSON / as the one line the runner prints (compact; invalid
// UTF-8 in names replaced).
nlohmann::json ToJson(const Document& doc);
std::string WriteRunnerJson(const Document& doc);

// The "accuracy" section: {"reference":…,"outputs":[{"index",…}]}.
nlohmann::json AccuracyJson(const Accuracy& accuracy);

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
