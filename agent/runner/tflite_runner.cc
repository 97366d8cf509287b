#include "agent/runner/tflite_runner.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <regex>
#include <system_error>

#include "agent/base/regular_file.h"
#include "agent/runner/accuracy.h"
#include "agent/runner/tensor_files.h"

namespace dfarm::runner {
namespace {

using Clock = std::chrono::steady_clock;
using tflite::InterpreterConfig;

// Records a failure in *outcome; returns false so a step can end with it.
bool Failed(RunOutcome* outcome, RunnerStatus status, std::string error) {
  outcome->status = status;
  outcome->error = std::move(error);
  return false;
}

RunnerStatus FromFault(tflite::CreateFault fault) {
  switch (fault) {
    case tflite::CreateFault::kNone:
      return RunnerStatus::kOk;
    case tflite::CreateFault::kModel:
      return RunnerStatus::kModelError;
    case tflite::CreateFault::kUnsupported:
      return RunnerStatus::kUnsupported;
    case tflite::CreateFault::kDelegate:
      return RunnerStatus::kDelegateError;
  }
  return RunnerStatus::kInternalError;
}

// TFLite's tensor type as ours; false for the types we have none of (string, complex).
bool DTypeOf(tflite::CType type, runtime::DType* out) {
  switch (type) {
    case tflite::CType::kFloat32:
      *out = runtime::DType::kFloat32;
      return true;
    case tflite::CType::kFloat16:
      *out = runtime::DType::kFloat16;
      return true;
    case tflite::CType::kInt32:
      *out = runtime::DType::kInt32;
      return true;
    case tflite::CType::kUInt8:
      *out = runtime::DType::kUint8;
      return true;
    case tflite::CType::kInt64:
      *out = runtime::DType::kInt64;
      return true;
    case tflite::CType::kBool:
      *out = runtime::DType::kBool;
      return true;
    case tflite::CType::kInt16:
      *out = runtime::DType::kInt16;
      return true;
    case tflite::CType::kInt8:
      *out = runtime::DType::kInt8;
      return true;
    default:
      return false;
  }
}

// TFLite's input or output tensors as runtime::Tensors over TFLite's own
// buffers, so that the runner's input, hash, dump and accuracy code reads and
// writes them in place. Made again after Invoke() for outputs (a dynamic
// tensor may move).
struct TensorViews {
  std::vector<runtime::Tensor> tensors;
  std::vector<runtime::Tensor*> ptrs;
};

Result<TensorViews> ViewTensors(tflite::Interpreter& in, bool inputs) {
  TensorViews out;
  const size_t n = inputs ? in.num_inputs() : in.num_outputs();
  out.tensors.resize(n);
  for (size_t i = 0; i < n; ++i) {
    tflite::TensorView v = inputs ? in.InputView(i) : in.OutputView(i);
    runtime::Tensor& t = out.tensors[i];
    t.index = static_cast<int>(i);
    t.name = v.meta.name;
    if (!DTypeOf(v.meta.type, &t.dtype)) {
      return MakeError(std::string(inputs ? "input " : "output ") + std::to_string(i) + " '" +
                       t.name + "' has TfLiteType " +
                       std::to_string(static_cast<int>(v.meta.type)) +
                       ", which dfarm does not handle");
    }
    t.shape = v.meta.shape;
    t.bytes = v.byte_size;
    t.data = static_cast<std::byte*>(v.data);
    t.allocation = runtime::Allocation::kArena;
    t.quantized = v.meta.scale > 0.0f;
    t.scale = v.meta.scale;
    t.zero_point = v.meta.zero_point;
    if (t.quantized) {
      t.scales = {t.scale};
      t.zero_points = {t.zero_point};
    }
  }
  for (runtime::Tensor& t : out.tensors) out.ptrs.push_back(&t);
  return out;
}

// A "threads" delegate option: an integer from 1 to 256.
bool ValidThreads(const std::string& value) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  return !value.empty() && *end == '\0' && n >= 1 && n <= 256;
}

bool ChooseXnnpack(const RunnerOptions& options, InterpreterConfig* config, RunOutcome* outcome) {
  for (const auto& [key, value] : options.delegate_options) {
    if (key == "threads" && !ValidThreads(value)) {
      return Failed(
          outcome, RunnerStatus::kDelegateError,
          "delegate option 'threads' has value '" + value + "', expected an integer from 1 to 256");
    }
    if (key == "fp16") {
      if (value != "true" && value != "1" && value != "false" && value != "0") {
        return Failed(outcome, RunnerStatus::kDelegateError,
                      "delegate option 'fp16' has value '" + value + "', expected true or false");
      }
      config->xnnpack_fp16 = value == "true" || value == "1";
    } else if (key != "threads") {
      return Failed(outcome, RunnerStatus::kDelegateError,
                    "TensorFlow Lite's delegate 'xnnpack' has no option '" + key +
                        "' (it takes threads, fp16)");
    }
  }
  Result<uint32_t> threads = DelegateThreads(options);
  if (!threads.ok()) return Failed(outcome, RunnerStatus::kDelegateError, threads.message());
  config->delegate = InterpreterConfig::Delegate::kXnnpack;
  config->xnnpack_threads = static_cast<int>(*threads);
  outcome->threads_used = *threads;
  return true;
}

bool ChooseExternal(const RunnerOptions& options, InterpreterConfig* config, RunOutcome* outcome) {
  for (const auto& [key, value] : options.delegate_options) {
    if (key == "path") {
      config->plugin_path = value;
    } else {
      config->plugin_options.emplace_back(key, value);
    }
  }
  if (config->plugin_path.empty()) {
    return Failed(outcome, RunnerStatus::kDelegateError,
                  "delegate 'external' needs the option path:/abs/plugin.so (a TensorFlow Lite "
                  "external delegate)");
  }
  config->delegate = InterpreterConfig::Delegate::kExternal;
  return true;
}

// The interpreter's settings for --delegate and its options. TFLite's own
// kernels take --num-threads (threads_used, except with xnnpack: its pool's).
bool ChooseDelegate(const RunnerOptions& options, InterpreterConfig* config, RunOutcome* outcome) {
  config->num_threads = static_cast<int>(options.num_threads);
  outcome->threads_used = options.num_threads;
  if (options.delegate == "cpu") {
    if (options.delegate_options.empty()) return true;
    return Failed(
        outcome, RunnerStatus::kDelegateError,
        "delegate 'cpu' takes no options (got '" + options.delegate_options.front().first + "')");
  }
  if (options.delegate == "xnnpack") return ChooseXnnpack(options, config, outcome);
  if (options.delegate == "external") return ChooseExternal(options, config, outcome);
  return Failed(outcome, RunnerStatus::kDelegateError,
                "unknown delegate '" + options.delegate + "' (" + kTfliteRunnerName +
                    " has: cpu, xnnpack, external)");
}

// One job's TensorFlow Lite objects.
struct Job {
  std::shared_ptr<const std::vector<uint8_t>> model;  // held once, by every interpreter of the job
  InterpreterConfig config;
  std::unique_ptr<tflite::Interpreter> interpreter;
  TensorViews inputs;
  TensorViews outputs;
};

Result<std::vector<uint8_t>> ReadModel(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return MakeError("failed to load model '" + path + "': no such file");
  }
  // Never blocks: a FIFO is refused as not a regular file.
  auto bytes = ReadRegularFile(path, "file", uint64_t{1} << 31);
  if (!bytes) return MakeError("failed to load model '" + path + "': " + bytes.message());
  return std::vector<uint8_t>(bytes->begin(), bytes->end());
}

