#include "reports/formats.h"

#include <cstdio>
#include <cstdlib>

#include "reports/gate/gate.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

constexpr FormatInfo kFormats[] = {
#define DFARM_REPORT_FORMAT(Name, name, alias, help, run, gate, report_gate) \
  {Format::k##Name, name, alias, help, run, gate, report_gate},
#include "reports/formats.inc"
#undef DFARM_REPORT_FORMAT
};

[[noreturn]] void NoRenderer(Format format, const char* what) {
  std::fprintf(stderr, "reports: format '%s' has no %s renderer\n", FormatOf(format).name, what);
  std::abort();
}

}  // namespace

bool FormatInfo::UsableBy(FormatUse use) const {
  return use == FormatUse::kGate ? render_gate != nullptr
                                 : render_run != nullptr || report_renders_gate;
}

std::span<const FormatInfo> Formats() { return kFormats; }

const FormatInfo& FormatOf(Format format) {
  // kFormats and Format come from the same rows, in the same order.
  return kFormats[static_cast<size_t>(format)];
}

Result<Format> ParseFormat(const std::string& name, FormatUse use) {
  for (const FormatInfo& f : kFormats) {
    if (f.UsableBy(use) && (name == f.name || (*f.alias != '\0' && name == f.alias))) {
      return f.format;
    }
  }
  return MakeError(ErrorKind::kInvalidInput,
                   "unknown report format '" + name + "' (known: " + FormatNames(use) + ")");
}

std::string FormatNames(FormatUse use) {
  std::string names;
  for (const FormatInfo& f : kFormats) {
    if (f.UsableBy(use)) names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  return names;
}

std::string FormatHelp(FormatUse use) {
  std::string help;
  for (const FormatInfo& f : kFormats) {
    if (!f.UsableBy(use)) continue;
    help += (help.empty() ? "" : ", ") + std::string(f.name) + " (" + f.help + ")";
  }
  return help;
}

std::string Render(const RunReport& report, Format format) {
  const FormatInfo& f = FormatOf(format);
  if (f.render_run == nullptr) NoRenderer(format, "run");
  return f.render_run(report);
}

std::string Render(const gate::GateResult& result, Format format) {
  const FormatInfo& f = FormatOf(format);
  if (f.render_gate == nullptr) NoRenderer(format, "gate");
  return f.render_gate(result);
}

}  // namespace dfarm::reports
