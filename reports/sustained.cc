// Sustained-mode jobs (spec benchmark.sustained_s) in reports: the latency
// curve in brief and, in HTML, drawn with the device's hottest temperature.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "reports/format.h"
#include "reports/html_sections.h"
#include "reports/report.h"

namespace dfarm::reports {
std::vector<std::pair<double, double>> HottestZoneOverTime(std::vector<store::TelemetryRow> rows) {
  std::vector<std::pair<double, double>> out;
  if (rows.empty()) return out;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.unix_ms < b.unix_ms; });
  for (const store::TelemetryRow& t : rows) {
    if (!t.hottest_temp_c) continue;
    out.emplace_back(static_cast<double>(t.unix_ms - rows.front().unix_ms) / 1000.0,
                     *t.hottest_temp_c);
  }
  return out;
}

namespace {

// The job's hottest thermal zone over time (HottestZoneOverTime).
std::vector<std::pair<double, double>> Temperatures(const RunReport& report, int64_t job_id) {
  auto it = report.telemetry.find(job_id);
  if (it == report.telemetry.end()) return {};
  return HottestZoneOverTime(it->second);
}

// Points of a polyline: x over [0, x_max], y over [lo, hi], in a w x h box
// at (x0, y0).
struct Frame {
  double x0, y0, w, h, x_max, lo, hi;
  std::string Point(double x, double y) const {
    const double px = x0 + w * std::clamp(x / x_max, 0.0, 1.0);
    const double py = y0 + h * (1 - std::clamp((y - lo) / (hi - lo), 0.0, 1.0));
    return Fixed(px, 1) + "," + Fixed(py, 1) + " ";
  }
};

// Widens [lo, hi] by 5% each side (1 unit when flat).
std::pair<double, double> Padded(double lo, double hi) {
  const double pad = hi > lo ? (hi - lo) * 0.05 : 1;
  return {lo - pad, hi + pad};
}

// The p50 curve (blue) and the hottest temperature (orange, own scale).
std::string CurveSvg(const store::JobSustained& c,
                     const std::vector<std::pair<double, double>>& temps) {
  constexpr double kW = 440, kH = 110, kLeft = 66, kRight = 50, kTop = 8, kBottom = 18;
  double lo = c.windows.front().p50_us, hi = lo;
  double t_max = c.secs;
  for (const store::SustainedWindow& w : c.windows) {
    lo = std::min(lo, w.p50_us);
    hi = std::max(hi, w.p50_us);
    t_max = std::max(t_max, (w.t_ms + c.window_ms) / 1000);
  }
  std::tie(lo, hi) = Padded(lo / 1000, hi / 1000);
  for (const auto& [t, temp] : temps) t_max = std::max(t_max, t);
  const Frame lat{kLeft, kTop, kW - kLeft - kRight, kH - kTop - kBottom, t_max, lo, hi};
  std::string svg = "<svg class=\"curve\" width=\"" + Fixed(kW, 0) + "\" height=\"" + Fixed(kH, 0) +
                    "\" role=\"img\" aria-label=\"p50 latency over time\">";
  svg += "<rect x=\"" + Fixed(kLeft, 0) + "\" y=\"" + Fixed(kTop, 0) + "\" width=\"" +
         Fixed(lat.w, 0) + "\" height=\"" + Fixed(lat.h, 0) +
         "\" fill=\"#fafafa\" stroke=\"#ccc\"/>";
  auto label = [&](double x, double y, const std::string& text, const char* anchor,
                   const char* colour) {
    svg += "<text x=\"" + Fixed(x, 1) + "\" y=\"" + Fixed(y, 1) + "\" font-size=\"10\" fill=\"" +
           colour + "\" text-anchor=\"" + anchor + "\">" + text + "</text>";
  };
  label(kLeft - 4, kTop + 9, Fixed(hi, 3) + " ms", "end", "#1f5fa8");
  label(kLeft - 4, kTop + lat.h, Fixed(lo, 3) + " ms", "end", "#1f5fa8");
  label(kLeft, kH - 4, "0 s", "start", "#555");
  label(kLeft + lat.w, kH - 4, Fixed(t_max, 1) + " s", "end", "#555");
  std::string points;
  for (const store::SustainedWindow& w : c.windows) {
    points += lat.Point((w.t_ms + c.window_ms / 2) / 1000, w.p50_us / 1000);
  }
  svg +=
      "<polyline fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\" points=\"" + points + "\"/>";
  if (temps.size() >= 2) {
    double tlo = temps.front().second, thi = tlo;
    for (const auto& [t, temp] : temps) {
      tlo = std::min(tlo, temp);
      thi = std::max(thi, temp);
    }
    std::tie(tlo, thi) = Padded(tlo, thi);
    const Frame hot{lat.x0, lat.y0, lat.w, lat.h, t_max, tlo, thi};
    std::string tp;
    for (const auto& [t, temp] : temps) tp += hot.Point(t, temp);
    svg +=
        "<polyline fill=\"none\" stroke=\"#d9822b\" stroke-width=\"1\" "
        "stroke-dasharray=\"3,2\" points=\"" +
        tp + "\"/>";
    label(kLeft + lat.w + 4, kTop + 9, Fixed(thi, 1) + " &#176;C", "start", "#d9822b");
    label(kLeft + lat.w + 4, kTop + lat.h, Fixed(tlo, 1) + " &#176;C", "start", "#d9822b");
  }
  return svg + "</svg>";
}

}  // namespace

