// OverviewView: every cell of the database at a glance, one row each: its
// label, its latest p50 latency, a sparkline of its newest runs and the last
// step change `dfarm history` finds in them (reports::SeriesOfTrials over
// Store::ListRecentCellValues: one query for every cell). Rows sort on a
// header click and filter on a part of the label; activating a row opens the
// cell's trend, the context menu draws the selected cells on one trend.
#pragma once

#include <QAbstractTableModel>
#include <QList>
#include <QString>
#include <optional>
#include <vector>

#include "agent/base/result.h"
#include "gui/views/view.h"
#include "reports/store/store.h"

class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace dfarm::gui {

// The runs of each cell the overview reads (its sparkline's points).
constexpr int64_t kOverviewRuns = 30;

struct OverviewChange {
  int64_t runId = 0;  // the first run of the new level
  QString createdAt;  // that run's
  double before = 0;  // ms
  double after = 0;
  double changePct = 0;
  bool regression = false;
};

struct OverviewRow {
  store::Cell cell;
  QString label;                   // cell.Label()
  std::optional<double> latestMs;  // the newest point: median p50 of its run's ok trials
  int64_t latestRunId = 0;         // the run of that point
  int64_t lastRunId = 0;           // the newest run with a job of the cell, any status
  std::vector<double> points;      // medians (ms), oldest of the newest kOverviewRuns first
  std::optional<OverviewChange> lastChange;  // the newest step change among the points
};

struct OverviewData {
  std::vector<OverviewRow> rows;  // in Cell order
};

// Reads every cell's newest `runs` runs (blocking; off the GUI thread).
Result<OverviewData> loadOverview(store::Reader& store, int64_t runs = kOverviewRuns);

class OverviewModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { CellColumn, LatestColumn, TrendColumn, LastRunColumn, ChangeColumn, ColumnCount };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int PointsRole = Qt::UserRole + 2;  // QList<double>: the sparkline's medians
  static constexpr int RowRole = Qt::UserRole + 3;     // the row's index in data()

  explicit OverviewModel(QObject* parent = nullptr);
  void setOverview(OverviewData data);
  const OverviewData& overview() const { return m_data; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  OverviewData m_data;
};

class OverviewView : public View {
  Q_OBJECT

 public:
  explicit OverviewView(QWidget* parent = nullptr);

  void open(const Location& where) override;
  void refresh() override;

  OverviewModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  // The cells of the selected rows, in the order shown (at most kMaxTrendSeries).
  QList<store::Cell> selectedCells() const;
  // The error or empty-state message ("" when none).
  QString message() const;

 private:
  void load();
  void showOverview(const Result<OverviewData>& data);
  void showMenu(const QPoint& pos);

  quint64 m_generation = 0;
  QLabel* m_summary = nullptr;
  QLineEdit* m_filter = nullptr;
  QLabel* m_message = nullptr;
  OverviewModel* m_model = nullptr;
  QSortFilterProxyModel* m_proxy = nullptr;
  QTableView* m_table = nullptr;
};

}  // namespace dfarm::gui