// Reads the model and builds the interpreter with its delegate and tensors
// (init_us); fills in the placement TFLite logged and the tensor summaries.
bool LoadAndPrepare(const RunnerOptions& options, const tflite::Library& library, Job* job,
                    RunOutcome* outcome) {
  const Clock::time_point init_start = Clock::now();
  Result<std::vector<uint8_t>> model = ReadModel(options.model);
  if (!model.ok()) return Failed(outcome, RunnerStatus::kModelError, model.message());
  job->model = std::make_shared<const std::vector<uint8_t>>(std::move(*model));
  job->config.capture_log = true;
  tflite::CreateInfo info;
  job->interpreter = library.Create(job->model, job->config, &info);
  if (job->interpreter == nullptr) {
    return Failed(outcome, FromFault(info.fault),
                  (info.fault == tflite::CreateFault::kDelegate
                       ? "delegate '" + options.delegate + "': "
                       : "failed to load model '" + outcome->model + "': ") +
                      info.error);
  }
  outcome->metrics.init_us =
      std::chrono::duration<double, std::micro>(Clock::now() - init_start).count();
  outcome->placement = PlacementFromTfliteLog(info.log);
  Result<TensorViews> inputs = ViewTensors(*job->interpreter, true);
  Result<TensorViews> outputs = ViewTensors(*job->interpreter, false);
  if (!inputs.ok()) return Failed(outcome, RunnerStatus::kUnsupported, inputs.message());
  if (!outputs.ok()) return Failed(outcome, RunnerStatus::kUnsupported, outputs.message());
  job->inputs = std::move(*inputs);
  job->outputs = std::move(*outputs);
  outcome->inputs = Summaries(job->inputs.ptrs);
  outcome->outputs = Summaries(job->outputs.ptrs);
  return true;
}

