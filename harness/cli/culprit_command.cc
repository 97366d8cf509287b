// dfarm culprit RUN (--job ID | --model M --delegate D [--device X]) [--db FILE]
//              [--max-abs-error X] [--max-abs-error-lsb N] [--json]
//
// Which node's delegation pushes a job's outputs past the threshold: the job
// runs again on its device with its delegate restricted to ever fewer of the
// nodes it delegated (bisection, harness/analysis/culprit.h).
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "harness/analysis/culprit.h"
#include "harness/cli/commands.h"
#include "reports/report.h"

namespace dfarm::cli {
namespace {

struct CulpritCommandOptions {
  std::string db;
  std::string run;
  int64_t job = 0;
  // Or a cell: its ok trial with the largest output error.
  std::string model;
  std::string delegate;
  std::string device;
  double max_abs_error = 2e-3;
  double max_abs_error_lsb = 2;
  std::string agent_store;
  std::string token_file;
  bool json = false;
};

nlohmann::json ResultJson(const harness::CulpritResult& r, const CulpritCommandOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  j["run"] = r.run_id;
  j["job"] = r.job_id;
  j["model"] = r.model;
  j["delegate"] = r.delegate;
  j["device"] = r.device;
  j["node"] = r.node ? nlohmann::json(*r.node) : nlohmann::json(nullptr);
  j["op"] = r.op;
  j["runs"] = r.steps.size();
  j["candidates"] = r.candidates;
  j["threshold"] = {{"max_abs_error", o.max_abs_error}, {"max_abs_error_lsb", o.max_abs_error_lsb}};
  if (!r.note.empty()) j["note"] = r.note;
  nlohmann::json steps = nlohmann::json::array();
  for (const harness::CulpritStep& s : r.steps) {
    steps.push_back({{"last_node", s.last_node},
                     {"delegated", s.delegated},
                     {"max_abs_error", s.max_abs_error},
                     {"fails", s.fails}});
  }
  j["steps"] = std::move(steps);
  nlohmann::json layers = nlohmann::json::array();
  for (const runner_json::LayerError& l : r.layers)
    layers.push_back(runner_json::LayerErrorJson(l));
  j["layers"] = std::move(layers);
  return j;
}

void PrintText(const harness::CulpritResult& r, std::ostream& out) {
  out << "run " << r.run_id << " job " << r.job_id << ": " << r.model << " on " << r.delegate
      << " @ " << r.device << ", " << r.candidates << " delegated node(s), " << r.steps.size()
      << " run(s)\n";
  if (!r.node) {
    out << r.note << "\n";
    return;
  }
  out << "culprit: node " << *r.node << (r.op.empty() ? "" : " (" + r.op + ")")
      << ": delegating nodes up to it pushes an output past the threshold\n";
  if (r.layers.empty()) return;
  out << "per-layer error (delegated up to node " << *r.node << "):\n";
  char line[256];
  for (const runner_json::LayerError& l : r.layers) {
    std::snprintf(line, sizeof(line), "  node %4lld %-24s %-10s max %.3g  mean %.3g  %s\n",
                  static_cast<long long>(l.node), l.op.c_str(), l.delegate.c_str(), l.max_abs_error,
                  l.mean_abs_error, l.name.c_str());
    out << line;
  }
}

// The job of --model/--delegate[/--device]: of the run's ok jobs that match
// (the model by file name), the one whose outputs are furthest from the
// reference (largest max_abs_error; the first such when none was compared).
Result<int64_t> PickCellJob(store::Store& store, int64_t run, const CulpritCommandOptions& o) {
  auto jobs = store.ListJobs(run);
  if (!jobs) return jobs.error();
  std::optional<int64_t> pick;
  double worst = -1;
  for (const store::JobRow& j : *jobs) {
    if (j.status != store::kJobOk || j.delegate != o.delegate) continue;
    if (j.model != o.model && std::filesystem::path(o.model).filename() != j.model) continue;
    if (!o.device.empty() && j.device != o.device) continue;
    auto accuracy = store.GetAccuracy(j.id);
    if (!accuracy) return accuracy.error();
    const double error = *accuracy ? reports::MaxAbsError(**accuracy).value_or(-1) : -1;
    if (!pick || error > worst) {
      pick = j.id;
      worst = error;
    }
  }
  if (!pick) {
    return MakeError(ErrorKind::kInvalidInput,
                     "run " + std::to_string(run) + " has no ok job of model '" + o.model +
                         "' on delegate '" + o.delegate + "'" +
                         (o.device.empty() ? "" : " on device '" + o.device + "'") +
                         " (dfarm show " + std::to_string(run) + " lists its jobs)");
  }
  return *pick;
}

int Culprit(const CulpritCommandOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  auto run = ResolveRun(**store, o.run);
  if (!run) return ctx.Fail(run.error());
  if (auto r = CheckTokenFileOption(o.token_file); !r) return ctx.Fail(r.error());
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = o.agent_store;
  po.token_file = o.token_file;
  // The run's devices keep their spec token files (as `sweep --resume`).
  if (auto run_row = (*store)->GetRun(*run)) {
    if (auto spec = harness::ParseSpec(run_row->spec_json, "run " + std::to_string(*run))) {
      po.device_token_files = spec->device_token_files;
    }
  }
  auto provider = harness::MakeDeviceProvider(po);
  harness::SweepOptions so;
  const char* runner = std::getenv("DFARM_RUNNER");
  so.runner_path = runner && *runner ? runner : harness::BesideSelf("dfarm-runner");
  so.progress = &ctx.err;
  harness::CulpritOptions co;
  co.run_id = *run;
  co.job_id = o.job;
  if (co.job_id == 0) {
    auto job = PickCellJob(**store, *run, o);
    if (!job) return ctx.Fail(job.error());
    co.job_id = *job;
  }
  co.max_abs_error = o.max_abs_error;
  co.max_abs_error_lsb = o.max_abs_error_lsb;
  auto result = harness::FindCulprit(co, **store, *provider, so);
  if (!result) return ctx.Fail(result.error());
  if (o.json) {
    ctx.out << ResultJson(*result, o).dump() << "\n";
  } else {
    PrintText(*result, ctx.out);
  }
  return result->node ? kExitOk : kExitJobsFailed;
}

}  // namespace

void AddCulpritCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<CulpritCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "culprit", "Find the first node whose delegation pushes a job's outputs past a threshold");
  AddDbOption(*cmd, o->db);
  cmd->add_option("RUN", o->run, "run id, 'last' or tag:NAME")->required();
  CLI::Option* job = cmd->add_option("--job", o->job, "the job (an id from 'dfarm show RUN')");
  CLI::Option* model =
      cmd->add_option("--model", o->model, "or a cell: its model (file name) ...")->excludes(job);
  CLI::Option* delegate =
      cmd->add_option("--delegate", o->delegate, "... and delegate; its worst ok trial is taken")
          ->excludes(job);
  cmd->add_option("--device", o->device, "... and device, when the run has several")
      ->excludes(job)
      ->needs(model);
  model->needs(delegate);
  delegate->needs(model);
  cmd->add_option("--max-abs-error", o->max_abs_error,
                  "an output fails above this absolute error (the gate's default)")
      ->capture_default_str();
  cmd->add_option("--max-abs-error-lsb", o->max_abs_error_lsb,
                  "a quantized output fails above this many quantization steps")
      ->capture_default_str();
  AddAgentStoreOption(*cmd, o->agent_store);
  AddTokenFileOption(*cmd, o->token_file);
  cmd->add_flag("--json", o->json,
                "print {\"node\",\"op\",\"runs\",\"candidates\",\"steps\",\"layers\",...}");
  cmd->footer(
      "Runs the job's model again on the job's device with the same runner build, delegate and "
      "options, delegating only the nodes up to an index (first_delegate_node_index / "
      "last_delegate_node_index), and bisects: about log2(N) runs for N delegated nodes. The "
      "run at the culprit compares every layer with the CPU reference (per-layer error). "
      "Nothing is recorded in the database. A cell (--model, --delegate, --device) stands for "
      "its ok trial with the largest output error.\nExit codes: 0 culprit found, 1 the outputs "
      "pass "
      "with every node delegated (no culprit), 2 usage error (unknown run or job, a cpu job), "
      "3 device or database error, or a model/plugin/runner that changed since the run.");
  cmd->callback([o, &ctx, job, model] {
    if (job->count() == 0 && model->count() == 0) {
      ctx.exit_code = ctx.Fail(MakeError(ErrorKind::kInvalidInput,
                                         "dfarm culprit: give --job ID, or a cell with --model "
                                         "and --delegate (and --device)"));
      return;
    }
    ctx.exit_code = Culprit(*o, ctx);
  });
}

}  // namespace dfarm::cli
