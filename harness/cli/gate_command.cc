// dfarm gate CANDIDATE --baseline REF [--policy FILE] [--format FORMAT (reports/formats.inc)]
//            [-o FILE|-] [--db FILE] [--rerun-unknown K]
// dfarm compare A B [--json] [--db FILE]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "harness/cli/commands.h"
#include "harness/devices/devices.h"
#include "harness/run/sweep.h"
#include "harness/spec/spec.h"
#include "reports/formats.h"
#include "reports/gate/gate.h"
#include "reports/gate/policy.h"

namespace dfarm::cli {
namespace {

struct GateOptions {
  std::string candidate;
  std::string baseline;
  std::string policy;
  std::string format = "text";
  std::string output = "-";
  std::string db;
  std::string agent_store;
  std::string token_file;
  int rerun_unknown = 0;
  std::string candidate_runner, baseline_runner;
  bool paired = false, unpaired = false;
};

Result<void> WriteOutput(const std::string& text, const std::string& path, Context& ctx) {
  if (path == "-") {
    ctx.out << text << std::flush;
    return {};
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return MakeError("cannot write '" + path + "'");
  return {};
}

// ---- --rerun-unknown -------------------------------------------------------------

// The spec of one rerun: the candidate's stored spec cut to one cell, K trials.
Result<harness::SweepSpec> RerunSpec(const harness::SweepSpec& run_spec,
                                     const gate::CellResult& cell,
                                     const std::vector<store::JobRow>& jobs, int trials) {
  harness::SweepSpec spec = run_spec;
  spec.name = run_spec.name + "-rerun";
  std::set<std::string> devices, model_paths;
  for (const auto& j : jobs) {
    devices.insert(j.device);
    model_paths.insert(j.model_path);
  }
  spec.models.clear();
  for (const auto& m : run_spec.models) {
    if (model_paths.count(m.path)) spec.models.push_back(m);
  }
  spec.delegates.clear();
  for (const auto& d : run_spec.delegates) {
    if (d.name == cell.cell.delegate && d.ShownOptionsString() == cell.cell.delegate_options) {
      spec.delegates.push_back(d);
    }
  }
  // The default runner's cell ("") is the spec's runner named "default"
  // when it has one (store::kDefaultRunnerName).
  const std::string runner =
      cell.cell.runner.empty() ? std::string(store::kDefaultRunnerName) : cell.cell.runner;
  const bool named =
      !cell.cell.runner.empty() ||
      std::any_of(run_spec.runners.begin(), run_spec.runners.end(),
                  [&](const auto& r) { return r.name == store::kDefaultRunnerName; });
  if (named) {
    spec.runners.clear();
    for (const auto& r : run_spec.runners) {
      if (r.name == runner) spec.runners.push_back(r);
    }
    spec.pairing = {};  // one runner: nothing to pair
  }
  spec.devices.assign(devices.begin(), devices.end());
  spec.device_selectors.clear();
  spec.num_threads = {cell.cell.num_threads};
  spec.benchmark.num_threads = cell.cell.num_threads;
  spec.benchmark.repeats = static_cast<uint32_t>(trials);
  if (spec.models.empty() || spec.delegates.empty() || spec.devices.empty() ||
      (named && spec.runners.empty())) {
    return MakeError(ErrorKind::kInvalidInput,
                     "cannot rerun cell '" + cell.cell.Label() +
                         "': the candidate run's spec no longer names its model, delegate, "
                         "device or runner");
  }
  return spec;
}

harness::SweepOptions RerunSweepOptions(const GateOptions& o, Context& ctx) {
  harness::SweepOptions so;
  const char* runner = std::getenv("DFARM_RUNNER");
  so.runner_path = runner && *runner ? runner : harness::BesideSelf("dfarm-runner");
  so.progress = &ctx.err;
  std::string db = o.db;
  so.open_store = [db] { return store::OpenStore(db); };
  return so;
}

// Runs K more trials of every unknown cell, each cell as a new run linked to
// the candidate (SetRunParent); returns the new runs. kFailed: no device reached.
Result<std::vector<int64_t>> RerunUnknown(store::Store& store, const gate::GateResult& first,
                                          const GateOptions& o, Context& ctx) {
  auto run = store.GetRun(first.candidate_run);
  if (!run) return run.error();
  auto run_spec = harness::ParseSpec(run->spec_json, "run " + std::to_string(run->id));
  if (!run_spec) {
    return MakeError(
        ErrorKind::kInvalidInput,
        "cannot rerun cells of run " + std::to_string(run->id) + ": " + run_spec.message());
  }
  if (auto r = CheckTokenFileOption(o.token_file); !r) return r.error();
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = o.agent_store;
  po.token_file = o.token_file;
  po.device_token_files = run_spec->device_token_files;
  auto provider = harness::MakeDeviceProvider(po);
  const harness::SweepOptions so = RerunSweepOptions(o, ctx);
  std::vector<int64_t> reruns;
  for (const auto& cell : first.cells) {
    // A cell whose delegate took no node stays unknown whatever a rerun measures.
    if (cell.verdict != gate::Verdict::kUnknown || cell.delegate_took_none) continue;
    std::vector<store::JobRow> jobs;
    for (int64_t id : cell.candidate_jobs) {
      auto job = store.GetJob(id);
      if (!job) return job.error();
      jobs.push_back(std::move(*job));
    }
    auto spec = RerunSpec(*run_spec, cell, jobs, o.rerun_unknown);
    if (!spec) return spec.error();
    ctx.err << "gate: rerunning " << o.rerun_unknown << " trial(s) of " << cell.cell.Label()
            << std::endl;
    auto summary = harness::RunSweep(*spec, store, *provider, so);
    if (!summary) return summary.error();
    if (auto r = store.SetRunParent(summary->run_id, first.candidate_run); !r) return r.error();
    reruns.push_back(summary->run_id);
    if (summary->status == store::kRunFailed) {
      return MakeError(ErrorKind::kFailed, "rerun " + std::to_string(summary->run_id) + " of '" +
                                               cell.cell.Label() + "' reached no device");
    }
  }
  return reruns;
}

// ---- gate ------------------------------------------------------------------------

int RunGateCommand(const GateOptions& o, Context& ctx) {
  if (o.rerun_unknown < 0 || o.rerun_unknown > 1000) {
    ctx.Fail(kExitUsage, "--rerun-unknown must be 0..1000, got " + std::to_string(o.rerun_unknown));
    return kExitUsage;
  }
  auto format = reports::ParseFormat(o.format, reports::FormatUse::kGate);
  if (!format) return ctx.Fail(format.error());
  gate::Policy policy = gate::DefaultPolicy();
  if (!o.policy.empty()) {
    auto loaded = gate::LoadPolicy(o.policy);
    if (!loaded) return ctx.Fail(loaded.error());
    policy = std::move(*loaded);
  }
  policy.candidate_runner = o.candidate_runner;
  policy.baseline_runner = o.baseline_runner;
  if (o.paired || o.unpaired) policy.paired = o.paired;
  if (o.baseline.empty() && !o.paired) {
    ctx.Fail(kExitUsage, "--baseline is required (it may be left out only with --paired)");
    return kExitUsage;
  }
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  auto candidate = ResolveRun(**store, o.candidate);
  if (!candidate) return ctx.Fail(candidate.error());
  // --paired without --baseline: the paired run is its own baseline.
  auto baseline =
      o.baseline.empty() ? Result<int64_t>(*candidate) : ResolveRun(**store, o.baseline);
  if (!baseline) return ctx.Fail(baseline.error());
  auto result = gate::RunGate(**store, *candidate, *baseline, policy);
  if (!result) return ctx.Fail(result.error());
  const bool any_unknown = std::any_of(result->cells.begin(), result->cells.end(), [](auto& c) {
    return c.verdict == gate::Verdict::kUnknown && !c.delegate_took_none;
  });
  if (o.rerun_unknown > 0 && any_unknown && !result->paired_baseline_runner.empty()) {
    ctx.Fail(kExitUsage,
             "--rerun-unknown does not rerun paired cells yet: sweep the paired spec again "
             "with more benchmark.repeats (or judge it --unpaired)");
    return kExitUsage;
  }
  if (o.rerun_unknown > 0 && any_unknown) {
    auto reruns = RerunUnknown(**store, *result, o, ctx);
    if (!reruns) return ctx.Fail(reruns.error());
    auto again = gate::RunGate(**store, *candidate, *reruns, *baseline, policy);
    if (!again) return ctx.Fail(again.error());
    result = std::move(again);
  }
  const std::string text = reports::Render(*result, *format);
  if (auto w = WriteOutput(text, o.output, ctx); !w) return ctx.Fail(w.error());
  if (o.output != "-") {
    ctx.err << "gate " << (result->passed ? "passed" : "FAILED") << ": wrote '" << o.output << "'"
            << std::endl;
  }
  return result->passed ? kExitOk : kExitJobsFailed;
}

// ---- compare ---------------------------------------------------------------------

struct CompareOptions {
  std::string a, b, db;
  std::string runner_a, runner_b;
  bool json = false;
};

std::string Fmt(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string CompareTable(const gate::GateResult& r) {
  std::string s = "compare: run " + std::to_string(r.baseline_run) + " (A) -> run " +
                  std::to_string(r.candidate_run) + " (B)\n\n";
  size_t width = 4;
  for (const auto& c : r.cells) width = std::max(width, c.cell.Label().size());
  char line[512];
  // VERDICT is the gate's (default policy) for the cell, LATENCY its latency part.
  std::snprintf(line, sizeof line, "%-*s  %-9s %-9s %10s %10s %-22s %8s %8s %-19s %s\n",
                static_cast<int>(width), "CELL", "VERDICT", "LATENCY", "A ms", "B ms", "B/A [CI]",
                "p", "q", "MAX ABS ERR A->B", "PEAK RSS");
  s += line;
  for (const auto& c : r.cells) {
    const bool cmp = c.ratio > 0;
    const std::string ci = cmp ? Fmt("%.3f", c.ratio) + " [" + Fmt("%.3f", c.ci_low) + "," +
                                     Fmt("%.3f", c.ci_high) + "]"
                               : "-";
    std::string err = "-";
    if (std::isfinite(c.baseline_max_abs_error) || std::isfinite(c.candidate_max_abs_error)) {
      err = Fmt("%.2g", c.baseline_max_abs_error) + "->" + Fmt("%.2g", c.candidate_max_abs_error);
    }
    std::string rss = "-";
    if (c.baseline_peak_rss_bytes > 0 && c.candidate_peak_rss_bytes > 0) {
      rss = Fmt("%+.1f%%", 100.0 * (static_cast<double>(c.candidate_peak_rss_bytes) /
                                        static_cast<double>(c.baseline_peak_rss_bytes) -
                                    1));
    }
    std::snprintf(line, sizeof line, "%-*s  %-9s %-9s %10s %10s %-22s %8s %8s %-19s %s\n",
                  static_cast<int>(width), c.cell.Label().c_str(), gate::VerdictName(c.verdict),
                  gate::VerdictName(c.latency),
                  cmp ? Fmt("%.3f", c.baseline_median_us / 1000).c_str() : "-",
                  cmp ? Fmt("%.3f", c.candidate_median_us / 1000).c_str() : "-", ci.c_str(),
                  cmp ? Fmt("%.3g", c.p_value).c_str() : "-",
                  cmp ? Fmt("%.3g", c.q_value).c_str() : "-", err.c_str(), rss.c_str());
    s += line;
  }
  for (const auto& c : r.cells) {
    if (c.delegation.empty()) continue;
    s += "partly delegated: " + c.cell.Label() + ": " + c.delegation +
         (c.delegate_took_none ? " - latency not judged" : "") + "\n";
  }
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  return s;
}

int RunCompare(const CompareOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  auto a = ResolveRun(**store, o.a);
  if (!a) return ctx.Fail(a.error());
  auto b = ResolveRun(**store, o.b);
  if (!b) return ctx.Fail(b.error());
  gate::Policy policy = gate::DefaultPolicy();
  policy.baseline_runner = o.runner_a;
  policy.candidate_runner = o.runner_b;
  auto result = gate::RunGate(**store, *b, *a, policy);
  if (!result) return ctx.Fail(result.error());
  ctx.out << (o.json ? gate::RenderGateJson(*result) : CompareTable(*result)) << std::flush;
  return kExitOk;
}

}  // namespace

void AddGateCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<GateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "gate", "Judge a candidate run against a baseline run under a policy (release gate)");
  cmd->add_option("CANDIDATE", o->candidate, "candidate run: an id, 'last' or 'tag:NAME'")
      ->required();
  cmd->add_option("--baseline", o->baseline,
                  "baseline run: an id, 'last' or 'tag:NAME' (with --paired: the run itself, "
                  "the default)");
  cmd->add_option("--policy", o->policy, "policy JSON (docs/gate.md); default: the documented one");
  cmd->add_option("--format", o->format, reports::FormatHelp(reports::FormatUse::kGate))
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "file to write, or - for stdout")
      ->capture_default_str();
  cmd->add_option("--rerun-unknown", o->rerun_unknown,
                  "run K more trials of each unknown cell (new runs linked to the candidate) "
                  "and judge again over all trials");
  cmd->add_option("--candidate-runner", o->candidate_runner,
                  "judge only this runner's jobs of the candidate ('default' for the default "
                  "runner), against --baseline-runner's");
  cmd->add_option("--baseline-runner", o->baseline_runner,
                  "compare with this runner's jobs of the baseline (which may be the candidate "
                  "run itself: ours against TensorFlow Lite, cell by cell)");
  auto* paired = cmd->add_flag(
      "--paired", o->paired,
      "judge a paired run (spec \"pairing\") pair by pair: its candidate runner against its "
      "baseline runner (Wilcoxon signed-rank; docs/gate.md, \"Paired A/B\"); the default for "
      "a paired run gated against itself");
  cmd->add_flag("--unpaired", o->unpaired,
                "judge a paired run's two runners as unpaired samples (Mann-Whitney)")
      ->excludes(paired);
  AddDbOption(*cmd, o->db);
  AddAgentStoreOption(*cmd, o->agent_store);
  AddTokenFileOption(*cmd, o->token_file);
  cmd->footer(
      "Exit codes: 0 the gate passed, 1 the gate failed (a cell failed or regressed), 2 usage "
      "or data error (bad argument or policy, no such run or tag, no comparable cell), 3 "
      "infrastructure (database unreadable, output unwritable, a rerun reached no device).");
  cmd->callback([o, &ctx] { ctx.exit_code = RunGateCommand(*o, ctx); });

  auto c = std::make_shared<CompareOptions>();
  CLI::App* cmp = app.add_subcommand(
      "compare", "Show per-cell deltas of run B against run A (latency, accuracy, memory)");
  cmp->add_option("A", c->a, "the reference run: an id, 'last' or 'tag:NAME'")->required();
  cmp->add_option("B", c->b, "the run compared with it")->required();
  cmp->add_flag("--json", c->json, "print the gate's JSON (docs/CONTRACTS.md) instead");
  cmp->add_option("--runner-a", c->runner_a,
                  "only this runner's jobs of A ('default' for the default runner)");
  cmp->add_option("--runner-b", c->runner_b,
                  "only this runner's jobs of B, matched with --runner-a's cell by cell (A and B "
                  "may be one run: `dfarm compare 7 7 --runner-a tflite --runner-b ours`)");
  AddDbOption(*cmp, c->db);
  cmp->footer(
      "Exit codes: 0 ok, 2 usage error (a bad argument, no such run, no comparable cell), 3 no "
      "database, or it cannot be read.");
  cmp->callback([c, &ctx] { ctx.exit_code = RunCompare(*c, ctx); });
}

}  // namespace dfarm::cli
