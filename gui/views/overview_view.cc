#include "gui/views/overview_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "gui/store_loader.h"
#include "reports/history.h"

namespace dfarm::gui {

namespace {

QString formatChange(const OverviewChange& c) {
  return QStringLiteral("%1%2% at run #%3 (%4 -> %5 ms)")
      .arg(c.changePct >= 0 ? "+" : "")
      .arg(c.changePct, 0, 'f', 1)
      .arg(c.runId)
      .arg(c.before, 0, 'f', 3)
      .arg(c.after, 0, 'f', 3);
}

// Draws PointsRole as a line scaled to the cell, the last point as a dot.
class SparklineDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

  void paint(QPainter* painter, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override {
    QStyledItemDelegate::paint(painter, option, QModelIndex());  // background, selection
    const QList<double> points = index.data(OverviewModel::PointsRole).value<QList<double>>();
    if (points.size() < 2) return;
    const auto [lo_it, hi_it] = std::minmax_element(points.begin(), points.end());
    // At least +-10% of the middle in height: run-to-run noise stays flat,
    // a step stands out.
    const double mid = (*hi_it + *lo_it) / 2;
    const double span = std::max({*hi_it - *lo_it, std::fabs(mid) * 0.2, 1e-9});
    const double lo = mid - span / 2;
    const QRectF r = QRectF(option.rect).adjusted(4, 4, -6, -4);
    QPainterPath path;
    QPointF last;
    for (qsizetype i = 0; i < points.size(); ++i) {
      const double x = r.left() + r.width() * static_cast<double>(i) / (points.size() - 1);
      const double y = r.bottom() - r.height() * (points[i] - lo) / span;
      last = QPointF(x, y);
      if (i == 0) {
        path.moveTo(last);
      } else {
        path.lineTo(last);
      }
    }
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    painter->setPen(QPen(QColor(25, 90, 160), 1.5));
    painter->drawPath(path);
    painter->setBrush(QColor(25, 90, 160));
    painter->drawEllipse(last, 2.5, 2.5);
    painter->restore();
  }

  QSize sizeHint(const QStyleOptionViewItem&, const QModelIndex&) const override {
    return {160, 24};
  }
};

OverviewRow makeRow(const store::CellRecentValues& recent, const reports::RunsById& runs) {
  OverviewRow row;
  row.cell = recent.cell;
  row.label = QString::fromStdString(recent.cell.Label());
  row.lastRunId = recent.last_run_id;
  // The history rule: medians by run, then stats::DetectChangePoints.
  const reports::CellSeries series = reports::SeriesOfTrials(recent.p50_us, runs);
  for (const reports::HistoryPoint& p : series.points) row.points.push_back(p.value / 1000.0);
  if (!series.points.empty()) {
    row.latestMs = series.points.back().value / 1000.0;
    row.latestRunId = series.points.back().run_id;
  }
  if (!series.changes.empty()) {
    const reports::HistoryChange& c = series.changes.back();
    row.lastChange = OverviewChange{c.run_id,          QString::fromStdString(c.created_at),
                                    c.before / 1000.0, c.after / 1000.0,
                                    c.change_pct,      c.regression};
  }
  return row;
}

}  // namespace

Result<OverviewData> loadOverview(store::Reader& store, int64_t runs) {
  auto byId = reports::LoadRunsById(store);
  if (!byId) return byId.error();
  auto recent = store.ListRecentCellValues(runs);
  if (!recent) return recent.error();
  OverviewData data;
  data.rows.reserve(recent->size());
  for (const store::CellRecentValues& r : *recent) data.rows.push_back(makeRow(r, *byId));
  return data;
}

OverviewModel::OverviewModel(QObject* parent) : QAbstractTableModel(parent) {}

void OverviewModel::setOverview(OverviewData data) {
  beginResetModel();
  m_data = std::move(data);
  endResetModel();
}

int OverviewModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_data.rows.size());
}

int OverviewModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant OverviewModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const OverviewRow& r = m_data.rows[static_cast<size_t>(index.row())];
  const int column = index.column();
  if (role == RowRole) return index.row();
  if (role == PointsRole)
    return QVariant::fromValue(QList<double>(r.points.begin(), r.points.end()));
  if (role == Qt::TextAlignmentRole && (column == LatestColumn || column == LastRunColumn)) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ForegroundRole && column == ChangeColumn && r.lastChange) {
    return QColor(r.lastChange->regression ? QColor(0xb0, 0x20, 0x20) : QColor(0x1a, 0x6b, 0x1a));
  }
  if (role == Qt::ToolTipRole) {
    if (column == ChangeColumn && r.lastChange) {
      return tr("Step change at run #%1 (%2), as `dfarm history` finds it in the newest %3 runs")
          .arg(r.lastChange->runId)
          .arg(r.lastChange->createdAt)
          .arg(kOverviewRuns);
    }
    if (column == TrendColumn) return tr("Median p50 of the newest %1 runs").arg(r.points.size());
    return data(index, Qt::DisplayRole);
  }
  if (role == SortRole) {
    switch (column) {
      case LatestColumn:
        return r.latestMs ? *r.latestMs : -1.0;
      case TrendColumn:  // the newest point against the oldest shown
        return r.points.size() < 2 || r.points.front() == 0
                   ? 0.0
                   : r.points.back() / r.points.front() - 1;
      case ChangeColumn:
        return r.lastChange ? r.lastChange->changePct : 0.0;
      case LastRunColumn:
        return QVariant::fromValue<qint64>(r.lastRunId);
      default:
        return r.label;
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (column) {
    case CellColumn:
      return r.label;
    case LatestColumn:
      return r.latestMs ? QString::number(*r.latestMs, 'f', 3) : tr("no ok trial");
    case ChangeColumn:
      return r.lastChange ? formatChange(*r.lastChange) : QString();
    case LastRunColumn:
      return QStringLiteral("#%1").arg(r.lastRunId);
    default:
      return {};
  }
}

QVariant OverviewModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case CellColumn:
      return tr("Cell");
    case LatestColumn:
      return tr("Latest p50 (ms)");
    case TrendColumn:
      return tr("Trend (newest %1 runs)").arg(kOverviewRuns);
    case ChangeColumn:
      return tr("Last change");
    case LastRunColumn:
      return tr("Last run");
  }
  return {};
}

