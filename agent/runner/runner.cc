#include "agent/runner/runner.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "agent/runner/tensor_files.h"
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

RunReport Fail(RunReport report, RunnerStatus status, std::string error) {
  report.status = status;
  report.error = std::move(error);
  return report;
}

std::vector<TensorSummary> Summaries(const std::vector<runtime::Tensor*>& tensors) {
  std::vector<TensorSummary> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.push_back({i, tensors[i]->name, tensors[i]->dtype, tensors[i]->shape});
  }
  return out;
}

nlohmann::json TensorsJson(const std::vector<TensorSummary>& tensors) {
  nlohmann::json list = nlohmann::json::array();
  for (const TensorSummary& t : tensors) {
    list.push_back({{"index", t.index},
                    {"name", t.name},
                    {"dtype", runtime::DTypeName(t.dtype)},
                    {"shape", t.shape}});
  }
  return list;
}

std::string Dump(const nlohmann::json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", us / 1000.0);
  return buf;
}

std::string ShapeText(const TensorSummary& t) {
  return std::string(runtime::DTypeName(t.dtype)) + " " + runtime::ShapeToString(t.shape);
}

}  // namespace

RunReport Run(const RunnerOptions& options, std::ostream& log) {
  RunReport report;
  report.model = std::filesystem::path(options.model).filename().string();
  report.delegate = options.delegate;
  report.num_threads = options.num_threads;

  const delegates::Delegate* delegate = nullptr;
  if (runtime::Status s = delegates::FindDelegate(options.delegate, &delegate); !s.ok()) {
    return Fail(std::move(report), RunnerStatus::kDelegateError, s.message());
  }
  if (runtime::Status s = delegates::CheckDelegateOptions(*delegate, options.delegate_options);
      !s.ok()) {
    return Fail(std::move(report), RunnerStatus::kDelegateError, s.message());
  }
  if (options.num_threads > 1) {
    log << "note: delegate '" << delegate->name << "' runs on one thread; --num-threads "
        << options.num_threads << " is recorded only\n";
  }

  const Clock::time_point init_start = Clock::now();
  std::unique_ptr<runtime::Model> model;
  if (runtime::Status s = runtime::Model::Load(options.model, &model); !s.ok()) {
    return Fail(std::move(report), FromRuntime(s), s.message());
  }
  runtime::OpResolver resolver;
  delegate->add_kernels(resolver);
  runtime::Interpreter interpreter(*model, resolver);
  if (runtime::Status s = interpreter.AllocateTensors(); !s.ok()) {
    return Fail(std::move(report), FromRuntime(s), s.message());
  }
  report.init_us = MicrosSince(init_start);
  report.arena_bytes = interpreter.arena_bytes();
  report.inputs = Summaries(interpreter.inputs());
  report.outputs = Summaries(interpreter.outputs());

  if (options.inputs_dir.empty()) {
    FillRandomInputs(interpreter, options.seed);
  } else if (Result<void> r = LoadInputs(interpreter, options.inputs_dir); !r.ok()) {
    return Fail(std::move(report), RunnerStatus::kModelError, r.message());
  }

  auto invoke = [&](double* us_out) {
    const Clock::time_point start = Clock::now();
    runtime::Status s = interpreter.Invoke();
    *us_out = MicrosSince(start);
    return s;
  };
  if (runtime::Status s = invoke(&report.first_us); !s.ok()) {
    return Fail(std::move(report), FromRuntime(s), s.message());
  }
  double warmup_total = 0;
  for (uint32_t i = 0; i < options.warmup_runs; ++i) {
    double us = 0;
    if (runtime::Status s = invoke(&us); !s.ok()) {
      return Fail(std::move(report), FromRuntime(s), s.message());
    }
    warmup_total += us;
  }
  if (options.warmup_runs > 0) report.warmup_mean_us = warmup_total / options.warmup_runs;
  report.samples_us.assign(options.num_runs, 0.0);
  for (uint32_t i = 0; i < options.num_runs; ++i) {
    if (runtime::Status s = invoke(&report.samples_us[i]); !s.ok()) {
      return Fail(std::move(report), FromRuntime(s), s.message());
    }
  }
  report.latency = ComputeLatencyStats(report.samples_us);
  report.peak_rss_bytes = PeakRssBytes().value_or(0);

  if (!options.dump_outputs_dir.empty()) {
    if (Result<void> r = DumpOutputs(interpreter, options.dump_outputs_dir); !r.ok()) {
      return Fail(std::move(report), RunnerStatus::kInternalError, r.message());
    }
  }
  return report;
}

