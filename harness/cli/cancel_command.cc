// dfarm cancel RUN [--db FILE] [--json]
//
// Cancels a running run: its queued and running jobs end cancelled at once
// (store::Store::CancelRun), the run ends cancelled. The nodes (or the sweep)
// running one of its jobs record nothing more for it: their result is refused.
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"

namespace dfarm::cli {
namespace {

struct CancelOptions {
  std::string db;
  std::string run;
  bool json = false;
};

int Cancel(const CancelOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  auto id = ResolveRun(**store, o.run);
  if (!id) return ctx.Fail(id.error());
  auto cancelled = (*store)->CancelRun(*id, OperatorName());
  if (!cancelled) return ctx.Fail(cancelled.error());
  if (o.json) {
    ctx.out << nlohmann::json{{"run_id", cancelled->run_id},
                              {"status", store::kRunCancelled},
                              {"queued", cancelled->queued},
                              {"running", cancelled->running}}
                   .dump()
            << "\n";
  } else {
    ctx.out << "cancelled run " << cancelled->run_id << ": " << cancelled->queued << " queued and "
            << cancelled->running << " running job(s) ended cancelled\n";
  }
  return kExitOk;
}

}  // namespace

void AddCancelCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<CancelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "cancel", "Cancel a running run: its queued and running jobs end cancelled");
  AddDbOption(*cmd, o->db);
  cmd->add_option("RUN", o->run, "run id, 'last' or tag:NAME")->required();
  cmd->add_flag("--json", o->json,
                "print {\"run_id\",\"status\":\"cancelled\",\"queued\",\"running\"}: the jobs "
                "that ended cancelled");
  cmd->footer(
      "A farm's node running one of the run's jobs records nothing for it: its result is "
      "refused (the job stays cancelled). On a SQLite database, a sweep running the run in "
      "another dfarm process does the same and stops claiming its jobs; the job it is running "
      "finishes on the device, unrecorded.\nExit codes: 0 cancelled, 2 no such run, or the run "
      "is not running (finished, failed or cancelled: nothing changes), 3 no database, or it "
      "cannot be read or written.");
  cmd->callback([o, &ctx] { ctx.exit_code = Cancel(*o, ctx); });
}

}  // namespace dfarm::cli