// An Invoke() that fails: with a delegate, the delegate's fault.
bool InvokeFailed(const Job& job, RunOutcome* outcome, const std::string& what) {
  return Failed(outcome,
                job.config.delegate == InterpreterConfig::Delegate::kNone
                    ? RunnerStatus::kModelError
                    : RunnerStatus::kDelegateError,
                what + "TensorFlow Lite's Invoke failed: " + job.interpreter->last_error());
}

bool Measure(const RunnerOptions& options, const Job& job, RunOutcome* outcome) {
  return MeasureInvokes(
      options, [&] { return job.interpreter->Invoke() || InvokeFailed(job, outcome, ""); },
      outcome);
}

// Output views after an Invoke(), or a failure in *outcome.
bool RefreshOutputs(tflite::Interpreter& in, TensorViews* views, RunOutcome* outcome) {
  Result<TensorViews> outputs = ViewTensors(in, false);
  if (!outputs.ok()) return Failed(outcome, RunnerStatus::kUnsupported, outputs.message());
  *views = std::move(*outputs);
  return true;
}

// --accuracy-reference cpu: TensorFlow Lite's builtin kernels on one thread,
// no delegate, on the same inputs, each output compared (every input set).
bool CompareWithReference(const RunnerOptions& options, const tflite::Library& library, Job& job,
                          RunOutcome* outcome) {
  InterpreterConfig plain;
  tflite::CreateInfo info;
  std::unique_ptr<tflite::Interpreter> reference = library.Create(job.model, plain, &info);
  if (reference == nullptr) {
    return Failed(outcome, FromFault(info.fault), "accuracy reference 'cpu' failed: " + info.error);
  }
  Result<TensorViews> ref_inputs = ViewTensors(*reference, true);
  if (!ref_inputs.ok()) return Failed(outcome, RunnerStatus::kUnsupported, ref_inputs.message());
  const size_t sets = std::max<size_t>(1, options.inputs_dirs.size());
  std::vector<std::vector<OutputAccuracy>> per_output(job.outputs.ptrs.size());
  for (size_t k = 0; k < sets; ++k) {
    // With several sets the job's interpreter runs set k again (the measured
    // runs used set 0); with one, its outputs are those of the measured runs.
    if (sets > 1) {
      if (Result<void> r = SetInputs(options, job.inputs.ptrs, k); !r.ok()) {
        return Failed(outcome, RunnerStatus::kModelError, r.message());
      }
      if (!job.interpreter->Invoke()) {
        return InvokeFailed(job, outcome, "input set " + std::to_string(k) + ": ");
      }
      if (!RefreshOutputs(*job.interpreter, &job.outputs, outcome)) return false;
    }
    if (Result<void> r = SetInputs(options, ref_inputs->ptrs, k); !r.ok()) {
      return Failed(outcome, RunnerStatus::kModelError, r.message());
    }
    if (!reference->Invoke()) {
      return Failed(outcome, RunnerStatus::kModelError,
                    "accuracy reference 'cpu' failed: " + reference->last_error());
    }
    TensorViews ref_outputs;
    if (!RefreshOutputs(*reference, &ref_outputs, outcome)) return false;
    for (size_t i = 0; i < per_output.size(); ++i) {
      per_output[i].push_back(CompareOutput(i, *job.outputs.ptrs[i], *ref_outputs.ptrs[i]));
    }
  }
  outcome->accuracy = AccuracyOf(options, per_output);
  return true;
}

