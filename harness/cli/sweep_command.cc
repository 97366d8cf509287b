// dfarm sweep SPEC.json [--device URI]... [--db FILE] [--json]
// dfarm sweep --resume RUN [--db FILE] [--json]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "harness/cli/commands.h"
#include "harness/devices/devices.h"
#include "harness/run/sweep.h"
#include "harness/spec/spec.h"
#include "reports/gate/policy.h"
#include "reports/gate/stats.h"

namespace dfarm::cli {
namespace {

std::atomic<bool> g_sweep_cancel{false};

// First SIGINT/SIGTERM: cancel the jobs in flight (they go back to queued)
// and start no other (harness/README.md, Scheduler); a second one ends dfarm
// at once.
void OnSignal(int sig) {
  g_sweep_cancel.store(true);
  ::signal(sig, SIG_DFL);
}

struct SweepOptions {
  std::string spec;
  std::string resume;
  std::vector<std::string> devices;
  std::string db;
  std::string agent_store;
  std::string token_file;
  bool json = false;
  bool allow_runner_change = false;
  bool detach = false;
  int priority = -1;  // -1: not given
};

// The spec to sweep, with --device in place of its devices; unset for
// --resume. Returns the exit code (kExitOk, or after ctx.Fail).
// Before a sweep whose repeats cannot reach the gate's default alpha (2 to 3
// trials a cell: the smallest p is 0.33 or 0.1; a paired sweep: up to 5 pairs,
// 2 / 2^pairs), says so on stderr: its latency verdicts could only be pass or
// unknown.
void NoteTrialsForTheGate(const harness::SweepSpec& spec, Context& ctx) {
  const uint32_t repeats = spec.benchmark.repeats;
  const double alpha = gate::DefaultPolicy().latency.alpha;
  const bool paired = spec.pairing.enabled();
  const double smallest =
      paired ? stats::SmallestSignedRankP(repeats) : stats::SmallestMannWhitneyP(repeats, repeats);
  if ((!paired && repeats < 2) || smallest <= alpha) return;
  char line[320];
  std::snprintf(line, sizeof line,
                "dfarm: note: with benchmark.repeats %u the gate's smallest p per %s is %.3g, "
                "above its default alpha %.3g: latency can only be pass or unknown; %zu or more "
                "repeats can show a change\n",
                repeats, paired ? "paired cell (Wilcoxon signed-rank over its pairs)" : "cell",
                smallest, alpha,
                paired ? stats::PairsForAlpha(alpha) : stats::ValuesPerSideForAlpha(alpha));
  ctx.err << line;
}

int LoadSpec(const SweepOptions& o, std::optional<harness::SweepSpec>& spec, Context& ctx) {
  if (o.spec.empty() == o.resume.empty()) {
    ctx.Fail(kExitUsage, "give either a SPEC to sweep or --resume RUN");
    return kExitUsage;
  }
  if (!o.resume.empty() && !o.devices.empty()) {
    ctx.Fail(kExitUsage, "--device cannot be combined with --resume (a run keeps its devices)");
    return kExitUsage;
  }
  if (o.spec.empty()) {
    if (!store::IsPostgresUrl(o.db) && !std::filesystem::exists(o.db)) {
      ctx.Fail(kExitUsage, "no database '" + o.db + "' to resume a run from (pass --db)");
      return kExitUsage;
    }
    return kExitOk;
  }
  auto loaded = harness::LoadSpec(o.spec);
  if (!loaded) {
    return ctx.Fail(loaded.error());
  }
  spec = std::move(*loaded);
  NoteTrialsForTheGate(*spec, ctx);
  if (!o.devices.empty()) {
    std::vector<std::string> devices;
    for (const std::string& d : o.devices) {
      if (auto r = harness::CheckDeviceName(d); !r) {
        ctx.Fail(kExitUsage, "--device: " + r.message());
        return kExitUsage;
      }
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
    }
    spec->devices = devices;
  }
  return kExitOk;
}

// The sweep's settings: the runner ($DFARM_RUNNER, else beside dfarm),
// progress on stderr (one redrawn line on a terminal), Ctrl-C.
harness::SweepOptions MakeSweepOptions(const SweepOptions& o, Context& ctx) {
  harness::SweepOptions so;
  const char* runner = std::getenv("DFARM_RUNNER");
  so.runner_path = runner && *runner ? runner : harness::BesideSelf("dfarm-runner");
  so.progress = &ctx.err;
  so.progress_tty = &ctx.err == &std::cerr && ::isatty(STDERR_FILENO);
  so.cancel = &g_sweep_cancel;
  so.allow_runner_change = o.allow_runner_change;
  if (o.priority >= 0) so.priority = static_cast<uint32_t>(o.priority);
  std::string db = o.db;
  so.open_store = [db] { return store::OpenStore(db); };
  return so;
}

// Runs `sweep` with SIGINT/SIGTERM cancelling it (OnSignal), then puts the
// previous handlers back.
Result<harness::SweepSummary> RunCancellable(
    const std::function<Result<harness::SweepSummary>()>& sweep) {
  g_sweep_cancel.store(false);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  auto summary = sweep();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return summary;
}

// Prints the run id (or --json) on stdout and the summary on stderr; returns
// the exit code the run's outcome means.
int ReportSummary(const SweepOptions& o, const harness::SweepSummary& s, Context& ctx) {
  if (o.json) {
    ctx.out << nlohmann::json{{"run_id", s.run_id},
                              {"jobs", s.jobs},
                              {"ok", s.ok},
                              {"failed", s.failed},
                              {"not_run", s.not_run},
                              {"moved", s.moved},
                              {"resumed", s.resumed},
                              {"quarantined", s.quarantined},
                              {"bytes_pushed", s.bytes_pushed},
                              {"status", s.status},
                              {"db", store::RedactUrl(o.db)}}
                   .dump()
            << std::endl;
  } else {
    ctx.out << s.run_id << std::endl;
    char pushed[32];
    std::snprintf(pushed, sizeof pushed, "%.1f MiB",
                  static_cast<double>(s.bytes_pushed) / (1 << 20));
    ctx.err << "run " << s.run_id << " " << s.status << ": " << s.jobs << " jobs, " << s.ok
            << " ok, " << s.failed << " failed";
    if (s.not_run) ctx.err << ", " << s.not_run << " not run";
    if (s.moved) ctx.err << ", " << s.moved << " moved";
    if (!o.resume.empty()) ctx.err << " (" << s.resumed << " resumed)";
    for (const std::string& q : s.quarantined) ctx.err << ", '" << q << "' quarantined";
    ctx.err << " (" << pushed << " pushed) in '" << store::RedactUrl(o.db) << "'" << std::endl;
  }
  if (s.status == store::kRunCancelled && !g_sweep_cancel.load()) {
    ctx.Fail(kExitInterrupted, "run " + std::to_string(s.run_id) +
                                   " was cancelled (dfarm cancel): its jobs that had not ended "
                                   "are cancelled");
    return kExitInterrupted;
  }
  if (s.status == store::kRunCancelled) {
    ctx.Fail(kExitInterrupted, "sweep interrupted; run " + std::to_string(s.run_id) +
                                   " is marked cancelled (finish it with 'dfarm sweep --resume " +
                                   std::to_string(s.run_id) + "')");
    return kExitInterrupted;
  }
  if (s.status == store::kRunFailed) {
    ctx.Fail(kExitInfra, "no device of run " + std::to_string(s.run_id) + " could be reached");
    return kExitInfra;
  }
  return s.failed ? kExitJobsFailed : kExitOk;
}

// A sweep on a farm (--db postgresql://...): the jobs are queued for `dfarm
// node` processes and followed until they end (a resumed queue run is only
// followed); --detach prints the run id at once. Ctrl-C stops the following
// only: the run goes on on the nodes.
int RunOnFarm(const SweepOptions& o, const std::optional<harness::SweepSpec>& spec,
              int64_t resume_id, store::Store& store, Context& ctx) {
  const harness::SweepOptions so = MakeSweepOptions(o, ctx);
  int64_t run_id = resume_id;
  if (spec) {
    auto queued = harness::EnqueueSweep(*spec, store, so, &ctx.err);
    if (!queued) return ctx.Fail(queued.error());
    run_id = *queued;
    if (!o.json) {
      ctx.err << "run " << run_id << " queued for the farm's nodes in '" << store::RedactUrl(o.db)
              << "'" << std::endl;
    }
  }
  if (o.detach) {
    if (o.json) {
      ctx.out << nlohmann::json{{"run_id", run_id},
                                {"status", store::kRunRunning},
                                {"detached", true},
                                {"db", store::RedactUrl(o.db)}}
                     .dump()
              << std::endl;
    } else {
      ctx.out << run_id << std::endl;
    }
    return kExitOk;
  }
  auto summary = RunCancellable([&] { return harness::FollowRun(run_id, store, so); });
  if (!summary) return ctx.Fail(summary.error());
  if (summary->not_run > 0 && g_sweep_cancel.load()) {
    ReportSummary(o, *summary, ctx);
    ctx.Fail(kExitInterrupted, "stopped following run " + std::to_string(run_id) +
                                   "; it goes on on the farm's nodes (follow it again with "
                                   "'dfarm sweep --resume " +
                                   std::to_string(run_id) + "')");
    return kExitInterrupted;
  }
  return ReportSummary(o, *summary, ctx);
}

int Run(const SweepOptions& o, Context& ctx) {
  std::optional<harness::SweepSpec> spec;
  if (int code = LoadSpec(o, spec, ctx); code != kExitOk) return code;
  std::map<std::string, std::string> spec_token_files;  // of the run to resume
  auto store = store::OpenStore(o.db);
  if (!store) {
    return ctx.Fail(store.error());
  }
  if (auto r = CheckTokenFileOption(o.token_file); !r) return ctx.Fail(r.error());
  int64_t resume_id = 0;
  if (!o.resume.empty()) {
    auto id = ResolveRun(**store, o.resume);
    if (!id) {
      return ctx.Fail(id.error());
    }
    auto run = (*store)->GetRun(*id);
    if (!run) {
      return ctx.Fail(run.error());
    }
    resume_id = *id;
    // The run's devices keep their spec token files; a spec that no longer
    // parses is reported by ResumeSweep.
    if (auto stored = harness::ParseSpec(run->spec_json, "run " + std::to_string(*id)); stored) {
      spec_token_files = stored->device_token_files;
    }
    if (run->mode == store::kRunModeQueue) return RunOnFarm(o, spec, resume_id, **store, ctx);
  }
  if (store::IsPostgresUrl(o.db) && spec) return RunOnFarm(o, spec, 0, **store, ctx);
  if (o.priority >= 0) {
    ctx.Fail(kExitUsage,
             "--priority orders a farm's queue: it needs a new farm run (--db "
             "postgresql://USER@HOST:PORT/DB and a SPEC)");
    return kExitUsage;
  }
  if (o.detach) {
    ctx.Fail(kExitUsage, "--detach needs a farm: --db postgresql://USER@HOST:PORT/DB");
    return kExitUsage;
  }
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = o.agent_store;
  po.token_file = o.token_file;
  po.device_token_files = spec ? spec->device_token_files : spec_token_files;
  auto provider = harness::MakeDeviceProvider(po);
  const harness::SweepOptions so = MakeSweepOptions(o, ctx);
  auto summary = RunCancellable([&] {
    return spec ? harness::RunSweep(*spec, **store, *provider, so)
                : harness::ResumeSweep(resume_id, **store, *provider, so);
  });
  if (!summary) {
    return ctx.Fail(summary.error());
  }
  return ReportSummary(o, *summary, ctx);
}

}  // namespace

void AddSweepCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Run every model x delegate x device job of a sweep spec and record the results");
  cmd->add_option("SPEC", o->spec, "sweep spec (JSON, see docs/CONTRACTS.md)");
  cmd->add_option(
      "--resume", o->resume,
      "finish run RUN (an id, 'last' or 'tag:NAME') after dfarm was killed or interrupted: its "
      "queued and running jobs run again, finished ones are kept");
  cmd->add_flag("--detach", o->detach,
                "with --db postgresql://...: queue the jobs for the farm's nodes and print the run "
                "id at once instead of following the run");
  cmd->add_flag("--allow-runner-change", o->allow_runner_change,
                "with --resume: accept a runner build that differs from the one the run started "
                "with (refused otherwise)");
  cmd->add_option("--device", o->devices,
                  "run on this device instead of the spec's (local, local:NAME, "
                  "tcp://HOST:PORT, qemu-arm64, adb, adb:SERIAL); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--priority", o->priority,
                  "with --db postgresql://...: the run's priority, 0 to 9 (default: the spec's "
                  "farm.priority, else 5); nodes claim the jobs of higher priority first")
      ->check(CLI::Range(0, 9));
  AddDbOption(*cmd, o->db);
  cmd->add_flag("--json", o->json,
                "print {\"run_id\",\"jobs\",\"ok\",\"failed\",\"not_run\",\"moved\",\"resumed\","
                "\"quarantined\",\"bytes_pushed\",\"status\",\"db\"} instead of the run id");
  AddAgentStoreOption(*cmd, o->agent_store);
  AddTokenFileOption(*cmd, o->token_file);
  cmd->footer(
      "Exit codes: 0 every job of the run ended ok, 1 the sweep ran and some job did not "
      "(infra included), 2 usage or spec error (bad arguments, spec or --device, unknown run, "
      "--resume without a database), 3 device or database error (no device reachable, "
      "database, runner or agent missing, a model changed since the run to resume was "
      "created), 130 interrupted (the run is marked cancelled: finish it with --resume; on a "
      "farm the run goes on on the nodes and --resume follows it again; also when the followed "
      "run was cancelled with `dfarm cancel`). With --db "
      "postgresql://... the jobs are queued for `dfarm node` processes (spec device \"any\": any "
      "device of any node) and followed like a sweep here.");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
