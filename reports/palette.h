// The colours of the gate's verdicts, one palette for the HTML report's badges
// and the dashboard's cells, so a verdict looks the same wherever it is shown.
#pragma once

#include <string>

#include "reports/gate/verdict.h"

namespace dfarm::reports {

// A background and a text colour, "#rrggbb"; static strings.
struct Colours {
  const char* background;
  const char* foreground;
};

// The colours of `v` (every verdict has its own row in palette.cc).
Colours VerdictColours(gate::Verdict v);
// A cell the gate gave no verdict (the dashboard before or without a gate).
Colours NoVerdictColours();

// The colours of a job or cell that ended with `status` (a job status class,
// or queued / running / "" for not run): ok green; unsupported neutral grey
// (an expected outcome: the delegate declines the model); not run, queued
// and running light grey; every failure (model_error, delegate_error,
// crashed, timeout, infra) red, as a failing verdict; any other status
// (queued, running, cancelled, not_run) light grey.
Colours JobStatusColours(const std::string& status);
// Whether `status` is a failure, as JobStatusColours draws it red.
bool IsFailureStatus(const std::string& status);

// CSS rules ".v-NAME { background: ...; color: ...; }", one line per verdict,
// for the HTML report's badges (class "badge v-NAME").
std::string VerdictCss();

}  // namespace dfarm::reports
