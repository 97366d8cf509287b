// Test only: stand-ins for Google's benchmark_model and inference_diff
// (run_eval) as runner builds of kinds "benchmark_model" / "inference_diff"
// (agent/protocol/runner_kinds.h), so the end-to-end tests need neither
// tool. From the outside each behaves like the tool: it takes the tool's
// flag spellings (--name=value), fails on a model it cannot read with the
// tool's lines and exit code 1, and otherwise prints, on stderr as the tools
// log, a RECORDED REAL output from harness/testdata/benchmark_logs/ chosen by
// the delegate flags, with its flag echo and model path made the ones given,
// and exits 0. Nothing is measured: the figures are the recording's.
//
// One source, two programs (DFARM_STANDIN_TOOL): dfarm-benchmark-model-standin
// and dfarm-inference-diff-standin. argv[0] cannot choose, as an agent runs a
// build under its store name.
//
// Stricter than the tools in one way: a flag the tool does not know makes the
// real tool warn ("Unconsumed cmdline flags: ...") and go on; the stand-in
// prints that line and exits 1, so a mapping that passes a wrong flag fails
// the test that made it.
//
// DFARM_STANDIN_ARGV_LOG, when set, names a file that each run appends its
// arguments to (argv[1..]), one JSON array a line, for the tests to read.
// DFARM_STANDIN_FAIL_XNNPACK=1 makes a benchmark_model run with
// --use_xnnpack=true print the recorded failure of tensorflow/tensorflow
// issue 56166 ("Failed to apply XNNPACK delegate.") and exit 1, as the tool
// did.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

enum class FlagType { kBool, kInt, kFloat, kString };

struct FlagDef {
  std::string_view name;
  FlagType type;
  std::string_view echo;  // the "Name: [value]" label the tool logs; empty: none
};

// benchmark_model's flags (tools/benchmark/benchmark_model.cc,
// benchmark_tflite_model.cc and the delegate providers), in the order the
// tool echoes them.
constexpr FlagDef kBenchmarkModelFlags[] = {
    {"num_runs", FlagType::kInt, "Min num runs"},
    {"min_secs", FlagType::kFloat, "Min runs duration (seconds)"},
    {"max_secs", FlagType::kFloat, "Max runs duration (seconds)"},
    {"run_delay", FlagType::kFloat, "Inter-run delay (seconds)"},
    {"run_frequency", FlagType::kFloat, "Number of prorated runs per second"},
    {"num_threads", FlagType::kInt, "Num threads"},
    {"use_caching", FlagType::kBool, "Use caching"},
    {"benchmark_name", FlagType::kString, "Benchmark name"},
    {"output_prefix", FlagType::kString, "Output prefix"},
    {"warmup_runs", FlagType::kInt, "Min warmup runs"},
    {"warmup_min_secs", FlagType::kFloat, "Min warmup runs duration (seconds)"},
    {"verbose", FlagType::kBool, ""},
    {"dry_run", FlagType::kBool, "Run w/o invoking kernels"},
    {"report_peak_memory_footprint", FlagType::kBool, "Report the peak memory footprint"},
    {"memory_footprint_check_interval_ms", FlagType::kInt, "Memory footprint check interval (ms)"},
    {"graph", FlagType::kString, "Graph"},
    {"signature_to_run_for", FlagType::kString, "Signature to run"},
    {"input_layer", FlagType::kString, "Input layers"},
    {"input_layer_shape", FlagType::kString, "Input shapes"},
    {"input_layer_value_range", FlagType::kString, "Input value ranges"},
    {"input_layer_value_files", FlagType::kString, "Input value files"},
    {"allow_fp16", FlagType::kBool, "Allow fp16"},
    {"require_full_delegation", FlagType::kBool, "Require full delegation"},
    {"enable_op_profiling", FlagType::kBool, "Enable op profiling"},
    {"max_profiling_buffer_entries", FlagType::kInt, "Max profiling buffer entries"},
    {"profiling_output_csv_file", FlagType::kString, "CSV File to export profiling data to"},
    {"print_preinvoke_state", FlagType::kBool, "Print pre-invoke interpreter state"},
    {"print_postinvoke_state", FlagType::kBool, "Print post-invoke interpreter state"},
    {"max_delegated_partitions", FlagType::kInt, "Max number of delegated partitions"},
    {"min_nodes_per_partition", FlagType::kInt, "Min nodes per partition"},
    {"use_gpu", FlagType::kBool, "Use gpu"},
    {"gpu_precision_loss_allowed", FlagType::kBool, "Allow lower precision in gpu"},
    {"gpu_experimental_enable_quant", FlagType::kBool, "Enable running quant models in gpu"},
    {"gpu_backend", FlagType::kString, "GPU backend"},
    {"use_nnapi", FlagType::kBool, "Use NNAPI"},
    {"nnapi_accelerator_name", FlagType::kString, "NNAPI accelerator"},
    {"use_hexagon", FlagType::kBool, "Use Hexagon"},
    {"use_xnnpack", FlagType::kBool, "Use xnnpack"},
    {"xnnpack_force_fp16", FlagType::kBool, "xnnpack_force_fp16"},
    {"external_delegate_path", FlagType::kString, "External delegate path"},
    {"external_delegate_options", FlagType::kString, "External delegate options"},
};

