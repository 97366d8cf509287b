#include "agent/runner/runner_options.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/protocol/status.h"
#include "delegates/delegate_options.h"

namespace dfarm::runner {
namespace {

// A number of at least `min`: "--num-runs: must be at least 1 (got 0)"
// (CLI11 puts the option's name first). description is what --help shows.
CLI::Validator AtLeast(int min, const std::string& description) {
  const std::string min_text = std::to_string(min);
  return CLI::Validator(
      [min, min_text](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(input.c_str(), &end);
        if (input.empty() || end != input.c_str() + input.size()) {
          return "must be a number (got '" + input + "')";
        }
        if (!(value >= static_cast<double>(min))) {
          return "must be at least " + min_text + " (got " + input + ")";
        }
        return std::string();
      },
      description);
}

// benchmark_model's --use_xnnpack: true runs the xnnpack delegate, false the
// CPU kernels; an explicit --delegate that says otherwise is a usage error.
Result<void> ApplyUseXnnpack(const std::string& value, bool delegate_given, RunnerOptions& o) {
  if (value.empty()) return Ok();
  const std::string wanted = (value == "true" || value == "1") ? "xnnpack" : "cpu";
  if (delegate_given && o.delegate != wanted) {
    return MakeError("--use_xnnpack=" + value + " contradicts --delegate " + o.delegate);
  }
  o.delegate = wanted;
  return Ok();
}

// Unsigned decimal fields of `text` split at `sep`; unset when any field
// is not digits (or too long).
std::optional<std::vector<uint32_t>> Fields(const std::string& text, char sep) {
  std::vector<uint32_t> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    const std::string f = text.substr(start, end == std::string::npos ? end : end - start);
    if (f.empty() || f.size() > 6 || f.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    out.push_back(static_cast<uint32_t>(std::stoul(f)));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// "anchors:B,S:SCORE:OFFSET:THRESHOLD[:MAX]" (MAX in 1..100000, default 100).
bool ParseAnchorsKind(const std::string& rest, RunnerOptions& o) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t c = rest.find(':', start);
    parts.push_back(rest.substr(start, c == std::string::npos ? c : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  if (parts.size() < 4 || parts.size() > 5) return false;
  auto outputs = Fields(parts[0], ',');
  auto offset = Fields(parts[2], ':');
  auto max = parts.size() == 5 ? Fields(parts[4], ':')
                               : std::optional<std::vector<uint32_t>>(std::vector{100u});
  char* end = nullptr;
  const double threshold = std::strtod(parts[3].c_str(), &end);
  if (!outputs || outputs->size() != 2 || !offset || offset->size() != 1 || !max || (*max)[0] < 1 ||
      (*max)[0] > 100000 || parts[3].empty() || *end != '\0' || !std::isfinite(threshold) ||
      (parts[1] != "sigmoid" && parts[1] != "softmax" && parts[1] != "raw")) {
    return false;
  }
  o.task_boxes = *outputs;
  o.task_activation = parts[1];
  o.task_class_offset = (*offset)[0];
  o.task_threshold = threshold;
  o.task_max_boxes = (*max)[0];
  return true;
}

// "topk:K[:OUTPUT]", "boxes:B,C,S,N[:MAX]", "anchors:..." (ParseAnchorsKind)
// or "classmap:OUTPUT[:ACTIVATION]".
Result<void> ParseTaskKind(const std::string& text, const std::string& usage, RunnerOptions& o) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "topk") {
    auto f = Fields(rest, ':');
    if (!f || f->size() > 2 || (*f)[0] < 1 || (*f)[0] > 1000) return MakeError(usage);
    o.task_top_k = (*f)[0];
    o.task_output = f->size() > 1 ? (*f)[1] : 0;
  } else if (kind == "boxes") {
    const size_t c = rest.find(':');
    auto outputs = Fields(rest.substr(0, c), ',');
    auto max = c == std::string::npos ? std::optional<std::vector<uint32_t>>(std::vector{100u})
                                      : Fields(rest.substr(c + 1), ':');
    if (!outputs || outputs->size() != 4 || !max || max->size() != 1 || (*max)[0] < 1 ||
        (*max)[0] > 1000) {
      return MakeError(usage);
    }
    o.task_boxes = *outputs;
    o.task_max_boxes = (*max)[0];
  } else if (kind == "classmap") {
    const size_t c = rest.find(':');
    auto output = Fields(rest.substr(0, c), ':');
    const std::string activation = c == std::string::npos ? "logits" : rest.substr(c + 1);
    if (!output || output->size() != 1 ||
        (activation != "logits" && activation != "probabilities")) {
      return MakeError(usage);
    }
    o.task_output = (*output)[0];
    o.task_activation = activation;
  } else if (kind == "anchors") {
    if (!ParseAnchorsKind(rest, o)) return MakeError(usage);
  } else {
    return MakeError(usage);
  }
  o.task_kind = kind;
  return Ok();
}

// --task-outputs (runner::TaskOutputs' kinds) into `o`; "" leaves it off.
Result<void> ParseTaskOutputs(const std::string& text, RunnerOptions& o) {
  if (text.empty()) return Ok();
  const std::string usage =
      "--task-outputs '" + text +
      "': expected topk:K[:OUTPUT] (K in 1..1000), boxes:B,C,S,N[:MAX] (the detection "
      "post-process's boxes, classes, scores and count outputs; MAX in 1..1000 rows per set), "
      "anchors:B,S:sigmoid|softmax|raw:OFFSET:THRESHOLD[:MAX] (raw box regressors and class "
      "scores; MAX in 1..100000 candidates per set) or classmap:OUTPUT[:logits|probabilities]";
  if (Result<void> r = ParseTaskKind(text, usage, o); !r.ok()) return r;
  if (o.inputs_dirs.empty()) return MakeError("--task-outputs needs --inputs (a labelled set)");
  return Ok();
}

// --step-fds R,W into `o`, and --partner-runner's partner_args; a stepped pair
// has no sustained mode and no --init-only, and a runner is a driver or a
// partner, not both.
Result<void> ParseStepping(int argc, const char* const* argv, const std::string& step_fds,
                           RunnerOptions& o) {
  if (!step_fds.empty()) {
    int r = -1, w = -1;
    char tail = 0;
    if (std::sscanf(step_fds.c_str(), "%d,%d%c", &r, &w, &tail) != 2 || r < 0 || w < 0) {
      return MakeError("--step-fds '" + step_fds + "': expected R,W (two descriptor numbers)");
    }
    o.step_read_fd = r;
    o.step_write_fd = w;
  }
  const bool driver = !o.partner_runner.empty();
  if (!driver && step_fds.empty()) return Ok();
  if (driver && !step_fds.empty()) {
    return MakeError(
        "--partner-runner and --step-fds do not combine (a runner drives or is "
        "driven)");
  }
  if (o.sustained_secs > 0 || o.init_only) {
    return MakeError(std::string(driver ? "--partner-runner" : "--step-fds") +
                     " does not combine with " +
                     (o.init_only ? "--init-only" : "--sustained-secs"));
  }
  if (!driver) return Ok();
  // Flags with a value, left out of the partner's command line.
  static constexpr std::string_view kDropped[] = {"--partner-runner", "--partner-seed",
                                                  "--dump-outputs"};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    bool dropped = false;
    for (std::string_view flag : kDropped) {
      if (arg == flag) {
        ++i;  // and its value
        dropped = true;
      } else if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
                 arg[flag.size()] == '=') {
        dropped = true;
      }
    }
    if (!dropped) o.partner_args.emplace_back(arg);
  }
  return Ok();
}

// The flags, into `o` (--delegate-options and --use_xnnpack as given, for
// ParseCommandLine to check). benchmark_model's spellings are aliases.
void AddFlags(CLI::App& app, RunnerOptions& o, std::string& delegate_options,
              std::string& use_xnnpack, std::string& task_outputs, std::string& step_fds) {
  app.add_option("--model,--graph", o.model, "The .tflite model to run")->required();
  app.add_option("--delegate", o.delegate, "Delegate to run with")->capture_default_str();
  app.add_option("--delegate-options", delegate_options, "Delegate options, 'k1:v1;k2:v2'");
  app.add_option("--num-threads,--num_threads", o.num_threads,
                 "Threads the delegate (or cpu, our kernels) may use")
      ->check(AtLeast(1, "POSITIVE"))
      ->capture_default_str();
  app.add_option("--warmup-runs,--warmup_runs", o.warmup_runs,
                 "Runs after the first one, not measured")
      ->capture_default_str();
  app.add_option("--num-runs,--num_runs", o.num_runs, "Measured runs")
      ->check(AtLeast(1, "POSITIVE"))
      ->capture_default_str();
  app.add_option("--min-secs", o.min_secs,
                 "Measured runs go on until --num-runs runs and this many seconds are done")
      ->check(AtLeast(0, "NONNEGATIVE"))
      ->capture_default_str();
  app.add_option("--sustained-secs", o.sustained_secs,
                 "Sustained mode: measured runs go on for this many seconds (not --num-runs), "
                 "and the JSON's \"sustained\" gives the latency curve in time windows")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--accuracy-reference", o.accuracy_reference,
                 "Compare the outputs with this reference on the same inputs ('cpu': the "
                 "single-thread reference kernels; 'layers': 'cpu', then every tensor written "
                 "outside a delegated partition on the first input set)")
      ->check(CLI::IsMember({"cpu", "layers"}));
  app.add_flag("--profile,--enable_op_profiling", o.profile,
               "Time each node and op type (a delegated partition as one step) over --num-runs "
               "extra runs");
  app.add_option("--seed", o.seed, "Seed of the random inputs")->capture_default_str();
  app.add_option("--inputs", o.inputs_dirs,
                 "Folder with input_<i>.bin per model input (raw little-endian data); repeat it "
                 "for several input sets (the measured runs use the first; accuracy covers "
                 "all); default: seeded random inputs")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--task-outputs", task_outputs,
                 "After the measured runs, run every input set once more and list per set "
                 "(the JSON's \"task_outputs\"): topk:K[:OUTPUT] the indices of output "
                 "OUTPUT's (default 0) K highest values; boxes:B,C,S,N[:MAX] the first "
                 "min(count, MAX) (default 100) rows of a detection post-process's boxes, "
                 "classes, scores and count outputs; anchors:B,S:SCORE:OFFSET:THRESHOLD[:MAX] "
                 "the (anchor, class) candidates of raw box regressors B [1,N,K] and class "
                 "scores S [1,N,C] whose score after SCORE (sigmoid, softmax or raw) is at "
                 "least THRESHOLD for a class from OFFSET on, with the anchor's first four box "
                 "values, the MAX (default 100) best; classmap:OUTPUT[:logits|probabilities] "
                 "the argmax class of each pixel, run-length coded; needs --inputs");
  app.add_option("--dump-outputs", o.dump_outputs_dir,
                 "Folder to write output_<i>.bin and outputs.json to");
  app.add_option("--use_xnnpack", use_xnnpack,
                 "benchmark_model's spelling: true is --delegate xnnpack, false --delegate cpu")
      ->check(CLI::IsMember({"true", "false", "1", "0"}));
  app.footer(ExitCodesHelp() +
             "benchmark_model's flag spellings are accepted too: --graph, --num_runs, "
             "--warmup_runs, --num_threads, --use_xnnpack, --enable_op_profiling.\n");
  app.add_flag("--json", o.json, "Print one JSON document on stdout (human text goes to stderr)");
  app.add_option("--partner-runner", o.partner_runner,
                 "A stepped pair: start this runner with the same arguments as a partner, and "
                 "take turns with it run by run (the JSON's \"partner\" and \"steps\")");
  app.add_option("--partner-seed", o.partner_seed,
                 "The seed of a stepped pair's order (ABBA blocks)")
      ->capture_default_str();
  app.add_option("--step-fds", step_fds,
                 "(internal) a stepped pair's partner: R,W, the descriptors its driver steps it "
                 "over");
  app.add_flag("--init-only", o.init_only,
               "Load the model and prepare the delegate only: init_us and delegate_stats (the "
               "runner's own second start with serialization_dir)");
}

}  // namespace

