// The gate's verdict on a cell, typed: one list (verdicts.inc) gives the enum
// and the names outputs carry, so gate, reports and the dashboard decide by
// the enum and print the same words.
#pragma once

#include <string>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::gate {

enum class Verdict {
#define DFARM_VERDICT(Name, name) k##Name,
#include "reports/gate/verdicts.inc"
#undef DFARM_VERDICT
};

// Every verdict, in enum order.
const std::vector<Verdict>& AllVerdicts();
// "pass", "improved", "regressed", "unknown", "fail", "new", "missing".
const char* VerdictName(Verdict v);
// The verdict VerdictName gives `name`; kInvalidInput, listing the names, for
// any other string.
Result<Verdict> ParseVerdict(const std::string& name);
// fail and regressed: the verdicts that fail the gate.
bool FailsGate(Verdict v);

}  // namespace dfarm::gate
