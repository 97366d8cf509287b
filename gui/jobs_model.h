// JobsModel: the jobs of one run with their headline figures. Value types
// only; it resets when the loader hands it a new list.
#pragma once

#include <QAbstractTableModel>
#include <map>
#include <vector>

#include "reports/store/store.h"

namespace dfarm::gui {

class JobsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    ModelColumn,
    DelegateColumn,
    OptionsColumn,
    DeviceColumn,
    StatusColumn,
    InitColumn,
    FirstColumn,
    MeanColumn,
    P50Column,
    P90Column,
    P99Column,
    PeakRssColumn,
    PlacementColumn,
    DeviceStateColumn,
    AccuracyColumn,  // max abs error vs the cpu reference (reports::AccuracyLabel)
    ErrorColumn,
    ColumnCount
  };
  // Role that returns the raw number behind a figure column (double), so that
  // sorting is numeric; DisplayRole is the formatted text.
  static constexpr int SortRole = Qt::UserRole + 1;

  explicit JobsModel(QObject* parent = nullptr);

  void setJobs(std::vector<store::JobRow> jobs, std::map<int64_t, store::Accuracy> accuracy = {});
  const std::vector<store::JobRow>& jobs() const { return m_jobs; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QVariant display(const store::JobRow& job, int column) const;
  QVariant number(const store::JobRow& job, int column) const;

  std::vector<store::JobRow> m_jobs;
  std::map<int64_t, store::Accuracy> m_accuracy;
};

}  // namespace dfarm::gui
