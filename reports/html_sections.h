// The later sections of the HTML report (html.cc draws the summary, the
// verdicts, the heatmap and the distributions). Internal to reports/.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "reports/report.h"

namespace dfarm::reports {

// Escaped for HTML text and attribute values alike; control characters
// other than newline and tab become spaces.
std::string HtmlEscape(const std::string& s);
// "st st-ok", "st st-fail" or "st st-pending" for a job or run status.
const char* HtmlStatusClass(const std::string& status);

void AccuracySection(std::ostringstream& h, const RunReport& report,
                     const std::vector<CellGroup>& cells);
void PlacementSection(std::ostringstream& h, const RunReport& report,
                      const std::vector<CellGroup>& cells);
// The top op types of each profiled cell (spec benchmark.profile); nothing
// when the run has no profile.
void ProfileSection(std::ostringstream& h, const RunReport& report,
                    const std::vector<CellGroup>& cells);
// Sustained-mode jobs (spec benchmark.sustained_s; sustained.cc): first and
// last window, change, temperature and the curve; nothing when the run has
// none.
void SustainedSection(std::ostringstream& h, const RunReport& report,
                      const std::vector<CellGroup>& cells);
// Task accuracy (task_accuracy.cc): per job with an eval, top-1 and top-k with
// their intervals and the paired change against the same run's cpu job;
// nothing when the run has none. TaskAccuracyTable is the Markdown form.
void TaskAccuracySection(std::ostringstream& h, const RunReport& report,
                         const std::vector<CellGroup>& cells);
void TaskAccuracyTable(std::ostringstream& md, const RunReport& report,
                       const std::vector<CellGroup>& cells);
// Delegate init and fp16 cost (delegate_init.cc): per model, each
// cell's latency, first inference, cold and warm init, worst error and the
// accuracy cost of reduced precision; nothing when the run has none.
void DelegateInitSection(std::ostringstream& h, const RunReport& report,
                         const std::vector<CellGroup>& cells);
// Every job (in cell order, by trial) with its noise flags: the load and
// temperature before it, hot, throttled.
void JobsSection(std::ostringstream& h, const RunReport& report,
                 const std::vector<CellGroup>& cells);
void EnvironmentSection(std::ostringstream& h, const RunReport& report);
void FailuresSection(std::ostringstream& h, const RunReport& report);

}  // namespace dfarm::reports
