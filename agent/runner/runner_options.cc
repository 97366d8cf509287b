#include "agent/runner/runner_options.h"

#include <CLI/CLI.hpp>
#include <cstring>

namespace dfarm::runner {

Result<std::vector<std::pair<std::string, std::string>>> ParseDelegateOptions(
    const std::string& text) {
  std::vector<std::pair<std::string, std::string>> options;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    size_t colon = entry.find(':');
    if (colon == std::string::npos || colon == 0) {
      return MakeError("bad --delegate-options entry '" + entry + "' (expected 'key:value')");
    }
    options.emplace_back(entry.substr(0, colon), entry.substr(colon + 1));
  }
  return options;
}

ParsedCommandLine ParseCommandLine(int argc, const char* const* argv) {
  ParsedCommandLine parsed;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) parsed.json = true;
  }
  RunnerOptions& o = parsed.options;
  std::string delegate_options;
  CLI::App app{
      "dfarm-runner: load a .tflite model, run it with a delegate and report latency, memory "
      "and outputs (docs/CONTRACTS.md)",
      "dfarm-runner"};
  app.add_option("--model", o.model, "The .tflite model to run")->required();
  app.add_option("--delegate", o.delegate, "Delegate to run with")->capture_default_str();
  app.add_option("--delegate-options", delegate_options, "Delegate options, 'k1:v1;k2:v2'");
  app.add_option("--num-threads", o.num_threads, "Threads the delegate may use")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup-runs", o.warmup_runs, "Runs after the first one, not measured")
      ->capture_default_str();
  app.add_option("--num-runs", o.num_runs, "Measured runs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--min-secs", o.min_secs,
                 "Measured runs go on until --num-runs runs and this many seconds are done")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--accuracy-reference", o.accuracy_reference,
                 "Compare the outputs with this reference on the same inputs (only 'cpu': the "
                 "single-thread reference kernels)")
      ->check(CLI::IsMember({"cpu"}));
  app.add_flag("--profile", o.profile,
               "Time each node and op type (a delegated partition as one step) over --num-runs "
               "extra runs");
  app.add_option("--seed", o.seed, "Seed of the random inputs")->capture_default_str();
  app.add_option("--inputs", o.inputs_dir,
                 "Folder with input_<i>.bin per model input (raw little-endian data); default: "
                 "seeded random inputs");
  app.add_option("--dump-outputs", o.dump_outputs_dir,
                 "Folder to write output_<i>.bin and outputs.json to");
  app.add_flag("--json", o.json, "Print one JSON document on stdout (human text goes to stderr)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    parsed.action = ParsedCommandLine::Action::kHelp;
    parsed.help = app.help();
    return parsed;
  } catch (const CLI::ParseError& e) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = e.what();
    return parsed;
  }
  auto options = ParseDelegateOptions(delegate_options);
  if (!options.ok()) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = options.message();
    return parsed;
  }
  o.delegate_options = std::move(*options);
  return parsed;
}

}  // namespace dfarm::runner