std::string ReportJson(const RunReport& r) {
  if (r.status != RunnerStatus::kOk) {
    return Dump({{"status", RunnerStatusName(r.status)}, {"error", r.error}});
  }
  nlohmann::json doc = {
      {"status", "ok"},
      {"model", r.model},
      {"delegate", r.delegate},
      {"num_threads", r.num_threads},
      {"metrics",
       {{"init_us", r.init_us},
        {"first_us", r.first_us},
        {"warmup_mean_us", r.warmup_mean_us},
        {"mean_us", r.latency.mean_us},
        {"std_us", r.latency.std_us},
        {"min_us", r.latency.min_us},
        {"max_us", r.latency.max_us},
        {"p50_us", r.latency.p50_us},
        {"p90_us", r.latency.p90_us},
        {"p99_us", r.latency.p99_us},
        {"num_runs", r.samples_us.size()},
        {"peak_rss_bytes", r.peak_rss_bytes},
        {"arena_bytes", r.arena_bytes}}},
      {"samples_us", r.samples_us},
      {"inputs", TensorsJson(r.inputs)},
      {"outputs", TensorsJson(r.outputs)},
  };
  return Dump(doc);
}

std::string ReportText(const RunReport& r) {
  if (r.status != RunnerStatus::kOk) {
    return std::string("dfarm-runner: ") + RunnerStatusName(r.status) + ": " + r.error + "\n";
  }
  std::string s = "model " + r.model + ", delegate " + r.delegate + ", " +
                  std::to_string(r.num_threads) + " thread(s)\n";
  for (const TensorSummary& t : r.inputs) {
    s += "  input " + std::to_string(t.index) + " '" + t.name + "': " + ShapeText(t) + "\n";
  }
  for (const TensorSummary& t : r.outputs) {
    s += "  output " + std::to_string(t.index) + " '" + t.name + "': " + ShapeText(t) + "\n";
  }
  s += "init " + Ms(r.init_us) + ", first run " + Ms(r.first_us) + ", warmup mean " +
       Ms(r.warmup_mean_us) + "\n";
  s += std::to_string(r.samples_us.size()) + " runs: mean " + Ms(r.latency.mean_us) + " (std " +
       Ms(r.latency.std_us) + "), min " + Ms(r.latency.min_us) + ", max " + Ms(r.latency.max_us) +
       ", p50 " + Ms(r.latency.p50_us) + ", p90 " + Ms(r.latency.p90_us) + ", p99 " +
       Ms(r.latency.p99_us) + "\n";
  s += "peak RSS " + std::to_string(r.peak_rss_bytes / 1024) + " KiB, arena " +
       std::to_string(r.arena_bytes / 1024) + " KiB\n";
  return s;
}

int RunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  ParsedCommandLine parsed = ParseCommandLine(argc, argv);
  RunReport report;
  switch (parsed.action) {
    case ParsedCommandLine::Action::kHelp:
      out << parsed.help;
      return 0;
    case ParsedCommandLine::Action::kUsageError:
      report.status = RunnerStatus::kUsageError;
      report.error = parsed.error;
      err << ReportText(report) << "Run with --help for more information.\n";
      if (parsed.json) out << ReportJson(report) << "\n";
      return ExitCode(report.status);
    case ParsedCommandLine::Action::kRun:
      break;
  }
  try {
    report = Run(parsed.options, err);
  } catch (const std::exception& e) {
    report = RunReport{};
    report.status = RunnerStatus::kInternalError;
    report.error = std::string("unexpected exception: ") + e.what();
  }
  err << ReportText(report);
  if (parsed.options.json) out << ReportJson(report) << "\n";
  out.flush();
  return ExitCode(report.status);
}

}  // namespace dfarm::runner
