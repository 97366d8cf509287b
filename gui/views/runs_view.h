// RunsView: every run of the database with a filter bar (name, tag, date
// range, device, model, delegate, status), job counts by status and tags.
// Enter or a double click opens a run; two selected runs and "Compare" ask
// the window to compare them (older as baseline).
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gui/views/view.h"
#include "reports/store/store.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;

namespace dfarm::gui {

// One run as the runs table shows it, and what the filter bar asks for
// (empty fields match everything): the store's own query, as `dfarm runs`.
using RunSummaryRow = store::RunSummary;
using RunsFilter = store::RunFilter;

// Reads the runs matching `filter`, newest first (blocking: call it off the
// GUI thread).
Result<std::vector<RunSummaryRow>> ReadRunSummaries(store::Reader& store, const RunsFilter& filter);

class RunSummariesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    IdColumn,
    NameColumn,
    CreatedColumn,
    StatusColumn,
    JobsColumn,
    CountsColumn,
    TagsColumn,
    ColumnCount
  };
  static constexpr int RunIdRole = Qt::UserRole + 1;
  static constexpr int SortRole = Qt::UserRole + 2;

  explicit RunSummariesModel(QObject* parent = nullptr);

  // Replaces the rows; rows whose run id is unchanged update in place when
  // the run ids are the same list (live refresh keeps selection and scroll).
  void setRuns(std::vector<RunSummaryRow> runs);
  const std::vector<RunSummaryRow>& runs() const { return m_runs; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<RunSummaryRow> m_runs;
};

class RunsView : public View {
  Q_OBJECT

 public:
  explicit RunsView(QWidget* parent = nullptr);

  void showRuns();
  void open(const Location& where) override;
  void refresh() override;

  RunSummariesModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  // The filter the bar holds now.
  RunsFilter filter() const;
  // Selected run ids, in row order.
  std::vector<qint64> selectedRuns() const;
  // Selects the rows of these run ids (tests, restoring after a refresh).
  void selectRuns(const std::vector<qint64>& ids);
  // Emits compareRuns(older, newer) when two runs are selected.
  void compareSelected();

 private:
  void load();
  void applied(const Result<std::vector<RunSummaryRow>>& result, std::vector<qint64> keep);
  void updateButtons();

  RunSummariesModel* m_model;
  QSortFilterProxyModel* m_proxy;
  QTableView* m_table;
  QLabel* m_message;
  QLineEdit* m_name;
  QLineEdit* m_tag;
  QLineEdit* m_device;
  QLineEdit* m_modelName;
  QLineEdit* m_delegate;
  QComboBox* m_status;
  QLineEdit* m_from;
  QLineEdit* m_to;
  QPushButton* m_compare;
  quint64 m_generation = 0;
};

}  // namespace dfarm::gui
