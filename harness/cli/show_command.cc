// dfarm show RUN [--db FILE] [--json]
#include <cstdio>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"

namespace dfarm::cli {
namespace {

using nlohmann::json;

struct ShowOptions {
  std::string run;
  std::string db;
  bool json = false;
};

json MetricsJson(const store::Metrics& m) {
  return {
      {"init_us", m.init_us},        {"first_us", m.first_us}, {"warmup_mean_us", m.warmup_mean_us},
      {"mean_us", m.mean_us},        {"std_us", m.std_us},     {"min_us", m.min_us},
      {"max_us", m.max_us},          {"p50_us", m.p50_us},     {"p90_us", m.p90_us},
      {"p99_us", m.p99_us},          {"num_runs", m.num_runs}, {"peak_rss_bytes", m.peak_rss_bytes},
      {"arena_bytes", m.arena_bytes}};
}

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", us / 1000.0);
  return buf;
}

int Run(const ShowOptions& o, Context& ctx) {
  auto store = OpenExistingStore(o.db);
  if (!store) {
    ctx.Fail(kExitInfra, store.message());
    return kExitInfra;
  }
  auto id = ResolveRun(**store, o.run);
  if (!id) {
    ctx.Fail(kExitUsage, id.message());
    return kExitUsage;
  }
  auto run = (*store)->GetRun(*id);
  if (!run) {
    ctx.Fail(kExitUsage, run.message());
    return kExitUsage;
  }
  auto jobs = (*store)->ListJobs(*id);
  if (!jobs) {
    ctx.Fail(kExitInfra, jobs.message());
    return kExitInfra;
  }
  if (o.json) {
    json spec = json::parse(run->spec_json, nullptr, /*allow_exceptions=*/false);
    json doc;
    doc["run"] = {{"id", run->id},
                  {"name", run->name},
                  {"created_at", run->created_at},
                  {"finished_at", run->finished_at},
                  {"status", run->status},
                  {"spec", spec.is_discarded() ? json(run->spec_json) : spec}};
    doc["jobs"] = json::array();
    for (const store::JobRow& j : *jobs) {
      auto samples = (*store)->GetSamples(j.id);
      doc["jobs"].push_back({{"id", j.id},
                             {"job_key", j.job_key},
                             {"model", j.model},
                             {"model_sha256", j.model_sha256},
                             {"delegate", j.delegate},
                             {"delegate_options", j.delegate_options},
                             {"device", j.device},
                             {"moved_from", j.moved_from},
                             {"num_threads", j.num_threads},
                             {"attempts", j.attempts},
                             {"status", j.status},
                             {"error", j.error},
                             {"wall_ms", j.wall_ms},
                             {"num_samples", samples ? samples->size() : 0},
                             {"metrics", j.metrics ? MetricsJson(*j.metrics) : json(nullptr)}});
    }
    ctx.out << doc.dump(2) << "\n";
    return kExitOk;
  }
  ctx.out << "run " << run->id << " '" << run->name << "' " << run->status << ", created "
          << run->created_at;
  if (!run->finished_at.empty()) ctx.out << ", finished " << run->finished_at;
  ctx.out << "\n\nMODEL\tDELEGATE\tDEVICE\tSTATUS\tMEAN_MS\tP90_MS\tPEAK_RSS_MIB\n";
  for (const store::JobRow& j : *jobs) {
    std::string delegate = j.delegate;
    if (!j.delegate_options.empty()) delegate += "(" + j.delegate_options + ")";
    if (j.num_threads > 1) delegate += " x" + std::to_string(j.num_threads);
    ctx.out << j.model << "\t" << delegate << "\t" << j.device << "\t" << j.status;
    if (j.metrics) {
      char rss[32];
      std::snprintf(rss, sizeof rss, "%.1f",
                    static_cast<double>(j.metrics->peak_rss_bytes) / (1 << 20));
      ctx.out << "\t" << Ms(j.metrics->mean_us) << "\t" << Ms(j.metrics->p90_us) << "\t" << rss;
    } else {
      ctx.out << "\t-\t-\t-";
    }
    if (!j.error.empty()) ctx.out << "\t" << j.error;
    ctx.out << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddShowCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* cmd = app.add_subcommand("show", "Show one run and its jobs");
  cmd->add_option("RUN", o->run, "run id (see 'dfarm runs'), or 'last'")->required();
  AddDbOption(*cmd, o->db);
  cmd->add_flag("--json", o->json, "print {\"run\":{...},\"jobs\":[...]}");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
