// dfarm sweep SPEC.json [--db FILE] [--json]
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/devices.h"
#include "harness/spec.h"
#include "harness/sweep.h"

namespace dfarm::cli {
namespace {

std::atomic<bool> g_cancel{false};

// First SIGINT/SIGTERM: finish the current job's bookkeeping and stop; a
// second one ends dfarm at once.
void OnSignal(int sig) {
  g_cancel.store(true);
  ::signal(sig, SIG_DFL);
}

struct SweepOptions {
  std::string spec;
  std::string db;
  std::string agent_store;
  bool json = false;
};

int Run(const SweepOptions& o, Context& ctx) {
  auto spec = harness::LoadSpec(o.spec);
  if (!spec) {
    ctx.Fail(kExitUsage, spec.message());
    return kExitUsage;
  }
  auto store = store::OpenSqliteStore(o.db);
  if (!store) {
    ctx.Fail(kExitInfra, store.message());
    return kExitInfra;
  }
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = o.agent_store;
  auto provider = harness::MakeDeviceProvider(po);

  harness::SweepOptions so;
  const char* runner = std::getenv("DFARM_RUNNER");
  so.runner_path = runner && *runner ? runner : harness::BesideSelf("dfarm-runner");
  so.progress = &ctx.err;
  so.cancel = &g_cancel;
  g_cancel.store(false);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  auto summary = harness::RunSweep(*spec, **store, *provider, so);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (!summary) {
    ctx.Fail(kExitInfra, summary.message());
    return kExitInfra;
  }
  const harness::SweepSummary& s = *summary;
  if (o.json) {
    ctx.out << nlohmann::json{{"run_id", s.run_id},   {"jobs", s.jobs},
                              {"ok", s.ok},           {"failed", s.failed},
                              {"not_run", s.not_run}, {"bytes_pushed", s.bytes_pushed},
                              {"status", s.status},   {"db", o.db}}
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
    ctx.err << " (" << pushed << " pushed) in '" << o.db << "'" << std::endl;
  }
  if (s.status == store::kRunCancelled) {
    ctx.Fail(kExitInterrupted,
             "sweep interrupted; run " + std::to_string(s.run_id) + " is marked cancelled");
    return kExitInterrupted;
  }
  if (s.status == store::kRunFailed) {
    ctx.Fail(kExitInfra, "no device of run " + std::to_string(s.run_id) + " could be reached");
    return kExitInfra;
  }
  return s.failed ? kExitJobsFailed : kExitOk;
}

}  // namespace

void AddSweepCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Run every model x delegate x device job of a sweep spec and record the results");
  cmd->add_option("SPEC", o->spec, "sweep spec (JSON, see docs/CONTRACTS.md)")->required();
  AddDbOption(*cmd, o->db);
  cmd->add_flag("--json", o->json,
                "print {\"run_id\",\"jobs\",\"ok\",\"failed\",\"bytes_pushed\"} instead of the "
                "run id");
  AddAgentStoreOption(*cmd, o->agent_store);
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