std::string ExitCodesHelp() {
  std::string text = "Exit codes (with --json, also the document's \"status\"):\n";
#define DFARM_RUNNER_EXIT_CODE_LINE(e, code, name, job) \
  text += "  " + std::to_string(code) + "  " + name + "\n";
  DFARM_RUNNER_STATUSES(DFARM_RUNNER_EXIT_CODE_LINE)
#undef DFARM_RUNNER_EXIT_CODE_LINE
  return text;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseDelegateOptions(
    const std::string& text) {
  std::string error;
  auto options = delegates::ParseDelegateOptions(text, "--delegate-options", &error);
  if (!options) return MakeError(error);
  return *options;
}

ParsedCommandLine ParseCommandLine(int argc, const char* const* argv) {
  ParsedCommandLine parsed;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) parsed.json = true;
  }
  RunnerOptions& o = parsed.options;
  std::string delegate_options;
  std::string use_xnnpack;
  CLI::App app{
      "dfarm-runner: load a .tflite model, run it with a delegate and report latency, memory "
      "and outputs (docs/CONTRACTS.md)",
      "dfarm-runner"};
  app.set_version_flag("--version", std::string("dfarm-runner ") + DFARM_VERSION);
  std::string task_outputs, step_fds;
  AddFlags(app, o, delegate_options, use_xnnpack, task_outputs, step_fds);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    parsed.action = ParsedCommandLine::Action::kHelp;
    parsed.help = app.help();
    return parsed;
  } catch (const CLI::CallForVersion& e) {
    parsed.action = ParsedCommandLine::Action::kVersion;
    parsed.help = std::string(e.what()) + "\n";
    return parsed;
  } catch (const CLI::ParseError& e) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = e.what();
    return parsed;
  }
  if (Result<void> r = ApplyUseXnnpack(use_xnnpack, app.count("--delegate") > 0, o); !r.ok()) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = r.message();
    return parsed;
  }
  auto options = ParseDelegateOptions(delegate_options);
  if (!options.ok()) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = options.message();
    return parsed;
  }
  o.delegate_options = std::move(*options);
  if (Result<void> r = ParseTaskOutputs(task_outputs, o); !r.ok()) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = r.message();
    return parsed;
  }
  if (Result<void> r = ParseStepping(argc, argv, step_fds, o); !r.ok()) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = r.message();
  }
  return parsed;
}

}  // namespace dfarm::runner
