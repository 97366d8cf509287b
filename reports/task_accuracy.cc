// Task accuracy on a labelled set (spec "eval") in reports: one row per job
// that has it, with the same run's cpu job of the same cell beside it and the
// paired drop against it (reports/eval/task_drop.h).
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reports/eval/task_drop.h"
#include "reports/format.h"
#include "reports/html_sections.h"
#include "reports/report.h"

namespace dfarm::reports {

std::string TaskMetricText(const store::TaskMetric& m) {
  std::string text = Fixed(100 * m.value, 1) + "%";
  if (std::isfinite(m.low) && std::isfinite(m.high)) {
    text += " (" + Fixed(100 * m.low, 1) + "-" + Fixed(100 * m.high, 1) + ")";
  }
  return text;
}

nlohmann::json TaskAccuracyJson(const store::TaskAccuracy& t) {
  nlohmann::json metrics = nlohmann::json::array();
  auto bound = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  for (const store::TaskMetric& m : t.metrics) {
    metrics.push_back(
        {{"name", m.name}, {"value", m.value}, {"low", bound(m.low)}, {"high", bound(m.high)}});
  }
  return {{"task", t.task}, {"dataset", t.dataset}, {"images", t.images}, {"metrics", metrics}};
}

std::string TaskMetricLabel(const std::string& name) {
  if (name.rfind("top", 0) == 0) return "top-" + name.substr(3);
  if (name == "map") return "mAP@[.5:.95]";
  if (name == "map50") return "mAP@.5";
  if (name == "map75") return "mAP@.75";
  if (name == "recall") return "AR@100";
  if (name == "miou") return "mIoU";
  if (name == "pixel_accuracy") return "pixel accuracy";
  return name;
}

const store::TaskAccuracy* CpuTaskOf(const RunReport& report, const store::JobRow& job) {
  if (job.delegate == "cpu" && job.delegate_options.empty()) return nullptr;
  auto mine = report.task.find(job.id);
  if (mine == report.task.end()) return nullptr;
  store::Cell want = store::CellOf(job);
  want.delegate = "cpu";
  want.delegate_options.clear();
  for (const store::JobRow& j : report.jobs) {
    if (j.trial != job.trial || !(store::CellOf(j) == want)) continue;
    auto it = report.task.find(j.id);
    if (it != report.task.end() && it->second.dataset == mine->second.dataset) return &it->second;
  }
  return nullptr;
}

const store::TaskAccuracy* BaselineTaskOf(const RunReport& report, const store::JobRow& job) {
  if (!report.comparison) return nullptr;
  const store::Cell cell = store::CellOf(job);
  for (const CellVerdict& v : report.comparison->cells) {
    if (!(v.cell == cell)) continue;
    for (int64_t id : v.baseline_jobs) {
      auto it = report.comparison->baseline_task.find(id);
      if (it != report.comparison->baseline_task.end()) return &it->second;
    }
  }
  return nullptr;
}

namespace {

// Points with a sign, one decimal, and no "-0.0": "-10.0", "+2.5", "0.0".
std::string SignedPoints(double v) {
  const double r = std::round(v * 10) / 10;
  if (r == 0) return "0.0";
  return (r > 0 ? "+" : "") + Fixed(r, 1);
}

struct TaskRow {
  const store::JobRow* job;
  const store::TaskAccuracy* task;
  std::string top1, topk, vs_cpu;
  bool lost = false;  // the drop against cpu is above 0 beyond its interval
  // With a baseline (report.comparison): its headline metric and the paired
  // change from it; "-" when the baseline cell has none on the same set.
  std::string baseline = "-", vs_baseline = "-";
  bool lost_vs_baseline = false;
};

// The change from `from` to `to` of `metric` (minus the paired drop, its
// interval turned over): "-2.5 pt (-4.1 to -0.8)"; `lost` when the drop is
// above 0 beyond its interval. "-" when the two are not on the same set.
std::string ChangeText(const store::TaskAccuracy& from, const store::TaskAccuracy& to,
                       const std::string& metric, bool& lost) {
  auto d = eval::PairedTaskDrop(from, to, metric);
  if (!d) return "-";
  lost = d->low > 0;
  return SignedPoints(-d->points) + " pt (" + SignedPoints(-d->high) + " to " +
         SignedPoints(-d->low) + ")";
}

// `t`'s value of metric `name`, as TaskMetricText writes it, or "-".
std::string MetricText(const store::TaskAccuracy& t, const std::string& name) {
  const store::TaskMetric* m = t.Find(name);
  return m == nullptr ? "-" : TaskMetricText(*m);
}

std::vector<TaskRow> TaskRows(const RunReport& report, const std::vector<CellGroup>& cells) {
  std::vector<TaskRow> rows;
  for (const CellGroup& cell : cells) {
    for (size_t i : cell.jobs) {
      const store::JobRow& j = report.jobs[i];
      auto it = report.task.find(j.id);
      if (it == report.task.end()) continue;
      TaskRow row{&j, &it->second, "-", "-", "-"};
      const store::TaskAccuracy& t = it->second;
      // The headline metric (top-1, mAP or mIoU) first, named but for top-1.
      const std::string headline = t.metrics.empty() ? "top1" : t.metrics[0].name;
      if (!t.metrics.empty()) {
        row.top1 = (headline == "top1" ? "" : TaskMetricLabel(headline) + " ") +
                   TaskMetricText(t.metrics[0]);
      }
      if (t.metrics.size() > 1) {
        row.topk = TaskMetricLabel(t.metrics[1].name) + " " + TaskMetricText(t.metrics[1]);
      }
      if (const store::TaskAccuracy* cpu = CpuTaskOf(report, j)) {
        row.vs_cpu = ChangeText(*cpu, t, headline, row.lost);
      }
      if (const store::TaskAccuracy* base = BaselineTaskOf(report, j)) {
        row.baseline = MetricText(*base, headline);
        row.vs_baseline = ChangeText(*base, t, headline, row.lost_vs_baseline);
      }
      rows.push_back(row);
    }
  }
  return rows;
}

// `text` escaped, its value and its "(interval)" each kept on one line (the
// cell may break between them, never inside "94.2-100.0" or "top-5"), so a
// table of many columns fits the page.
std::string UnbrokenParts(const std::string& text) {
  const size_t open = text.find(" (");
  const auto unbroken = [](const std::string& part) {
    return "<span style=\"white-space:nowrap\">" + HtmlEscape(part) + "</span>";
  };
  if (open == std::string::npos) return unbroken(text);
  return unbroken(text.substr(0, open)) + " " + unbroken(text.substr(open + 1));
}

const char* kTaskIntro =
    "Task accuracy on the labelled set of each model's `eval` (classification: top-1 and top-k; "
    "detection: COCO mAP@[.5:.95] and mAP@.5; segmentation: mIoU and pixel accuracy; in "
    "percent, with a 95% bootstrap interval over the images); against cpu: the change of the "
    "first metric from the same run's cpu job on the same images, in percentage points, with "
    "its paired interval.";
const char* kTaskBaselineIntro =
    " Baseline: the first metric of the baseline run's cell (the job the gate judges) and the "
    "change from it, likewise paired.";

}  // namespace

void TaskAccuracyTable(std::ostringstream& md, const RunReport& report,
                       const std::vector<CellGroup>& cells) {
  const std::vector<TaskRow> rows = TaskRows(report, cells);
  if (rows.empty()) return;
  const bool with_baseline = report.comparison.has_value();
  md << "\n## Task accuracy\n\n"
     << kTaskIntro << (with_baseline ? kTaskBaselineIntro : "")
     << "\n\n| job | set | images | top-1 (mAP, mIoU) | top-k (mAP@.5, pixel accuracy) | "
        "against cpu |"
     << (with_baseline ? " baseline | against baseline |" : "")
     << "\n| --- | --- | ---: | ---: | ---: | ---: |" << (with_baseline ? " ---: | ---: |" : "")
     << "\n";
  const auto bold = [](bool on, const std::string& text) { return on ? "**" + text + "**" : text; };
  for (const TaskRow& r : rows) {
    md << "| " << Md(store::CellOf(*r.job).Label()) << " #" << r.job->id << " | "
       << Md(r.task->dataset) << " | " << r.task->images << " | " << r.top1 << " | " << r.topk
       << " | " << bold(r.lost, r.vs_cpu) << " |";
    if (with_baseline) {
      md << " " << r.baseline << " | " << bold(r.lost_vs_baseline, r.vs_baseline) << " |";
    }
    md << "\n";
  }
}

void TaskAccuracySection(std::ostringstream& h, const RunReport& report,
                         const std::vector<CellGroup>& cells) {
  const std::vector<TaskRow> rows = TaskRows(report, cells);
  if (rows.empty()) return;
  std::string intro = kTaskIntro;
  for (size_t at; (at = intro.find('`')) != std::string::npos;) {
    intro.replace(at, 1, intro.find('`', at + 1) == std::string::npos ? "</code>" : "<code>");
  }
  const bool with_baseline = report.comparison.has_value();
  h << "<h2>Task accuracy</h2>\n<p>" << intro << (with_baseline ? kTaskBaselineIntro : "")
    << "</p>\n<table>\n<thead><tr><th>job</th><th>set</th><th>images</th><th>top-1 (mAP, mIoU)</th>"
       "<th>top-k (mAP@.5, pixel accuracy)</th><th>against cpu</th>"
    << (with_baseline ? "<th>baseline</th><th>against baseline</th>" : "")
    << "</tr></thead>\n<tbody>\n";
  const auto figure = [](bool lost, const std::string& text) {
    return std::string("<td class=\"num\"") + (lost ? " style=\"color:#b00\"" : "") + ">" +
           UnbrokenParts(text) + "</td>";
  };
  for (const TaskRow& r : rows) {
    h << "<tr><td>" << HtmlEscape(store::CellOf(*r.job).Label()) << " #" << r.job->id << "</td><td>"
      << HtmlEscape(r.task->dataset) << "</td><td class=\"num\">" << r.task->images << "</td>"
      << figure(false, r.top1) << figure(false, r.topk) << figure(r.lost, r.vs_cpu);
    if (with_baseline) {
      h << figure(false, r.baseline) << figure(r.lost_vs_baseline, r.vs_baseline);
    }
    h << "</tr>\n";
  }
  h << "</tbody>\n</table>\n";
}

}  // namespace dfarm::reports
