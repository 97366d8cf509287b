#include "agent/runner/runner.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <random>
#include <string_view>

#include "agent/base/sha256.h"
#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"
#include "agent/runner/layer_errors.h"
#include "agent/runner/metrics.h"
#include "agent/runner/runner_json.h"
#include "agent/runner/tensor_files.h"
#include "delegates/delegate_options.h"
#include "delegates/registry.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"

namespace dfarm::runner {
namespace {

using Clock = std::chrono::steady_clock;

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// CLOCK_MONOTONIC in microseconds: one clock for every process of the machine.
double MonotonicMicros() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

#ifdef DFARM_TEST_SLOWDOWN_FRACTION
// Test only (dfarm-runner-slowdown: agent/runner/CMakeLists.txt, for
// scripts/bench-paired.sh): after each timed Invoke(), real CPU work (an
// integer hash loop, not a sleep) for $DFARM_TEST_SLOWDOWN_FRACTION times the
// wall time that Invoke() took, so every measured invocation is that
// fraction slower however busy the machine is. Unset or not a number
// in [0, 10]: 0.
double SlowdownFraction() {
  static const double fraction = [] {
    const char* v = std::getenv("DFARM_TEST_SLOWDOWN_FRACTION");
    char* end = nullptr;
    const double f = v ? std::strtod(v, &end) : 0;
    return v && end != v && f >= 0 && f <= 10 ? f : 0.0;
  }();
  return fraction;
}

void WorkFor(std::chrono::steady_clock::duration span) {
  const auto until = std::chrono::steady_clock::now() + span;
  static volatile uint64_t sink = 0;
  uint64_t x = sink + 1;
  do {
    for (int i = 0; i < 256; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  } while (std::chrono::steady_clock::now() < until);
  sink = x;
}
#endif

#ifdef DFARM_TEST_COUNTED_CLOCK
// Test only (dfarm-runner-counted, dfarm-runner-slow: agent/runner/CMakeLists.txt):
// a timed invocation lasts its Invoke() calls x 1000 us, each within a random
// +-1%, not the clock's time: latency verdicts in tests that do not depend on
// how busy the machine is.
uint64_t counted_invokes = 0;

double CountedMicros(uint64_t invokes) {
  static std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.99, 1.01);
  return static_cast<double>(invokes) * 1000.0 * jitter(rng);
}
#endif

// Runtime faults: the model or its data (model_error), a feature we lack
// (unsupported), a broken precondition (internal_error).
RunnerStatus FromRuntime(const runtime::Status& status) {
  switch (status.code()) {
    case runtime::StatusCode::kOk:
      return RunnerStatus::kOk;
    case runtime::StatusCode::kError:
      return RunnerStatus::kModelError;
    case runtime::StatusCode::kUnsupported:
      return RunnerStatus::kUnsupported;
    case runtime::StatusCode::kInvalidArgument:
      return RunnerStatus::kInternalError;
  }
  return RunnerStatus::kInternalError;
}

// Forwards to a delegate and remembers whether any of its calls failed
// (anything but Ok or kUnsupported), so that such a failure is classed
// delegate_error rather than model_error.
class FaultTrackingDelegate : public runtime::Delegate {
 public:
  explicit FaultTrackingDelegate(std::unique_ptr<runtime::Delegate> inner)
      : Delegate(inner->name(), inner->options()), inner_(std::move(inner)) {}

  runtime::Status CheckNode(const runtime::Node& node) const override {
    return Track(inner_->CheckNode(node), false);
  }
  std::unique_ptr<runtime::DelegateKernel> CreateKernel() override {
    std::unique_ptr<runtime::DelegateKernel> kernel = inner_->CreateKernel();
    if (kernel == nullptr) {
      faulted_ = true;
      return nullptr;
    }
    return std::make_unique<Kernel>(std::move(kernel), this);
  }
  std::vector<std::pair<std::string, double>> Stats() const override { return inner_->Stats(); }
  runtime::Status EnableProfiling() override { return inner_->EnableProfiling(); }
  bool faulted() const { return faulted_; }

 private:
  class Kernel : public runtime::DelegateKernel {
   public:
    Kernel(std::unique_ptr<runtime::DelegateKernel> inner, const FaultTrackingDelegate* owner)
        : inner_(std::move(inner)), owner_(owner) {}
    runtime::Status Init(const runtime::Partition& p) override {
      return owner_->Track(inner_->Init(p), true);
    }
    runtime::Status Prepare(const runtime::Partition& p) override {
      return owner_->Track(inner_->Prepare(p), true);
    }
    runtime::Status Invoke(const runtime::Partition& p) override {
      return owner_->Track(inner_->Invoke(p), true);
    }
    runtime::Status InvokeProfiled(const runtime::Partition& p,
                                   std::vector<double>* node_us_out) override {
      runtime::Status s = inner_->InvokeProfiled(p, node_us_out);
      return s.code() == runtime::StatusCode::kUnsupported ? s : owner_->Track(std::move(s), true);
    }

   private:
    std::unique_ptr<runtime::DelegateKernel> inner_;
    const FaultTrackingDelegate* owner_;
  };

  // A kernel's kUnsupported (a partition it refuses after claiming it) is
  // the delegate's fault too; a node check's is an ordinary fallback.
  runtime::Status Track(runtime::Status s, bool in_kernel) const {
    if (!s.ok() && (in_kernel || s.code() != runtime::StatusCode::kUnsupported)) faulted_ = true;
    return s;
  }

