// dfarm import benchmark-log FILE --device NAME --model NAME_OR_PATH
//     [--delegate D] [--threads N] [--run-name NAME] [--db FILE] [--json]
//
// Brings a log of Google's benchmark_model (TensorFlow Lite or LiteRT) into
// the results database as a run of one job (harness/import/benchmark_log.h), so
// history, show and the reports hold it beside the farm's own runs.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/base/sha256.h"
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
  bool json = false;
};

// The tool's output kept with the job (as a runner's stderr would be): its end.
constexpr size_t kLogTailBytes = 16 * 1024;

Result<std::string> ReadLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorKind::kInvalidInput, "cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return MakeError(ErrorKind::kInvalidInput, "cannot read '" + path + "'");
  return text.str();
}

// The threads of the job: --threads, else the log's echo of its flag, else 0.
uint32_t Threads(const ImportOptions& o, const harness::BenchmarkLog& log) {
  if (o.threads > 0) return o.threads;
  for (const auto& [name, value] : log.flags) {
    if (name == "#threads used for CPU inference" || name == "Num threads") {
      try {
        return static_cast<uint32_t>(std::stoul(value));
      } catch (const std::exception&) {
      }
    }
  }
  return 0;
}

// The job as the store keeps it; --model names a file (hashed) or just a model.
Result<store::JobRow> JobOf(const ImportOptions& o, const harness::BenchmarkLog& log) {
  store::JobRow job;
  job.model = fs::path(o.model).filename().string();
  std::error_code ec;
  if (fs::is_regular_file(o.model, ec)) {
    auto sha = agent::Sha256File(o.model);
    if (!sha) return sha.error();
    job.model_sha256 = *sha;
    job.model_path = fs::absolute(o.model, ec).string();
  }
  job.delegate = !o.delegate.empty() ? o.delegate : !log.delegate.empty() ? log.delegate : "cpu";
  job.device = o.device;
  job.num_threads = Threads(o, log);
  job.runner = "benchmark_model";
  harness::BenchmarkSpec bench;
  bench.warmup_runs = log.warmup ? static_cast<uint32_t>(log.warmup->count) : 0;
  bench.num_runs = static_cast<uint32_t>(log.metrics.num_runs);
  bench.num_threads = job.num_threads;
  job.job_key =
      harness::JobKey(job.model_sha256, {job.delegate, {}}, job.device, bench, "", job.runner);
  return job;
}

std::string SpecJson(const ImportOptions& o, const harness::BenchmarkLog& log) {
  nlohmann::json flags = nlohmann::json::object();
  for (const auto& [name, value] : log.flags) flags[name] = value;
  return nlohmann::json{{"import",
                         {{"tool", "benchmark_model"},
                          {"format", log.format},
                          {"file", fs::absolute(o.file).string()},
                          {"graph", log.graph},
                          {"flags", flags}}}}
      .dump();
}

store::JobOutcome OutcomeOf(const harness::BenchmarkLog& log, const std::string& text,
                            uint32_t threads) {
  store::JobOutcome outcome;
  outcome.status = harness::BenchmarkLogStatus(log);
  outcome.error = log.failure;
  if (log.failure.empty()) outcome.metrics = store::JobMetrics{log.metrics, threads};
  outcome.stderr_tail =
      text.size() > kLogTailBytes ? text.substr(text.size() - kLogTailBytes) : text;
  return outcome;
}

int Import(const ImportOptions& o, Context& ctx) {
  auto text = ReadLog(o.file);
  if (!text) return ctx.Fail(text.error());
  auto log = harness::ParseBenchmarkModelLog(*text);
  if (!log) {
    return ctx.Fail(MakeError(ErrorKind::kInvalidInput,
                              o.file + " is not benchmark_model output: " + log.message()));
  }
  auto job = JobOf(o, *log);
  if (!job) return ctx.Fail(job.error());
  auto store = store::OpenStore(o.db);
  if (!store) return ctx.Fail(store.error());
  store::Store& s = **store;
  auto run = s.CreateRun(o.run_name.empty() ? "import " + o.file : o.run_name, SpecJson(o, *log));
  if (!run) return ctx.Fail(run.error());
  auto job_id = s.AddJob(*run, *job);
  if (!job_id) return ctx.Fail(job_id.error());
  const store::JobOutcome outcome = OutcomeOf(*log, *text, job->num_threads);
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

}  // namespace

void AddImportCommands(CLI::App& app, Context& ctx) {
  CLI::App* import = app.add_subcommand("import", "Bring results made outside the farm in");
  import->require_subcommand(1);
  auto o = std::make_shared<ImportOptions>();
  CLI::App* cmd = import->add_subcommand(
      "benchmark-log", "Import a log of Google's benchmark_model (TensorFlow Lite or LiteRT)");
  AddDbOption(*cmd, o->db);
  cmd->add_option("FILE", o->file, "the benchmark_model output, as saved")->required();
  cmd->add_option("--device", o->device, "the device it ran on (a name)")->required();
  cmd->add_option("--model", o->model,
                  "the model: a .tflite file (hashed, so history matches it) or its name")
      ->required();
  cmd->add_option("--delegate", o->delegate,
                  "the delegate (default: the one the log names, else cpu)");
  cmd->add_option("--threads", o->threads, "threads it ran with (default: the log's flag echo)");
  cmd->add_option("--run-name", o->run_name, "the run's name (default: 'import FILE')");
  cmd->add_flag("--json", o->json, "print {\"run_id\", \"job_id\", \"status\"}");
  cmd->footer(
      "Makes a finished run of one job: the log's timings as metrics, or its failure line as "
      "the error (status model_error, delegate_error or crashed).\nExit codes: 0 imported, "
      "2 unreadable FILE or not benchmark_model output, 3 database error.");
  cmd->callback([o, &ctx] { ctx.exit_code = Import(*o, ctx); });
}

}  // namespace dfarm::cli
