// CompareView: two runs side by side, cell by cell, as the release gate
// judges them (gate::RunGate, default policy): medians, ratio with its
// confidence interval, q-value, accuracy and memory deltas and the verdict.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <map>
#include <string>
#include <vector>

#include "gui/views/view.h"
#include "reports/gate/gate.h"
#include "reports/store/store.h"

class QLabel;
class QTableView;

namespace dfarm::gui {

struct CompareData {
  store::RunRow baseline, candidate;
  gate::GateResult gate;
  // Both runs' task accuracy (spec "eval"), by job id.
  std::map<int64_t, store::TaskAccuracy> task;
};

// Reads both runs, their task accuracy, and gates candidate against baseline (blocking).
Result<CompareData> ReadCompare(store::Reader& store, int64_t baselineRunId,
                                int64_t candidateRunId);

class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    CellColumn,
    VerdictColumn,
    TaskColumn,  // task accuracy, baseline → candidate (each side's first ok job with it);
                 // hidden when no cell has any
    BaselineColumn,
    CandidateColumn,
    RatioColumn,
    QColumn,
    AccuracyColumn,
    MemoryColumn,
    TrialsColumn,
    FindingsColumn,
    ColumnCount
  };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int JobIdRole = Qt::UserRole + 2;  // the candidate's first ok job

  explicit CompareModel(QObject* parent = nullptr);

  // The cells, and the task accuracy of their jobs by job id (CompareData::task).
  void setCells(std::vector<gate::CellResult> cells,
                std::map<int64_t, store::TaskAccuracy> task = {});
  const std::vector<gate::CellResult>& cells() const { return m_cells; }
  // Whether any cell has task accuracy on either side.
  bool hasTask() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QVariant display(const gate::CellResult& c, int column) const;
  // The first of `jobs` with task accuracy, or nullptr.
  const store::TaskAccuracy* taskOf(const std::vector<int64_t>& jobs) const;
  std::vector<gate::CellResult> m_cells;
  std::map<int64_t, store::TaskAccuracy> m_task;
};

class CompareView : public View {
  Q_OBJECT

 public:
  explicit CompareView(QWidget* parent = nullptr);

  void showCompare(qint64 baselineRunId, qint64 candidateRunId);
  void open(const Location& where) override;
  void refresh() override;

  CompareModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  QString summary() const;

 private:
  void load();
  void applied(const Result<CompareData>& result);

  CompareModel* m_model;
  QSortFilterProxyModel* m_proxy;
  QTableView* m_table;
  QLabel* m_runs;
  QLabel* m_message;
  qint64 m_baseline = 0, m_candidate = 0;
  quint64 m_generation = 0;
};

}  // namespace dfarm::gui