  std::unique_ptr<runtime::Delegate> inner_;
  mutable bool faulted_ = false;
};

std::vector<runner_json::TensorEntry> TensorsDocument(const std::vector<TensorSummary>& tensors) {
  std::vector<runner_json::TensorEntry> out;
  for (const TensorSummary& t : tensors) {
    out.push_back({static_cast<int64_t>(t.index), t.name, runtime::DTypeName(t.dtype),
                   std::vector<int64_t>(t.shape.begin(), t.shape.end()),
                   t.sha256.empty() ? std::nullopt : std::optional<std::string>(t.sha256)});
  }
  return out;
}

// The interpreter's placement as the runner reports it: a partition only on
// delegated nodes.
JobPlacement PlacementOf(const runtime::Placement& placement) {
  JobPlacement out;
  out.partitions = placement.partitions;
  for (const runtime::NodePlacement& p : placement.nodes) {
    out.nodes.push_back({p.node, p.op, p.delegate,
                         p.partition >= 0 ? std::optional<int64_t>(p.partition) : std::nullopt,
                         p.folded, p.reason});
  }
  return out;
}

runner_json::JobProfile ProfileDocument(const Profile& p) {
  runner_json::JobProfile out;
  out.runs = p.runs;
  for (const NodeProfile& n : p.nodes) {
    runner_json::ProfileNode node{n.index, n.op, n.delegate, std::nullopt, {}, n.mean_us};
    if (n.partition >= 0) node.partition = n.partition;
    node.nodes.assign(n.nodes.begin(), n.nodes.end());
    out.nodes.push_back(std::move(node));
  }
  for (const OpProfile& o : p.by_op) {
    out.by_op.push_back({o.op, static_cast<int64_t>(o.count), o.total_us, o.pct});
  }
  return out;
}

// The --json document of an outcome: the one conversion from RunOutcome.
runner_json::Document ToDocument(const RunOutcome& r) {
  runner_json::Document doc;
  doc.status = RunnerStatusName(r.status);
  if (r.status != RunnerStatus::kOk) {
    doc.error = r.error;
    return doc;
  }
  doc.model = r.model;
  doc.delegate = r.delegate;
  doc.runtime = runner_json::RuntimeEntry{r.runtime, r.runtime_version};
  doc.num_threads = r.num_threads;
  doc.threads_used = r.threads_used;
  doc.metrics = r.metrics;
  doc.samples_us = r.samples_us;
  doc.inputs = TensorsDocument(r.inputs);
  doc.outputs = TensorsDocument(r.outputs);
  doc.placement = r.placement;
  doc.accuracy = r.accuracy;
  if (r.profile) doc.profile = ProfileDocument(*r.profile);
  doc.sustained = r.sustained;
  doc.task_outputs = r.task_outputs;
  doc.delegate_stats = r.delegate_stats;
  doc.steps = r.steps;
  doc.partner = r.partner_json;
  return doc;
}

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", us / 1000.0);
  return buf;
}

std::string ShapeText(const TensorSummary& t) {
  return std::string(runtime::DTypeName(t.dtype)) + " " + runtime::ShapeToString(t.shape);
}

// One line per compared output.
std::string AccuracyText(const Accuracy& accuracy) {
  std::string s;
  for (const OutputAccuracy& a : accuracy.outputs) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "accuracy vs %s, output %lld: mean abs error %.3g (std %.3g), max %.3g, rmse "
                  "%.3g, NaN %lld/%lld, Inf %lld/%lld (delegate/reference)",
                  accuracy.reference.c_str(), static_cast<long long>(a.index), a.mean_abs_error,
                  a.std_abs_error, a.max_abs_error, a.rmse, static_cast<long long>(a.nan_count),
                  static_cast<long long>(a.reference_nan_count),
                  static_cast<long long>(a.inf_count),
                  static_cast<long long>(a.reference_inf_count));
    s += buf;
    if (a.top1_agreement && a.top5_agreement) {
      std::snprintf(buf, sizeof(buf), ", top-1 agrees on %.0f%%, top-5 on %.0f%% of the sets",
                    100 * *a.top1_agreement, 100 * *a.top5_agreement);
      s += buf;
    } else if (a.top1_agree) {
      s += std::string(", top-1 ") + (*a.top1_agree ? "agrees" : "differs") + ", top-5 " +
           (*a.top5_agree ? "agrees" : "differs");
    }
    s += "\n";
  }
  if (accuracy.sets) s += "accuracy over " + std::to_string(*accuracy.sets) + " input set(s)\n";
  return s;
}

// Whether `key` is one of the delegate's own option keys.
bool AcceptsOption(const delegates::RegisteredDelegate& delegate, std::string_view key) {
  for (const char* const* k = delegate.option_keys; k != nullptr && *k != nullptr; ++k) {
    if (key == *k) return true;
  }
  return false;
}

// A figure of the delegate's stats by name; 0 when it has none.
double StatOf(const DelegateStats& stats, std::string_view name) {
  for (const auto& [key, value] : stats) {
    if (key == name) return value;
  }
  return 0;
}

// Whether the delegate options name `key`.
bool HasOption(const RunnerOptions& options, std::string_view key) {
  return std::any_of(options.delegate_options.begin(), options.delegate_options.end(),
                     [&](const auto& kv) { return kv.first == key; });
}

// Creates the delegate's serialization_dir when it is missing (the agent
// runs each job in a fresh working directory, where a relative one is not
// there yet); a failure is only noted, the delegate then compiles.
void PrepareSerializationDir(const RunnerOptions& options, std::ostream& log) {
  for (const auto& [key, value] : options.delegate_options) {
    if (key != "serialization_dir" || value.empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(value, ec);
    if (ec)
      log << "note: cannot create serialization_dir '" << value << "': " << ec.message() << "\n";
  }
}

// An init that compiled programs is cold; one that only loaded them from the
// serialization cache is warm; others (no programs) are neither.
void ClassifyInit(const DelegateStats& stats, double init_us, Metrics* metrics) {
  if (StatOf(stats, "programs_compiled") > 0) {
    metrics->init_cold_us = init_us;
  } else if (StatOf(stats, "programs_loaded") > 0) {
    metrics->init_warm_us = init_us;
  }
}

}  // namespace

namespace {

// One job's runtime objects; the interpreter borrows the model, the resolver
// and the delegate, so a Job stays where it was made.
struct Job {
  const delegates::RegisteredDelegate* delegate = nullptr;
  delegates::DelegateOptions delegate_options;  // with `threads` added when it applies
  std::unique_ptr<runtime::Model> model;
  std::unique_ptr<FaultTrackingDelegate> runtime_delegate;  // null: kernels only
  runtime::OpResolver resolver;
  std::unique_ptr<runtime::Interpreter> interpreter;
  uint32_t kernel_threads = 1;  // InterpreterOptions::num_threads: our kernels' threads

