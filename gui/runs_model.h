// RunsModel: the runs of one database as a table. It holds value types only
// and resets when the loader hands it a new list; no I/O happens here.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "reports/store/store.h"

namespace dfarm::gui {

class RunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { IdColumn, NameColumn, CreatedColumn, FinishedColumn, StatusColumn, ColumnCount };
  // Role that returns a run's id (qint64) for any column.
  static constexpr int RunIdRole = Qt::UserRole + 1;

  explicit RunsModel(QObject* parent = nullptr);

  void setRuns(std::vector<store::RunRow> runs);
  const std::vector<store::RunRow>& runs() const { return m_runs; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::RunRow> m_runs;
};

}  // namespace dfarm::gui
