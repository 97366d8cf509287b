// The release gate: compares a candidate run with a baseline run cell by cell
// (latency, accuracy, memory, placement, failures) under a Policy, and renders
// the verdicts for people (text, Markdown) and CI (JUnit XML, JSON).
// docs/gate.md describes the method; docs/CONTRACTS.md the JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "reports/gate/policy.h"
#include "reports/gate/verdict.h"
#include "reports/store/store.h"

namespace dfarm::gate {

struct Finding {
  std::string
      metric;  // "accuracy.max_abs_error", "memory.peak_rss_growth", "placement.fallback", ...
  std::string output;  // output name (accuracy), else empty
  double value = 0;
  double threshold = 0;
  bool fails = false;
  std::string message;  // one line a person reads
};

struct CellResult {
  // device: the device class the policy puts the device in (else the device);
  // runner: "A vs B" when the policy pairs two runners. Label() names it.
  store::Cell cell;
  std::vector<int64_t> baseline_jobs, candidate_jobs;  // ok jobs used, all trials
  // Latency (trial statistic = median of the trial's samples).
  double baseline_median_us = 0, candidate_median_us = 0, ratio = 0, ci_low = 0, ci_high = 0;
  double p_value = 1, q_value = 1;
  // The smallest p the values compared could give (stats::SmallestMannWhitneyP):
  // above the policy's alpha, latency can never be regressed or improved.
  double smallest_p = 1;
  size_t baseline_trials = 0, candidate_trials = 0;
  bool within_run_only = false;  // one trial per side: verdict from the samples of one trial
  // Paired (a paired run judged paired, with at least 2 complete pairs):
  // p from the Wilcoxon signed-rank test of the pairs' log ratios, ratio and
  // interval the median of the paired ratios and its bootstrap interval,
  // smallest_p stats::SmallestSignedRankP; pairs = baseline_trials =
  // candidate_trials.
  bool paired = false;
  size_t pairs = 0;
  // Ok trials left out of the latency comparison as noisy (policy
  // latency.exclude_noisy), both sides.
  size_t noisy_trials_excluded = 0;
  Verdict latency = Verdict::kUnknown;
  std::vector<Finding> findings;        // accuracy, memory, placement, failure findings
  Verdict verdict = Verdict::kUnknown;  // the cell's overall verdict
  // Figures beside the verdicts (dfarm compare): medians over the ok trials
  // (0 when unknown) and the worst max_abs_error over outputs and trials
  // against the CPU reference (NaN when the jobs compared none).
  int64_t baseline_peak_rss_bytes = 0, candidate_peak_rss_bytes = 0;
  int64_t baseline_arena_bytes = 0, candidate_arena_bytes = 0;
  double baseline_max_abs_error = std::numeric_limits<double>::quiet_NaN();
  double candidate_max_abs_error = std::numeric_limits<double>::quiet_NaN();
  size_t baseline_failed_jobs = 0, candidate_failed_jobs = 0;  // jobs not ok (any final status)
  // When the candidate's delegate took less than the whole graph: its
  // store::PartialDelegation::Label() ("xnnpack: 0 of 60 nodes (...)"), else
  // "". delegate_took_none: it took no node, so the latency is the CPU
  // path's and its latency verdict is unknown (docs/gate.md).
  std::string delegation;
  bool delegate_took_none = false;
  // A task-accuracy drop (policy "task") whose interval straddles its
  // threshold: the cell is unknown unless something fails.
  bool task_unknown = false;
};

struct GateResult {
  int64_t candidate_run = 0, baseline_run = 0;  // baseline_run 0: the candidate judged alone
  std::vector<int64_t> extra_candidate_runs;    // reruns combined with the candidate
  std::vector<CellResult> cells;
  // The pairing used (Policy::paired): candidate_runner's jobs against
  // baseline_runner's, pair by pair, in the one run. Empty when unpaired.
  std::string paired_baseline_runner, paired_candidate_runner;
  bool passed = false;             // no cell fails or is regressed
  std::vector<std::string> notes;  // e.g. "verdicts rest on within-run samples only"
};

// Judges candidate_run against baseline_run (0: the candidate alone, see
// docs/gate.md). Errors: no such run (kNotFound), no comparable cell
// (kInvalidInput), the store failed (kFailed); policy.paired true on a run
// that is not paired, or with another baseline run or other runners
// (kInvalidInput).
Result<GateResult> RunGate(store::Reader& store, int64_t candidate_run, int64_t baseline_run,
                           const Policy& policy);
// Same, with the jobs of extra_candidate_runs (reruns) added to the candidate's trials.
Result<GateResult> RunGate(store::Reader& store, int64_t candidate_run,
                           const std::vector<int64_t>& extra_candidate_runs, int64_t baseline_run,
                           const Policy& policy);

// What a gate result comes to in one word, as the HTML report's banner
// colours it (reports::HealthOf): failed (a cell fails the gate: red),
// inconclusive (none fails but a cell is unknown or missing: not enough data
// to pass, neutral), passed (every cell judged and none fails: green).
enum class GateOutcome { kPassed, kInconclusive, kFailed };
GateOutcome OutcomeOf(const GateResult& result);
const char* OutcomeName(GateOutcome outcome);  // "passed", "inconclusive", "failed"
// The gate's count line, as its text and JUnit renderings end: "6 cell(s);
// 2 fail the gate (2 fail); 4 do not (4 unknown)".
std::string GateCounts(const GateResult& result);

std::string RenderGateText(const GateResult& result);
std::string RenderGateMarkdown(const GateResult& result);
std::string RenderGateJunit(const GateResult& result);
std::string RenderGateJson(const GateResult& result);

}  // namespace dfarm::gate