  // A delegate's failure (not a refusal) is delegate_error, whatever its code.
  RunnerStatus Classify(const runtime::Status& s) const {
    return runtime_delegate != nullptr && runtime_delegate->faulted() ? RunnerStatus::kDelegateError
                                                                      : FromRuntime(s);
  }
};

// Records a failure in *outcome; returns false so a step can end with it.
bool Failed(RunOutcome* outcome, RunnerStatus status, std::string error) {
  outcome->status = status;
  outcome->error = std::move(error);
  return false;
}

// Finds the delegate and checks its options. --num-threads reaches our kernels
// on the cpu path (the interpreter's thread pool), and a delegate that has a
// `threads` option (xnnpack) as that option unless the options name one, and
// then they must agree (its fallback nodes use as many); other delegates run
// on one thread. threads_used reports what ran.
bool ChooseDelegate(const RunnerOptions& options, std::ostream& log, Job* job,
                    RunOutcome* outcome) {
  if (runtime::Status s = delegates::FindDelegate(options.delegate, &job->delegate); !s.ok()) {
    return Failed(outcome, RunnerStatus::kDelegateError, s.message());
  }
  const delegates::RegisteredDelegate& delegate = *job->delegate;
  if (runtime::Status s = delegates::CheckDelegateOptions(delegate, options.delegate_options);
      !s.ok()) {
    return Failed(outcome, RunnerStatus::kDelegateError, s.message());
  }
  job->delegate_options = options.delegate_options;
  delegates::DelegateOptions& delegate_options = job->delegate_options;
  outcome->threads_used = 1;
  if (AcceptsOption(delegate, "threads")) {
    Result<uint32_t> threads = DelegateThreads(options);
    if (!threads.ok()) return Failed(outcome, RunnerStatus::kDelegateError, threads.message());
    auto it = std::find_if(delegate_options.begin(), delegate_options.end(),
                           [](const auto& kv) { return kv.first == "threads"; });
    if (it == delegate_options.end()) {
      delegate_options.emplace_back("threads", std::to_string(*threads));
    }
    outcome->threads_used = *threads;
    job->kernel_threads = *threads;
  } else if (delegate.create == nullptr) {
    job->kernel_threads = options.num_threads;  // threads_used: what the interpreter started
  } else if (options.num_threads > 1) {
    log << "note: delegate '" << delegate.name << "' runs on one thread; --num-threads "
        << options.num_threads << " is recorded only (threads_used is 1)\n";
  }
  return true;
}

// Loads the model, creates the delegate and allocates the tensors (init_us);
// fills in the placement, the arena size and the input and output summaries.
bool LoadAndPrepare(const RunnerOptions& options, Job* job, RunOutcome* outcome) {
  const Clock::time_point init_start = Clock::now();
  if (runtime::Status s = runtime::Model::Load(options.model, &job->model); !s.ok()) {
    return Failed(outcome, FromRuntime(s), s.message());
  }
  if (job->delegate->create != nullptr) {
    std::unique_ptr<runtime::Delegate> created;
    if (runtime::Status s = job->delegate->create(job->delegate_options, &created); !s.ok()) {
      return Failed(outcome,
                    s.code() == runtime::StatusCode::kUnsupported ? RunnerStatus::kUnsupported
                                                                  : RunnerStatus::kDelegateError,
                    s.message());
    }
    job->runtime_delegate = std::make_unique<FaultTrackingDelegate>(std::move(created));
    // --profile, --accuracy-reference layers: the delegate times the nodes
    // inside its partitions and shows their outputs, where it can.
    if (options.profile || options.accuracy_reference == "layers") {
      if (runtime::Status s = job->runtime_delegate->EnableProfiling();
          !s.ok() && s.code() != runtime::StatusCode::kUnsupported) {
        return Failed(outcome, RunnerStatus::kDelegateError, s.message());
      }
    }
  }
  job->delegate->add_kernels(job->resolver);
  runtime::InterpreterOptions interpreter_options;
  interpreter_options.num_threads = static_cast<int>(std::max<uint32_t>(1, job->kernel_threads));
  job->interpreter =
      std::make_unique<runtime::Interpreter>(*job->model, job->resolver, interpreter_options);
  runtime::Interpreter& interpreter = *job->interpreter;
  if (job->delegate->create == nullptr) {
    outcome->threads_used = static_cast<uint32_t>(interpreter.num_threads());
  }
  if (job->runtime_delegate != nullptr) interpreter.AddDelegate(job->runtime_delegate.get());
  if (runtime::Status s = interpreter.AllocateTensors(); !s.ok()) {
    return Failed(outcome, job->Classify(s), s.message());
  }
  outcome->placement = PlacementOf(interpreter.placement());
  outcome->metrics.init_us = MicrosSince(init_start);
  if (job->runtime_delegate != nullptr) {
    outcome->delegate_stats = job->runtime_delegate->Stats();
    ClassifyInit(outcome->delegate_stats, outcome->metrics.init_us, &outcome->metrics);
  }
  outcome->metrics.arena_bytes = static_cast<int64_t>(interpreter.arena_bytes());
  outcome->inputs = Summaries(interpreter.inputs());
  outcome->outputs = Summaries(interpreter.outputs());
  return true;
}

// The job's Invoke() timed by MeasureInvokes.
bool Measure(const RunnerOptions& options, const Job& job, RunOutcome* outcome,
             Stepping* stepping) {
  return MeasureInvokes(
      options,
      [&] {
#ifdef DFARM_TEST_SLOWDOWN_FRACTION
        const auto invoke_start = std::chrono::steady_clock::now();
#endif
        runtime::Status s = job.interpreter->Invoke();
#ifdef DFARM_TEST_SLOWDOWN_FRACTION
        if (SlowdownFraction() > 0) {
          WorkFor(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              (std::chrono::steady_clock::now() - invoke_start) * SlowdownFraction()));
        }
#endif
#ifdef DFARM_TEST_COUNTED_CLOCK
        ++counted_invokes;
#endif
#ifdef DFARM_TEST_SLOWDOWN
        // Test only: dfarm-runner-slow (agent/runner/CMakeLists.txt) invokes the
        // model DFARM_TEST_SLOWDOWN more times inside each timed invocation:
        // a known latency regression in counted work, however busy the machine,
        // for tests/e2e/gate_e2e_test.cc.
        for (int extra = 0; s.ok() && extra < (DFARM_TEST_SLOWDOWN); ++extra) {
          s = job.interpreter->Invoke();
          ++counted_invokes;
        }
#endif
        return s.ok() || Failed(outcome, job.Classify(s), s.message());
      },
      outcome, stepping);
}

