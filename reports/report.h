// Reports over one run of the store. One renderer per file (markdown.cc,
// html.cc, table.cc for JSON and CSV), all over the same RunReport; the
// formats and which renderer each uses are one table (formats.h). JUnit is the
// gate's (reports/gate, RenderGateJunit).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "nlohmann/json_fwd.hpp"
#include "reports/formats.h"
#include "reports/gate/verdict.h"
#include "reports/store/delegation.h"
#include "reports/store/store.h"

namespace dfarm::reports {

// A latency distribution summarised into quantiles (linear interpolation
// between closest ranks), so a report draws it without every sample.
struct SampleSummary {
  size_t count = 0;
  double min = 0, p05 = 0, p25 = 0, p50 = 0, p75 = 0, p95 = 0, max = 0, mean = 0;
};
// Quantiles of `samples_us` (any order); count 0 for none.
SampleSummary Summarize(std::vector<double> samples_us);

// The trials of one cell of a run (store::Cell, reports/store/cell.h), which
// names it: Label() wherever a report shows the cell.
struct CellGroup {
  store::Cell cell;          // model: the file name of the cell's newest job
  std::vector<size_t> jobs;  // indices into RunReport::jobs, in trial order
  // The pooled samples of the cell's ok trials (count 0 without any).
  SampleSummary latency;
};
// The cells of `jobs` (latency unset), by model file name, the model's cpu
// cells first, then in Cell order.
std::vector<CellGroup> GroupCells(const std::vector<store::JobRow>& jobs);

// One cell's verdict from the release gate (`--baseline`), as the
// renderers show it. The gate's other types stay in reports/gate: the CLI
// converts its CellResult into this (the verdicts are the gate's own enum).
struct CellVerdict {
  store::Cell cell;  // the gate's cell (device: its device class, if any)
  gate::Verdict verdict = gate::Verdict::kUnknown;
  gate::Verdict latency_verdict = gate::Verdict::kUnknown;
  double baseline_median_us = 0, candidate_median_us = 0, ratio = 0, ci_low = 0, ci_high = 0;
  double p_value = 1, q_value = 1;
  size_t baseline_trials = 0, candidate_trials = 0;
  bool within_run_only = false;
  std::vector<std::string> findings;   // the failing findings, one line each
  std::vector<std::string> passed;     // the findings within their thresholds
  std::vector<int64_t> baseline_jobs;  // the baseline's ok jobs the gate used, all trials
};
struct Comparison {
  int64_t baseline_run = 0;
  std::string baseline_name;
  bool passed = false;
  std::vector<CellVerdict> cells;
  std::vector<std::string> notes;
  // The baseline run's task accuracy (store ListRunTaskAccuracy), by job id:
  // the task table shows each cell's baseline beside it.
  std::map<int64_t, store::TaskAccuracy> baseline_task{};
};

struct RunReport {
  store::RunRow run;
  std::vector<store::JobRow> jobs;  // in job id order
  // Each job's outputs against the reference (store output_accuracy), by job
  // id; jobs without a comparison are absent.
  std::map<int64_t, store::Accuracy> accuracy;
  // Filled by LoadRunReport (renderers cope with them empty):
  std::vector<CellGroup> cells{};              // GroupCells(jobs) with latency
  std::map<int64_t, SampleSummary> samples{};  // each job's own samples, by job id
  std::map<int64_t, std::vector<store::TelemetryRow>> telemetry{};  // by job id
  std::map<int64_t, std::string> stderr_tails{};  // failed jobs' runner stderr (last lines)
  std::vector<store::DeviceRow> devices{};        // the devices the run's jobs name
  std::vector<std::pair<std::string, std::string>> runner_builds{};  // (host path, sha256)
  std::optional<Comparison> comparison{};  // set by the caller for `--baseline`
  // Per-op profiles (spec benchmark.profile; store ListRunProfiles): runs and
  // by_op of each profiled job, by job id; absent for the others.
  std::map<int64_t, store::JobProfile> profiles{};
  // Sustained-mode curves (spec benchmark.sustained_s; store
  // ListRunSustained), by job id; absent for the other jobs.
  std::map<int64_t, store::JobSustained> sustained{};
  // Task accuracy on a labelled set (spec "eval"; store
  // ListRunTaskAccuracy), by job id; absent for the other jobs.
  std::map<int64_t, store::TaskAccuracy> task{};
};

// Reads a run, its jobs, their accuracy, samples (summarised), telemetry,
// failed jobs' stderr tails, devices and runner builds from `store`.
Result<RunReport> LoadRunReport(store::Reader& store, int64_t run_id);

// The accuracy rows of `jobs` (RunReport::accuracy), by job id.
Result<std::map<int64_t, store::Accuracy>> LoadAccuracy(store::Reader& store,
                                                        const std::vector<store::JobRow>& jobs);

// "12/40 on example" (delegated/all nodes, the delegates that ran them) or
// "all 40 on cpu"; nodes folded at load count apart, not as fallbacks:
// "90/90 on xnnpack (+74 constants folded at load)"; "none delegated" for a
// placement without nodes (a tool's log that counts none). Empty when the job has
// no placement.
std::string PlacementLabel(const store::JobRow& job);

// The largest error of a job's outputs against the reference: "6.9e-05",
// "0.0039 (1 LSB)" when the worst output is quantized, "NaN/Inf" when an
// output had non-finite values the reference did not; empty without a comparison.
std::string AccuracyLabel(const RunReport& report, const store::JobRow& job);
std::string AccuracyLabel(const store::Accuracy& accuracy);
// The largest finite max_abs_error of the outputs; unset when there is none.
std::optional<double> MaxAbsError(const store::Accuracy& accuracy);

// Per-op profiles (profiles.cc). The time per op type of a cell: each op's
// total_us and pct averaged over the cell's profiled trials (count as the
// first trial that has the op lists it), largest total first; empty when no
// trial of the cell has a profile.
std::vector<store::ProfileOp> CellProfileOps(const RunReport& report, const CellGroup& cell);
// The number of the cell's trials with a profile.
size_t CellProfiledTrials(const RunReport& report, const CellGroup& cell);
// "CONV_2D 62.1%, DELEGATE 30.0%, ADD 5.2%": the first `n` of `ops` (in
// their order); empty when there are none.
std::string TopOpsLabel(const std::vector<store::ProfileOp>& ops, size_t n = 3);

// Task accuracy (task_accuracy.cc). A metric as people read it: "97.5%
// (94.2-99.2)", the value and its 95% interval in percent.
std::string TaskMetricText(const store::TaskMetric& metric);
// A metric's name as people read it: "top-1", "top-5", "mAP@[.5:.95]",
// "mAP@.5", "mAP@.75", "AR@100", "mIoU", "pixel accuracy"; others as named.
std::string TaskMetricLabel(const std::string& name);
// One job's task accuracy as `dfarm show --json` and reports write it:
// {"task","dataset","images","metrics":[{"name","value","low","high"}]}
// (bounds null when unknown).
nlohmann::json TaskAccuracyJson(const store::TaskAccuracy& task);
// The same run's cpu job of `job`'s cell (same model, inputs, device,
// runner, threads and trial, delegate cpu without options) that has task
// accuracy on the same set; nullptr when there is none or `job` is it.
const store::TaskAccuracy* CpuTaskOf(const RunReport& report, const store::JobRow& job);
// The baseline's task accuracy of `job`'s cell (report.comparison: the first
// of the cell's baseline jobs with task accuracy, as the gate judges it);
// nullptr without a comparison or when the baseline cell has none.
const store::TaskAccuracy* BaselineTaskOf(const RunReport& report, const store::JobRow& job);

// A sustained-mode job's curve in brief (sustained.cc): the p50 of its first
// and last windows, the change between them, the slowest window, and the
// hottest thermal zone at the first reading and at its peak (unset without
// thermal readings).
struct SustainedSummary {
  double secs = 0;
  double window_ms = 0;
  size_t windows = 0;
  double first_p50_us = 0;
  double last_p50_us = 0;
  double change_pct = 0;  // last vs first window, percent
  double slowest_p50_us = 0;
  double slowest_t_s = 0;  // the slowest window's start
  std::optional<double> start_temp_c;
  std::optional<double> peak_temp_c;
};
// Unset for a job without a curve (or with no window).
std::optional<SustainedSummary> SummarizeSustained(const RunReport& report,
                                                   const store::JobRow& job);
// The curve alone (no temperatures: start/peak unset); unset with no window.
std::optional<SustainedSummary> SummarizeCurve(const store::JobSustained& curve);
// A job's hottest thermal zone over time from its telemetry rows (before,
// during..., after; any order): (seconds after the first reading, C), rows
// without a temperature left out.
std::vector<std::pair<double, double>> HottestZoneOverTime(std::vector<store::TelemetryRow> rows);

// delegate_init.cc: "Delegate init and fp16 cost". The GPU of a
// device as its agent reported it (store::OpenClDeviceLabel of the run's
// DeviceRow): "NAME (driver V)", empty when it has no OpenCL device.
std::string GpuDeviceLabel(const RunReport& report, const std::string& device);
// True when the job's delegate options ask for reduced precision:
// precision_loss_allowed (gpu) or fp16 (xnnpack) set to true or 1.
bool IsReducedPrecision(const store::JobRow& job);
// One output's accuracy cost of reduced precision: the worst max abs error
// against the reference over the fp16 cell's trials and over its twin's (the
// same delegate, model, device, threads and runner without the option).
struct OutputCost {
  int64_t index = 0;
  std::string name;
  double fp16_max_abs_error = 0;
  double fp32_max_abs_error = 0;
  double cost = 0;  // fp16 - fp32
};
// One cell of the section: figures are means over the cell's ok trials;
// cold and warm init over the trials that measured them.
struct InitCell {
  size_t cell = 0;  // index into the cells given
  std::string model;
  std::string config;  // store::ConfigLabel
  std::string device;
  std::string gpu;  // GpuDeviceLabel, "" for none
  std::optional<double> mean_us, first_us, init_us, init_cold_us, init_warm_us;
  std::optional<double> max_abs_error;  // worst output, worst trial
  bool reduced_precision = false;
  std::optional<size_t> twin;     // the cell without reduced precision, when there is one
  std::vector<OutputCost> costs;  // per output; empty without a twin or comparisons
};
// Every cell of each model that has a cell with a cold or warm init or
// reduced precision, in cell order; empty when the run has none.
std::vector<InitCell> DelegateInitCells(const RunReport& report,
                                        const std::vector<CellGroup>& cells);
// (device, GPU) of the devices of `rows` that have an OpenCL device, by name.
std::vector<std::pair<std::string, std::string>> SectionGpus(const std::vector<InitCell>& rows);

// "noisy", "hot", "throttled" joined by ", " ("hot, throttled"), or empty
// when the job was flagged none of them.
std::string DeviceStateFlags(const store::JobRow& job);

// The run's matrix as the HTML heatmap and the dashboard lay it out: one row
// per (model, store::ConfigLabel) in the order of `cells`, devices as columns
// in first appearance order; each row's index into `cells` per device, -1 for
// none.
struct MatrixRow {
  std::string model;
  std::string config;
  std::vector<int> cells;  // by column of CellMatrix::devices
};
struct CellMatrix {
  std::vector<std::string> devices;
  std::vector<MatrixRow> rows;
};
CellMatrix LayoutMatrix(const std::vector<CellGroup>& cells);
// Background and text colour ("#rrggbb") of a speed-up: blue when faster than
// cpu, orange when slower, white near 1 (log2 scale, saturating at 4x).
std::pair<std::string, std::string> SpeedupColours(double speedup);

// The median latency of a cell (its pooled samples' p50, else the median of
// its ok trials' p50); unset when no trial is ok.
std::optional<double> CellMedianUs(const RunReport& report, const CellGroup& cell);
// The cell's trial whose delegate took the fewest nodes, when it took less
// than the whole graph (store::PartialDelegation, whose Label() every view
// shows beside the cell's latency); unset for a cpu cell or a whole one.
std::optional<store::PartialDelegation> CellPartialDelegation(const RunReport& report,
                                                              const CellGroup& cell);
// The cell's latency speed-up against the cpu cell of the same model, device,
// threads and runner (cpu median / this median); unset without both.
std::optional<double> SpeedupVsCpu(const RunReport& report, const std::vector<CellGroup>& cells,
                                   const CellGroup& cell);

// A run is "green" only when it finished, every job is ok and, with a
// baseline, the gate passed.
enum class RunHealth { kGreen, kAmber, kRed };
RunHealth HealthOf(const RunReport& report);

// The run renderers of formats.inc. Json: {"run":{...},"jobs":[rows]}; Csv: a
// header and one row per job (docs/CONTRACTS.md, "Reports").
std::string RenderMarkdown(const RunReport& report);
std::string RenderHtml(const RunReport& report);  // self-contained, every string escaped
std::string RenderJson(const RunReport& report);
std::string RenderCsv(const RunReport& report);

// The column names of RenderCsv (and the keys of a JSON row), in order.
const std::vector<std::string>& TableColumns();

// Writes `text` to `path` (replacing it); the error names the file.
Result<void> WriteText(const std::string& text, const std::string& path);
// Renders and writes `path` (replacing it); the error names the file.
Result<void> WriteReport(const RunReport& report, Format format, const std::string& path);

}  // namespace dfarm::reports
