#include "reports/gate/verdict.h"

namespace dfarm::gate {
namespace {

struct VerdictRow {
  Verdict verdict;
  const char* name;
};

constexpr VerdictRow kVerdicts[] = {
#define DFARM_VERDICT(Name, name) {Verdict::k##Name, name},
#include "reports/gate/verdicts.inc"
#undef DFARM_VERDICT
};

}  // namespace

const std::vector<Verdict>& AllVerdicts() {
  static const std::vector<Verdict> all = [] {
    std::vector<Verdict> v;
    for (const VerdictRow& row : kVerdicts) v.push_back(row.verdict);
    return v;
  }();
  return all;
}

const char* VerdictName(Verdict v) {
  for (const VerdictRow& row : kVerdicts) {
    if (row.verdict == v) return row.name;
  }
  return "unknown";  // not a Verdict: a cast from a bad integer
}

Result<Verdict> ParseVerdict(const std::string& name) {
  std::string known;
  for (const VerdictRow& row : kVerdicts) {
    if (name == row.name) return row.verdict;
    known += (known.empty() ? "" : ", ") + std::string(row.name);
  }
  return MakeError(ErrorKind::kInvalidInput,
                   "unknown gate verdict '" + name + "' (known: " + known + ")");
}

bool FailsGate(Verdict v) { return v == Verdict::kFail || v == Verdict::kRegressed; }

}  // namespace dfarm::gate