OverviewView::OverviewView(QWidget* parent) : View(parent) {
  m_summary = new QLabel(this);
  m_filter = new QLineEdit(this);
  m_filter->setPlaceholderText(tr("Filter cells (a part of the label)"));
  m_filter->setClearButtonEnabled(true);
  m_filter->setMinimumWidth(280);
  m_message = new QLabel(this);
  m_message->setWordWrap(true);
  m_message->hide();
  m_model = new OverviewModel(this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(OverviewModel::SortRole);
  m_proxy->setFilterKeyColumn(OverviewModel::CellColumn);
  m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
  connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
  m_table = new QTableView(this);
  m_table->setModel(m_proxy);
  m_table->setItemDelegateForColumn(OverviewModel::TrendColumn, new SparklineDelegate(m_table));
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(OverviewModel::CellColumn, Qt::AscendingOrder);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(m_table, &QTableView::activated, this, [this](const QModelIndex& index) {
    const int row = index.data(OverviewModel::RowRole).toInt();
    emit openCell(m_model->overview().rows[static_cast<size_t>(row)].cell);
  });
  connect(m_table, &QTableView::customContextMenuRequested, this, &OverviewView::showMenu);
  auto* top = new QHBoxLayout;
  top->addWidget(m_summary, 1);
  top->addWidget(m_filter);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(m_message);
  layout->addWidget(m_table, 1);
}

View* MakeOverviewView(QWidget* parent) { return new OverviewView(parent); }

void OverviewView::open(const Location&) { load(); }

void OverviewView::refresh() { load(); }

QString OverviewView::message() const { return m_message->isHidden() ? "" : m_message->text(); }

QList<store::Cell> OverviewView::selectedCells() const {
  QList<store::Cell> cells;
  for (const QModelIndex& index : m_table->selectionModel()->selectedRows()) {
    if (cells.size() == kMaxTrendSeries) break;
    const int row = index.data(OverviewModel::RowRole).toInt();
    cells << m_model->overview().rows[static_cast<size_t>(row)].cell;
  }
  return cells;
}

void OverviewView::load() {
  markLoading();
  const quint64 generation = ++m_generation;
  LoadAsync<OverviewData>(
      database(), this, [](store::Reader& s) { return loadOverview(s); },
      [this, generation](const Result<OverviewData>& data) {
        if (generation == m_generation) showOverview(data);
      });
}

void OverviewView::showOverview(const Result<OverviewData>& data) {
  if (!data) {
    m_message->setText(
        tr("Cannot show the overview: %1").arg(QString::fromStdString(data.message())));
    m_message->setStyleSheet("color: darkred");
    m_message->show();
  } else {
    // The same rows again (a live refresh): keep the selection and scroll.
    const int scroll = m_table->verticalScrollBar()->value();
    const QList<store::Cell> selected = selectedCells();
    m_model->setOverview(*data);
    size_t changes = 0;
    for (const OverviewRow& r : data->rows) changes += r.lastChange ? 1 : 0;
    m_summary->setText(tr("%1 cells, %2 with a step change in their newest %3 runs")
                           .arg(data->rows.size())
                           .arg(changes)
                           .arg(kOverviewRuns));
    m_message->setText(tr("No cell yet: run `dfarm sweep SPEC` into this database."));
    m_message->setStyleSheet("");
    m_message->setVisible(data->rows.empty());
    for (int i = 0; i < m_proxy->rowCount(); ++i) {
      const QModelIndex index = m_proxy->index(i, 0);
      const int row = index.data(OverviewModel::RowRole).toInt();
      if (selected.contains(m_model->overview().rows[static_cast<size_t>(row)].cell)) {
        m_table->selectionModel()->select(index,
                                          QItemSelectionModel::Select | QItemSelectionModel::Rows);
      }
    }
    m_table->resizeColumnsToContents();
    m_table->setColumnWidth(OverviewModel::TrendColumn, 180);
    m_table->verticalScrollBar()->setValue(scroll);
  }
  QTimer::singleShot(0, this, [this] { markReady(); });
}

void OverviewView::showMenu(const QPoint& pos) {
  const QModelIndex index = m_table->indexAt(pos);
  if (!index.isValid()) return;
  const QList<store::Cell> cells = selectedCells();
  QMenu menu(this);
  menu.addAction(tr("Trend of this cell"), this, [this, index] { emit m_table->activated(index); });
  if (cells.size() > 1) {
    menu.addAction(tr("Trend of the %1 selected cells").arg(cells.size()), this,
                   [this, cells] { emit openCells(cells); });
  }
  menu.addAction(tr("Add to the trend"), this, [this, cells] { emit addToTrend(cells); });
  menu.exec(m_table->viewport()->mapToGlobal(pos));
}

}  // namespace dfarm::gui
