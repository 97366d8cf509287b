// dfarm report RUN [--db FILE] [--baseline REF] [--policy FILE]
//   --format FORMAT (reports/formats.inc) -o FILE|-
#include "harness/cli/commands.h"
#include "reports/formats.h"
#include "reports/gate/gate.h"
#include "reports/gate/policy.h"
#include "reports/report.h"

namespace dfarm::cli {
namespace {

struct ReportOptions {
  std::string run;
  std::string db;
  std::string baseline;
  std::string policy;
  std::string format;
  std::string output;
};

// The gate's verdicts as the renderers show them.
reports::Comparison ToComparison(const gate::GateResult& g, const std::string& baseline_name) {
  reports::Comparison c;
  c.baseline_run = g.baseline_run;
  c.baseline_name = baseline_name;
  c.passed = g.passed;
  c.notes = g.notes;
  for (const gate::CellResult& cell : g.cells) {
    reports::CellVerdict v;
    v.cell = cell.cell;
    v.verdict = cell.verdict;
    v.latency_verdict = cell.latency;
    v.baseline_median_us = cell.baseline_median_us;
    v.candidate_median_us = cell.candidate_median_us;
    v.ratio = cell.ratio;
    v.ci_low = cell.ci_low;
    v.ci_high = cell.ci_high;
    v.p_value = cell.p_value;
    v.q_value = cell.q_value;
    v.baseline_trials = cell.baseline_trials;
    v.candidate_trials = cell.candidate_trials;
    v.within_run_only = cell.within_run_only;
    for (const gate::Finding& f : cell.findings) {
      (f.fails ? v.findings : v.passed).push_back(f.message);
    }
    v.baseline_jobs = cell.baseline_jobs;
    c.cells.push_back(std::move(v));
  }
  return c;
}

Result<std::string> RenderText(store::Store& store, int64_t run, int64_t baseline,
                               const ReportOptions& o, reports::Format format) {
  auto policy =
      o.policy.empty() ? Result<gate::Policy>(gate::DefaultPolicy()) : gate::LoadPolicy(o.policy);
  if (!policy) return policy.error();
  // A format that writes the gate's result (junit) runs the gate even without a baseline.
  const bool gate_only = reports::FormatOf(format).report_renders_gate;
  std::optional<gate::GateResult> verdicts;
  if (gate_only || baseline != 0) {
    auto g = gate::RunGate(store, run, baseline, *policy);
    if (!g) return g.error();
    verdicts = std::move(*g);
  }
  if (gate_only) return reports::Render(*verdicts, format);
  auto report = reports::LoadRunReport(store, run);
  if (!report) return report.error();
  if (verdicts) {
    auto base = store.GetRun(baseline);
    report->comparison = ToComparison(*verdicts, base ? base->name : "");
    auto base_task = store.ListRunTaskAccuracy(baseline);
    if (!base_task) return base_task.error();
    report->comparison->baseline_task = std::move(*base_task);
  }
  return reports::Render(*report, format);
}

int Run(const ReportOptions& o, Context& ctx) {
  auto format = reports::ParseFormat(o.format, reports::FormatUse::kReport);
  if (!format) {
    return ctx.Fail(format.error());
  }
  auto store = OpenExistingStore(o.db);
  if (!store) {
    return ctx.Fail(store.error());
  }
  auto id = ResolveRun(**store, o.run);
  if (!id) {
    return ctx.Fail(id.error());
  }
  int64_t baseline = 0;
  if (!o.baseline.empty()) {
    auto b = ResolveRun(**store, o.baseline);
    if (!b) {
      return ctx.Fail(b.error());
    }
    baseline = *b;
  }
  auto text = RenderText(**store, *id, baseline, o, *format);
  if (!text) {
    return ctx.Fail(text.error());
  }
  if (o.output == "-") {
    ctx.out << *text << std::flush;
    return kExitOk;
  }
  if (auto r = reports::WriteText(*text, o.output); !r) {
    return ctx.Fail(r.error());
  }
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd =
      app.add_subcommand("report", "Write a report of one run in a format of --format (" +
                                       reports::FormatNames(reports::FormatUse::kReport) + ")");
  cmd->add_option("RUN", o->run, "run id (see 'dfarm runs'), 'last', or 'tag:NAME'")->required();
  AddDbOption(*cmd, o->db);
  cmd->add_option("--baseline", o->baseline,
                  "a run to compare with (id, 'last' or 'tag:NAME'): the gate's deltas and "
                  "verdicts per cell join the report, and the task accuracy table (a model's "
                  "eval) gets each cell's baseline value and the paired change from it");
  cmd->add_option("--policy", o->policy,
                  "gate policy JSON (docs/gate.md) for the verdicts; default: the documented "
                  "default policy");
  cmd->add_option("--format", o->format, reports::FormatHelp(reports::FormatUse::kReport))
      ->required();
  cmd->add_option("-o,--output", o->output, "file to write, or - for stdout")->required();
  cmd->footer(
      "Without --baseline, junit judges the run alone (accuracy against the CPU reference, "
      "failures); with it, against the baseline as 'dfarm gate' does. The report's exit code "
      "does not say whether the gate passed: use 'dfarm gate' for that.\n"
      "Exit codes: 0 ok, 2 usage error (a bad argument, format or policy, no such run, no "
      "comparable cell), 3 no database, or it cannot be read, or the report cannot be written.");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