std::optional<SustainedSummary> SummarizeCurve(const store::JobSustained& c) {
  if (c.windows.empty()) return std::nullopt;
  SustainedSummary s;
  s.secs = c.secs;
  s.window_ms = c.window_ms;
  s.windows = c.windows.size();
  s.first_p50_us = c.windows.front().p50_us;
  s.last_p50_us = c.windows.back().p50_us;
  s.change_pct = s.first_p50_us > 0 ? (s.last_p50_us / s.first_p50_us - 1) * 100 : 0;
  const store::SustainedWindow& slowest =
      *std::max_element(c.windows.begin(), c.windows.end(),
                        [](const auto& a, const auto& b) { return a.p50_us < b.p50_us; });
  s.slowest_p50_us = slowest.p50_us;
  s.slowest_t_s = slowest.t_ms / 1000;
  return s;
}

namespace {

// SummarizeCurve with the hottest zone's first and peak readings.
std::optional<SustainedSummary> SummarizeWithTemperatures(
    const store::JobSustained& curve, const std::vector<std::pair<double, double>>& temps) {
  std::optional<SustainedSummary> s = SummarizeCurve(curve);
  if (!s) return s;
  for (const auto& [t, temp] : temps) {
    if (!s->start_temp_c) s->start_temp_c = temp;
    s->peak_temp_c = std::max(s->peak_temp_c.value_or(temp), temp);
  }
  return s;
}

}  // namespace

std::optional<SustainedSummary> SummarizeSustained(const RunReport& report,
                                                   const store::JobRow& job) {
  auto it = report.sustained.find(job.id);
  if (it == report.sustained.end()) return std::nullopt;
  return SummarizeWithTemperatures(it->second, Temperatures(report, job.id));
}

void SustainedSection(std::ostringstream& h, const RunReport& report,
                      const std::vector<CellGroup>& cells) {
  if (report.sustained.empty()) return;
  h << "<h2>Sustained</h2>\n<p>Latency over time (<code>benchmark.sustained_s</code>): the p50 "
       "of each time window (blue) and the device's hottest thermal zone (orange, dashed, its "
       "own scale; sampled before, during and after the job). A curve that climbs while the "
       "temperature rises is thermal throttling. <code>dfarm show RUN --job ID --json</code> "
       "has every window.</p>\n<table>\n<thead><tr><th>job</th><th>time</th><th>p50 first</th>"
       "<th>p50 last</th><th>change</th><th>slowest</th><th>temperature</th><th>curve</th></tr>"
       "</thead>\n<tbody>\n";
  for (const CellGroup& cell : cells) {
    for (size_t i : cell.jobs) {
      const store::JobRow& j = report.jobs[i];
      auto curve = report.sustained.find(j.id);
      if (curve == report.sustained.end()) continue;
      const std::vector<std::pair<double, double>> temps = Temperatures(report, j.id);
      auto s = SummarizeWithTemperatures(curve->second, temps);
      if (!s) continue;
      const double change = s->change_pct;
      const char* kNum = "<td class=\"num\" style=\"white-space:nowrap\">";
      h << "<tr><td>" << HtmlEscape(store::CellOf(j).Label()) << " #" << j.id << "</td>" << kNum
        << Fixed(s->secs, 1) << " s</td>" << kNum << Ms(s->first_p50_us) << " ms</td>" << kNum
        << Ms(s->last_p50_us) << " ms</td><td class=\"num\""
        << (change > 5 ? " style=\"color:#b00\"" : "") << ">" << (change >= 0 ? "+" : "")
        << Fixed(change, 1) << "%</td>" << kNum << Ms(s->slowest_p50_us) << " ms<br><small>at "
        << Fixed(s->slowest_t_s, 1) << " s</small></td><td style=\"white-space:nowrap\">";
      if (s->peak_temp_c) {
        h << Fixed(*s->start_temp_c, 1) << " &rarr; " << Fixed(*s->peak_temp_c, 1) << " &#176;C";
      } else {
        h << "&ndash;";
      }
      h << "</td><td>" << CurveSvg(curve->second, temps) << "</td></tr>\n";
    }
  }
  h << "</tbody>\n</table>\n";
}

}  // namespace dfarm::reports
