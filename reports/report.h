// Reports over one run of the store. One renderer per file (markdown.cc,
// html.cc; JUnit, JSON and CSV later), all over the same RunReport.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/store.h"

namespace dfarm::reports {

struct RunReport {
  store::RunRow run;
  std::vector<store::JobRow> jobs;  // in job id order
  // Each job's outputs against the reference (store output_accuracy), by job
  // id; jobs without a comparison are absent.
  std::map<int64_t, store::Accuracy> accuracy;
};

// Reads a run and its jobs from `store`.
Result<RunReport> LoadRunReport(store::Store& store, int64_t run_id);

// The accuracy rows of `jobs` (RunReport::accuracy), by job id.
Result<std::map<int64_t, store::Accuracy>> LoadAccuracy(store::Store& store,
                                                        const std::vector<store::JobRow>& jobs);

// "12/40 on example" (delegated/all nodes, the delegates that ran them) or
// "all 40 on cpu"; nodes folded at load count apart, not as fallbacks:
// "90/90 on xnnpack (+74 constants folded at load)". Empty when the job has
// no placement.
std::string PlacementLabel(const store::JobRow& job);

// The largest error of a job's outputs against the reference: "6.9e-05",
// "0.0039 (1 LSB)" when the worst output is quantized, "NaN/Inf" when an
// output had non-finite values the reference did not; empty without a comparison.
std::string AccuracyLabel(const RunReport& report, const store::JobRow& job);
std::string AccuracyLabel(const store::Accuracy& accuracy);
// The largest finite max_abs_error of the outputs; unset when there is none.
std::optional<double> MaxAbsError(const store::Accuracy& accuracy);

// "hot", "throttled", "hot, throttled", or empty when the agent flagged neither.
std::string DeviceStateFlags(const store::JobRow& job);

enum class Format { kMarkdown, kHtml };

// "md"/"markdown" or "html"; the error lists the formats.
Result<Format> ParseFormat(const std::string& name);

std::string RenderMarkdown(const RunReport& report);
std::string RenderHtml(const RunReport& report);  // self-contained, every string escaped
std::string Render(const RunReport& report, Format format);

// Renders and writes `path` (replacing it); the error names the file.
Result<void> WriteReport(const RunReport& report, Format format, const std::string& path);

}  // namespace dfarm::reports
