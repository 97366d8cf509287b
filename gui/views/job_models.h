// What the Job view shows of one job, read in one go off the GUI thread
// (loadJob), and the table models of its parts: per-output accuracy,
// placement per node, the per-op profile, device telemetry before/after.
// latencyHistogram bins the raw samples.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <optional>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/store.h"

class QJsonObject;

namespace dfarm::gui {

struct JobData {
  store::JobRow job;
  std::vector<double> samples_us;          // steady-state runs, in run order
  std::optional<store::JobDetail> detail;  // unset until the job has a result
  std::optional<store::Accuracy> accuracy;
  std::optional<store::JobPlacement> placement;
  std::optional<store::JobProfile> profile;  // spec benchmark.profile only
  std::vector<store::TelemetryRow> telemetry;
  std::optional<store::JobSustained> sustained;  // spec benchmark.sustained_s only
  std::optional<store::TaskAccuracy> task;       // a model with a spec "eval" only
};

// Reads everything of job `jobId` (blocking). kNotFound names the job.
Result<JobData> loadJob(store::Reader& store, qint64 jobId);

struct HistogramBin {
  double lo_us = 0;
  double hi_us = 0;
  int count = 0;
};
// Equal-width bins over [min, max] of the samples (about sqrt(n), 5 to 30
// bins; one bin when all samples are equal). Empty for no samples.
std::vector<HistogramBin> latencyHistogram(const std::vector<double>& samples_us);

class AccuracyModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    IndexColumn,
    NameColumn,
    MaxAbsColumn,
    MeanAbsColumn,
    RmseColumn,
    SnrColumn,
    PsnrColumn,
    LsbColumn,
    NanInfColumn,
    Top1Column,
    Top5Column,
    ColumnCount
  };
  explicit AccuracyModel(QObject* parent = nullptr);
  void setAccuracy(std::optional<store::Accuracy> accuracy);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::OutputAccuracy> m_outputs;
};

class PlacementModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { IndexColumn, OpColumn, DelegateColumn, PartitionColumn, ReasonColumn, ColumnCount };
  explicit PlacementModel(QObject* parent = nullptr);
  // Folded nodes (constants evaluated at load) are listed after the others,
  // their delegate shown as "folded at load".
  void setPlacement(std::optional<store::JobPlacement> placement);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::PlacementNode> m_nodes;
};

// The per-op profile (spec benchmark.profile): one row per op type, slowest
// first, as the runner listed them.
class ProfileModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { OpColumn, CountColumn, TotalColumn, ShareColumn, ColumnCount };
  explicit ProfileModel(QObject* parent = nullptr);
  void setProfile(std::optional<store::JobProfile> profile);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::ProfileOp> m_ops;
};

// Device telemetry: one row per figure, columns before / after.
class TelemetryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { FigureColumn, BeforeColumn, AfterColumn, ColumnCount };
  explicit TelemetryModel(QObject* parent = nullptr);
  // The telemetry rows plus the state_before/after JSON objects' figures:
  // one row per CPU ("1800 MHz, schedutil"), per thermal zone and per other
  // key, named without the unit suffix and valued with the unit ("°C").
  void setTelemetry(const std::vector<store::TelemetryRow>& rows,
                    const std::optional<std::string>& stateBefore,
                    const std::optional<std::string>& stateAfter);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    QString figure, before, after;
  };
  // The device state objects' figures, one row each with its unit.
  void addStateRows(const QJsonObject& before, const QJsonObject& after);
  std::vector<Row> m_rows;
};

}  // namespace dfarm::gui
