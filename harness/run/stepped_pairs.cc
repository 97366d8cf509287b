#include "harness/run/stepped_pairs.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "agent/protocol/bundle.h"
#include "agent/protocol/features.h"
#include "agent/protocol/runner_kinds.h"
#include "agent/protocol/status.h"
#include "agent/runner/runner_json.h"
#include "harness/run/scheduler_parts.h"

namespace dfarm::harness {
namespace {

using json = nlohmann::json;

// The runner status named `name`; unset for a name no runner status has.
std::optional<runner::RunnerStatus> RunnerStatusNamed(const std::string& name) {
  for (int code = 0; code < 256; ++code) {
    auto status = runner::RunnerStatusFromExitCode(code);
    if (status && name == runner::RunnerStatusName(*status)) return status;
  }
  return std::nullopt;
}

// The partner's result from its document (JSON text): the job class of its
// status, its error, and the driver's process facts.
agent::JobResult PartnerResult(const agent::JobResult& driver, const std::string& text,
                               const runner_json::Document& doc) {
  agent::JobResult out = driver;
  out.runner_json = text;
  out.signal = 0;
  const auto status = RunnerStatusNamed(doc.status);
  if (!status) {
    out.status = JobStatusName(JobStatus::kCrashed);
    out.error = "partner runner reported unknown status '" + doc.status + "'";
    out.exit_code = -1;
    return out;
  }
  out.exit_code = runner::ExitCode(*status);
  out.status = JobStatusName(runner::JobStatusOf(*status));
  out.error = doc.error;
  return out;
}

}  // namespace

std::string SteppedPairRefusal(const std::vector<std::string>& features, const SweepJob& first,
                               const SweepJob& second, const std::string& first_path,
                               const std::string& second_path) {
  if (!agent::HasFeature(features, agent::kFeatureSteppedPairs)) {
    return "its dfarm-agent does not speak feature '" + std::string(agent::kFeatureSteppedPairs) +
           "' (an older agent, or one started with --runner-prefix)";
  }
  for (const SweepJob* job : {&first, &second}) {
    if (job->runner_kind != agent::kRunnerKindDfarm) {
      return "runner '" + job->runner + "' is of kind '" + job->runner_kind +
             "', not a plain dfarm-runner";
    }
  }
  for (const std::string* path : {&first_path, &second_path}) {
    if (path->empty() || agent::IsBundleFile(*path)) {
      return "runner build '" + *path + "' is a bundle, not a plain executable";
    }
  }
  if (first.benchmark.sustained_s > 0) return "sustained mode has no stepped pairs";
  if (!first.input_set_sha256s.empty() && !agent::HasFeature(features, agent::kFeatureInputs)) {
    return "its dfarm-agent cannot run input sets";
  }
  return "";
}

uint32_t SteppedPairSeed(const SweepJob& first) {
  return first.benchmark.order_seed * 2654435761u + static_cast<uint32_t>(first.pair);
}

SteppedResults SplitSteppedResult(const agent::JobResult& result) {
  SteppedResults out;
  out.driver = result;
  if (result.status != store::kJobOk) {
    out.partner_missing =
        "the driver ended " + result.status + (result.error.empty() ? "" : ": " + result.error);
    return out;
  }
  json doc = json::parse(result.runner_json, nullptr, false);
  if (!doc.is_object()) {
    out.partner_missing = "the driver's document does not read";
    return out;
  }
  std::string partner_text;
  if (doc.contains("partner") && doc["partner"].is_object()) {
    partner_text = doc["partner"].dump(-1, ' ', false, json::error_handler_t::replace);
    doc.erase("partner");
    out.driver.runner_json = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  auto parsed = runner_json::ParseRunnerJson(out.driver.runner_json);
  if (!parsed || !parsed->steps || parsed->steps->role != "driver") {
    out.partner_missing = "the driver's document has no stepped pair (an older dfarm-runner?)";
    return out;
  }
  if (!parsed->steps->partner_error.empty()) {
    out.partner_missing = parsed->steps->partner_error;
    return out;
  }
  auto partner = runner_json::ParseRunnerJson(partner_text);
  if (partner_text.empty() || !partner) {
    out.partner_missing = "the driver carries no readable partner document";
    return out;
  }
  out.partner = PartnerResult(result, partner_text, *partner);
  return out;
}

// Runs `first` and `second`, one pair of a paired sweep in its order, on
// `w` as one stepped pair: `first` drives. False when they cannot step or
// the attempt ended infra (nothing recorded: the caller runs them back to
// back); true when both were recorded or left queued.
Result<bool> SchedulerCore::RunPair(Worker& w, store::StorePool& db, WorkerConnection& c,
                                    SweepJob& first, SweepJob& second) {
  if (!c.session) {
    auto reached = Connect(w, db, c);
    if (!reached) return reached.error();
    if (!reached->empty()) return false;
  }
  const std::vector<std::string>& features = c.session->client().device().features;
  const std::string& first_path = source_->RunnerFor(first);
  const std::string& second_path = source_->RunnerFor(second);
  if (std::string why = SteppedPairRefusal(features, first, second, first_path, second_path);
      !why.empty()) {
    if (!w.stepping_noted && ctx_.progress) {
      ctx_.progress->Note("device '" + w.device + "': pairs run back to back, not stepped: " + why);
    }
    w.stepping_noted = true;
    return false;
  }
  if (c.runner_unsure || c.runner_path != first_path) {
    auto pushed = PushRunner(w, db, c.session->client(), first_path, &c.runner_sha);
    if (!pushed) return pushed.error();
    if (!pushed->empty()) {
      c.session.reset();
      return false;
    }
    c.runner_path = first_path;
    c.runner_unsure = false;
  }
  std::string partner_sha;
  auto pushed = PushRunner(w, db, c.session->client(), second_path, &partner_sha);
  if (!pushed) return pushed.error();
  if (!pushed->empty()) {
    c.session.reset();
    return false;
  }
  if (auto artifacts = PushJobArtifacts(w, db, c, first); !artifacts) {
    return artifacts.error();
  } else if (artifacts->has_value()) {
    return false;
  }
  return RunPairOnDevice(w, db, c, first, second, partner_sha);
}

// RunPair once everything is on the device: cooldown, the job, the split.
Result<bool> SchedulerCore::RunPairOnDevice(Worker& w, store::StorePool& db, WorkerConnection& c,
                                            SweepJob& first, SweepJob& second,
                                            const std::string& partner_sha) {
  const CooldownOutcome cool = CoolDown(w, c);
  if (Cooling() && Cancelled()) return true;  // never started: both stay queued
  for (const SweepJob* job : {&first, &second}) {
    auto held = MarkRunning(w, db, *job);
    if (!held) return held.error();
    if (!*held) return true;
  }
  const std::string label = ScheduledJobLabel(first, w.device) + " (stepped pair)";
  if (ctx_.progress) ctx_.progress->JobStarted(label);
  agent::JobSpec spec = ToJobSpec(first, c.runner_sha, c.session->client().device().features);
  spec.partner_runner_sha256 = partner_sha;
  spec.partner_seed = SteppedPairSeed(first);
  agent::RunJobOptions run_options;
  run_options.cancel = ctx_.cancel;
  auto result = c.session->client().RunJob(spec, run_options);
  if (ctx_.progress) ctx_.progress->JobStopped(label);
  if (result && ctx_.cancel && ctx_.cancel->load() && result->status == store::kJobInfra) {
    for (const SweepJob* job : {&first, &second}) {
      if (auto r = Requeue(db, *job); !r) return r.error();
    }
    return true;
  }
  if (!result) c.session.reset();
  if (!result || result->status == store::kJobInfra) return false;
  SteppedResults split = SplitSteppedResult(*result);
  const auto record = [&](const SweepJob& job, const agent::JobResult& r) {
    return Record(w, db, job, OutcomeOf(r, job, cool));
  };
  if (auto rec = record(first, split.driver); !rec) return rec.error();
  if (split.partner) {
    if (auto rec = record(second, *split.partner); !rec) return rec.error();
  }
  {
    std::lock_guard lock(mu_);
    w.infra_in_a_row = 0;
  }
  if (split.partner) return true;
  if (ctx_.progress) {
    ctx_.progress->Note(ScheduledJobLabel(second, w.device) + ": runner '" + second.runner +
                        "' did not step beside '" + first.runner + "' (" +
                        OneLine(split.partner_missing) + "); it runs alone");
  }
  if (auto r = RunOne(w, db, c, second); !r) return r.error();
  return true;
}

}  // namespace dfarm::harness
