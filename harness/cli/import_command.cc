// dfarm import benchmark-log FILE --device NAME --model NAME_OR_PATH
//     [--delegate D] [--threads N] [--run-name NAME] [--again] [--db FILE] [--json]
// dfarm import inference-diff FILE (the same options)
//
// Brings a log of one of Google's tools (benchmark_model of TensorFlow Lite
// or LiteRT, inference_diff's run_eval) into the results database as a run of
// one job (harness/import/benchmark_log.h), so history, show and the reports
// hold it beside the farm's own runs. The tools are rows of kTools; the
// import itself is one path.
//
// To add a tool: a parser in harness/import/ that gives an ImportedLog (the
// RunnerOutput the store keeps and the job's facts), then one row in kTools.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/base/sha256.h"
#include "agent/protocol/runner_kinds.h"
#include "harness/cli/commands.h"
#include "harness/import/benchmark_log.h"
#include "harness/spec/matrix.h"

namespace dfarm::cli {
namespace {

namespace fs = std::filesystem;

struct ImportOptions {
  std::string db;
  std::string file;
  std::string device;
  std::string model;
  std::string delegate;
  uint32_t threads = 0;
  std::string run_name;
  bool again = false;
  bool json = false;
};

// The tool's output kept with the job (as a runner's stderr would be): its end.
constexpr size_t kLogTailBytes = 16 * 1024;

// What one tool's log says: what the store keeps of the job's result, and
// the facts of the job it ran.
struct ImportedLog {
  harness::RunnerOutput out;
  std::string delegate;  // in our names; "" when the log names none
  std::map<std::string, std::string> delegate_options;
  uint32_t threads = 0;  // 0 when the log does not say
  uint32_t warmup_runs = 0;
  uint32_t num_runs = 0;
  nlohmann::json details = nlohmann::json::object();  // the tool's own facts, for spec_json
};

Result<ImportedLog> FromBenchmarkModel(const std::string& text) {
  auto log = harness::ParseBenchmarkModelLog(text);
  if (!log) return log.error();
  ImportedLog in;
  in.out = harness::BenchmarkRunnerOutput(*log);
  in.delegate = log->delegate;
  in.delegate_options = log->delegate_options;
  if (in.out.metrics) in.threads = static_cast<uint32_t>(in.out.metrics->threads_used);
  in.warmup_runs = log->warmup ? static_cast<uint32_t>(log->warmup->count) : 0;
  in.num_runs = static_cast<uint32_t>(log->metrics.num_runs);
  nlohmann::json flags = nlohmann::json::object();
  for (const auto& [name, value] : log->flags) flags[name] = value;
  in.details = {{"format", log->format}, {"graph", log->graph}, {"flags", flags}};
  return in;
}

Result<ImportedLog> FromInferenceDiff(const std::string& text) {
  auto log = harness::ParseInferenceDiffLog(text);
  if (!log) return log.error();
  ImportedLog in;
  in.out = harness::InferenceDiffRunnerOutput(*log);
  in.delegate = log->delegate;
  in.delegate_options = log->delegate_options;
  in.num_runs = static_cast<uint32_t>(log->num_runs);
  in.details = {{"reference_mean_us", log->reference.avg_us},
                {"reference_std_us", log->reference.std_us}};
  return in;
}

struct ImportTool {
  const char* command;    // `dfarm import COMMAND`
  std::string_view kind;  // the runner kind (agent/protocol/runner_kinds.h), the job's runner
  const char* help;
  const char* output;  // what the FILE must be, for messages: "benchmark_model output"
  Result<ImportedLog> (*read)(const std::string& text);
};

const ImportTool kTools[] = {
    {"benchmark-log", agent::kRunnerKindBenchmarkModel,
     "Import a log of Google's benchmark_model (TensorFlow Lite or LiteRT)",
     "benchmark_model output", FromBenchmarkModel},
    {"inference-diff", agent::kRunnerKindInferenceDiff,
     "Import a log of TensorFlow Lite's inference_diff (run_eval): latency and output error "
     "against the CPU",
     "inference_diff output", FromInferenceDiff},
};

Result<std::string> ReadLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorKind::kInvalidInput, "cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return MakeError(ErrorKind::kInvalidInput, "cannot read '" + path + "'");
  return text.str();
}

// The job as the store keeps it; --model names a file (hashed) or just a
// model. The delegate: --delegate, else the log's, else cpu (TensorFlow
// Lite's own kernels).
Result<store::JobRow> JobOf(const ImportOptions& o, const ImportTool& tool,
                            const ImportedLog& log) {
  store::JobRow job;
  job.model = fs::path(o.model).filename().string();
  std::error_code ec;
  if (fs::is_regular_file(o.model, ec)) {
    auto sha = agent::Sha256File(o.model);
    if (!sha) return sha.error();
    job.model_sha256 = *sha;
    job.model_path = fs::absolute(o.model, ec).string();
  }
  harness::DelegateSpec delegate{"cpu", {}};
  if (!o.delegate.empty()) {
    delegate.name = o.delegate;
  } else if (!log.delegate.empty()) {
    delegate = {log.delegate, log.delegate_options};
  }
  job.delegate = delegate.name;
  job.delegate_options = delegate.ShownOptionsString();
  job.device = o.device;
  job.num_threads = o.threads > 0 ? o.threads : log.threads;
  job.runner = std::string(tool.kind);
  harness::BenchmarkSpec bench;
  bench.warmup_runs = log.warmup_runs;
  bench.num_runs = log.num_runs;
  bench.num_threads = job.num_threads;
  job.job_key = harness::JobKey(job.model_sha256, delegate, job.device, bench, "", job.runner);
  return job;
}

// The run's spec_json: what was imported, with the log's sha256 (so a second
// import of the same bytes is caught).
std::string SpecJson(const ImportOptions& o, const ImportTool& tool, const ImportedLog& log,
                     const std::string& sha256) {
  nlohmann::json doc = log.details;
  doc["tool"] = std::string(tool.kind);
  doc["file"] = fs::absolute(o.file).string();
  doc["sha256"] = sha256;
  return nlohmann::json{{"import", doc}}.dump();
}

// The run that imported a log of these bytes before; 0 when none did.
Result<int64_t> EarlierImport(store::Store& s, const std::string& sha256) {
  auto runs = s.ListRuns();
  if (!runs) return runs.error();
  for (const store::RunRow& run : *runs) {
    const auto doc = nlohmann::json::parse(run.spec_json, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("import") || !doc["import"].is_object()) continue;
    if (doc["import"].value("sha256", "") == sha256) return run.id;
  }
  return int64_t{0};
}

store::JobOutcome OutcomeOf(const ImportedLog& log, const std::string& text, uint32_t threads) {
  store::JobOutcome outcome;
  outcome.status = log.out.status;
  outcome.error = log.out.error;
  outcome.metrics = log.out.metrics;
  if (outcome.metrics && threads > 0) outcome.metrics->threads_used = threads;
  outcome.placement = log.out.placement;
  outcome.accuracy = log.out.accuracy;
  outcome.stderr_tail =
      text.size() > kLogTailBytes ? text.substr(text.size() - kLogTailBytes) : text;
  return outcome;
}

// Records the run of one job; prints its id (or the --json document).
int Record(const ImportOptions& o, const ImportTool& tool, const ImportedLog& log,
           const store::JobRow& job, const std::string& text, store::Store& s, Context& ctx) {
  const std::string sha256 = harness::Sha256OfBytes(text);
  auto earlier = EarlierImport(s, sha256);
  if (!earlier) return ctx.Fail(earlier.error());
  if (*earlier != 0 && !o.again) {
    return ctx.Fail(MakeError(ErrorKind::kInvalidInput,
                              o.file + " was imported already, as run " + std::to_string(*earlier) +
                                  " (the same bytes); --again imports it once more"));
  }
  auto run = s.CreateRun(o.run_name.empty() ? "import " + o.file : o.run_name,
                         SpecJson(o, tool, log, sha256));
  if (!run) return ctx.Fail(run.error());
  auto job_id = s.AddJob(*run, job);
  if (!job_id) return ctx.Fail(job_id.error());
  const store::JobOutcome outcome = OutcomeOf(log, text, job.num_threads);
  if (auto r = s.MarkJobRunning(*job_id, 0); !r) return ctx.Fail(r.error());
  if (auto r = s.RecordJobResult(*job_id, outcome); !r) return ctx.Fail(r.error());
  if (auto r = s.FinishRun(*run, store::kRunFinished); !r) return ctx.Fail(r.error());
  if (o.json) {
    ctx.out
        << nlohmann::json{{"run_id", *run}, {"job_id", *job_id}, {"status", outcome.status}}.dump()
        << "\n";
  } else {
    ctx.out << *run << "\n";
  }
  return kExitOk;
}

int Import(const ImportOptions& o, const ImportTool& tool, Context& ctx) {
  auto text = ReadLog(o.file);
  if (!text) return ctx.Fail(text.error());
  auto log = tool.read(*text);
  if (!log) {
    return ctx.Fail(MakeError(ErrorKind::kInvalidInput,
                              o.file + " is not " + tool.output + ": " + log.message()));
  }
  auto job = JobOf(o, tool, *log);
  if (!job) return ctx.Fail(job.error());
  auto store = store::OpenStore(o.db);
  if (!store) return ctx.Fail(store.error());
  return Record(o, tool, *log, *job, *text, **store, ctx);
}

void AddImportCommand(CLI::App& import, const ImportTool& tool, Context& ctx) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* cmd = import.add_subcommand(tool.command, tool.help);
  AddDbOption(*cmd, o->db);
  cmd->add_option("FILE", o->file, "the " + std::string(tool.kind) + " output, as saved")
      ->required();
  cmd->add_option("--device", o->device, "the device it ran on (a name)")->required();
  cmd->add_option("--model", o->model,
                  "the model: a .tflite file (hashed, so history matches it) or its name")
      ->required();
  cmd->add_option("--delegate", o->delegate,
                  "the delegate (default: the one the log's own lines name, else cpu)");
  cmd->add_option("--threads", o->threads, "threads it ran with (default: the log's flag echo)");
  cmd->add_option("--run-name", o->run_name, "the run's name (default: 'import FILE')");
  cmd->add_flag("--again", o->again,
                "import a file whose bytes were imported before (else refused, exit 2)");
  cmd->add_flag("--json", o->json, "print {\"run_id\", \"job_id\", \"status\"}");
  cmd->footer(
      std::string("Makes a finished run of one job: the log's figures as metrics (figures the "
                  "log does not give, such as a peak memory without "
                  "--report_peak_memory_footprint, stay unknown), or its failure line as the "
                  "error (status model_error, delegate_error or crashed). The delegate comes "
                  "from the log's lines: XNNPACK (TensorFlow Lite's default) is xnnpack, the GPU "
                  "delegate gpu, NNAPI and Hexagon nnapi and hexagon (as a benchmark_model "
                  "runner's jobs), others (Core ML) external with the option kind:coreml.\nExit "
                  "codes: 0 imported, 2 "
                  "unreadable FILE, not ") +
      tool.output + " or imported already (without --again), 3 database error.");
  const ImportTool* t = &tool;
  cmd->callback([o, t, &ctx] { ctx.exit_code = Import(*o, *t, ctx); });
}

}  // namespace

void AddImportCommands(CLI::App& app, Context& ctx) {
  CLI::App* import = app.add_subcommand("import", "Bring results made outside the farm in");
  import->require_subcommand(1);
  for (const ImportTool& tool : kTools) AddImportCommand(*import, tool, ctx);
}

}  // namespace dfarm::cli