// After the measured runs: the output hashes, the dump and the accuracy.
bool Finish(const RunnerOptions& options, const tflite::Library& library, Job& job,
            RunOutcome* outcome) {
  if (!RefreshOutputs(*job.interpreter, &job.outputs, outcome)) return false;
  HashOutputs(job.outputs.ptrs, outcome);
  if (!options.dump_outputs_dir.empty()) {
    if (Result<void> r = DumpOutputs(job.outputs.ptrs, options.dump_outputs_dir); !r.ok()) {
      return Failed(outcome, RunnerStatus::kInternalError, r.message());
    }
  }
  if (!options.accuracy_reference.empty() &&
      !CompareWithReference(options, library, job, outcome)) {
    return false;
  }
  if (options.task_kind.empty()) return true;
  const auto run_set = [&](size_t set) -> const std::vector<runtime::Tensor*>* {
    if (Result<void> r = SetInputs(options, job.inputs.ptrs, set); !r.ok()) {
      Failed(outcome, RunnerStatus::kModelError, r.message());
      return nullptr;
    }
    if (!job.interpreter->Invoke()) {
      InvokeFailed(job, outcome, "input set " + std::to_string(set) + ": ");
      return nullptr;
    }
    if (!RefreshOutputs(*job.interpreter, &job.outputs, outcome)) return nullptr;
    return &job.outputs.ptrs;
  };
  return CollectTaskOutputs(options, job.outputs.ptrs.size(), run_set, outcome);
}

std::string ExecutableDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Takes --tflite-lib PATH (or --tflite-lib=PATH) out of argv; the rest is
// dfarm-runner's command line.
struct SplitArgs {
  std::vector<const char*> rest;
  std::string library;
  std::string error;
};

SplitArgs SplitTfliteArgs(int argc, const char* const* argv) {
  SplitArgs out;
  const std::string flag = "--tflite-lib";
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0 && (arg == flag || arg.rfind(flag + "=", 0) == 0)) {
      if (arg != flag) {
        out.library = arg.substr(flag.size() + 1);
      } else if (i + 1 < argc) {
        out.library = argv[++i];
      }
      if (out.library.empty()) out.error = "--tflite-lib: expected a path";
    } else {
      out.rest.push_back(argv[i]);
    }
  }
  return out;
}

// dfarm-runner's help, renamed, with what differs here.
std::string TfliteHelp(const std::string& runner_help) {
  std::string help = std::regex_replace(runner_help, std::regex("dfarm-runner"), kTfliteRunnerName);
  return help + "\n" + kTfliteRunnerName +
         " runs the job on TensorFlow Lite's C library (libtensorflowlite_c.so) instead of "
         "DelegateFarm's runtime, with the same flags, --json document and exit codes:\n"
         "  --delegate cpu       TensorFlow Lite's builtin kernels, --num-threads of them\n"
         "  --delegate xnnpack   TensorFlow Lite's XNNPACK delegate (options threads, fp16)\n"
         "  --delegate external  a TensorFlow Lite external delegate plugin (option "
         "path:PLUGIN.so; the other options go to the plugin)\n"
         "  --accuracy-reference cpu compares with TensorFlow Lite's builtin kernels on one "
         "thread; --profile is not available.\n"
         "  --tflite-lib PATH    TensorFlow Lite's C library (default: $DFARM_TFLITE_LIB, else "
         "libtensorflowlite_c.so through the loader's search path, else "
         "<program's folder>/../lib/libtensorflowlite_c.so)\n";
}

}  // namespace

