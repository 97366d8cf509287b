// dfarm runs [--db FILE] [--tag NAME] [--json]
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/run/terminal_text.h"

namespace dfarm::cli {
namespace {

struct RunsOptions {
  std::string db;
  bool json = false;
  std::string tag;  // only the run with this tag
};

// Tags as the text listing shows them: " [a, b]", or "" without tags.
std::string TagsText(const std::vector<std::string>& tags) {
  if (tags.empty()) return "";
  std::string s;
  for (const std::string& t : tags) s += (s.empty() ? "" : ", ") + harness::TerminalSafe(t);
  return " [" + s + "]";
}

int Run(const RunsOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) {
    return ctx.Fail(store.error());
  }
  auto runs = (*store)->ListRuns();
  if (!runs) {
    return ctx.Fail(runs.error());
  }
  if (!o.tag.empty()) {
    std::erase_if(*runs, [&o](const store::RunRow& r) {
      return std::find(r.tags.begin(), r.tags.end(), o.tag) == r.tags.end();
    });
  }
  if (o.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const store::RunRow& r : *runs) {
      list.push_back({{"id", r.id},
                      {"name", r.name},
                      {"created_at", r.created_at},
                      {"finished_at", r.finished_at},
                      {"status", r.status},
                      {"tags", r.tags}});
      if (r.mode == store::kRunModeQueue) {
        list.back()["priority"] = r.priority;
        list.back()["unserved_timeout_s"] = r.unserved_timeout_s;
      }
    }
    ctx.out << nlohmann::json{{"runs", list}}.dump(2) << "\n";
    return kExitOk;
  }
  // The job counts of every run in one query (the dashboard's runs view reads the same).
  auto summaries = (*store)->ListRunSummaries();
  if (!summaries) {
    return ctx.Fail(summaries.error());
  }
  std::map<int64_t, const store::RunSummary*> counts;
  for (const store::RunSummary& s : *summaries) counts[s.run.id] = &s;
  ctx.out << "ID\tCREATED\tSTATUS\tJOBS\tNAME\n";
  for (const store::RunRow& r : *runs) {
    const store::RunSummary* s = counts.count(r.id) ? counts[r.id] : nullptr;
    const int64_t total = s ? s->jobs : 0;
    const int64_t ok = s && s->by_status.count(store::kJobOk) ? s->by_status.at(store::kJobOk) : 0;
    ctx.out << r.id << "\t" << r.created_at << "\t" << r.status << "\t" << ok << "/" << total
            << " ok\t" << harness::TerminalSafe(r.name) << TagsText(r.tags) << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddRunsCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<RunsOptions>();
  CLI::App* cmd = app.add_subcommand("runs", "List the runs in the database, oldest first");
  AddDbOption(*cmd, o->db);
  cmd->add_option("--tag", o->tag, "only the run tagged NAME (dfarm tag)");
  cmd->add_flag("--json", o->json,
                "print {\"runs\":[{\"id\",\"name\",\"created_at\",\"status\",\"tags\"}]}; a farm "
                "run also \"priority\" and \"unserved_timeout_s\"");
  cmd->footer("Exit codes: 0 ok, 2 usage error, 3 no database, or it cannot be read.");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
