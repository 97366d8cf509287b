// dfarm tag RUN NAME [--move] [--db FILE]; dfarm untag NAME [--db FILE]
//
// Tags name runs, such as the release a run is the baseline of; every command
// that takes a RUN also takes `tag:NAME` (ResolveRun).
#include "harness/cli/commands.h"

namespace dfarm::cli {
namespace {

struct TagOptions {
  std::string db;
  std::string run;
  std::string name;
  bool move = false;
};

int Tag(const TagOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  auto id = ResolveRun(**store, o.run);
  if (!id) return ctx.Fail(id.error());
  auto holder = (*store)->FindTag(o.name);
  if (!holder) return ctx.Fail(holder.error());
  if (auto r = (*store)->TagRun(*id, o.name, o.move); !r) return ctx.Fail(r.error());
  if (*holder && **holder != *id) {
    ctx.out << "moved tag " << o.name << " from run " << **holder << " to run " << *id << "\n";
  } else {
    ctx.out << "tagged run " << *id << " " << o.name << "\n";
  }
  return kExitOk;
}

int Untag(const TagOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  auto holder = (*store)->FindTag(o.name);
  if (!holder) return ctx.Fail(holder.error());
  if (auto r = (*store)->UntagRun(o.name); !r) return ctx.Fail(r.error());
  ctx.out << "removed tag " << o.name << " from run " << holder->value_or(0) << "\n";
  return kExitOk;
}

}  // namespace

void AddTagCommands(CLI::App& app, Context& ctx) {
  auto tag = std::make_shared<TagOptions>();
  CLI::App* cmd =
      app.add_subcommand("tag", "Name a run (a baseline): other commands then take it as tag:NAME");
  AddDbOption(*cmd, tag->db);
  cmd->add_option("RUN", tag->run, "run id, 'last' or tag:NAME")->required();
  cmd->add_option("NAME", tag->name, "tag name, [A-Za-z0-9_.-]{1,64}")->required();
  cmd->add_flag("--move", tag->move, "move the tag when another run has it");
  cmd->footer(
      "A tag names one run. Tagging another run with a name in use is refused unless "
      "--move.\nExit codes: 0 ok, 2 usage error (bad name, unknown run, tag in use), "
      "3 no database, or it cannot be read.");
  cmd->callback([tag, &ctx] { ctx.exit_code = Tag(*tag, ctx); });

  auto untag = std::make_shared<TagOptions>();
  CLI::App* un = app.add_subcommand("untag", "Remove a run tag");
  AddDbOption(*un, untag->db);
  un->add_option("NAME", untag->name, "tag name")->required();
  un->footer("Exit codes: 0 ok, 2 no such tag, 3 no database, or it cannot be read.");
  un->callback([untag, &ctx] { ctx.exit_code = Untag(*untag, ctx); });
}

}  // namespace dfarm::cli