// A stepped pair's side of this runner (stepped_pair.h), or null: the driver
// starts its partner and waits until it is warm, before loading itself, so
// the two never load at once.
std::unique_ptr<Stepping> StartStepping(const RunnerOptions& options, PartnerRunner** partner) {
  *partner = nullptr;
  if (!options.partner_runner.empty()) {
    auto driver = std::make_unique<PartnerRunner>(options);
    driver->StartAndWait();
    *partner = driver.get();
    return driver;
  }
  if (options.step_read_fd >= 0) {
    return std::make_unique<StepFds>(options.step_read_fd, options.step_write_fd);
  }
  return nullptr;
}

// --accuracy-reference layers: after the outputs, every layer on input set 0.
bool CompareLayersOnFirstSet(const RunnerOptions& options, const Job& job,
                             runtime::Interpreter& reference, RunOutcome* outcome) {
  for (runtime::Interpreter* interpreter : {job.interpreter.get(), &reference}) {
    if (Result<void> r = SetInputs(options, interpreter->inputs(), 0); !r.ok()) {
      return Failed(outcome, RunnerStatus::kModelError, r.message());
    }
  }
  if (runtime::Status s = CompareLayers(*job.interpreter, reference, &outcome->accuracy->layers);
      !s.ok()) {
    return Failed(outcome, job.Classify(s), "per-layer comparison: " + s.message());
  }
  return true;
}

// --accuracy-reference cpu: runs the model once with the reference kernels on
// the same inputs and compares each output.
bool CompareWithReference(const RunnerOptions& options, const Job& job, RunOutcome* outcome) {
  const bool layers = options.accuracy_reference == "layers";
  if (options.accuracy_reference != "cpu" && !layers) {
    return Failed(outcome, RunnerStatus::kUsageError,
                  "unknown accuracy reference '" + options.accuracy_reference +
                      "' (only 'cpu', or 'layers': cpu and every layer)");
  }
  const delegates::RegisteredDelegate* cpu = nullptr;
  if (runtime::Status s = delegates::FindDelegate("cpu", &cpu); !s.ok()) {
    return Failed(outcome, RunnerStatus::kInternalError, s.message());
  }
  runtime::OpResolver reference_resolver;
  cpu->add_kernels(reference_resolver);
  // layers: nothing folded into a neighbour, so every node's output exists
  // to compare with (a delegated node's included); the same values.
  runtime::InterpreterOptions reference_options;
  if (layers) {
    reference_options.fold_activations = false;
    reference_options.fold_pads = false;
    reference_options.fold_adds = false;
    reference_options.fuse_rows = false;
  }
  runtime::Interpreter reference(*job.model, reference_resolver, reference_options);
  if (runtime::Status s = reference.AllocateTensors(); !s.ok()) {
    return Failed(outcome, FromRuntime(s), "accuracy reference 'cpu' failed: " + s.message());
  }
  runtime::Interpreter& interpreter = *job.interpreter;
  const size_t sets = std::max<size_t>(1, options.inputs_dirs.size());
  // per_output[i][k]: output i compared on input set k.
  std::vector<std::vector<OutputAccuracy>> per_output(interpreter.outputs().size());
  for (size_t k = 0; k < sets; ++k) {
    // With several sets, the job's interpreter runs set k again (the measured
    // runs used set 0); with one, its outputs are those of the measured runs.
    if (sets > 1) {
      if (Result<void> r = SetInputs(options, interpreter.inputs(), k); !r.ok()) {
        return Failed(outcome, RunnerStatus::kModelError, r.message());
      }
      if (runtime::Status s = interpreter.Invoke(); !s.ok()) {
        return Failed(outcome, job.Classify(s),
                      "input set " + std::to_string(k) + ": " + s.message());
      }
    }
    // The same inputs, made again rather than copied, so that nothing the
    // benchmarked runs did to their input tensors can reach the reference.
    if (Result<void> r = SetInputs(options, reference.inputs(), k); !r.ok()) {
      return Failed(outcome, RunnerStatus::kModelError, r.message());
    }
    if (runtime::Status s = reference.Invoke(); !s.ok()) {
      return Failed(outcome, FromRuntime(s), "accuracy reference 'cpu' failed: " + s.message());
    }
    for (size_t i = 0; i < interpreter.outputs().size(); ++i) {
      per_output[i].push_back(CompareOutput(i, *interpreter.outputs()[i], *reference.outputs()[i]));
    }
  }
  outcome->accuracy = AccuracyOf(options, per_output);
  return !layers || CompareLayersOnFirstSet(options, job, reference, outcome);
}

// The runner's own program, to start it again (Linux; qemu-user maps it too).
constexpr const char* kSelfExe = "/proc/self/exe";

// The words that start this runner again. Usually /proc/self/exe; when the
// runner was started through a dynamic loader (a runner bundle:
// "ld-linux-x86-64.so.2 --library-path DIR dfarm-runner ..."), /proc/self/exe
// is the loader, so its options and the runner's path (from
// /proc/self/cmdline) follow it.
std::vector<std::string> SelfCommand() {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink(kSelfExe, ec).filename().string();
  if (ec || exe.rfind("ld-", 0) != 0) return {kSelfExe};
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> cmdline;
  for (std::string word; std::getline(in, word, '\0');) cmdline.push_back(word);
  // The loader's options that take a value (glibc's and musl's ld.so).
  static const char* const kWithValue[] = {
      "--library-path",     "--argv0", "--preload", "--audit", "--glibc-hwcaps-prepend",
      "--glibc-hwcaps-mask"};
  std::vector<std::string> out = {kSelfExe};
  size_t i = 1;
  for (; i < cmdline.size() && cmdline[i].rfind("--", 0) == 0; ++i) {
    out.push_back(cmdline[i]);
    const bool with_value =
        std::find(std::begin(kWithValue), std::end(kWithValue), cmdline[i]) != std::end(kWithValue);
    if (with_value && i + 1 < cmdline.size()) out.push_back(cmdline[++i]);
  }
  if (i < cmdline.size()) out.push_back(cmdline[i]);  // the runner itself
  return out;
}

// Runs `argv` and returns its standard output; the exit status is ignored
// (the document says how it went).
Result<std::string> OutputOf(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + std::strerror(errno));
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  // Its stderr (the report text of an init alone) would only confuse ours.
  UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  SpawnOptions spawn;
  spawn.stdout_fd = write_end.get();
  spawn.stderr_fd = null.get();
  spawn.terminate_with_parent = true;
  Result<pid_t> pid = SpawnProcess(argv, spawn);
  write_end.reset();
  if (!pid.ok()) return MakeError(pid.message());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(read_end.get(), buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ReapProcess(*pid, std::chrono::seconds(5));
  return out;
}