std::vector<std::string> TfliteLibraryCandidates(const std::string& flag, const char* env,
                                                 const std::string& exe_dir) {
  if (!flag.empty()) return {flag};
  if (env != nullptr && *env != '\0') return {env};
  std::vector<std::string> out = {kTfliteLibraryName};
  if (!exe_dir.empty()) {
    out.push_back((std::filesystem::path(exe_dir) / ".." / "lib" / kTfliteLibraryName).string());
  }
  return out;
}

Result<std::unique_ptr<tflite::Library>> LoadTfliteLibrary(
    const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& path : candidates) {
    std::string error;
    std::unique_ptr<tflite::Library> library = tflite::Library::Load(path, &error);
    if (library != nullptr) return library;
    tried += (tried.empty() ? "" : "; ") + error;
  }
  return MakeError(std::string("cannot find TensorFlow Lite's C library ") + kTfliteLibraryName +
                   "; tried " + tried +
                   " (give --tflite-lib PATH or set DFARM_TFLITE_LIB; scripts/setup.sh fetches "
                   "TFLite 2.9's into .cache/tflite/)");
}

std::optional<JobPlacement> PlacementFromTfliteLog(std::string_view log) {
  static const std::regex kReplacing(
      R"(Replacing (\d+) (?:out of \d+ )?node\(s\) with delegate \(([^)]+)\) node, yielding (\d+) partition)");
  std::optional<JobPlacement> out;
  for (std::cregex_iterator it(log.data(), log.data() + log.size(), kReplacing), end; it != end;
       ++it) {
    if (!out) out.emplace();
    out->partitions += std::atoll((*it)[3].str().c_str());
  }
  return out;
}

RunOutcome RunTflite(const RunnerOptions& options, const tflite::Library& library,
                     std::ostream& log) {
  RunOutcome outcome;
  outcome.model = std::filesystem::path(options.model).filename().string();
  outcome.delegate = options.delegate;
  outcome.runtime = "tflite";
  outcome.runtime_version = library.Version();
  outcome.num_threads = options.num_threads;
  if (options.profile) {
    Failed(&outcome, RunnerStatus::kUsageError,
           std::string("--profile: ") + kTfliteRunnerName +
               " cannot time nodes (TensorFlow Lite's C API has no profiler)");
    return outcome;
  }
  Job job;
  if (!ChooseDelegate(options, &job.config, &outcome)) return outcome;
  if (!LoadAndPrepare(options, library, &job, &outcome)) return outcome;
  log << "TensorFlow Lite " << outcome.runtime_version << ", delegate " << options.delegate << "\n";
  if (Result<void> r = SetInputs(options, job.inputs.ptrs); !r.ok()) {
    Failed(&outcome, RunnerStatus::kModelError, r.message());
    return outcome;
  }
  if (!Measure(options, job, &outcome)) return outcome;
  Finish(options, library, job, &outcome);
  return outcome;
}

int TfliteRunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  SplitArgs split = SplitTfliteArgs(argc, argv);
  ParsedCommandLine parsed =
      ParseCommandLine(static_cast<int>(split.rest.size()), split.rest.data());
  if (!split.error.empty() && parsed.action == ParsedCommandLine::Action::kRun) {
    parsed.action = ParsedCommandLine::Action::kUsageError;
    parsed.error = split.error;
  }
  if (parsed.action == ParsedCommandLine::Action::kHelp) parsed.help = TfliteHelp(parsed.help);
  if (parsed.action == ParsedCommandLine::Action::kVersion) {
    parsed.help = std::string(kTfliteRunnerName) + " " + DFARM_VERSION + "\n";
  }
  const std::vector<std::string> candidates =
      TfliteLibraryCandidates(split.library, std::getenv("DFARM_TFLITE_LIB"), ExecutableDir());
  auto run = [&](const RunnerOptions& options, std::ostream& log) {
    Result<std::unique_ptr<tflite::Library>> library = LoadTfliteLibrary(candidates);
    if (!library.ok()) {
      RunOutcome outcome;
      outcome.runtime = "tflite";
      Failed(&outcome, RunnerStatus::kUsageError, library.message());
      return outcome;
    }
    return RunTflite(options, **library, log);
  };
  return RunnerMainWith(parsed, kTfliteRunnerName, run, out, err);
}

}  // namespace dfarm::runner
