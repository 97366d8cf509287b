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

// CSS rules ".v-NAME { background: ...; color: ...; }", one line per verdict,
// for the HTML report's badges (class "badge v-NAME").
std::string VerdictCss();

}  // namespace dfarm::reports
