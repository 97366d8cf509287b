// MatrixView: one run as a matrix, model x delegate configuration rows and
// devices as columns (the HTML report's heatmap, reports::LayoutMatrix). A
// switch colours the cells by speed-up vs the cpu cell, latency (p50),
// accuracy drift (worst max_abs_error vs the CPU reference) or the gate's
// verdict against the run's parent or the run tagged baseline/release. A click
// opens the cell's first job; the context menu opens the cell's trend.
#pragma once

#include <QAbstractTableModel>
#include <QStyledItemDelegate>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gui/views/view.h"
#include "reports/gate/verdict.h"
#include "reports/store/store.h"

class QComboBox;
class QLabel;
class QTableView;

namespace dfarm::gui {

// One cell of the matrix, as value types.
struct MatrixCell {
  bool present = false;
  store::Cell cell;  // its first job's (Label() heads the tooltip; the trend opens it)
  size_t trials = 0, ok = 0;
  std::string bad;      // the first status of a trial that is not ok ("" when all are)
  std::string error;    // that trial's error line
  bool is_cpu = false;  // the cpu reference of its model and device
  std::optional<double> median_us, speedup, max_abs_error;
  int64_t first_job = 0;
  std::optional<gate::Verdict> verdict;  // unset before the gate ran or without one
  std::string verdict_detail;
  // The delegate took less than the whole graph (store::PartialDelegation):
  // its Count() on the cell's third line, its Label() in the tooltip.
  std::string partial_count, partial_label;
  bool not_delegated = false;  // it took no node: no speed-up of its own
};

struct MatrixData {
  store::RunRow run;
  std::vector<std::string> devices;
  std::vector<std::pair<std::string, std::string>> rows;  // (model, configuration)
  std::vector<std::vector<MatrixCell>> cells;             // [row][device]
};

// The gate's verdicts for a run: (cell, (verdict, detail)), cells as the gate
// keys them (the device's class, which the default policy leaves the device).
struct MatrixGate {
  int64_t baseline_run = 0;  // 0: none found
  std::string note;          // "no baseline", an error, or "vs run N (tag baseline)"
  std::vector<std::pair<store::Cell, std::pair<gate::Verdict, std::string>>> verdicts;
};

// Reads a run's matrix (blocking: call it off the GUI thread).
Result<MatrixData> ReadMatrix(store::Reader& store, int64_t runId);
// Runs the gate (default policy) of `run` against its parent, else the run
// tagged "baseline", else "release"; a note says "no baseline" when none.
Result<MatrixGate> ReadMatrixGate(store::Reader& store, const store::RunRow& run);

class MatrixModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum class Colour { kSpeedup, kLatency, kAccuracy, kVerdict };
  enum { ModelColumn, ConfigColumn, FirstDeviceColumn };
  static constexpr int JobIdRole = Qt::UserRole + 1;   // qint64, 0 for none
  static constexpr int DetailRole = Qt::UserRole + 2;  // the cell's second line
  static constexpr int FailedRole = Qt::UserRole + 3;  // bool: no ok trial
  // The cell's third line: "⚠ xnnpack: 0 of 60 nodes" when its delegate took
  // less than the whole graph, else empty.
  static constexpr int PartialRole = Qt::UserRole + 4;

  explicit MatrixModel(QObject* parent = nullptr);

  // A new run resets; the same run with the same shape updates in place.
  void setMatrix(MatrixData data);
  void setGate(const MatrixGate& gate);
  void setColour(Colour colour);
  Colour colour() const { return m_colour; }
  const MatrixData& matrix() const { return m_data; }
  // The cell at a device column, or null.
  const MatrixCell* cellAt(const QModelIndex& index) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QVariant cellData(const MatrixCell& cell, int role) const;
  QString figure(const MatrixCell& cell) const;
  QVariant background(const MatrixCell& cell) const;
  void updateAll();

  MatrixData m_data;
  Colour m_colour = Colour::kSpeedup;
  double m_minMedian = 0, m_maxMedian = 0;  // over the ok cells, for the latency scale
};

// Paints a cell as a coloured box with its figure and a second small line.
class MatrixDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;

 private:
  void paintThreeLines(QPainter* painter, const QStyleOptionViewItem& option, const QRect& box,
                       const QString& figure, const QString& detail, const QString& partial) const;
};

class MatrixView : public View {
  Q_OBJECT

 public:
  explicit MatrixView(QWidget* parent = nullptr);

  void showRun(qint64 runId);
  void open(const Location& where) override;
  void refresh() override;

  MatrixModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  QComboBox* colourSwitch() const { return m_colourSwitch; }
  QString gateNote() const { return m_gateNote; }
  // The cell and its first job (what the context menu and a click emit).
  void activateCell(const QModelIndex& index);
  void trendOfCell(const QModelIndex& index);

 signals:
  // The gate's verdicts arrived (or its note: no baseline, an error).
  void gateLoaded();

 private:
  void load();
  void loadGate();
  void applied(const Result<MatrixData>& result);
  void colourChanged(int index);
  void contextMenu(const QPoint& pos);
  // What the colours mean in the current mode (the gate's note for verdicts).
  QString legend() const;

  MatrixModel* m_model;
  QTableView* m_table;
  QLabel* m_title;
  QLabel* m_message;
  QComboBox* m_colourSwitch;
  qint64 m_runId = 0;
  quint64 m_generation = 0;
  bool m_gateLoaded = false;
  QString m_gateNote;
};

}  // namespace dfarm::gui
