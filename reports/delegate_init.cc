// "Delegate init and fp16 cost": a delegate's cold and warm init,
// its first inference apart from steady state, and what reduced precision
// costs in accuracy, per model. The data here; markdown.cc and the HTML
// section below draw it.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reports/format.h"
#include "reports/html_sections.h"
#include "reports/report.h"

namespace dfarm::reports {
namespace {

// The "k:v;k:v" entries of stored delegate options (the runner's syntax:
// a key ends at its first ':'), without the reduced-precision ones.
constexpr std::string_view kPrecisionKeys[] = {"precision_loss_allowed", "fp16"};

bool IsPrecisionKey(std::string_view key) {
  return std::find(std::begin(kPrecisionKeys), std::end(kPrecisionKeys), key) !=
         std::end(kPrecisionKeys);
}

std::vector<std::pair<std::string, std::string>> OptionEntries(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(start, end - start);
    if (!entry.empty()) {
      const size_t colon = entry.find(':');
      out.emplace_back(entry.substr(0, colon),
                       colon == std::string::npos ? "" : entry.substr(colon + 1));
    }
    start = end + 1;
  }
  return out;
}

// The cell with the precision options left out, so that a cell and its
// reduced-precision twin match.
store::Cell TwinOf(const store::Cell& cell) {
  store::Cell twin = cell;
  std::vector<std::pair<std::string, std::string>> kept;
  for (auto& [key, value] : OptionEntries(cell.delegate_options)) {
    if (!IsPrecisionKey(key)) kept.emplace_back(key, value);
  }
  std::sort(kept.begin(), kept.end());
  twin.delegate_options.clear();
  for (const auto& [key, value] : kept) {
    twin.delegate_options += (twin.delegate_options.empty() ? "" : ";") + key + ":" + value;
  }
  return twin;
}

// Mean of the present values; unset when none.
struct Mean {
  double sum = 0;
  size_t n = 0;
  void Add(double v) {
    if (std::isfinite(v)) sum += v, ++n;
  }
  std::optional<double> Get() const {
    return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt;
  }
};

// The worst max abs error of each output over the cell's trials.
std::map<int64_t, std::pair<std::string, double>> WorstByOutput(const RunReport& report,
                                                                const CellGroup& cell) {
  std::map<int64_t, std::pair<std::string, double>> out;
  for (size_t i : cell.jobs) {
    auto it = report.accuracy.find(report.jobs[i].id);
    if (it == report.accuracy.end()) continue;
    for (const store::OutputAccuracy& o : it->second.outputs) {
      if (std::isnan(o.max_abs_error)) continue;
      auto [entry, added] = out.emplace(o.index, std::make_pair(o.name, o.max_abs_error));
      if (!added) entry->second.second = std::max(entry->second.second, o.max_abs_error);
    }
  }
  return out;
}

InitCell MakeInitCell(const RunReport& report, const std::vector<CellGroup>& cells, size_t index) {
  const CellGroup& cell = cells[index];
  const store::JobRow& first = report.jobs[cell.jobs.front()];
  InitCell out;
  out.cell = index;
  out.model = cell.cell.model;
  out.config = store::ConfigLabel(cell.cell);
  out.device = first.device;
  out.gpu = GpuDeviceLabel(report, first.device);
  out.reduced_precision = IsReducedPrecision(first);
  Mean mean, first_us, init, cold, warm;
  for (size_t i : cell.jobs) {
    const store::JobRow& j = report.jobs[i];
    if (j.status != store::kJobOk || !j.metrics) continue;
    mean.Add(j.metrics->mean_us);
    first_us.Add(j.metrics->first_us);
    init.Add(j.metrics->init_us);
    if (j.metrics->init_cold_us) cold.Add(*j.metrics->init_cold_us);
    if (j.metrics->init_warm_us) warm.Add(*j.metrics->init_warm_us);
  }
  out.mean_us = mean.Get();
  out.first_us = first_us.Get();
  out.init_us = init.Get();
  out.init_cold_us = cold.Get();
  out.init_warm_us = warm.Get();
  for (const auto& [output, worst] : WorstByOutput(report, cell)) {
    out.max_abs_error = std::max(out.max_abs_error.value_or(worst.second), worst.second);
  }
  return out;
}

// Fills the twin and the per-output cost of a reduced-precision cell.
void AddCost(const RunReport& report, const std::vector<CellGroup>& cells, InitCell& c) {
  const store::Cell twin = TwinOf(cells[c.cell].cell);
  for (size_t k = 0; k < cells.size(); ++k) {
    const store::JobRow& other = report.jobs[cells[k].jobs.front()];
    if (k == c.cell || IsReducedPrecision(other) || TwinOf(cells[k].cell) != twin) continue;
    c.twin = k;
    const auto fp32 = WorstByOutput(report, cells[k]);
    for (const auto& [output, worst] : WorstByOutput(report, cells[c.cell])) {
      auto it = fp32.find(output);
      if (it == fp32.end()) continue;
      c.costs.push_back(
          {output, worst.first, worst.second, it->second.second, worst.second - it->second.second});
    }
    return;
  }
}

std::string OptMs(const std::optional<double>& us) { return us ? Ms(*us) : "–"; }
std::string OptSig(const std::optional<double>& v) { return v ? Sig(*v) : "–"; }

}  // namespace