// serialization_dir: once the job is measured, the runner starts itself
// again with the same model, delegate and options (--init-only): a second
// start of the delegate, which reads the cache the first one wrote (a fresh
// process, as a user's next start: no program kept in this one). Its init is
// init_warm_us when it loaded every program and compiled none. Leaves the
// outcome's status alone: a failed second start only leaves no figure.
void MeasureWarmInit(const RunnerOptions& options, std::ostream& log, RunOutcome* outcome) {
  if (outcome->metrics.init_warm_us) return;  // the first init was warm already
  std::vector<std::string> argv = SelfCommand();
  const std::vector<std::string> args = {"--model",
                                         options.model,
                                         "--delegate",
                                         options.delegate,
                                         "--delegate-options",
                                         delegates::FormatDelegateOptions(options.delegate_options),
                                         "--num-threads",
                                         std::to_string(options.num_threads),
                                         "--init-only",
                                         "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  Result<std::string> out = OutputOf(argv);
  Result<runner_json::Document> doc =
      out.ok() ? runner_json::ParseRunnerJson(*out) : MakeError(out.message());
  if (!doc.ok() || !runner_json::IsOk(*doc) || !doc->metrics) {
    log << "note: the second start (warm init, serialization_dir) failed: "
        << (doc.ok() ? doc->error : doc.message()) << "\n";
    return;
  }
  Metrics second;
  ClassifyInit(doc->delegate_stats, doc->metrics->init_us, &second);
  if (second.init_warm_us) {
    outcome->metrics.init_warm_us = second.init_warm_us;
  } else {
    log << "note: the second start did not load from serialization_dir (compiled "
        << StatOf(doc->delegate_stats, "programs_compiled") << " program(s), loaded "
        << StatOf(doc->delegate_stats, "programs_loaded") << "); no init_warm_us\n";
  }
}

// --init-only: the init alone.
RunOutcome InitOnly(const RunnerOptions& options, std::ostream& log, RunOutcome outcome) {
  Job job;
  if (ChooseDelegate(options, log, &job, &outcome)) LoadAndPrepare(options, &job, &outcome);
  return outcome;
}

}  // namespace

std::vector<TensorSummary> Summaries(const std::vector<runtime::Tensor*>& tensors) {
  std::vector<TensorSummary> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.push_back({i, tensors[i]->name, tensors[i]->dtype, tensors[i]->shape, ""});
  }
  return out;
}

void HashOutputs(const std::vector<runtime::Tensor*>& outputs, RunOutcome* outcome) {
  for (size_t i = 0; i < outputs.size() && i < outcome->outputs.size(); ++i) {
    agent::Sha256 hash;
    if (outputs[i]->data != nullptr) hash.Update(outputs[i]->data, outputs[i]->bytes);
    outcome->outputs[i].sha256 = hash.FinishHex();
  }
}

