// Figures as reports print them. Internal to reports/.
#pragma once

#include <cstdint>
#include <string>

#include "reports/store/store.h"

namespace dfarm::reports {

std::string Ms(double us);                            // "12.35"
std::string MiB(int64_t bytes);                       // "41.2"
std::string PeakRssMiB(int64_t bytes);                // MiB, or "-" when unknown (0)
std::string DelegateLabel(const store::JobRow& job);  // "cpu" or "cpu (k:v)"
std::string Fixed(double v, int decimals);            // "%.*f"
std::string Sig(double v);                            // "%.3g"

// `s` with every control character (C0, DEL; also C1 in UTF-8) replaced by a
// space; newlines and tabs are kept when `keep_lines`.
std::string Printable(const std::string& s, bool keep_lines = false);

// A Markdown table cell or inline text: control characters and newlines
// become spaces; pipes, backslashes and Markdown/HTML punctuation are escaped.
std::string Md(const std::string& s);

struct JobCounts {
  size_t total = 0, ok = 0, failed = 0, pending = 0;
};
JobCounts CountJobs(const std::vector<store::JobRow>& jobs);

}  // namespace dfarm::reports