std::vector<std::pair<std::string, std::string>> SectionGpus(const std::vector<InitCell>& rows) {
  std::map<std::string, std::string> gpus;
  for (const InitCell& c : rows) {
    if (!c.gpu.empty()) gpus.emplace(c.device, c.gpu);
  }
  return {gpus.begin(), gpus.end()};
}

std::string GpuDeviceLabel(const RunReport& report, const std::string& device) {
  for (const store::DeviceRow& d : report.devices) {
    if (d.name == device) return store::OpenClDeviceLabel(d.opencl);
  }
  return "";
}

bool IsReducedPrecision(const store::JobRow& job) {
  for (const auto& [key, value] : OptionEntries(job.delegate_options)) {
    if (IsPrecisionKey(key) && (value == "true" || value == "1")) return true;
  }
  return false;
}

std::vector<InitCell> DelegateInitCells(const RunReport& report,
                                        const std::vector<CellGroup>& cells) {
  std::set<std::string> models;  // models with a cell worth the section
  std::vector<InitCell> all;
  for (size_t k = 0; k < cells.size(); ++k) {
    InitCell c = MakeInitCell(report, cells, k);
    if (c.init_cold_us || c.init_warm_us || c.reduced_precision) models.insert(c.model);
    if (c.reduced_precision) AddCost(report, cells, c);
    all.push_back(std::move(c));
  }
  std::vector<InitCell> out;
  for (const std::string& model : models) {
    for (const InitCell& c : all) {
      if (c.model == model) out.push_back(c);
    }
  }
  return out;
}

void DelegateInitSection(std::ostringstream& h, const RunReport& report,
                         const std::vector<CellGroup>& cells) {
  const std::vector<InitCell> rows = DelegateInitCells(report, cells);
  if (rows.empty()) return;
  h << "<h2>Delegate init and fp16 cost</h2>\n<p>Per model: mean latency, the first inference "
       "(kernels compile or upload then), init with program compilation (cold) and from the "
       "serialized cache (warm), the worst max abs error against the reference, and for a "
       "reduced-precision cell (<code>precision_loss_allowed</code>) the error it adds over the "
       "same delegate without it, per output. Times in ms, means over the ok trials.</p>\n";
  for (const auto& [device, gpu] : SectionGpus(rows)) {
    h << "<p>OpenCL device of <b>" << HtmlEscape(device) << "</b>: " << HtmlEscape(gpu) << "</p>\n";
  }
  h << "<table class=\"init\">\n<thead><tr><th>model</th><th>delegate</th><th>device</th>"
       "<th>mean</th><th>first inference</th><th>init</th><th>cold init</th><th>warm init</th>"
       "<th>max abs error</th><th>fp16 cost (per output)</th></tr></thead>\n<tbody>\n";
  std::string last_model;
  for (const InitCell& c : rows) {
    std::string cost = "–";
    if (c.reduced_precision && c.costs.empty()) cost = "no fp32 twin or no comparison";
    if (!c.costs.empty()) {
      cost.clear();
      for (const OutputCost& o : c.costs) {
        cost += (cost.empty() ? "" : "<br>") +
                HtmlEscape(o.name.empty() ? "#" + std::to_string(o.index) : o.name) + ": " +
                (o.cost >= 0 ? "+" : "") + Sig(o.cost) + " <span class=\"dim\">(" +
                Sig(o.fp16_max_abs_error) + " vs " + Sig(o.fp32_max_abs_error) + ")</span>";
      }
    }
    const bool new_model = c.model != last_model;
    last_model = c.model;
    h << "<tr" << (new_model ? " class=\"first\"" : "") << "><td>"
      << (new_model ? HtmlEscape(c.model) : "") << "</td><td>" << HtmlEscape(c.config)
      << "</td><td>" << HtmlEscape(c.device) << "</td><td class=\"num\">" << OptMs(c.mean_us)
      << "</td><td class=\"num\">" << OptMs(c.first_us) << "</td><td class=\"num\">"
      << OptMs(c.init_us) << "</td><td class=\"num\">" << OptMs(c.init_cold_us)
      << "</td><td class=\"num\">" << OptMs(c.init_warm_us) << "</td><td class=\"num\">"
      << OptSig(c.max_abs_error) << "</td><td class=\"cost\">" << cost << "</td></tr>\n";
  }
  h << "</tbody>\n</table>\n";
}

}  // namespace dfarm::reports
