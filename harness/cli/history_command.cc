// dfarm history --model M --delegate D [...] and dfarm regressions [--since DATE]:
// thin shells over harness/analysis/cell_history.h.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "harness/analysis/cell_history.h"
#include "harness/cli/commands.h"
#include "harness/run/terminal_text.h"

namespace dfarm::cli {
namespace {

using nlohmann::json;

struct HistoryOptions {
  std::string model;
  std::string delegate;
  std::string delegate_options;
  std::string device;
  uint32_t threads = 0;
  std::string runner;
  std::string inputs;
  std::string metric = "p50";
  size_t min_segment = 5;
  std::string since;  // regressions
  std::string db;
  bool json = false;
};

json CellJson(const store::Cell& c) {
  return {{"model", c.model},
          {"model_sha256", c.model_sha256},
          {"delegate", c.delegate},
          {"delegate_options", c.delegate_options},
          {"num_threads", c.num_threads},
          {"runner", c.runner},
          {"device", c.device},
          {"inputs", c.inputs}};
}

json ChangeJson(const harness::HistoryChange& c) {
  return {{"run_id", c.run_id},
          {"created_at", c.created_at},
          {"index", c.index},
          {"before", c.before},
          {"after", c.after},
          {"change_pct", c.change_pct},
          {"kind", c.regression ? "regression" : "improvement"}};
}

// A value in the metric's unit: microseconds with one decimal, bytes whole,
// errors in 4 significant digits.
std::string Value(harness::HistoryMetric metric, double v) {
  char buf[48];
  if (metric == harness::HistoryMetric::kPeakRss) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (metric == harness::HistoryMetric::kMaxAbsError) {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  }
  return buf;
}

const char* Unit(harness::HistoryMetric metric) {
  switch (metric) {
    case harness::HistoryMetric::kPeakRss:
      return " (bytes)";
    case harness::HistoryMetric::kMaxAbsError:
      return "";
    case harness::HistoryMetric::kTop1:
    case harness::HistoryMetric::kTop5:
    case harness::HistoryMetric::kMap:
    case harness::HistoryMetric::kMiou:
      return " (%)";
    default:
      return " (us)";
  }
}

std::string ChangeText(const harness::HistoryChange& c) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%% %s", c.change_pct,
                c.regression ? "regression" : "improvement");
  return buf;
}

Result<std::unique_ptr<store::Store>> OpenForHistory(const HistoryOptions& o,
                                                     harness::HistoryMetric* metric) {
  auto parsed = harness::ParseHistoryMetric(o.metric);
  if (!parsed) return parsed.error();
  *metric = *parsed;
  if (o.min_segment < 1) {
    return MakeError(ErrorKind::kInvalidInput, "--min-segment must be at least 1");
  }
  return OpenExistingStore(o.db);
}

void PrintHistory(const harness::CellHistory& h, Context& ctx) {
  ctx.out << "cell: " << harness::TerminalSafe(h.cell.Label(), 1024) << "\n"
          << "metric: " << harness::HistoryMetricName(h.metric) << Unit(h.metric)
          << ", one point per run: the median of its ok trials\n"
          << "RUN\tCREATED\tVALUE\tTRIALS\tCHANGE\n";
  size_t next = 0;
  for (size_t i = 0; i < h.points.size(); ++i) {
    const harness::HistoryPoint& p = h.points[i];
    ctx.out << p.run_id << "\t" << p.created_at << "\t" << Value(h.metric, p.value) << "\t"
            << p.trials << "\t";
    if (next < h.changes.size() && h.changes[next].index == i) {
      const harness::HistoryChange& c = h.changes[next++];
      ctx.out << Value(h.metric, c.before) << " -> " << Value(h.metric, c.after) << " "
              << ChangeText(c);
    }
    ctx.out << "\n";
  }
  ctx.out << h.points.size() << " runs, " << h.changes.size()
          << (h.changes.size() == 1 ? " change point" : " change points") << "\n";
}

int RunHistory(const HistoryOptions& o, CLI::App& cmd, Context& ctx) {
  harness::HistoryMetric metric{};
  auto store = OpenForHistory(o, &metric);
  if (!store) return ctx.Fail(store.error());
  harness::CellQuery q;
  q.model = o.model;
  q.delegate = o.delegate;
  if (cmd.count("--options")) q.delegate_options = o.delegate_options;
  if (cmd.count("--device")) q.device = o.device;
  if (cmd.count("--threads")) q.num_threads = o.threads;
  if (cmd.count("--runner")) q.runner = o.runner;
  if (cmd.count("--inputs")) {
    // A bare hex prefix names input sets ("sets:PREFIX").
    q.inputs = o.inputs.find(':') == std::string::npos ? "sets:" + o.inputs : o.inputs;
  }
  auto history = harness::LoadCellHistory(**store, q, metric, {.min_segment = o.min_segment});
  if (!history) return ctx.Fail(history.error());
  if (!o.json) {
    PrintHistory(*history, ctx);
    return kExitOk;
  }
  json points = json::array(), changes = json::array();
  for (const harness::HistoryPoint& p : history->points) {
    points.push_back({{"run_id", p.run_id},
                      {"created_at", p.created_at},
                      {"value", p.value},
                      {"trials", p.trials}});
  }
  for (const harness::HistoryChange& c : history->changes) changes.push_back(ChangeJson(c));
  ctx.out << json{{"cell", CellJson(history->cell)},
                  {"metric", harness::HistoryMetricName(metric)},
                  {"points", points},
                  {"change_points", changes}}
                 .dump(2)
          << "\n";
  return kExitOk;
}

