// The report formats: one table (formats.inc) says, for each, the names
// --format takes, what `dfarm report` writes of a run and what `dfarm gate`
// writes of a gate result. Parsing, the error that lists the formats and the
// CLI's --format help come from it.
//
// Adding a format:
//   1. its renderer(s) in a file of their own: a run renderer
//      `std::string RenderX(const RunReport&)` declared with the others in
//      report.h, and/or a gate renderer (reports/gate/gate.h);
//   2. one row in formats.inc;
//   3. the new file in reports/CMakeLists.txt.
#pragma once

#include <span>
#include <string>

#include "agent/base/result.h"

namespace dfarm::gate {
struct GateResult;
}  // namespace dfarm::gate

namespace dfarm::reports {

struct RunReport;

enum class Format {
#define DFARM_REPORT_FORMAT(Name, ...) k##Name,
#include "reports/formats.inc"
#undef DFARM_REPORT_FORMAT
};

// What a format is rendered for: `dfarm report` (a run) or `dfarm gate` (a
// gate result).
enum class FormatUse { kReport, kGate };

// One row of formats.inc.
struct FormatInfo {
  Format format;
  const char* name;   // what --format takes, and errors and help list
  const char* alias;  // another name --format takes; "" for none
  const char* help;   // a few words for --format's help
  // (optional) What `dfarm report` writes of a run.
  std::string (*render_run)(const RunReport&);
  // (optional) What `dfarm gate` writes of its result.
  std::string (*render_gate)(const gate::GateResult&);
  // `dfarm report` writes render_gate's text of the run's gate result instead.
  bool report_renders_gate;

  bool UsableBy(FormatUse use) const;
};

// Every format, in the table's order.
std::span<const FormatInfo> Formats();
const FormatInfo& FormatOf(Format format);

// The format whose name or alias is `name`, if `use` has it; else
// kInvalidInput: "unknown report format 'pdf' (known: html, md, junit, json, csv)".
Result<Format> ParseFormat(const std::string& name, FormatUse use = FormatUse::kReport);
// The names `use` takes, in table order: "html, md, junit, json, csv".
std::string FormatNames(FormatUse use);
// --format's help for `use`: "html (self-contained), md (for a PR comment), ...".
std::string FormatHelp(FormatUse use);

// `format`'s run renderer over `report`, or its gate renderer over `result`.
// Calling one the format does not have (render_run, render_gate null) is a
// programmer error: it aborts.
std::string Render(const RunReport& report, Format format);
std::string Render(const gate::GateResult& result, Format format);

}  // namespace dfarm::reports