// inference_diff's (tools/evaluation/tasks/inference_diff/run_eval) and the
// delegate registrar's it takes too.
constexpr FlagDef kInferenceDiffFlags[] = {
    {"model_file", FlagType::kString, ""},
    {"output_file_path", FlagType::kString, ""},
    {"num_runs", FlagType::kInt, ""},
    {"num_interpreter_threads", FlagType::kInt, ""},
    {"delegate", FlagType::kString, ""},
    {"num_threads", FlagType::kInt, ""},
    {"use_gpu", FlagType::kBool, ""},
    {"use_nnapi", FlagType::kBool, ""},
    {"use_hexagon", FlagType::kBool, ""},
    {"use_xnnpack", FlagType::kBool, ""},
    {"xnnpack_force_fp16", FlagType::kBool, ""},
    {"external_delegate_path", FlagType::kString, ""},
    {"external_delegate_options", FlagType::kString, ""},
};

bool ValueParses(FlagType type, const std::string& v) {
  char* end = nullptr;
  switch (type) {
    case FlagType::kBool:
      return v == "true" || v == "false" || v == "1" || v == "0";
    case FlagType::kInt:
      std::strtol(v.c_str(), &end, 10);
      return !v.empty() && *end == '\0';
    case FlagType::kFloat:
      std::strtod(v.c_str(), &end);
      return !v.empty() && *end == '\0';
    case FlagType::kString:
      return true;
  }
  return false;
}

// The flags given, by name, in the order of `defs`; exits 1 as the tool
// does on a value it cannot parse, and on an unknown flag (see the top).
template <size_t N>
std::map<std::string, std::string> ParseFlags(int argc, char** argv, const FlagDef (&defs)[N]) {
  std::map<std::string, std::string> given;
  std::string unconsumed;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const FlagDef* def = nullptr;
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      for (const FlagDef& d : defs) {
        if (arg.compare(2, eq - 2, d.name) == 0 && d.name.size() == eq - 2) def = &d;
      }
    }
    if (!def) {
      unconsumed += (unconsumed.empty() ? "" : " ") + arg;
      continue;
    }
    const std::string value = arg.substr(eq + 1);
    if (!ValueParses(def->type, value)) {
      std::cerr << "ERROR: Failed to parse flag '" << def->name << "' against argv '" << arg
                << "'\n";
      std::exit(1);
    }
    given[std::string(def->name)] = value;
  }
  if (!unconsumed.empty()) {
    std::cerr << "WARNING: Unconsumed cmdline flags: " << unconsumed << "\n"
              << "dfarm stand-in: a flag the real tool does not know; exiting 1 (the real tool "
                 "would go on)\n";
    std::exit(1);
  }
  return given;
}

void LogArgv(int argc, char** argv) {
  const char* path = std::getenv("DFARM_STANDIN_ARGV_LOG");
  if (!path || !*path) return;
  nlohmann::json args = nlohmann::json::array();
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  std::ofstream(path, std::ios::app) << args.dump() << "\n";
}

bool On(const std::map<std::string, std::string>& f, const std::string& name) {
  auto it = f.find(name);
  return it != f.end() && (it->second == "true" || it->second == "1");
}

std::string Get(const std::map<std::string, std::string>& f, const std::string& name) {
  auto it = f.find(name);
  return it == f.end() ? "" : it->second;
}

// The lines of a recorded sample, the "#" lines of its origin left out.
std::vector<std::string> SampleLines(const std::string& name) {
  const std::string path = std::string(DFARM_BENCHMARK_LOGS_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) {
    std::cerr << "dfarm stand-in: cannot read its recording '" << path << "'\n";
    std::exit(2);
  }
  std::vector<std::string> lines;
  bool head = true;
  for (std::string line; std::getline(in, line);) {
    if (head && line.rfind("#", 0) == 0) continue;
    head = false;
    lines.push_back(line);
  }
  return lines;
}