int RunRegressions(const HistoryOptions& o, Context& ctx) {
  static const std::regex kDate(R"(\d{4}-\d{2}-\d{2}(T\d{2}(:\d{2}(:\d{2}Z?)?)?)?)");
  if (!o.since.empty() && !std::regex_match(o.since, kDate)) {
    ctx.Fail(kExitUsage,
             "--since must be a date such as 2024-05-01 (or 2024-05-01T12:00:00Z), "
             "got '" +
                 o.since + "'");
    return kExitUsage;
  }
  harness::HistoryMetric metric{};
  auto store = OpenForHistory(o, &metric);
  if (!store) return ctx.Fail(store.error());
  auto cells = harness::FindStepChanges(**store, o.since, metric, {.min_segment = o.min_segment});
  if (!cells) return ctx.Fail(cells.error());
  const std::vector<harness::CellChange> changes = harness::FlattenChanges(*cells);
  if (o.json) {
    json list = json::array();
    for (const harness::CellChange& c : changes) {
      json row = ChangeJson(*c.change);
      row["cell"] = CellJson(c.history->cell);
      row["runs"] = c.history->points.size();
      list.push_back(row);
    }
    ctx.out << json{{"metric", harness::HistoryMetricName(metric)},
                    {"since", o.since},
                    {"changes", list}}
                   .dump(2)
            << "\n";
    return kExitOk;
  }
  ctx.out << "metric: " << harness::HistoryMetricName(metric) << Unit(metric)
          << (o.since.empty() ? "" : ", changes since " + o.since) << "\n"
          << "RUN\tCREATED\tBEFORE\tAFTER\tCHANGE\tCELL\n";
  size_t regressions = 0;
  for (const harness::CellChange& c : changes) {
    regressions += c.change->regression ? 1 : 0;
    ctx.out << c.change->run_id << "\t" << c.change->created_at << "\t"
            << Value(metric, c.change->before) << "\t" << Value(metric, c.change->after) << "\t"
            << ChangeText(*c.change) << "\t" << harness::TerminalSafe(c.history->cell.Label(), 1024)
            << "\n";
  }
  ctx.out << regressions << (regressions == 1 ? " regression, " : " regressions, ")
          << changes.size() - regressions
          << (changes.size() - regressions == 1 ? " improvement" : " improvements") << "\n";
  return kExitOk;
}

void AddCommonOptions(CLI::App& cmd, HistoryOptions& o) {
  cmd.add_option("--metric", o.metric,
                 "mean, p50, p90 (us), peak_rss (bytes), max_abs_error, or top1/top5/map/miou "
                 "(task accuracy of a model with an eval: top-k, detection mAP@[.5:.95], "
                 "segmentation mIoU, percent; a drop is a regression)")
      ->capture_default_str();
  cmd.add_option("--min-segment", o.min_segment, "fewest runs at one level between steps")
      ->capture_default_str();
  AddDbOption(cmd, o.db);
}

}  // namespace

void AddHistoryCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<HistoryOptions>();
  CLI::App* cmd = app.add_subcommand(
      "history", "One cell's metric over the runs, oldest first, with its step changes");
  cmd->add_option("--model", o->model, "model file name, path or sha256 (prefix of 8+)")
      ->required();
  cmd->add_option("--delegate", o->delegate, "delegate name, e.g. xnnpack")->required();
  cmd->add_option("--options", o->delegate_options, "delegate options 'k:v;..' (any order)");
  cmd->add_option("--device", o->device,
                  "device name, e.g. local, or a device class, class:pixel7 (docs/farm.md)");
  cmd->add_option("--threads", o->threads, "thread count of the cell");
  cmd->add_option("--runner", o->runner, "runner name of the spec ('' = the default runner)");
  cmd->add_option("--inputs", o->inputs,
                  "the cell's inputs: seeded:1/dfarm (the runner's seeded random inputs), "
                  "or the hex digits (a prefix) its label shows after 'on inputs'");
  AddCommonOptions(*cmd, *o);
  cmd->add_flag("--json", o->json,
                "print {\"cell\",\"metric\",\"points\":[{\"run_id\",\"created_at\",\"value\","
                "\"trials\"}],\"change_points\":[{\"run_id\",\"index\",\"before\",\"after\","
                "\"change_pct\",\"kind\"}]}");
  cmd->footer(
      "Exit codes: 0 ok (with or without change points), 2 usage error, or no cell or more "
      "than one matches (the message lists them), 3 no database, or it cannot be read.");
  cmd->callback([o, cmd, &ctx] { ctx.exit_code = RunHistory(*o, *cmd, ctx); });

  auto r = std::make_shared<HistoryOptions>();
  CLI::App* reg =
      app.add_subcommand("regressions", "Step changes of every cell over the runs, newest first");
  reg->add_option("--since", r->since, "only changes at runs created on or after DATE (UTC)");
  AddCommonOptions(*reg, *r);
  reg->add_flag("--json", r->json,
                "print {\"metric\",\"since\",\"changes\":[{\"cell\",\"run_id\",\"created_at\","
                "\"before\",\"after\",\"change_pct\",\"kind\"}]}");
  reg->footer(
      "Exit codes: 0 ok (with or without regressions), 2 usage error, 3 no database, or it "
      "cannot be read.");
  reg->callback([r, &ctx] { ctx.exit_code = RunRegressions(*r, ctx); });
}

}  // namespace dfarm::cli
