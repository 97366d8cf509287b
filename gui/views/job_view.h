// JobView: one job in full. Its header (model, delegate and options, device,
// threads, trial, runner name and build sha256, status, error, device-state
// flags), a latency histogram of its raw samples, the samples as a timeline
// in run order (the first run and the warm-up mean marked), per-output
// accuracy, placement per node (folded constants apart), the per-op profile
// (when the spec asked for one), the device's
// telemetry before/after and, for a failed job, the runner's stderr tail.
#pragma once

#include "gui/views/job_models.h"
#include "gui/views/view.h"

class QChart;
class QChartView;
class QLabel;
class QPlainTextEdit;
class QTableView;

namespace dfarm::gui {

class JobView : public View {
  Q_OBJECT

 public:
  explicit JobView(QWidget* parent = nullptr);

  void showJob(qint64 jobId);
  void open(const Location& where) override;
  void refresh() override;
  // The latency histogram.
  QWidget* exportableChart() const override;

  qint64 jobId() const { return m_jobId; }
  AccuracyModel* accuracyModel() const { return m_accuracy; }
  PlacementModel* placementModel() const { return m_placement; }
  ProfileModel* profileModel() const { return m_profile; }
  // "Per-op profile (N runs)", or "" when the job has none (the box is hidden).
  QString profileTitle() const;
  TelemetryModel* telemetryModel() const { return m_telemetry; }
  QChart* histogramChart() const { return m_histogram; }
  QChart* timelineChart() const { return m_timeline; }
  QString headerText() const;
  QString stderrText() const;
  QString message() const;

 private:
  void load();
  void showData(const Result<JobData>& data);
  void showHeader(const JobData& d);
  void showProfile(const JobData& d);
  // A sustained-mode job's timeline: p50 per time window, and the hottest
  // thermal zone on a second axis.
  void buildSustainedTimeline(const JobData& d);
  void buildHistogram(const JobData& d);
  void buildTimeline(const JobData& d);

  qint64 m_jobId = 0;
  quint64 m_generation = 0;
  QLabel* m_header = nullptr;
  QLabel* m_flags = nullptr;
  QLabel* m_message = nullptr;
  QChart* m_histogram = nullptr;
  QChartView* m_histogramView = nullptr;
  QChart* m_timeline = nullptr;
  QChartView* m_timelineView = nullptr;
  AccuracyModel* m_accuracy = nullptr;
  PlacementModel* m_placement = nullptr;
  ProfileModel* m_profile = nullptr;
  TelemetryModel* m_telemetry = nullptr;
  QTableView* m_accuracyTable = nullptr;
  QTableView* m_placementTable = nullptr;
  QTableView* m_profileTable = nullptr;
  QLabel* m_profileSummary = nullptr;
  QWidget* m_profileBox = nullptr;
  QTableView* m_telemetryTable = nullptr;
  QLabel* m_placementSummary = nullptr;
  QPlainTextEdit* m_stderr = nullptr;
  QWidget* m_stderrBox = nullptr;
};

}  // namespace dfarm::gui
