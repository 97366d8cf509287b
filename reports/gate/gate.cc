#include "reports/gate/gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "reports/eval/task_drop.h"
#include "reports/gate/stats.h"
#include "reports/store/delegation.h"

namespace dfarm::gate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One job of either side with what the gate reads of it.
struct LoadedJob {
  store::JobRow row;
  std::vector<double> samples;
  std::optional<store::Accuracy> accuracy;
  std::optional<store::JobPlacement> placement;
  std::optional<store::TaskAccuracy> task;  // spec "eval"
  bool ok() const { return row.status == store::kJobOk; }
};

struct CellJobs {
  std::vector<LoadedJob> baseline, candidate;
};

// The device of a job's cell: the class it recorded (a job aimed at `any` or
// a selector), else its device's class in the policy, else its device.
std::string DeviceCell(const Policy& policy, const store::JobRow& job) {
  return store::CellDevice(job.device,
                           job.device_class.empty()
                               ? store::MatchingDeviceClass(policy.device_classes, job.device)
                               : job.device_class);
}

std::string Num(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

// "A vs B" for --candidate-runner A --baseline-runner B ("any" for an unset side).
std::string PairLabel(const Policy& policy) {
  auto name = [](const std::string& n) { return n.empty() ? std::string("any") : n; };
  return name(policy.candidate_runner) + " vs " + name(policy.baseline_runner);
}

// Loads every job of `run_id` into its cell, on the side `baseline` says
// (only the jobs of policy's candidate/baseline runner when one is set).
Result<void> LoadRun(store::Reader& store, int64_t run_id, bool baseline, const Policy& policy,
                     std::map<store::Cell, CellJobs>& cells) {
  auto jobs = store.ListJobs(run_id);
  if (!jobs) return jobs.error();
  auto tasks = store.ListRunTaskAccuracy(run_id);
  if (!tasks) return tasks.error();
  const std::string& only = baseline ? policy.baseline_runner : policy.candidate_runner;
  const bool paired = !policy.baseline_runner.empty() || !policy.candidate_runner.empty();
  for (auto& row : *jobs) {
    if (!only.empty() && (row.runner.empty() ? "default" : row.runner) != only) continue;
    LoadedJob job;
    job.row = std::move(row);
    if (job.ok()) {
      auto samples = store.GetSamples(job.row.id);
      if (!samples) return samples.error();
      job.samples = std::move(*samples);
      auto accuracy = store.GetAccuracy(job.row.id);
      if (!accuracy) return accuracy.error();
      job.accuracy = std::move(*accuracy);
      auto placement = store.GetPlacement(job.row.id);
      if (!placement) return placement.error();
      job.placement = std::move(*placement);
      if (auto t = tasks->find(job.row.id); t != tasks->end()) job.task = std::move(t->second);
    }
    // Paired runners: one cell across the two names, labelled with both.
    store::Cell key = store::CellOf(job.row);
    if (paired) key.runner = PairLabel(policy);
    key.device = DeviceCell(policy, job.row);
    auto& side = baseline ? cells[key].baseline : cells[key].candidate;
    side.push_back(std::move(job));
  }
  return {};
}

std::vector<const LoadedJob*> OkJobs(const std::vector<LoadedJob>& jobs) {
  std::vector<const LoadedJob*> ok;
  for (const auto& j : jobs) {
    if (j.ok()) ok.push_back(&j);
  }
  return ok;
}

// ---- latency -----------------------------------------------------------------

struct LatencyInput {
  // Trial medians, or one trial's samples; paired: the pairs' trial medians, aligned.
  std::vector<double> baseline, candidate;
  bool paired = false;
};

// `jobs` without the ones flagged noisy, unless none would be left (then
// all of them: a noisy figure beats none). Counts what it leaves out.
std::vector<const LoadedJob*> WithoutNoisy(const std::vector<const LoadedJob*>& jobs,
                                           size_t* excluded) {
  std::vector<const LoadedJob*> quiet;
  for (const LoadedJob* j : jobs) {
    if (!j->row.noisy) quiet.push_back(j);
  }
  if (quiet.empty()) return jobs;
  *excluded += jobs.size() - quiet.size();
  return quiet;
}

LatencyInput LatencyData(CellResult& cell, std::vector<const LoadedJob*> base,
                         std::vector<const LoadedJob*> cand, bool exclude_noisy) {
  if (exclude_noisy) {
    base = WithoutNoisy(base, &cell.noisy_trials_excluded);
    cand = WithoutNoisy(cand, &cell.noisy_trials_excluded);
  }
  LatencyInput in;
  std::vector<double> base_samples, cand_samples;
  for (const auto* j : base) {
    if (j->samples.empty()) continue;
    in.baseline.push_back(stats::Median(j->samples));
    base_samples.insert(base_samples.end(), j->samples.begin(), j->samples.end());
  }
  for (const auto* j : cand) {
    if (j->samples.empty()) continue;
    in.candidate.push_back(stats::Median(j->samples));
    cand_samples.insert(cand_samples.end(), j->samples.begin(), j->samples.end());
  }
  cell.baseline_trials = in.baseline.size();
  cell.candidate_trials = in.candidate.size();
  if (in.baseline.size() < 2 || in.candidate.size() < 2) {
    cell.within_run_only = true;
    in.baseline = std::move(base_samples);
    in.candidate = std::move(cand_samples);
  }
  return in;
}

// The pairs of a paired cell: each candidate job with the baseline job of its
// pair (same SweepJob::pair, same device), both with samples, in pair order.
// With exclude_noisy a pair with a noisy trial is left out, unless every pair
// has one. Fills `in` and returns true with at least 2 pairs; else false and
// the cell is judged unpaired.
bool PairedLatencyData(CellResult& cell, const std::vector<const LoadedJob*>& base,
                       const std::vector<const LoadedJob*>& cand, bool exclude_noisy,
                       LatencyInput& in) {
  std::map<int64_t, const LoadedJob*> base_by_pair;
  for (const LoadedJob* j : base) {
    if (j->row.pair > 0 && !j->samples.empty()) base_by_pair[j->row.pair] = j;
  }
  std::map<int64_t, std::pair<const LoadedJob*, const LoadedJob*>> all, quiet;
  for (const LoadedJob* c : cand) {
    auto b = base_by_pair.find(c->row.pair);
    if (c->row.pair <= 0 || c->samples.empty() || b == base_by_pair.end() ||
        b->second->row.device != c->row.device) {
      continue;
    }
    all[c->row.pair] = {b->second, c};
    if (!c->row.noisy && !b->second->row.noisy) quiet[c->row.pair] = {b->second, c};
  }
  const auto& used = exclude_noisy && !quiet.empty() ? quiet : all;
  if (used.size() < 2) return false;
  cell.noisy_trials_excluded += 2 * (all.size() - used.size());
  for (const auto& [pair, jobs] : used) {
    in.baseline.push_back(stats::Median(jobs.first->samples));
    in.candidate.push_back(stats::Median(jobs.second->samples));
  }
  in.paired = true;
  cell.paired = true;
  cell.pairs = used.size();
  cell.baseline_trials = cell.candidate_trials = used.size();
  return true;
}

// The paired comparison: Wilcoxon signed-rank over the log ratios of the
// pairs' trial medians, the median of the paired ratios and its interval.
bool ComparePairedLatency(CellResult& cell, const LatencyInput& in, const LatencyPolicy& p) {
  cell.baseline_median_us = stats::Median(in.baseline);
  cell.candidate_median_us = stats::Median(in.candidate);
  std::vector<double> log_ratios;
  for (size_t i = 0; i < in.baseline.size(); ++i) {
    if (in.baseline[i] > 0 && in.candidate[i] > 0) {
      log_ratios.push_back(std::log(in.candidate[i] / in.baseline[i]));
    }
  }
  const auto ratio = stats::BootstrapMedianOfPairedRatios(in.baseline, in.candidate, p.confidence,
                                                          p.bootstrap_resamples, p.seed);
  if (!(ratio.median_ratio > 0)) return false;
  cell.ratio = ratio.median_ratio;
  cell.ci_low = ratio.interval.low;
  cell.ci_high = ratio.interval.high;
  cell.p_value = stats::WilcoxonSignedRank(log_ratios).p_value;
  cell.smallest_p = stats::SmallestSignedRankP(in.baseline.size());
  return true;
}

// Fills the cell's latency figures and p-value; false when there is nothing to compare.
bool CompareLatency(CellResult& cell, const LatencyInput& in, const LatencyPolicy& p) {
  if (in.baseline.empty() || in.candidate.empty()) return false;
  if (in.paired) return ComparePairedLatency(cell, in, p);
  cell.baseline_median_us = stats::Median(in.baseline);
  cell.candidate_median_us = stats::Median(in.candidate);
  if (!(cell.baseline_median_us > 0)) return false;
  cell.ratio = cell.candidate_median_us / cell.baseline_median_us;
  cell.p_value = stats::MannWhitneyU(in.candidate, in.baseline).p_value;
  cell.smallest_p = stats::SmallestMannWhitneyP(in.candidate.size(), in.baseline.size());
  auto ci = stats::BootstrapRatioOfMedians(in.baseline, in.candidate, p.confidence,
                                           p.bootstrap_resamples, p.seed);
  cell.ci_low = ci.low;
  cell.ci_high = ci.high;
  return true;
}

Verdict LatencyVerdict(const CellResult& c, const LatencyPolicy& p) {
  const double up = 1 + p.min_effect, down = 1 - p.min_effect;
  if (!std::isfinite(c.ci_low) || !std::isfinite(c.ci_high)) return Verdict::kUnknown;
  const bool significant = c.q_value < p.alpha;
  // Significant after the correction AND the whole interval beyond the
  // minimum effect: confident that the change is larger than min_effect, not
  // only that there is one. Run-to-run drift of shared machines is often a few
  // percent and significant; this keeps it from crying wolf (a real slow-down
  // a little above min_effect stays `unknown` until more trials narrow it).
  if (significant && c.ci_low > up && c.ratio > up) return Verdict::kRegressed;
  if (significant && c.ci_high < down && c.ratio < down) return Verdict::kImproved;
  if (c.ci_low >= down && c.ci_high <= up) return Verdict::kPass;
  return Verdict::kUnknown;
}

// ---- accuracy ------------------------------------------------------------------

// The worst figures of one output over a side's trials.
struct OutputFigures {
  std::string name;
  double max_abs_error = kNaN, mean_abs_error = kNaN, rmse = kNaN, max_lsb = kNaN;
  double snr_db = kNaN, psnr_db = kNaN;  // the lowest; NaN when no trial reported one
  bool quantized = false;
  int64_t new_nan_inf = 0;  // NaN/Inf in the delegate's output beyond the reference's
  int top1_total = 0, top1_agree = 0, top5_total = 0, top5_agree = 0;
};

double Worst(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

// The lower of two figures where higher is better (dB); NaN: none yet.
double Lowest(double a, const std::optional<double>& b) {
  if (!b) return a;
  return std::isnan(a) ? *b : std::min(a, *b);
}

void CountAgreement(const std::optional<bool>& all_agree, const std::optional<double>& fraction,
                    int64_t sets, int& agree, int& total) {
  if (!all_agree) return;
  if (fraction && sets > 1) {
    total += static_cast<int>(sets);
    agree += static_cast<int>(std::lround(*fraction * static_cast<double>(sets)));
    return;
  }
  ++total;
  agree += *all_agree ? 1 : 0;
}

std::map<int64_t, OutputFigures> Figures(const std::vector<const LoadedJob*>& jobs) {
  std::map<int64_t, OutputFigures> out;
  for (const auto* j : jobs) {
    if (!j->accuracy) continue;
    for (const auto& o : j->accuracy->outputs) {
      auto& f = out[o.index];
      f.name = o.name;
      f.max_abs_error = Worst(f.max_abs_error, o.max_abs_error);
      f.mean_abs_error = Worst(f.mean_abs_error, o.mean_abs_error);
      f.rmse = Worst(f.rmse, o.rmse);
      f.snr_db = Lowest(f.snr_db, o.snr_db);
      f.psnr_db = Lowest(f.psnr_db, o.psnr_db);
      if (o.max_abs_error_lsb) {
        f.quantized = true;
        f.max_lsb = Worst(f.max_lsb, runner::ToDouble(*o.max_abs_error_lsb));
      }
      f.new_nan_inf += std::max<int64_t>(0, o.nan_count - o.reference_nan_count) +
                       std::max<int64_t>(0, o.inf_count - o.reference_inf_count);
      // One comparison per input set (a job over N sets counts N, with the
      // runner's agreement fraction), else one per trial.
      const int64_t sets = j->accuracy->sets.value_or(1);
      CountAgreement(o.top1_agree, o.top1_agreement, sets, f.top1_agree, f.top1_total);
      CountAgreement(o.top5_agree, o.top5_agreement, sets, f.top5_agree, f.top5_total);
    }
  }
  return out;
}

// The effective thresholds for one output: per field, the first matching rule that sets it.
AccuracyRule EffectiveRule(const Policy& policy, const std::string& model, const OutputFigures& f) {
  AccuracyRule e;
  auto fill = [](std::optional<double>& dst, const std::optional<double>& src) {
    if (!dst && src) dst = src;
  };
  for (const auto& r : policy.accuracy) {
    if (!GlobMatch(r.model, model) || !GlobMatch(r.output, f.name)) continue;
    if (r.dtype != "*" && (r.dtype == "quantized") != f.quantized) continue;
    fill(e.max_abs_error, r.max_abs_error);
    fill(e.mean_abs_error, r.mean_abs_error);
    fill(e.rmse, r.rmse);
    fill(e.max_abs_error_lsb, r.max_abs_error_lsb);
    fill(e.min_top1_agreement, r.min_top1_agreement);
    fill(e.min_top5_agreement, r.min_top5_agreement);
    fill(e.min_snr_db, r.min_snr_db);
    fill(e.min_psnr_db, r.min_psnr_db);
    fill(e.max_abs_error_growth, r.max_abs_error_growth);
    fill(e.mean_abs_error_growth, r.mean_abs_error_growth);
    fill(e.rmse_growth, r.rmse_growth);
    fill(e.growth_floor, r.growth_floor);
    if (!e.nan_inf && r.nan_inf) e.nan_inf = r.nan_inf;
  }
  return e;
}

void AddFinding(CellResult& cell, std::string metric, const std::string& output, double value,
                double threshold, bool fails, std::string message) {
  cell.findings.push_back(
      Finding{std::move(metric), output, value, threshold, fails, std::move(message)});
}

// Against the CPU reference: the figure must not exceed the threshold.
void CheckMax(CellResult& cell, const char* metric, const OutputFigures& f, double value,
              const std::optional<double>& threshold, const char* unit) {
  if (!threshold || std::isnan(value)) return;
  const bool fails = value > *threshold;
  AddFinding(cell, std::string("accuracy.") + metric, f.name, value, *threshold, fails,
             "output '" + f.name + "': " + metric + " " + Num(value) + unit +
                 " vs the CPU reference " + (fails ? "exceeds" : "within") + " the threshold " +
                 Num(*threshold) + unit);
}

// Against the CPU reference, higher is better: the figure must not be below the minimum.
void CheckMin(CellResult& cell, const char* metric, const OutputFigures& f, double value,
              const std::optional<double>& threshold, const char* unit) {
  if (!threshold || std::isnan(value)) return;
  const bool fails = value < *threshold;
  AddFinding(cell, std::string("accuracy.") + metric, f.name, value, *threshold, fails,
             "output '" + f.name + "': " + metric + " " + Num(value) + unit +
                 " vs the CPU reference (the lowest over trials) " +
                 (fails ? "below" : "at least") + " the minimum " + Num(*threshold) + unit);
}

void CheckAgreement(CellResult& cell, const char* metric, const OutputFigures& f, int agree,
                    int total, const std::optional<double>& threshold) {
  if (!threshold || total == 0) return;
  const double value = static_cast<double>(agree) / total;
  const bool fails = value < *threshold;
  AddFinding(cell, std::string("accuracy.") + metric, f.name, value, *threshold, fails,
             "output '" + f.name + "': " + metric + " " + Num(value) + " (" +
                 std::to_string(agree) + "/" + std::to_string(total) + " comparisons) " +
                 (fails ? "below" : "at least") + " the minimum " + Num(*threshold));
}

void CheckGrowth(CellResult& cell, const char* metric, const OutputFigures& f, double cand,
                 double base, const std::optional<double>& factor, double floor) {
  if (!factor || std::isnan(cand) || std::isnan(base) || cand <= floor) return;
  const double growth = cand / std::max(base, floor);
  if (growth <= *factor) return;
  AddFinding(cell, std::string("accuracy.") + metric + "_growth", f.name, growth, *factor, true,
             "output '" + f.name + "': " + metric + " " + Num(cand) + " is " + Num(growth) +
                 "x the baseline's " + Num(base) + " (allowed " + Num(*factor) + "x)");
}

double WorstMaxAbsError(const std::map<int64_t, OutputFigures>& figures) {
  double worst = kNaN;
  for (const auto& [index, f] : figures) worst = Worst(worst, f.max_abs_error);
  return worst;
}

void JudgeAccuracy(CellResult& cell, const Policy& policy,
                   const std::vector<const LoadedJob*>& base,
                   const std::vector<const LoadedJob*>& cand) {
  const auto cand_figures = Figures(cand);
  const auto base_figures = Figures(base);
  cell.candidate_max_abs_error = WorstMaxAbsError(cand_figures);
  cell.baseline_max_abs_error = WorstMaxAbsError(base_figures);
  for (const auto& [index, f] : cand_figures) {
    const AccuracyRule r = EffectiveRule(policy, cell.cell.model, f);
    if (f.new_nan_inf > 0 && r.nan_inf.value_or("fail") == "fail") {
      AddFinding(cell, "accuracy.nan_inf", f.name, static_cast<double>(f.new_nan_inf), 0, true,
                 "output '" + f.name + "': " + std::to_string(f.new_nan_inf) +
                     " NaN/Inf values the CPU reference does not have");
    }
    if (f.quantized) CheckMax(cell, "max_abs_error_lsb", f, f.max_lsb, r.max_abs_error_lsb, " LSB");
    CheckMax(cell, "max_abs_error", f, f.max_abs_error, r.max_abs_error, "");
    CheckMax(cell, "mean_abs_error", f, f.mean_abs_error, r.mean_abs_error, "");
    CheckMax(cell, "rmse", f, f.rmse, r.rmse, "");
    CheckAgreement(cell, "top1_agreement", f, f.top1_agree, f.top1_total, r.min_top1_agreement);
    CheckAgreement(cell, "top5_agreement", f, f.top5_agree, f.top5_total, r.min_top5_agreement);
    CheckMin(cell, "snr_db", f, f.snr_db, r.min_snr_db, " dB");
    CheckMin(cell, "psnr_db", f, f.psnr_db, r.min_psnr_db, " dB");
    auto b = base_figures.find(index);
    if (b == base_figures.end() || b->second.name != f.name) continue;
    const double floor = r.growth_floor.value_or(1e-12);
    CheckGrowth(cell, "max_abs_error", f, f.max_abs_error, b->second.max_abs_error,
                r.max_abs_error_growth, floor);
    CheckGrowth(cell, "mean_abs_error", f, f.mean_abs_error, b->second.mean_abs_error,
                r.mean_abs_error_growth, floor);
    CheckGrowth(cell, "rmse", f, f.rmse, b->second.rmse, r.rmse_growth, floor);
  }
}

// ---- memory, placement, failures -------------------------------------------------

int64_t MedianOf(const std::vector<const LoadedJob*>& jobs, int64_t runner::Metrics::*field) {
  std::vector<double> v;
  for (const auto* j : jobs) {
    if (j->row.metrics && (*j->row.metrics).*field > 0) {
      v.push_back(static_cast<double>((*j->row.metrics).*field));
    }
  }
  return v.empty() ? 0 : static_cast<int64_t>(stats::Median(v));
}

void CheckMemoryGrowth(CellResult& cell, const char* metric, int64_t base, int64_t cand,
                       const std::optional<double>& limit) {
  if (!limit || base <= 0 || cand <= 0) return;
  const double growth = static_cast<double>(cand) / static_cast<double>(base) - 1;
  if (growth <= *limit) return;
  AddFinding(cell, std::string("memory.") + metric, "", growth, *limit, true,
             std::string(metric) + ": " + std::to_string(cand) + " bytes is " + Num(growth * 100) +
                 "% above the baseline's " + std::to_string(base) + " (allowed " +
                 Num(*limit * 100) + "%)");
}

void JudgeMemory(CellResult& cell, const MemoryPolicy& p) {
  CheckMemoryGrowth(cell, "peak_rss_growth", cell.baseline_peak_rss_bytes,
                    cell.candidate_peak_rss_bytes, p.max_peak_rss_growth);
  CheckMemoryGrowth(cell, "arena_growth", cell.baseline_arena_bytes, cell.candidate_arena_bytes,
                    p.max_arena_growth);
}

void JudgePlacement(CellResult& cell, const PlacementPolicy& p,
                    const std::vector<const LoadedJob*>& base,
                    const std::vector<const LoadedJob*>& cand) {
  std::set<int64_t> delegated;  // nodes some baseline trial delegated
  for (const auto* j : base) {
    if (!j->placement) continue;
    for (const auto& n : j->placement->nodes) {
      if (n.delegate != "cpu") delegated.insert(n.index);
    }
  }
  std::set<int64_t> reported;
  for (const auto* j : cand) {
    if (!j->placement) continue;
    for (const auto& n : j->placement->nodes) {
      if (n.delegate != "cpu" || n.folded || delegated.count(n.index) == 0) continue;
      if (!reported.insert(n.index).second) continue;
      AddFinding(cell, "placement.fallback", "", static_cast<double>(n.index), 0,
                 p.fallback_is_failure,
                 "node " + std::to_string(n.index) + " (" + n.op +
                     ") was delegated in the baseline and runs on cpu now" +
                     (n.reason.empty() ? "" : ": " + n.reason));
    }
  }
}

// A candidate whose delegate took less than the whole graph: a finding that
// never fails, naming it. One that took no node ran the CPU path: its latency
// is not judged as the delegate's (FinishVerdict).
void NotePartialDelegation(CellResult& cell, const std::vector<const LoadedJob*>& cand) {
  std::vector<const store::JobRow*> rows;
  for (const auto* j : cand) rows.push_back(&j->row);
  const auto partial = store::PartialDelegationOf(rows);
  if (!partial) return;
  cell.delegation = partial->Label();
  cell.delegate_took_none = partial->TookNone();
  AddFinding(cell, "placement.partial", "", static_cast<double>(partial->delegated),
             static_cast<double>(partial->nodes), false,
             partial->Label() + (partial->TookNone()
                                     ? ": no node ran on " + partial->delegate +
                                           ", the latency is the CPU path's and is not judged"
                                     : ": the other nodes ran on the CPU, the latency is not " +
                                           partial->delegate + "'s alone"));
}

std::string FailedJobsText(const std::vector<LoadedJob>& jobs, size_t& count) {
  std::map<std::string, int> by_status;
  std::string first_error;
  for (const auto& j : jobs) {
    if (j.ok()) continue;
    ++count;
    ++by_status[j.row.status];
    if (first_error.empty() && !j.row.error.empty()) first_error = j.row.error;
  }
  std::string text;
  for (const auto& [status, n] : by_status) {
    text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  }
  if (!first_error.empty()) text += " (" + first_error.substr(0, 200) + ")";
  return text;
}

void JudgeFailures(CellResult& cell, const FailuresPolicy& p, const CellJobs& jobs,
                   bool has_baseline) {
  const std::string cand_text = FailedJobsText(jobs.candidate, cell.candidate_failed_jobs);
  FailedJobsText(jobs.baseline, cell.baseline_failed_jobs);
  if (cell.candidate_failed_jobs == 0) {
    if (has_baseline && cell.baseline_failed_jobs > 0 && !cell.candidate_jobs.empty() &&
        cell.baseline_jobs.empty()) {
      AddFinding(cell, "failures.fixed", "", 0, 0, false,
                 "every job failed in the baseline, the candidate's ran ok");
    }
    return;
  }
  const double value = static_cast<double>(cell.candidate_failed_jobs);
  if (!has_baseline) {
    AddFinding(cell, "failures.failed", "", value, 0, p.failed_alone_is_failure,
               "candidate jobs not ok: " + cand_text);
  } else if (!cell.baseline_jobs.empty()) {
    AddFinding(cell, "failures.ok_to_failed", "", value, 0, p.ok_to_failed_is_failure,
               "ok in the baseline, now: " + cand_text);
  } else {
    AddFinding(cell, "failures.still_failing", "", value, 0, false,
               "failed in the baseline too, now: " + cand_text);
  }
}

// ---- cells -----------------------------------------------------------------------

// The first ok trial of `jobs` with task accuracy, or nullptr.
const store::TaskAccuracy* FirstTask(const std::vector<LoadedJob>& jobs) {
  for (const LoadedJob& j : jobs) {
    if (j.ok() && j.task) return &*j.task;
  }
  return nullptr;
}

// One task-accuracy threshold: the paired drop from `from` to `to` in
// points, failing above the threshold across its interval, unknown when the
// interval straddles it.
void CheckTaskDrop(CellResult& cell, const TaskPolicy& p, const std::optional<double>& max,
                   const store::TaskAccuracy* from, const store::TaskAccuracy* to,
                   const std::string& metric, const char* against) {
  if (!max || from == nullptr || to == nullptr) return;
  // Each metric belongs to one task; a cell of another task is not judged by it.
  const char* task = metric.rfind("top", 0) == 0 ? "classification"
                     : metric == "map"           ? "detection"
                                                 : "segmentation";
  if (to->task != task) return;
  const std::string name =
      "task." + metric + "_drop" + (std::string(against) == "cpu" ? "_vs_cpu" : "");
  const auto d =
      eval::PairedTaskDrop(*from, *to, metric, p.confidence, p.bootstrap_resamples, p.seed);
  if (!d) {
    AddFinding(cell, name, "", 0, *max, false,
               std::string("not judged: the ") + against +
                   " cell's task accuracy is on another "
                   "labelled set (" +
                   from->dataset + " vs " + to->dataset + ")");
    return;
  }
  const bool fails = d->low > *max;
  const bool unknown = !fails && d->high > *max;
  cell.task_unknown = cell.task_unknown || unknown;
  const std::string shown = metric == "map"    ? "mAP"
                            : metric == "miou" ? "mIoU"
                                               : "top-" + metric.substr(3);
  AddFinding(cell, name, "", d->points, *max, fails,
             shown + " dropped " + Num(d->points) + " points against the " + against + " (" +
                 Num(d->low) + " to " + Num(d->high) + ", " + Num(100 * p.confidence) +
                 "% paired interval over " + std::to_string(to->images) + " images); allowed " +
                 Num(*max) +
                 (fails     ? ": fails"
                  : unknown ? ": unknown, the interval straddles it"
                            : ""));
}

// Policy "task": the candidate's task accuracy against the baseline cell and
// the same run's cpu cell.
void JudgeTask(CellResult& cell, const TaskPolicy& p, const CellJobs& jobs, const CellJobs* cpu) {
  const store::TaskAccuracy* cand = FirstTask(jobs.candidate);
  if (cand == nullptr) return;
  const store::TaskAccuracy* base = FirstTask(jobs.baseline);
  CheckTaskDrop(cell, p, p.max_top1_drop, base, cand, "top1", "baseline");
  CheckTaskDrop(cell, p, p.max_top5_drop, base, cand, "top5", "baseline");
  CheckTaskDrop(cell, p, p.max_map_drop, base, cand, "map", "baseline");
  CheckTaskDrop(cell, p, p.max_miou_drop, base, cand, "miou", "baseline");
  const store::TaskAccuracy* on_cpu = cpu != nullptr ? FirstTask(cpu->candidate) : nullptr;
  if (on_cpu == cand) return;
  CheckTaskDrop(cell, p, p.max_top1_drop_vs_cpu, on_cpu, cand, "top1", "cpu");
  CheckTaskDrop(cell, p, p.max_top5_drop_vs_cpu, on_cpu, cand, "top5", "cpu");
  CheckTaskDrop(cell, p, p.max_map_drop_vs_cpu, on_cpu, cand, "map", "cpu");
  CheckTaskDrop(cell, p, p.max_miou_drop_vs_cpu, on_cpu, cand, "miou", "cpu");
}

CellResult MakeCell(const store::Cell& key, const CellJobs& jobs) {
  CellResult cell;
  const LoadedJob& any = jobs.candidate.empty() ? jobs.baseline.front() : jobs.candidate.front();
  cell.cell = key;
  cell.cell.model = any.row.model;
  return cell;
}

bool AnyFailing(const CellResult& cell) {
  return std::any_of(cell.findings.begin(), cell.findings.end(),
                     [](const Finding& f) { return f.fails; });
}

// Everything but the latency verdict, which needs every cell's p-value first.
CellResult JudgeCell(const store::Cell& key, const CellJobs& jobs, const CellJobs* cpu,
                     const Policy& policy, bool alone, bool paired, LatencyInput& latency_out,
                     bool& latency_compared) {
  CellResult cell = MakeCell(key, jobs);
  const auto base = OkJobs(jobs.baseline), cand = OkJobs(jobs.candidate);
  for (const auto* j : base) cell.baseline_jobs.push_back(j->row.id);
  for (const auto* j : cand) cell.candidate_jobs.push_back(j->row.id);
  cell.baseline_peak_rss_bytes = MedianOf(base, &runner::Metrics::peak_rss_bytes);
  cell.candidate_peak_rss_bytes = MedianOf(cand, &runner::Metrics::peak_rss_bytes);
  cell.baseline_arena_bytes = MedianOf(base, &runner::Metrics::arena_bytes);
  cell.candidate_arena_bytes = MedianOf(cand, &runner::Metrics::arena_bytes);
  const bool has_baseline = !alone && !jobs.baseline.empty();
  if (jobs.candidate.empty()) {
    cell.verdict = Verdict::kMissing;
    cell.latency = Verdict::kMissing;
    return cell;
  }
  JudgeFailures(cell, policy.failures, jobs, has_baseline);
  JudgeAccuracy(cell, policy, has_baseline ? base : std::vector<const LoadedJob*>{}, cand);
  JudgeTask(cell, policy.task, jobs, cpu);
  latency_compared = false;
  if (has_baseline) {
    JudgeMemory(cell, policy.memory);
    JudgePlacement(cell, policy.placement, base, cand);
    if (!paired ||
        !PairedLatencyData(cell, base, cand, policy.latency.exclude_noisy, latency_out)) {
      latency_out = LatencyData(cell, base, cand, policy.latency.exclude_noisy);
    }
    latency_compared = CompareLatency(cell, latency_out, policy.latency);
  }
  NotePartialDelegation(cell, cand);
  return cell;
}

void FinishVerdict(CellResult& cell, bool alone, bool has_baseline, bool compared,
                   const Policy& policy) {
  if (cell.verdict == Verdict::kMissing) {
    if (policy.failures.missing_is_failure) {
      AddFinding(cell, "failures.missing", "", 0, 0, true,
                 "the baseline has this cell, the candidate does not");
      cell.verdict = Verdict::kFail;
    }
    return;
  }
  if (alone) {
    cell.latency = Verdict::kPass;  // not compared: judged alone
  } else if (!has_baseline) {
    cell.latency = Verdict::kNew;
  } else if (compared && !cell.delegate_took_none) {
    cell.latency = LatencyVerdict(cell, policy.latency);
  } else {
    cell.latency = Verdict::kUnknown;
  }
  if (AnyFailing(cell)) {
    cell.verdict = Verdict::kFail;
  } else if (cell.task_unknown) {
    cell.verdict = Verdict::kUnknown;  // a task-accuracy drop not settled either way
  } else if (alone) {
    cell.verdict = Verdict::kPass;
  } else if (!has_baseline) {
    cell.verdict = Verdict::kNew;
  } else if (!compared && cell.baseline_jobs.empty() && !cell.candidate_jobs.empty()) {
    cell.verdict = Verdict::kImproved;  // failed in the baseline, ok now (failures.fixed)
  } else {
    cell.verdict = cell.latency;
  }
}

Result<store::RunRow> CheckRun(store::Reader& store, int64_t run_id, const char* role) {
  auto run = store.GetRun(run_id);
  if (!run) {
    return MakeError(ErrorKind::kNotFound, std::string("no ") + role + " run " +
                                               std::to_string(run_id) + ": " + run.message() +
                                               " (see 'dfarm runs')");
  }
  return run;
}

void AddRunNotes(GateResult& result, const store::RunRow& run, const char* role) {
  if (run.status != store::kRunFinished) {
    result.notes.push_back(std::string(role) + " run " + std::to_string(run.id) + " is " +
                           run.status + ", not finished: its jobs that did not run count as " +
                           "failures");
  }
}

// Whether each side of `c` ran at least 2 trials (ok or not): then a side
// with fewer than 2 usable trials lost them to failures or noise, not to the
// spec's benchmark.repeats.
bool RanTwoTrialsASide(const CellResult& c) {
  return c.baseline_jobs.size() + c.baseline_failed_jobs >= 2 &&
         c.candidate_jobs.size() + c.candidate_failed_jobs >= 2;
}

// Cells whose trials are too few for the policy's alpha: "N cell(s) have 3
// trials a side: ..." (the smallest p, and the trials a side alpha needs).
void AddTrialCountNote(GateResult& result, const Policy& policy) {
  size_t short_cells = 0;
  double smallest = 0;
  std::string trials;
  for (const auto& c : result.cells) {
    if (c.paired || c.within_run_only || c.ratio <= 0 || c.smallest_p <= policy.latency.alpha) {
      continue;
    }
    if (++short_cells == 1) {
      smallest = c.smallest_p;
      trials = std::to_string(c.baseline_trials) + "/" + std::to_string(c.candidate_trials);
    }
  }
  if (short_cells == 0) return;
  const size_t needed = stats::ValuesPerSideForAlpha(policy.latency.alpha);
  char p[32], alpha[32];
  std::snprintf(p, sizeof p, "%.3g", smallest);
  std::snprintf(alpha, sizeof alpha, "%.3g", policy.latency.alpha);
  result.notes.push_back(
      std::to_string(short_cells) + " cell(s) have too few trials for a latency verdict: with " +
      trials + " trials (baseline/candidate) the smallest p is " + p + ", above alpha " + alpha +
      ", so their latency can only be pass or unknown" +
      (needed > 0
           ? "; " + std::to_string(needed) +
                 " trials a side are needed (benchmark.repeats >= " + std::to_string(needed) + ")"
           : ""));
}

// A paired gate's notes: what was paired, the cells whose pairs are too few
// for alpha (the smallest p of the signed-rank test, the pairs needed), and
// the cells left unpaired (fewer than 2 complete pairs).
void AddPairingNotes(GateResult& result, const Policy& policy) {
  if (result.paired_baseline_runner.empty()) return;
  result.notes.push_back(
      "paired: runner '" + result.paired_candidate_runner + "' against '" +
      result.paired_baseline_runner + "' of run " + std::to_string(result.candidate_run) +
      ", trial by trial on the same device (Wilcoxon signed-rank test of the log ratios of the "
      "pairs' trial medians; ratio: the median of the paired ratios)");
  size_t short_cells = 0, unpaired = 0, pairs = 0;
  double smallest = 1;
  for (const auto& c : result.cells) {
    const bool compared = c.latency != Verdict::kNew && c.latency != Verdict::kMissing;
    unpaired += compared && !c.paired && !c.candidate_jobs.empty() ? 1 : 0;
    if (!c.paired || c.smallest_p <= policy.latency.alpha) continue;
    if (++short_cells == 1) {
      smallest = c.smallest_p;
      pairs = c.pairs;
    }
  }
  if (short_cells > 0) {
    char p[32], alpha[32];
    std::snprintf(p, sizeof p, "%.3g", smallest);
    std::snprintf(alpha, sizeof alpha, "%.3g", policy.latency.alpha);
    const size_t needed = stats::PairsForAlpha(policy.latency.alpha);
    result.notes.push_back(
        std::to_string(short_cells) + " paired cell(s) have too few pairs for a latency verdict: " +
        "with " + std::to_string(pairs) + " pairs the smallest p is " + p + ", above alpha " +
        alpha + ", so their latency can only be pass or unknown" +
        (needed > 0 ? "; " + std::to_string(needed) +
                          " pairs are needed (benchmark.repeats >= " + std::to_string(needed) + ")"
                    : ""));
  }
  if (unpaired > 0) {
    result.notes.push_back(std::to_string(unpaired) +
                           " cell(s) have fewer than 2 complete pairs (both trials ok, on one "
                           "device): judged unpaired");
  }
}

void AddSummaryNotes(GateResult& result, const Policy& policy) {
  size_t within = 0, within_lost = 0, unknown = 0, missing = 0, compared = 0, undelegated = 0;
  for (const auto& c : result.cells) {
    const bool w = c.within_run_only && c.candidate_trials > 0;
    within += w && !RanTwoTrialsASide(c) ? 1 : 0;
    within_lost += w && RanTwoTrialsASide(c) ? 1 : 0;
    // Cells unknown because their delegate took no node are counted apart:
    // a rerun does not change them.
    unknown += c.verdict == Verdict::kUnknown && !c.delegate_took_none ? 1 : 0;
    undelegated += c.verdict == Verdict::kUnknown && c.delegate_took_none ? 1 : 0;
    missing += c.verdict == Verdict::kMissing ? 1 : 0;
    compared += c.latency != Verdict::kNew && c.latency != Verdict::kMissing ? 1 : 0;
  }
  if (within > 0) {
    result.notes.push_back(std::to_string(within) +
                           " cell(s) have fewer than 2 trials on a side: their latency verdict "
                           "rests on within-run samples only, which understate run-to-run noise "
                           "(set benchmark.repeats >= 2 in the spec)");
  }
  if (within_lost > 0) {
    result.notes.push_back(std::to_string(within_lost) +
                           " cell(s) ran 2 or more trials a side but kept fewer than 2 usable "
                           "ones (the others failed or were noisy): their latency verdict rests "
                           "on within-run samples only");
  }
  AddTrialCountNote(result, policy);
  AddPairingNotes(result, policy);
  if (unknown > 0) {
    result.notes.push_back(std::to_string(unknown) +
                           " cell(s) unknown: not enough evidence either way (rerun them with "
                           "--rerun-unknown K)");
  }
  if (undelegated > 0) {
    result.notes.push_back(std::to_string(undelegated) +
                           " cell(s) unknown because their delegate took no node: their latency "
                           "is the CPU path's, not the delegate's (a rerun does not change that)");
  }
  if (missing > 0) {
    result.notes.push_back(std::to_string(missing) + " baseline cell(s) missing in the candidate" +
                           (policy.failures.missing_is_failure ? " (failing: policy)" : ""));
  }
  if (result.baseline_run != 0 && compared == 0) {
    result.notes.push_back(
        "no cell of the candidate matches one of the baseline: every cell is "
        "judged alone against the CPU reference");
  }
}

// Jobs still queued or running in the candidate: recorded as the not-ok status they are.
void MarkUnfinished(std::map<store::Cell, CellJobs>& cells) {
  for (auto& [key, jobs] : cells) {
    for (auto& j : jobs.candidate) {
      if (!store::IsFinalJobStatus(j.row.status))
        j.row.error = "did not run (" + j.row.status + ")";
    }
  }
}

// ---- pairing ---------------------------------------------------------------------

struct RunPairing {
  std::string baseline, candidate;  // runner names
};

// The pairing of a run's stored spec ("pairing": {"baseline_runner": B}, and
// the other of its two "runners"); nullopt when the run is not paired.
std::optional<RunPairing> PairingOf(const store::RunRow& run) {
  const nlohmann::json doc = nlohmann::json::parse(run.spec_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("pairing") || !doc["pairing"].is_object() ||
      !doc.contains("runners") || !doc["runners"].is_array()) {
    return std::nullopt;
  }
  const nlohmann::json& b = doc["pairing"].value("baseline_runner", nlohmann::json());
  if (!b.is_string()) return std::nullopt;
  RunPairing out{b.get<std::string>(), ""};
  for (const nlohmann::json& r : doc["runners"]) {
    if (!r.is_object() || !r.contains("name") || !r["name"].is_string()) continue;
    if (r["name"] != out.baseline) out.candidate = r["name"].get<std::string>();
  }
  if (out.candidate.empty()) return std::nullopt;
  return out;
}

// Whether the gate judges pairs (Policy::paired, docs/gate.md): when it does,
// `policy`'s runners become the pairing's. Errors: --paired where it cannot be.
Result<bool> ResolvePairing(const store::RunRow& candidate, int64_t baseline_run, bool with_reruns,
                            Policy& policy) {
  if (policy.paired == false) return false;
  const bool required = policy.paired == true;
  const std::string run = "run " + std::to_string(candidate.id);
  auto fail = [&](const std::string& why) -> Result<bool> {
    if (!required) return false;
    return MakeError(ErrorKind::kInvalidInput, "--paired: " + why);
  };
  const std::optional<RunPairing> pairing = PairingOf(candidate);
  if (!pairing) {
    return fail(run + " is not paired (its spec has no \"pairing\"); sweep a spec with " +
                "\"pairing\": {\"baseline_runner\": NAME} and two runners (docs/gate.md)");
  }
  if (baseline_run != candidate.id) {
    return fail("the baseline is the paired run itself (" + run + "), not run " +
                std::to_string(baseline_run));
  }
  if (with_reruns) return fail("reruns (--rerun-unknown) are not paired yet");
  if (!policy.baseline_runner.empty() && policy.baseline_runner != pairing->baseline) {
    return fail("--baseline-runner '" + policy.baseline_runner + "' is not " + run +
                "'s pairing baseline '" + pairing->baseline + "'");
  }
  if (!policy.candidate_runner.empty() && policy.candidate_runner != pairing->candidate) {
    return fail("--candidate-runner '" + policy.candidate_runner + "' is not " + run +
                "'s paired candidate '" + pairing->candidate + "'");
  }
  policy.baseline_runner = pairing->baseline;
  policy.candidate_runner = pairing->candidate;
  return true;
}

}  // namespace

Result<GateResult> RunGate(store::Reader& store, int64_t candidate_run, int64_t baseline_run,
                           const Policy& policy) {
  return RunGate(store, candidate_run, {}, baseline_run, policy);
}

Result<GateResult> RunGate(store::Reader& store, int64_t candidate_run,
                           const std::vector<int64_t>& extra_candidate_runs, int64_t baseline_run,
                           const Policy& given_policy) {
  GateResult result;
  result.candidate_run = candidate_run;
  result.baseline_run = baseline_run;
  result.extra_candidate_runs = extra_candidate_runs;
  const bool alone = baseline_run == 0;
  Policy policy = given_policy;
  bool paired = false;
  if (!alone) {
    auto run = CheckRun(store, candidate_run, "candidate");
    if (!run) return run.error();
    auto resolved = ResolvePairing(*run, baseline_run, !extra_candidate_runs.empty(), policy);
    if (!resolved) return resolved.error();
    paired = *resolved;
    if (paired) {
      result.paired_baseline_runner = policy.baseline_runner;
      result.paired_candidate_runner = policy.candidate_runner;
    }
  }
  std::map<store::Cell, CellJobs> cells;
  for (int64_t id : [&] {
         std::vector<int64_t> ids{candidate_run};
         ids.insert(ids.end(), extra_candidate_runs.begin(), extra_candidate_runs.end());
         return ids;
       }()) {
    auto run = CheckRun(store, id, "candidate");
    if (!run) return run.error();
    AddRunNotes(result, *run, "candidate");
    if (auto r = LoadRun(store, id, false, policy, cells); !r) return r.error();
  }
  if (!alone) {
    auto run = CheckRun(store, baseline_run, "baseline");
    if (!run) return run.error();
    if (auto r = LoadRun(store, baseline_run, true, policy, cells); !r) return r.error();
  }
  MarkUnfinished(cells);
  bool any_candidate = false;
  for (const auto& [key, jobs] : cells) any_candidate = any_candidate || !jobs.candidate.empty();
  if (!any_candidate) {
    return MakeError(ErrorKind::kInvalidInput,
                     "candidate run " + std::to_string(candidate_run) + " has no jobs to judge");
  }
  std::vector<bool> compared(cells.size(), false), has_baseline(cells.size(), false);
  std::vector<double> p_values;
  std::vector<size_t> p_cells;
  for (const auto& [key, jobs] : cells) {
    LatencyInput latency;
    bool cmp = false;
    store::Cell cpu_key = key;
    cpu_key.delegate = "cpu";
    cpu_key.delegate_options.clear();
    const auto cpu = cells.find(cpu_key);
    result.cells.push_back(JudgeCell(key, jobs, cpu == cells.end() ? nullptr : &cpu->second, policy,
                                     alone, paired, latency, cmp));
    const size_t i = result.cells.size() - 1;
    compared[i] = cmp;
    has_baseline[i] = !alone && !jobs.baseline.empty();
    if (cmp) {
      p_values.push_back(result.cells[i].p_value);
      p_cells.push_back(i);
    }
  }
  const auto q = stats::BenjaminiHochberg(p_values);
  for (size_t k = 0; k < p_cells.size(); ++k) result.cells[p_cells[k]].q_value = q[k];
  bool any_common = false;
  result.passed = true;
  for (size_t i = 0; i < result.cells.size(); ++i) {
    auto& c = result.cells[i];
    FinishVerdict(c, alone, has_baseline[i], compared[i], policy);
    any_common = any_common || (has_baseline[i] && !c.candidate_jobs.empty());
    if (FailsGate(c.verdict)) result.passed = false;
  }
  AddSummaryNotes(result, policy);
  if (!alone && !any_common && result.passed) {
    return MakeError(ErrorKind::kInvalidInput,
                     "no comparable cell: no cell of candidate run " +
                         std::to_string(candidate_run) + " ran ok in baseline run " +
                         std::to_string(baseline_run) +
                         " (same model sha256, delegate, options, threads, runner and device "
                         "or device class), and nothing failed on its own");
  }
  return result;
}

}  // namespace dfarm::gate