// The model must be a readable file, as the tool mmaps it; else the tool's
// lines (FlatBufferModel::BuildFromFile, then the tool's own) and exit 1.
void CheckModel(const std::string& path, bool benchmark_model) {
  if (!path.empty() && ::access(path.c_str(), R_OK) == 0) {
    std::ifstream probe(path, std::ios::binary);
    char c;
    if (probe.get(c)) return;
  }
  std::cerr << "ERROR: Could not open '" << path << "'.\n";
  if (benchmark_model) {
    std::cerr << "ERROR: Failed to mmap model " << path << "\nERROR: Benchmarking failed.\n";
  } else {
    std::cerr << "ERROR: Failed to mmap model " << path << "\n";
  }
  std::exit(1);
}

// A recording, and where its body starts (the line after the tool's flag
// echo; 0 when the recording has no echo), and the prefix its lines carry.
struct Recording {
  const char* file;
  const char* body_from;  // the first line of the body begins with this; "" for line 0
  const char* prefix;
};

// Whether this run fails as the recorded failure did (exit code 1).
bool Failing(const std::map<std::string, std::string>& f) {
  const char* fail = std::getenv("DFARM_STANDIN_FAIL_XNNPACK");
  return fail && std::string_view(fail) == "1" && On(f, "use_xnnpack");
}

Recording ChooseBenchmarkModel(const std::map<std::string, std::string>& f) {
  if (Failing(f)) return {"tflite_failure_xnnpack_issue56166.txt", "Loaded model ", ""};
  if (On(f, "use_gpu")) return {"tflite_gpu_android_issue43541.txt", "Loaded model ", ""};
  if (On(f, "use_xnnpack") && On(f, "report_peak_memory_footprint")) {
    return {"tflite_xnnpack_cros_peak_memory.txt", "", "INFO: "};
  }
  if (On(f, "use_xnnpack")) {
    return {"tflite_xnnpack_rpi_xnnpack_issue999.txt", "Loaded model ", ""};
  }
  return {"tflite1x_op_profiling_readme.txt", "", ""};  // the one recorded CPU-only run
}

int BenchmarkModel(int argc, char** argv) {
  const auto flags = ParseFlags(argc, argv, kBenchmarkModelFlags);
  const std::string graph = Get(flags, "graph");
  if (graph.empty()) {
    std::cerr << "ERROR: Please specify the name of your TF Lite input file with --graph\n"
                 "ERROR: Benchmarking failed.\n";
    return 1;
  }
  const Recording rec = ChooseBenchmarkModel(flags);
  std::ostringstream out;
  out << rec.prefix << "STARTING!\n" << rec.prefix << "Log parameter values verbosely: [0]\n";
  for (const FlagDef& d : kBenchmarkModelFlags) {
    auto it = flags.find(std::string(d.name));
    if (it == flags.end() || d.echo.empty()) continue;
    std::string value = it->second;
    if (d.type == FlagType::kBool) value = On(flags, it->first) ? "1" : "0";
    out << rec.prefix << d.echo << ": [" << value << "]\n";
    if (d.name == "num_threads") {
      out << rec.prefix << "#threads used for CPU inference: [" << value << "]\n";
    }
  }
  std::cerr << out.str();  // the echo comes before the model is loaded
  out.str("");
  CheckModel(graph, true);
  const std::vector<std::string> lines = SampleLines(rec.file);
  size_t from = 0;
  if (*rec.body_from) {
    while (from < lines.size() && lines[from].rfind(rec.body_from, 0) != 0) ++from;
  }
  for (size_t i = from; i < lines.size(); ++i) {
    if (lines[i].rfind("Loaded model ", 0) == 0) {
      out << "Loaded model " << graph << "\n";
    } else {
      out << lines[i] << "\n";
    }
  }
  std::cerr << out.str();
  return Failing(flags) ? 1 : 0;
}

int InferenceDiff(int argc, char** argv) {
  const auto flags = ParseFlags(argc, argv, kInferenceDiffFlags);
  const std::string model = Get(flags, "model_file");
  CheckModel(model, false);
  const bool gpu = Get(flags, "delegate") == "gpu" || On(flags, "use_gpu");
  const std::vector<std::string> lines =
      SampleLines(gpu ? "inference_diff_gpu_issue42294.txt" : "inference_diff_readme.txt");
  std::ostringstream out;
  for (const std::string& line : lines) {
    // The GPU recording names its model on its first line: "PATH (conv2d)".
    const size_t named = line.find(".tflite (");
    out << (named == std::string::npos ? line : model + line.substr(named + 7)) << "\n";
  }
  std::cerr << out.str();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  LogArgv(argc, argv);
  const std::string_view tool = DFARM_STANDIN_TOOL;
  return tool == "inference_diff" ? InferenceDiff(argc, argv) : BenchmarkModel(argc, argv);
}