namespace {

// `v` as the shortest decimal that reads back as the same float: a float
// output's value, written in few digits.
double ShortFloat(double v) {
  if (!std::isfinite(v)) return v;
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

// The first min(count, max) rows of a detection post-process's outputs.
Result<std::vector<TaskDetection>> Detections(const RunnerOptions& options,
                                              const std::vector<runtime::Tensor*>& out) {
  const std::vector<double> boxes = TensorValues(*out[options.task_boxes[0]]);
  const std::vector<double> classes = TensorValues(*out[options.task_boxes[1]]);
  const std::vector<double> scores = TensorValues(*out[options.task_boxes[2]]);
  const std::vector<double> count = TensorValues(*out[options.task_boxes[3]]);
  if (count.size() != 1 || classes.size() != scores.size() || boxes.size() != 4 * scores.size()) {
    return MakeError("--task-outputs boxes: outputs " + std::to_string(options.task_boxes[0]) +
                     ", " + std::to_string(options.task_boxes[1]) + ", " +
                     std::to_string(options.task_boxes[2]) + ", " +
                     std::to_string(options.task_boxes[3]) +
                     " are not a detection post-process's boxes [1,N,4], classes [1,N], "
                     "scores [1,N] and count [1]");
  }
  const double n = std::isfinite(count[0]) ? std::max(0.0, count[0]) : 0.0;
  const size_t rows = std::min(
      {static_cast<size_t>(n), scores.size(), static_cast<size_t>(options.task_max_boxes)});
  std::vector<TaskDetection> set;
  for (size_t i = 0; i < rows; ++i) {
    set.push_back({static_cast<int64_t>(std::llround(classes[i])), ShortFloat(scores[i]),
                   ShortFloat(boxes[4 * i]), ShortFloat(boxes[4 * i + 1]),
                   ShortFloat(boxes[4 * i + 2]), ShortFloat(boxes[4 * i + 3]), -1});
  }
  return set;
}

// Anchor `a`'s C scores after `activation` (sigmoid, softmax or raw).
std::vector<double> Activated(const std::vector<double>& scores, size_t a, size_t c,
                              const std::string& activation) {
  std::vector<double> out(scores.begin() + static_cast<std::ptrdiff_t>(a * c),
                          scores.begin() + static_cast<std::ptrdiff_t>((a + 1) * c));
  if (activation == "sigmoid") {
    for (double& v : out) v = 1.0 / (1.0 + std::exp(-v));
  } else if (activation == "softmax") {
    const double most = *std::max_element(out.begin(), out.end());
    double sum = 0;
    for (double& v : out) sum += (v = std::exp(v - most));
    for (double& v : out) v /= sum;
  }
  return out;
}

// The candidates of raw box regressors [1,N,K] / [N,K] and class scores
// [1,N,C] / [N,C] / [1,N] (runner::TaskOutputs kind "anchors"); `anchors`
// gets N.
Result<std::vector<TaskDetection>> AnchorCandidates(const RunnerOptions& options,
                                                    const std::vector<runtime::Tensor*>& out,
                                                    int64_t& anchors) {
  const runtime::Tensor& b = *out[options.task_boxes[0]];
  const std::vector<double> boxes = TensorValues(b);
  const std::vector<double> scores = TensorValues(*out[options.task_boxes[1]]);
  const size_t n = b.shape.size() >= 2 ? static_cast<size_t>(std::max(0, b.shape.end()[-2])) : 0;
  const size_t k = n > 0 ? boxes.size() / n : 0;
  if (n == 0 || k < 4 || boxes.size() != n * k || scores.size() % n != 0 || scores.empty()) {
    return MakeError("--task-outputs anchors: outputs " + std::to_string(options.task_boxes[0]) +
                     ", " + std::to_string(options.task_boxes[1]) +
                     " are not raw box regressors [1,N,K] (K >= 4) and class scores [1,N,C] "
                     "of the same N anchors");
  }
  anchors = static_cast<int64_t>(n);
  const size_t c = scores.size() / n;
  std::vector<TaskDetection> rows;
  for (size_t a = 0; a < n; ++a) {
    const std::vector<double> s = Activated(scores, a, c, options.task_activation);
    for (size_t cls = options.task_class_offset; cls < c; ++cls) {
      if (!(s[cls] >= options.task_threshold)) continue;
      const double* v = &boxes[a * k];
      rows.push_back({static_cast<int64_t>(cls), ShortFloat(s[cls]), ShortFloat(v[0]),
                      ShortFloat(v[1]), ShortFloat(v[2]), ShortFloat(v[3]),
                      static_cast<int64_t>(a)});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const TaskDetection& x, const TaskDetection& y) {
    return x.score > y.score;
  });
  if (rows.size() > options.task_max_boxes) rows.resize(options.task_max_boxes);
  return rows;
}

// Each pixel's class of a [1,H,W,C], [H,W,C], [1,H,W] or [H,W] output,
// run-length coded.
Result<TaskClassMap> ClassMap(const RunnerOptions& options, const runtime::Tensor& t) {
  std::vector<int64_t> dims(t.shape.begin(), t.shape.end());
  if (dims.size() == 4 && dims[0] == 1) {
    dims.erase(dims.begin());  // [H,W,C]
  } else if (dims.size() == 3 && dims[0] == 1) {
    dims = {dims[1], dims[2], 1};  // [1,H,W]: one channel
  } else if (dims.size() == 2) {
    dims.push_back(1);
  }
  if (dims.size() != 3 || dims[0] < 1 || dims[1] < 1 || dims[2] < 1) {
    return MakeError("--task-outputs classmap: output " + std::to_string(options.task_output) +
                     " is not [1,H,W,C], [H,W,C], [1,H,W] or [H,W]");
  }
  const std::vector<double> v = TensorValues(t);
  const size_t channels = static_cast<size_t>(dims[2]);
  const size_t pixels = static_cast<size_t>(dims[0] * dims[1]);
  const double threshold = options.task_activation == "probabilities" ? 0.5 : 0.0;
  TaskClassMap map{dims[0], dims[1], {}};
  for (size_t p = 0; p < pixels; ++p) {
    int64_t best = 0;
    if (channels == 1) {
      best = v[p] > threshold ? 1 : 0;
    } else {
      for (size_t c = 1; c < channels; ++c) {
        if (v[p * channels + c] > v[p * channels + static_cast<size_t>(best)]) {
          best = static_cast<int64_t>(c);
        }
      }
    }
    if (!map.rle.empty() && map.rle[map.rle.size() - 2] == best) {
      ++map.rle.back();
    } else {
      map.rle.insert(map.rle.end(), {best, 1});
    }
  }
  return map;
}

// What options.task_kind lists of one set's outputs, into `task`.
Result<void> AddTaskSet(const RunnerOptions& options, const std::vector<runtime::Tensor*>& out,
                        TaskOutputs& task) {
  if (options.task_kind == "boxes") {
    auto d = Detections(options, out);
    if (!d.ok()) return d.error();
    task.detections.push_back(std::move(*d));
  } else if (options.task_kind == "anchors") {
    auto d = AnchorCandidates(options, out, task.anchors);
    if (!d.ok()) return d.error();
    task.detections.push_back(std::move(*d));
  } else if (options.task_kind == "classmap") {
    auto m = ClassMap(options, *out[options.task_output]);
    if (!m.ok()) return m.error();
    task.maps.push_back(std::move(*m));
  } else {
    std::vector<int64_t> top;
    for (size_t i : Ranking(TensorValues(*out[options.task_output]), options.task_top_k)) {
      top.push_back(static_cast<int64_t>(i));
    }
    task.sets.push_back(std::move(top));
  }
  return Ok();
}

}  // namespace

bool CollectTaskOutputs(
    const RunnerOptions& options, size_t outputs,
    const std::function<const std::vector<runtime::Tensor*>*(size_t set)>& run_set,
    RunOutcome* outcome) {
  const bool boxes = options.task_kind == "boxes" || options.task_kind == "anchors";
  std::vector<uint32_t> named = options.task_boxes;
  if (!boxes) named = {options.task_output};
  for (uint32_t i : named) {
    if (i >= outputs) {
      return Failed(outcome, RunnerStatus::kUsageError,
                    "--task-outputs names output " + std::to_string(i) + " but the model has " +
                        std::to_string(outputs));
    }
  }
  TaskOutputs task;
  task.kind = options.task_kind;
  if (task.kind == "topk") task.k = options.task_top_k;
  if (!boxes) task.output = options.task_output;
  if (boxes) {
    task.box_outputs.assign(named.begin(), named.end());
    task.max_boxes = options.task_max_boxes;
  }
  if (task.kind == "classmap" || task.kind == "anchors") task.activation = options.task_activation;
  if (task.kind == "anchors") {
    task.class_offset = options.task_class_offset;
    task.threshold = options.task_threshold;
  }
  for (size_t set = 0; set < options.inputs_dirs.size(); ++set) {
    const std::vector<runtime::Tensor*>* out = run_set(set);
    if (out == nullptr) return false;
    if (Result<void> r = AddTaskSet(options, *out, task); !r.ok()) {
      return Failed(outcome, RunnerStatus::kUsageError, r.message());
    }
  }
  outcome->task_outputs = std::move(task);
  return true;
}

Result<void> SetInputs(const RunnerOptions& options, const std::vector<runtime::Tensor*>& inputs,
                       size_t set) {
  if (!options.inputs_dirs.empty()) {
    Result<void> r = LoadInputs(inputs, options.inputs_dirs.at(set));
    if (!r.ok() && options.inputs_dirs.size() > 1) {
      return MakeError("input set " + std::to_string(set) + ": " + r.message());
    }
    return r;
  }
  FillRandomInputs(inputs, options.seed);
  return Ok();
}

Accuracy AccuracyOf(const RunnerOptions& options,
                    const std::vector<std::vector<OutputAccuracy>>& per_output) {
  Accuracy accuracy{options.accuracy_reference, {}, std::nullopt};
  for (const std::vector<OutputAccuracy>& p : per_output) {
    accuracy.outputs.push_back(options.inputs_dirs.empty() ? p.front()
                                                           : AggregateOutputAccuracy(p));
  }
  if (!options.inputs_dirs.empty()) {
    accuracy.sets = static_cast<int64_t>(std::max<size_t>(1, options.inputs_dirs.size()));
  }
  return accuracy;
}

Result<uint32_t> DelegateThreads(const RunnerOptions& options) {
  auto it = std::find_if(options.delegate_options.begin(), options.delegate_options.end(),
                         [](const auto& kv) { return kv.first == "threads"; });
  if (it == options.delegate_options.end()) return options.num_threads;
  const unsigned long given = std::strtoul(it->second.c_str(), nullptr, 10);
  if (options.num_threads > 1 && given != options.num_threads) {
    return MakeError("--num-threads " + std::to_string(options.num_threads) +
                     " disagrees with delegate option threads:" + it->second);
  }
  return static_cast<uint32_t>(given);
}

bool MeasureInvokes(const RunnerOptions& options, const std::function<bool()>& invoke,
                    RunOutcome* outcome, Stepping* stepping) {
  if (stepping && !outcome->steps) outcome->steps.emplace();
  auto timed = [&](double* us_out) {
    const Clock::time_point start = Clock::now();
#ifdef DFARM_TEST_COUNTED_CLOCK
    const uint64_t before = counted_invokes;
    const bool ok = invoke();
    *us_out = CountedMicros(counted_invokes - before);
    (void)start;
#else
    const bool ok = invoke();
    *us_out = MicrosSince(start);
#endif
    return ok;
  };
  if (!timed(&outcome->metrics.first_us)) return false;
  double warmup_total = 0;
  for (uint32_t i = 0; i < options.warmup_runs; ++i) {
    double us = 0;
    if (!timed(&us)) return false;
    warmup_total += us;
  }
  if (options.warmup_runs > 0) {
    outcome->metrics.warmup_mean_us = warmup_total / options.warmup_runs;
  }
  if (options.sustained_secs > 0) {
    if (!MeasureSustained(options.sustained_secs, timed, outcome)) return false;
    outcome->metrics.peak_rss_bytes = static_cast<int64_t>(PeakRssBytes().value_or(0));
    return true;
  }
  outcome->samples_us.reserve(options.num_runs);
  if (stepping) stepping->Warm();
  const Clock::time_point steady_start = Clock::now();
  const std::chrono::duration<double> min_duration(options.min_secs);
  const auto more = [&] {
    if (stepping && stepping->Driven()) return true;
    return outcome->samples_us.size() < options.num_runs ||
           Clock::now() - steady_start < min_duration;
  };
  while (more()) {
    const size_t k = outcome->samples_us.size();
    if (stepping && !stepping->Before(k)) break;
    if (stepping) outcome->steps->starts_us.push_back(MonotonicMicros());
    double us = 0;
    if (!timed(&us)) return false;
    outcome->samples_us.push_back(us);
    if (stepping) stepping->After(k);
  }
  if (stepping) stepping->Done();
  if (stepping && outcome->samples_us.empty()) {
    return Failed(outcome, RunnerStatus::kInternalError,
                  "--step-fds: the driver ended the pair before the first measured run");
  }
  Metrics& metrics = outcome->metrics;
  static_cast<LatencyStats&>(metrics) = ComputeLatencyStats(outcome->samples_us);
  metrics.num_runs = static_cast<int64_t>(outcome->samples_us.size());
  metrics.peak_rss_bytes = static_cast<int64_t>(PeakRssBytes().value_or(0));
  return true;
}

namespace {

// --profile: per-step timing over num_runs more runs.
bool ProfileSteps(const RunnerOptions& options, const Job& job, RunOutcome* outcome) {
  Profile profile;
  if (runtime::Status s =
          ProfileRuns(*job.interpreter, job.interpreter->placement(), options.num_runs, &profile);
      !s.ok()) {
    return Failed(outcome, job.Classify(s), s.message());
  }
  outcome->profile = std::move(profile);
  return true;
}

}  // namespace

RunOutcome Run(const RunnerOptions& options, std::ostream& log) {
  RunOutcome outcome;
  outcome.model = std::filesystem::path(options.model).filename().string();
  outcome.delegate = options.delegate;
  outcome.runtime_version = DFARM_VERSION;
  outcome.num_threads = options.num_threads;
  Job job;
  if (options.init_only) return InitOnly(options, log, std::move(outcome));
  if (!ChooseDelegate(options, log, &job, &outcome)) return outcome;
  PartnerRunner* partner = nullptr;
  const std::unique_ptr<Stepping> stepping = StartStepping(options, &partner);
  PrepareSerializationDir(options, log);
  if (!LoadAndPrepare(options, &job, &outcome)) return outcome;
  if (Result<void> r = SetInputs(options, job.interpreter->inputs()); !r.ok()) {
    Failed(&outcome, RunnerStatus::kModelError, r.message());
    return outcome;
  }
  if (!Measure(options, job, &outcome, stepping.get())) return outcome;
  HashOutputs(job.interpreter->outputs(), &outcome);
  if (!options.dump_outputs_dir.empty()) {
    if (Result<void> r = DumpOutputs(*job.interpreter, options.dump_outputs_dir); !r.ok()) {
      Failed(&outcome, RunnerStatus::kInternalError, r.message());
      return outcome;
    }
  }
  if (!options.accuracy_reference.empty() && !CompareWithReference(options, job, &outcome)) {
    return outcome;
  }
  if (options.profile && !ProfileSteps(options, job, &outcome)) return outcome;
  if (!options.task_kind.empty()) {
    const auto run_set = [&](size_t set) -> const std::vector<runtime::Tensor*>* {
      if (Result<void> r = SetInputs(options, job.interpreter->inputs(), set); !r.ok()) {
        Failed(&outcome, RunnerStatus::kModelError, r.message());
        return nullptr;
      }
      if (runtime::Status s = job.interpreter->Invoke(); !s.ok()) {
        Failed(&outcome, job.Classify(s), "input set " + std::to_string(set) + ": " + s.message());
        return nullptr;
      }
      return &job.interpreter->outputs();
    };
    if (!CollectTaskOutputs(options, job.interpreter->outputs().size(), run_set, &outcome)) {
      return outcome;
    }
  }
  if (HasOption(options, "serialization_dir")) MeasureWarmInit(options, log, &outcome);
  if (partner) partner->Collect(&*outcome.steps, &outcome.partner_json);
  if (outcome.steps) outcome.steps->role = partner ? "driver" : "partner";
  return outcome;
}

std::string ReportJson(const RunOutcome& r) { return runner_json::WriteRunnerJson(ToDocument(r)); }

std::string ReportText(const RunOutcome& r, const std::string& program) {
  if (r.status != RunnerStatus::kOk) {
    return program + ": " + RunnerStatusName(r.status) + ": " + r.error + "\n";
  }
  std::string s =
      "model " + r.model + ", delegate " + r.delegate + ", " + std::to_string(r.threads_used) +
      " thread(s)" +
      (r.runtime == "dfarm" ? std::string() : ", runtime " + r.runtime + " " + r.runtime_version) +
      "\n";
  for (const TensorSummary& t : r.inputs) {
    s += "  input " + std::to_string(t.index) + " '" + t.name + "': " + ShapeText(t) + "\n";
  }
  for (const TensorSummary& t : r.outputs) {
    s += "  output " + std::to_string(t.index) + " '" + t.name + "': " + ShapeText(t) + "\n";
  }
  const Metrics& m = r.metrics;
  s += "init " + Ms(m.init_us) + ", first run " + Ms(m.first_us) + ", warmup mean " +
       Ms(m.warmup_mean_us) + "\n";
  if (m.init_cold_us || m.init_warm_us) {
    s += "init cold " + (m.init_cold_us ? Ms(*m.init_cold_us) : std::string("-")) + ", warm " +
         (m.init_warm_us ? Ms(*m.init_warm_us) : std::string("-")) + "\n";
  }
  if (!r.delegate_stats.empty()) {
    s += "delegate stats:";
    for (const auto& [name, value] : r.delegate_stats) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), " %s %g", name.c_str(), value);
      s += buf;
    }
    s += "\n";
  }
  s += std::to_string(m.num_runs) + " runs: mean " + Ms(m.mean_us) + " (std " + Ms(m.std_us) +
       "), min " + Ms(m.min_us) + ", max " + Ms(m.max_us) + ", p50 " + Ms(m.p50_us) + ", p90 " +
       Ms(m.p90_us) + ", p99 " + Ms(m.p99_us) + "\n";
  if (r.placement && (r.placement->partitions > 0 || r.delegate != "cpu")) {
    size_t delegated = 0;
    std::string fallbacks;
    for (const PlacementNode& p : r.placement->nodes) {
      if (p.partition) ++delegated;
      if (!p.reason.empty()) {
        fallbacks +=
            "  node " + std::to_string(p.index) + " (" + p.op + ") on cpu: " + p.reason + "\n";
      }
    }
    s += "placement: " + std::to_string(r.placement->partitions) + " partition(s), " +
         std::to_string(delegated) + " of " + std::to_string(r.placement->nodes.size()) +
         " nodes delegated\n" + fallbacks;
  }
  s += "peak RSS " + std::to_string(m.peak_rss_bytes / 1024) + " KiB";
  // Another runtime's arena is not known (0).
  if (r.runtime == "dfarm" || m.arena_bytes > 0) {
    s += ", arena " + std::to_string(m.arena_bytes / 1024) + " KiB";
  }
  s += "\n";
  if (r.accuracy) s += AccuracyText(*r.accuracy);
  if (r.sustained && !r.sustained->windows.empty()) {
    const SustainedWindow& first = r.sustained->windows.front();
    const SustainedWindow& last = r.sustained->windows.back();
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "sustained %.1f s in %zu window(s) of %.0f ms: p50 %.3f ms at first, %.3f ms "
                  "at last (%+.1f%%)\n",
                  r.sustained->secs, r.sustained->windows.size(), r.sustained->window_ms,
                  first.p50_us / 1000, last.p50_us / 1000,
                  first.p50_us > 0 ? (last.p50_us / first.p50_us - 1) * 100 : 0.0);
    s += buf;
  }
  if (r.profile) {
    s += "profile over " + std::to_string(r.profile->runs) + " run(s), by op type:\n";
    for (const OpProfile& o : r.profile->by_op) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "  %-24s %4zu step(s) %12.1f us %5.1f%%\n", o.op.c_str(),
                    o.count, o.total_us, o.pct);
      s += buf;
    }
    s += PartitionProfileText(*r.profile);
  }
  return s;
}

int RunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  return RunnerMainWith(ParseCommandLine(argc, argv), "dfarm-runner", Run, out, err);
}

int RunnerMainWith(const ParsedCommandLine& parsed, const std::string& program,
                   const RunFunction& run, std::ostream& out, std::ostream& err) {
  RunOutcome outcome;
  switch (parsed.action) {
    case ParsedCommandLine::Action::kHelp:
    case ParsedCommandLine::Action::kVersion:
      out << parsed.help;
      return 0;
    case ParsedCommandLine::Action::kUsageError:
      outcome.status = RunnerStatus::kUsageError;
      outcome.error = parsed.error;
      err << ReportText(outcome, program) << "Run with --help for more information.\n";
      if (parsed.json) out << ReportJson(outcome) << "\n";
      return ExitCode(outcome.status);
    case ParsedCommandLine::Action::kRun:
      break;
  }
  try {
    outcome = run(parsed.options, err);
  } catch (const std::exception& e) {
    outcome = RunOutcome{};
    outcome.status = RunnerStatus::kInternalError;
    outcome.error = std::string("unexpected exception: ") + e.what();
  }
  err << ReportText(outcome, program);
  if (parsed.options.json) {
    out << ReportJson(outcome) << "\n";
  } else if (outcome.status == RunnerStatus::kOk) {
    // benchmark_model's summary line, for scripts written against it.
    out << BenchmarkTimingsLine(outcome.metrics) << "\n";
  }
  out.flush();
  return ExitCode(outcome.status);
}

}  // namespace dfarm::runner
