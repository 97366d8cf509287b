// The gate's renderers: a text table, Markdown for a PR comment, JUnit XML for
// CI and JSON for scripts (docs/CONTRACTS.md).
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/gate/gate.h"

namespace dfarm::gate {
namespace {

using nlohmann::json;

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Sci(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

bool Compared(const CellResult& c) {
  return c.ratio > 0 && c.latency != Verdict::kNew && c.latency != Verdict::kMissing;
}

std::string LatencyText(const CellResult& c) {
  if (!Compared(c)) return "-";
  return Fixed(c.baseline_median_us / 1000, 3) + " -> " + Fixed(c.candidate_median_us / 1000, 3) +
         " ms";
}

std::string RatioText(const CellResult& c) {
  if (!Compared(c)) return "-";
  return Fixed(c.ratio, 3) + " [" + Fixed(c.ci_low, 3) + ", " + Fixed(c.ci_high, 3) + "]";
}

std::string TrialsText(const CellResult& c) {
  if (!Compared(c)) return std::to_string(c.candidate_jobs.size());
  if (c.paired) return std::to_string(c.pairs) + " pairs";
  return std::to_string(c.baseline_trials) + "/" + std::to_string(c.candidate_trials) +
         (c.within_run_only ? "*" : "");
}

size_t FailingCount(const CellResult& c) {
  size_t n = 0;
  for (const auto& f : c.findings) n += f.fails ? 1 : 0;
  return n;
}

std::string Header(const GateResult& r) {
  std::string s = "gate: candidate run " + std::to_string(r.candidate_run);
  for (int64_t id : r.extra_candidate_runs) s += " + rerun " + std::to_string(id);
  if (r.baseline_run == 0) {
    s += " judged alone (no baseline)";
  } else {
    s += " vs baseline run " + std::to_string(r.baseline_run);
  }
  return s;
}

// "FAILED: 6 cell(s); 2 fail the gate (2 fail); 4 do not (4 unknown)": the
// verdicts that fail the gate counted apart from the others, so an unknown
// cell never reads as a failed one.
std::string Summary(const GateResult& r) {
  return std::string(r.passed ? "PASSED" : "FAILED") + ": " + GateCounts(r);
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// ---- XML ---------------------------------------------------------------------

// Escapes for an attribute or text; drops characters XML 1.0 cannot hold.
std::string XmlEscape(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        if (ch >= 0x20) out += static_cast<char>(ch);
        break;
    }
  }
  return out;
}

// Text content keeps its newlines.
std::string XmlText(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\n') {
      out += '\n';
    } else {
      out += XmlEscape(std::string(1, ch));
    }
  }
  return out;
}

std::string FindingText(const Finding& f) {
  if (!f.message.empty()) return f.metric + ": " + f.message;
  std::string s = f.metric;
  if (!f.output.empty()) s += " output '" + f.output + "'";
  s += ": value " + Sci(f.value) + ", threshold " + Sci(f.threshold) + ": " + f.message;
  return s;
}

std::string CellDetails(const CellResult& c) {
  std::string s =
      "verdict " + std::string(VerdictName(c.verdict)) + ", latency " + VerdictName(c.latency);
  if (Compared(c)) {
    s += ": median " + LatencyText(c) + ", ratio " + RatioText(c) + ", p " + Sci(c.p_value) +
         ", q " + Sci(c.q_value) +
         (c.paired ? ", " + std::to_string(c.pairs) + " pairs (paired ratio, signed-rank p)"
                   : ", trials " + std::to_string(c.baseline_trials) + "/" +
                         std::to_string(c.candidate_trials) +
                         (c.within_run_only ? " (within-run samples)" : ""));
    if (c.noisy_trials_excluded > 0) {
      s += ", " + std::to_string(c.noisy_trials_excluded) + " noisy trial(s) left out";
    }
  }
  s += "\n";
  for (const auto& f : c.findings) s += (f.fails ? "FAIL " : "ok   ") + FindingText(f) + "\n";
  return s;
}

