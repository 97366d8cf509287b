// dfarm report RUN [--db FILE] --format md|html -o FILE|-
#include "harness/cli/commands.h"
#include "reports/report.h"

namespace dfarm::cli {
namespace {

struct ReportOptions {
  std::string run;
  std::string db;
  std::string format;
  std::string output;
};

int Run(const ReportOptions& o, Context& ctx) {
  auto format = reports::ParseFormat(o.format);
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
  auto report = reports::LoadRunReport(**store, *id);
  if (!report) {
    return ctx.Fail(report.error());
  }
  if (o.output == "-") {
    ctx.out << reports::Render(*report, *format) << std::flush;
    return kExitOk;
  }
  if (auto r = reports::WriteReport(*report, *format, o.output); !r) {
    return ctx.Fail(r.error());
  }
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand("report", "Write a Markdown or HTML report of one run");
  cmd->add_option("RUN", o->run, "run id (see 'dfarm runs'), or 'last'")->required();
  AddDbOption(*cmd, o->db);
  cmd->add_option("--format", o->format, "md or html")->required();
  cmd->add_option("-o,--output", o->output, "file to write, or - for stdout")->required();
  cmd->footer(
      "Exit codes: 0 ok, 2 usage error (a bad argument or format, no such run), 3 no "
      "database, or it cannot be read, or the report cannot be written.");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
