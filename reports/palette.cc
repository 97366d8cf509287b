#include "reports/palette.h"

#include <iterator>

#include "reports/store/store.h"

namespace dfarm::reports {
namespace {

// Green: passes; blue: better than the baseline; orange: slower; red: fails;
// amber: not decided yet (more trials may decide it); grey: absent; lilac: new.
struct VerdictPaletteRow {
  gate::Verdict verdict;
  Colours colours;
};
constexpr VerdictPaletteRow kVerdictPalette[] = {
    {gate::Verdict::kPass, {"#d8f0dc", "#17692b"}},
    {gate::Verdict::kImproved, {"#c6e0f5", "#174a7a"}},
    {gate::Verdict::kRegressed, {"#fbd9b8", "#8a4200"}},
    {gate::Verdict::kUnknown, {"#fff0c2", "#7a5200"}},
    {gate::Verdict::kFail, {"#f9d0cb", "#8d1a12"}},
    {gate::Verdict::kNew, {"#e2e2f8", "#34347a"}},
    {gate::Verdict::kMissing, {"#e6e6e6", "#555555"}},
};

constexpr size_t kVerdictCount = 0
#define DFARM_VERDICT(Name, name) +1
#include "reports/gate/verdicts.inc"
#undef DFARM_VERDICT
    ;
static_assert(std::size(kVerdictPalette) == kVerdictCount,
              "every verdict of reports/gate/verdicts.inc needs a row in kVerdictPalette");

}  // namespace

Colours VerdictColours(gate::Verdict v) {
  for (const VerdictPaletteRow& row : kVerdictPalette) {
    if (row.verdict == v) return row.colours;
  }
  return NoVerdictColours();
}

Colours NoVerdictColours() { return {"#eeeeee", "#222222"}; }

bool IsFailureStatus(const std::string& status) {
  const std::optional<JobStatus> s = ParseJobStatus(status);
  // Unsupported is expected; cancelled and not_run are the farm's doing
  // (dfarm cancel, no live node), not the job's: neutral like pending.
  return s && *s != JobStatus::kOk && *s != JobStatus::kUnsupported &&
         *s != JobStatus::kCancelled && *s != JobStatus::kNotRun;
}

Colours JobStatusColours(const std::string& status) {
  if (status == store::kJobOk) return VerdictColours(gate::Verdict::kPass);
  if (status == JobStatusName(JobStatus::kUnsupported)) return {"#dcdcdc", "#444444"};
  if (!IsFailureStatus(status)) return VerdictColours(gate::Verdict::kMissing);
  return VerdictColours(gate::Verdict::kFail);
}

std::string VerdictCss() {
  std::string css;
  for (const VerdictPaletteRow& row : kVerdictPalette) {
    css += std::string(".v-") + gate::VerdictName(row.verdict) +
           " { background: " + row.colours.background + "; color: " + row.colours.foreground +
           "; }\n";
  }
  return css;
}

}  // namespace dfarm::reports