json Finite(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

std::string GateCounts(const GateResult& r) {
  std::map<std::string, int> failing, other;
  int failing_cells = 0;
  for (const auto& c : r.cells) {
    const bool fails = FailsGate(c.verdict);
    ++(fails ? failing : other)[VerdictName(c.verdict)];
    failing_cells += fails ? 1 : 0;
  }
  auto list = [](const std::map<std::string, int>& counts) {
    std::string s;
    for (const auto& [name, n] : counts) {
      s += (s.empty() ? " (" : ", ") + std::to_string(n) + " " + name;
    }
    return s.empty() ? s : s + ")";
  };
  const int rest = static_cast<int>(r.cells.size()) - failing_cells;
  return std::to_string(r.cells.size()) + " cell(s); " + std::to_string(failing_cells) +
         " fail the gate" + list(failing) + "; " + std::to_string(rest) +
         (rest == 1 ? " does not" : " do not") + list(other);
}

GateOutcome OutcomeOf(const GateResult& r) {
  if (!r.passed) return GateOutcome::kFailed;
  for (const auto& c : r.cells) {
    if (c.verdict == Verdict::kUnknown || c.verdict == Verdict::kMissing) {
      return GateOutcome::kInconclusive;
    }
  }
  return GateOutcome::kPassed;
}

const char* OutcomeName(GateOutcome outcome) {
  switch (outcome) {
    case GateOutcome::kPassed:
      return "passed";
    case GateOutcome::kInconclusive:
      return "inconclusive";
    case GateOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

std::string RenderGateText(const GateResult& r) {
  std::ostringstream out;
  out << Header(r) << "\n\n";
  size_t width = 4;
  for (const auto& c : r.cells) width = std::max(width, c.cell.Label().size());
  out << Pad("VERDICT", 10) << Pad("CELL", width + 2) << Pad("MEDIAN", 24) << Pad("RATIO [CI]", 24)
      << Pad("Q", 9) << Pad("TRIALS", 8) << "FINDINGS\n";
  for (const auto& c : r.cells) {
    out << Pad(VerdictName(c.verdict), 10) << Pad(c.cell.Label(), width + 2)
        << Pad(LatencyText(c), 24) << Pad(RatioText(c), 24)
        << Pad(Compared(c) ? Sci(c.q_value) : "-", 9) << Pad(TrialsText(c), 8) << FailingCount(c)
        << "\n";
  }
  bool any = false;
  for (const auto& c : r.cells) {
    for (const auto& f : c.findings) {
      if (!f.fails) continue;
      if (!any) out << "\nfailing findings:\n";
      any = true;
      out << "  " << c.cell.Label() << ": " << FindingText(f) << "\n";
    }
  }
  any = false;
  for (const auto& c : r.cells) {
    if (c.delegation.empty()) continue;
    if (!any) out << "\npartly delegated (the latency is not the delegate's alone):\n";
    any = true;
    out << "  " << c.cell.Label() << ": " << c.delegation
        << (c.delegate_took_none ? " - latency not judged" : "") << "\n";
  }
  if (!r.notes.empty()) out << "\nnotes:\n";
  for (const auto& n : r.notes) out << "  - " << n << "\n";
  out << "\n" << Summary(r) << "\n";
  return out.str();
}

std::string RenderGateMarkdown(const GateResult& r) {
  std::ostringstream out;
  out << "## DelegateFarm gate: " << (r.passed ? "passed" : "**FAILED**") << "\n\n";
  out << Header(r) << ". " << Summary(r) << ".\n\n";
  out << "| Verdict | Cell | Median (ms) | Ratio [CI] | q | Trials | Failing |\n";
  out << "|---|---|---|---|---|---|---|\n";
  auto md = [](const std::string& s) {
    std::string o;
    for (char ch : s) {
      if (ch == '|' || ch == '*' || ch == '_' || ch == '`' || ch == '[' || ch == ']' || ch == '<' ||
          ch == '>') {
        o += '\\';
      }
      o += ch == '\n' ? ' ' : ch;
    }
    return o;
  };
  for (const auto& c : r.cells) {
    const bool bad = FailsGate(c.verdict);
    out << "| " << (bad ? "**" : "") << VerdictName(c.verdict) << (bad ? "**" : "") << " | "
        << md(c.cell.Label()) << " | " << md(LatencyText(c)) << " | " << md(RatioText(c)) << " | "
        << (Compared(c) ? Sci(c.q_value) : "-") << " | " << md(TrialsText(c)) << " | "
        << FailingCount(c) << " |\n";
  }
  bool details = false;
  for (const auto& c : r.cells) {
    if (FailingCount(c) == 0 && c.verdict != Verdict::kUnknown) continue;
    if (!details) out << "\n### Details\n";
    details = true;
    out << "\n**" << md(c.cell.Label()) << "** (" << VerdictName(c.verdict) << ")\n\n";
    for (const auto& f : c.findings) {
      if (f.fails) out << "- " << md(FindingText(f)) << "\n";
    }
    if (c.verdict == Verdict::kUnknown && c.delegate_took_none) {
      out << "- latency not judged: " << md(c.delegation) << "\n";
    } else if (c.verdict == Verdict::kUnknown) {
      out << "- latency not decided: ratio " << md(RatioText(c)) << ", q " << Sci(c.q_value)
          << "\n";
    }
  }
  bool partial = false;
  for (const auto& c : r.cells) {
    if (c.delegation.empty()) continue;
    if (!partial) out << "\n### Partly delegated\n\nThe latency is not the delegate's alone.\n\n";
    partial = true;
    out << "- " << md(c.cell.Label()) << ": " << md(c.delegation)
        << (c.delegate_took_none ? " (latency not judged)" : "") << "\n";
  }
  if (!r.notes.empty()) out << "\n### Notes\n\n";
  for (const auto& n : r.notes) out << "- " << md(n) << "\n";
  out << "\n_Trials marked * rest on within-run samples only._\n";
  return out.str();
}

std::string RenderGateJunit(const GateResult& r) {
  size_t failures = 0, skipped = 0;
  for (const auto& c : r.cells) {
    failures += FailsGate(c.verdict) ? 1 : 0;
    skipped += c.verdict == Verdict::kMissing ? 1 : 0;
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"dfarm gate\" tests=\"" << r.cells.size() << "\" failures=\""
      << failures << "\" errors=\"0\" skipped=\"" << skipped << "\">\n";
  out << "  <testsuite name=\"" << XmlEscape(Header(r)) << "\" tests=\"" << r.cells.size()
      << "\" failures=\"" << failures << "\" errors=\"0\" skipped=\"" << skipped << "\">\n";
  out << "    <properties>\n";
  out << "      <property name=\"candidate_run\" value=\"" << r.candidate_run << "\"/>\n";
  out << "      <property name=\"baseline_run\" value=\"" << r.baseline_run << "\"/>\n";
  for (int64_t id : r.extra_candidate_runs) {
    out << "      <property name=\"rerun\" value=\"" << id << "\"/>\n";
  }
  out << "      <property name=\"passed\" value=\"" << (r.passed ? "true" : "false") << "\"/>\n";
  out << "    </properties>\n";
  for (const auto& c : r.cells) {
    const double time_s = c.candidate_median_us > 0 ? c.candidate_median_us / 1e6 : 0;
    out << "    <testcase classname=\"" << XmlEscape(c.cell.model) << "\" name=\""
        << XmlEscape(c.cell.Label()) << "\" time=\"" << Fixed(time_s, 6) << "\">\n";
    if (FailsGate(c.verdict)) {
      std::string message, type;
      for (const auto& f : c.findings) {
        if (f.fails && message.empty()) {
          message = FindingText(f);
          type = f.metric;
        }
      }
      if (message.empty()) {
        message = "latency regressed: median " + LatencyText(c) + ", ratio " + RatioText(c) +
                  ", q " + Sci(c.q_value) + " (threshold: beyond the policy's min_effect)";
        type = "latency.regressed";
      } else if (FailingCount(c) > 1) {
        message += " (and " + std::to_string(FailingCount(c) - 1) + " more)";
      }
      out << "      <failure message=\"" << XmlEscape(message) << "\" type=\"" << XmlEscape(type)
          << "\">" << XmlText(CellDetails(c)) << "</failure>\n";
    } else if (c.verdict == Verdict::kMissing) {
      out << "      <skipped message=\"the baseline has this cell, the candidate does not\"/>\n";
    }
    out << "      <system-out>" << XmlText(CellDetails(c)) << "</system-out>\n";
    out << "    </testcase>\n";
  }
  std::string notes;
  for (const auto& n : r.notes) notes += n + "\n";
  out << "    <system-out>" << XmlText(notes + Summary(r) + "\n") << "</system-out>\n";
  out << "  </testsuite>\n</testsuites>\n";
  return out.str();
}

std::string RenderGateJson(const GateResult& r) {
  json cells = json::array();
  std::map<std::string, int> counts;
  for (const auto& c : r.cells) {
    ++counts[VerdictName(c.verdict)];
    json findings = json::array();
    for (const auto& f : c.findings) {
      findings.push_back({{"metric", f.metric},
                          {"output", f.output},
                          {"value", Finite(f.value)},
                          {"threshold", Finite(f.threshold)},
                          {"fails", f.fails},
                          {"message", f.message}});
    }
    cells.push_back({{"label", c.cell.Label()},
                     {"model", c.cell.model},
                     {"model_sha256", c.cell.model_sha256},
                     {"delegate", c.cell.delegate},
                     {"delegate_options", c.cell.delegate_options},
                     {"num_threads", c.cell.num_threads},
                     {"runner", c.cell.runner},
                     {"device", c.cell.device},
                     {"inputs", c.cell.inputs},
                     {"verdict", VerdictName(c.verdict)},
                     {"baseline_jobs", c.baseline_jobs},
                     {"candidate_jobs", c.candidate_jobs},
                     {"baseline_failed_jobs", c.baseline_failed_jobs},
                     {"candidate_failed_jobs", c.candidate_failed_jobs},
                     {"latency",
                      {{"verdict", VerdictName(c.latency)},
                       {"baseline_median_us", Finite(c.baseline_median_us)},
                       {"candidate_median_us", Finite(c.candidate_median_us)},
                       {"ratio", Finite(c.ratio)},
                       {"ci_low", Finite(c.ci_low)},
                       {"ci_high", Finite(c.ci_high)},
                       {"p_value", Finite(c.p_value)},
                       {"q_value", Finite(c.q_value)},
                       {"baseline_trials", c.baseline_trials},
                       {"candidate_trials", c.candidate_trials},
                       {"within_run_only", c.within_run_only},
                       {"smallest_p", c.smallest_p},
                       {"noisy_trials_excluded", c.noisy_trials_excluded},
                       {"paired", c.paired},
                       {"pairs", c.pairs}}},
                     {"memory",
                      {{"baseline_peak_rss_bytes", c.baseline_peak_rss_bytes},
                       {"candidate_peak_rss_bytes", c.candidate_peak_rss_bytes},
                       {"baseline_arena_bytes", c.baseline_arena_bytes},
                       {"candidate_arena_bytes", c.candidate_arena_bytes}}},
                     {"accuracy",
                      {{"baseline_max_abs_error", Finite(c.baseline_max_abs_error)},
                       {"candidate_max_abs_error", Finite(c.candidate_max_abs_error)}}},
                     {"findings", findings},
                     {"delegation", c.delegation},
                     {"delegate_took_none", c.delegate_took_none}});
  }
  json doc = {{"candidate_run", r.candidate_run},
              {"baseline_run", r.baseline_run},
              {"extra_candidate_runs", r.extra_candidate_runs},
              {"passed", r.passed},
              {"summary", counts},
              {"notes", r.notes},
              {"cells", cells}};
  doc["paired"] = r.paired_baseline_runner.empty()
                      ? json(nullptr)
                      : json{{"baseline_runner", r.paired_baseline_runner},
                             {"candidate_runner", r.paired_candidate_runner}};
  return doc.dump(2) + "\n";
}

}  // namespace dfarm::gate
