#include "agent/daemon/tool_args.h"

#include <optional>
#include <string_view>

#include "agent/protocol/runner_kinds.h"
#include "delegates/delegate_options.h"

namespace dfarm::agent {
namespace {

// A delegate option the tool has a flag for: key:value becomes FLAG=value
// (a boolean's value read as true/1 or false/0).
struct OptionFlag {
  std::string_view key;
  std::string_view flag;
  bool boolean;
};

// A delegate the tool can run: the flags that select it and its options.
struct ToolDelegate {
  std::string_view name;
  std::vector<std::string_view> flags;
  std::vector<OptionFlag> options;
};

// Flags of TFLite's delegate providers that benchmark_model takes for any delegate.
const std::vector<OptionFlag> kPartitionFlags = {
    {"max_delegated_partitions", "--max_delegated_partitions", false},
    {"min_nodes_per_partition", "--min_nodes_per_partition", false}};

std::vector<OptionFlag> WithPartitionFlags(std::vector<OptionFlag> own) {
  own.insert(own.end(), kPartitionFlags.begin(), kPartitionFlags.end());
  return own;
}

// benchmark_model applies XNNPACK by default; every delegate but xnnpack
// turns it off, so the nodes it leaves run on TFLite's builtin kernels (as
// ours fall back to the reference kernels).
const std::vector<ToolDelegate>& BenchmarkModelDelegates() {
  static const std::vector<ToolDelegate> delegates = {
      {"cpu", {"--use_xnnpack=false"}, kPartitionFlags},
      {"xnnpack",
       {"--use_xnnpack=true"},
       WithPartitionFlags(
           {{"fp16", "--xnnpack_force_fp16", true}, {"force_fp16", "--xnnpack_force_fp16", true}})},
      {"gpu",
       {"--use_gpu=true", "--use_xnnpack=false"},
       WithPartitionFlags({{"precision_loss_allowed", "--gpu_precision_loss_allowed", true},
                           {"quantized_models_allowed", "--gpu_experimental_enable_quant", true}})},
      {"nnapi",
       {"--use_nnapi=true", "--use_xnnpack=false"},
       WithPartitionFlags({{"accelerator_name", "--nnapi_accelerator_name", false}})},
      {"hexagon", {"--use_hexagon=true", "--use_xnnpack=false"}, kPartitionFlags},
  };
  return delegates;
}

// run_eval of inference_diff: --delegate picks one; it takes no options.
const std::vector<ToolDelegate>& InferenceDiffDelegates() {
  static const std::vector<ToolDelegate> delegates = {
      {"cpu", {}, {}},
      {"xnnpack", {"--delegate=xnnpack"}, {}},
      {"gpu", {"--delegate=gpu"}, {}},
      {"nnapi", {"--delegate=nnapi"}, {}},
      {"hexagon", {"--delegate=hexagon"}, {}},
  };
  return delegates;
}

// "true"/"1" or "false"/"0"; anything else is unset.
std::optional<bool> ReadBool(std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return std::nullopt;
}

std::string Flag(std::string_view flag, std::string_view value) {
  return std::string(flag) + "=" + std::string(value);
}

// Options turned into `delegate`'s flags, appended to *args. The xnnpack
// option `threads` is accepted only as num_threads (benchmark_model's
// --num_threads sets XNNPACK's threads too).
Result<void> AddOptionFlags(std::string_view tool, const JobSpec& job, const ToolDelegate& delegate,
                            const delegates::DelegateOptions& options,
                            std::vector<std::string>* args) {
  for (const auto& [key, value] : options) {
    const std::string what = std::string(tool) + ": option '" + key + ":" + value +
                             "' of delegate '" + job.delegate + "'";
    if (job.delegate == "xnnpack" && key == "threads") {
      if (value == std::to_string(job.num_threads)) continue;
      return MakeError(what + ": the tool has no flag for XNNPACK threads apart from its " +
                       "thread count (" + std::to_string(job.num_threads) + ")");
    }
    const OptionFlag* flag = nullptr;
    for (const OptionFlag& f : delegate.options) {
      if (f.key == key) flag = &f;
    }
    if (flag == nullptr) return MakeError(what + ": the tool has no flag for it");
    if (!flag->boolean) {
      if (value.empty()) return MakeError(what + ": it needs a value");
      args->push_back(Flag(flag->flag, value));
      continue;
    }
    std::optional<bool> on = ReadBool(value);
    if (!on) return MakeError(what + ": expected true or false");
    args->push_back(Flag(flag->flag, *on ? "true" : "false"));
  }
  return Ok();
}

// An external delegate plugin: the tool loads it with
// --external_delegate_path and passes it the job's options.
void AddPluginFlags(bool benchmark_model, const std::string& plugin_path,
                    const delegates::DelegateOptions& options, std::vector<std::string>* args) {
  if (benchmark_model) args->push_back("--use_xnnpack=false");
  args->push_back("--external_delegate_path=" + plugin_path);
  if (!options.empty()) {
    args->push_back("--external_delegate_options=" + delegates::FormatDelegateOptions(options));
  }
}

Result<void> CheckToolJob(std::string_view tool, const JobSpec& job) {
  if (!job.input_set_sha256s.empty()) {
    return MakeError(std::string(tool) + " takes no input sets (it feeds random inputs)");
  }
  if (tool == kRunnerKindBenchmarkModel && !job.accuracy_reference.empty()) {
    return MakeError("benchmark_model cannot compare outputs (accuracy_reference '" +
                     job.accuracy_reference + "'); inference_diff can");
  }
  return Ok();
}

// The flags that pick the job's delegate (or plugin) and carry its options.
Result<void> AddDelegateFlags(std::string_view tool, const std::vector<ToolDelegate>& table,
                              const JobSpec& job, const std::string& plugin_path,
                              delegates::DelegateOptions options, std::vector<std::string>* args) {
  if (!plugin_path.empty()) {
    AddPluginFlags(tool == kRunnerKindBenchmarkModel, plugin_path, options, args);
    return Ok();
  }
  for (const ToolDelegate& d : table) {
    if (d.name != job.delegate) continue;
    args->insert(args->end(), d.flags.begin(), d.flags.end());
    return AddOptionFlags(tool, job, d, options, args);
  }
  return MakeError(std::string(tool) + " has no flag for delegate '" + job.delegate + "'");
}

}  // namespace

Result<std::vector<std::string>> ToolArgs(const JobSpec& job, const std::string& model_path,
                                          const std::string& plugin_path) {
  const bool benchmark_model = job.runner_kind == kRunnerKindBenchmarkModel;
  if (!benchmark_model && job.runner_kind != kRunnerKindInferenceDiff) {
    return MakeError("runner kind '" + job.runner_kind + "' is not a tool");
  }
  const std::string_view tool =
      benchmark_model ? kRunnerKindBenchmarkModel : kRunnerKindInferenceDiff;
  if (auto ok = CheckToolJob(tool, job); !ok) return ok.error();
  std::string parse_error;
  auto options =
      delegates::ParseDelegateOptions(job.delegate_options, "delegate_options", &parse_error);
  if (!options) return MakeError(std::string(tool) + ": " + parse_error);
  bool op_profiling = false;
  delegates::DelegateOptions rest;
  for (auto& [key, value] : *options) {
    if (key != "op_profiling") {
      rest.emplace_back(std::move(key), std::move(value));
      continue;
    }
    std::optional<bool> on = ReadBool(value);
    if (!on || !benchmark_model) {
      return MakeError(
          std::string(tool) + ": option 'op_profiling:" + value +
          "': " + (benchmark_model ? "expected true or false" : "the tool has no flag for it"));
    }
    op_profiling = *on;
  }
  std::vector<std::string> args;
  if (benchmark_model) {
    args = {"--graph=" + model_path, "--num_threads=" + std::to_string(job.num_threads),
            "--num_runs=" + std::to_string(job.num_runs),
            "--warmup_runs=" + std::to_string(job.warmup_runs),
            // num_runs and warmup_runs are minimums beside these; 0 lets the counts rule.
            "--min_secs=0", "--warmup_min_secs=0", "--report_peak_memory_footprint=true",
            std::string("--enable_op_profiling=") + (op_profiling ? "true" : "false")};
  } else {
    args = {"--model_file=" + model_path, "--num_runs=" + std::to_string(job.num_runs),
            "--num_interpreter_threads=" + std::to_string(job.num_threads)};
  }
  const auto& table = benchmark_model ? BenchmarkModelDelegates() : InferenceDiffDelegates();
  if (auto ok = AddDelegateFlags(tool, table, job, plugin_path, std::move(rest), &args); !ok) {
    return ok.error();
  }
  return args;
}

}  // namespace dfarm::agent
