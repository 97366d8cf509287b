#include "gui/views/matrix_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPainter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

#include "gui/format.h"
#include "gui/store_loader.h"
#include "reports/gate/gate.h"
#include "reports/palette.h"
#include "reports/report.h"

namespace dfarm::gui {

namespace {

MatrixCell MakeCell(const reports::RunReport& report, const reports::CellGroup& cell) {
  MatrixCell m;
  m.present = true;
  const store::JobRow& first = report.jobs[cell.jobs.front()];
  m.cell = cell.cell;
  m.first_job = first.id;
  m.trials = cell.jobs.size();
  m.is_cpu = first.delegate == "cpu" && first.delegate_options.empty();
  for (size_t i : cell.jobs) {
    const store::JobRow& j = report.jobs[i];
    if (j.status == store::kJobOk) {
      ++m.ok;
    } else if (m.bad.empty()) {
      m.bad = j.status;
      m.error = j.error;
    }
    auto acc = report.accuracy.find(j.id);
    if (acc == report.accuracy.end()) continue;
    if (auto e = reports::MaxAbsError(acc->second)) {
      m.max_abs_error = std::max(m.max_abs_error.value_or(0.0), *e);
    }
  }
  m.median_us = reports::CellMedianUs(report, cell);
  m.speedup = reports::SpeedupVsCpu(report, report.cells, cell);
  if (const auto partial = reports::CellPartialDelegation(report, cell)) {
    m.partial_count = partial->Count();
    m.partial_label = partial->Label();
    m.not_delegated = partial->TookNone();
  }
  return m;
}

// A verdict's colours as the HTML report's badges have them (reports/palette.h).
reports::Colours VerdictColours(const std::optional<gate::Verdict>& v) {
  return v ? reports::VerdictColours(*v) : reports::NoVerdictColours();
}

// White to red on a log scale between lo and hi.
QColor Ramp(double t) {
  t = std::clamp(t, 0.0, 1.0);
  return QColor(255, static_cast<int>(255 - 120 * t), static_cast<int>(255 - 200 * t));
}

QString Sci(double v) { return QString::number(v, 'g', 2); }

}  // namespace

Result<MatrixData> ReadMatrix(store::Reader& store, int64_t runId) {
  auto report = reports::LoadRunReport(store, runId);
  if (!report) return report.error();
  const reports::CellMatrix layout = reports::LayoutMatrix(report->cells);
  MatrixData d;
  d.run = report->run;
  d.devices = layout.devices;
  for (const reports::MatrixRow& row : layout.rows) {
    d.rows.emplace_back(row.model, row.config);
    std::vector<MatrixCell> line;
    for (int c : row.cells) {
      line.push_back(c < 0 ? MatrixCell{}
                           : MakeCell(*report, report->cells[static_cast<size_t>(c)]));
    }
    d.cells.push_back(std::move(line));
  }
  return d;
}

Result<MatrixGate> ReadMatrixGate(store::Reader& store, const store::RunRow& run) {
  MatrixGate g;
  std::string why;
  if (run.parent_run_id) {
    g.baseline_run = run.parent_run_id;
    why = "its parent run";
  }
  for (const char* tag : {"baseline", "release"}) {
    if (g.baseline_run) break;
    auto found = store.FindTag(tag);
    if (!found) return found.error();
    if (*found && **found != run.id) {
      g.baseline_run = **found;
      why = std::string("tag ") + tag;
    }
  }
  if (!g.baseline_run) {
    g.note = "no baseline (no parent run, no other run tagged baseline or release)";
    return g;
  }
  auto result = gate::RunGate(store, run.id, g.baseline_run, gate::DefaultPolicy());
  if (!result) {
    g.note = "gate vs run " + std::to_string(g.baseline_run) + ": " + result.message();
    return g;
  }
  g.note = "gate (default policy) vs run " + std::to_string(g.baseline_run) + " (" + why +
           "): " + (result->passed ? "passed" : "failed");
  for (const gate::CellResult& c : result->cells) {
    std::string detail;
    for (const gate::Finding& f : c.findings) {
      if (f.fails) detail += (detail.empty() ? "" : "\n") + f.message;
    }
    if (c.ratio > 0) {
      detail += (detail.empty() ? "" : "\n") + QStringLiteral("latency ratio %1 [%2, %3], q %4")
                                                   .arg(c.ratio, 0, 'f', 3)
                                                   .arg(c.ci_low, 0, 'f', 3)
                                                   .arg(c.ci_high, 0, 'f', 3)
                                                   .arg(c.q_value, 0, 'g', 2)
                                                   .toStdString();
    }
    g.verdicts.push_back({c.cell, {c.verdict, detail}});
  }
  return g;
}

MatrixModel::MatrixModel(QObject* parent) : QAbstractTableModel(parent) {}

void MatrixModel::setMatrix(MatrixData data) {
  const bool same =
      data.run.id == m_data.run.id && data.rows == m_data.rows && data.devices == m_data.devices;
  // Keep the gate's verdicts of the same run over a live refresh.
  if (same) {
    for (size_t r = 0; r < data.cells.size(); ++r) {
      for (size_t c = 0; c < data.cells[r].size(); ++c) {
        data.cells[r][c].verdict = m_data.cells[r][c].verdict;
        data.cells[r][c].verdict_detail = m_data.cells[r][c].verdict_detail;
      }
    }
  }
  if (!same) beginResetModel();
  m_data = std::move(data);
  m_minMedian = m_maxMedian = 0;
  for (const auto& line : m_data.cells) {
    for (const MatrixCell& c : line) {
      if (!c.median_us || *c.median_us <= 0) continue;
      m_minMedian = m_minMedian == 0 ? *c.median_us : std::min(m_minMedian, *c.median_us);
      m_maxMedian = std::max(m_maxMedian, *c.median_us);
    }
  }
  if (!same) {
    endResetModel();
  } else {
    updateAll();
  }
}

void MatrixModel::setGate(const MatrixGate& gate) {
  std::map<store::Cell, std::pair<gate::Verdict, std::string>> by_cell(gate.verdicts.begin(),
                                                                       gate.verdicts.end());
  for (auto& line : m_data.cells) {
    for (MatrixCell& c : line) {
      if (!c.present) continue;
      auto it = by_cell.find(c.cell);
      c.verdict = it == by_cell.end() ? std::nullopt : std::optional(it->second.first);
      c.verdict_detail = it == by_cell.end() ? "" : it->second.second;
    }
  }
  updateAll();
}

void MatrixModel::setColour(Colour colour) {
  m_colour = colour;
  updateAll();
}

void MatrixModel::updateAll() {
  if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

const MatrixCell* MatrixModel::cellAt(const QModelIndex& index) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid) ||
      index.column() < FirstDeviceColumn) {
    return nullptr;
  }
  const MatrixCell& c = m_data.cells[static_cast<size_t>(index.row())]
                                    [static_cast<size_t>(index.column() - FirstDeviceColumn)];
  return c.present ? &c : nullptr;
}

int MatrixModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_data.rows.size());
}

int MatrixModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : FirstDeviceColumn + static_cast<int>(m_data.devices.size());
}

QString MatrixModel::figure(const MatrixCell& c) const {
  if (c.ok == 0) return c.bad.empty() ? tr("not run") : Q(c.bad);
  switch (m_colour) {
    case Colour::kSpeedup:
      if (c.is_cpu) return tr("cpu ref");
      if (c.not_delegated) return tr("not delegated");
      return c.speedup ? QStringLiteral("%1×").arg(*c.speedup, 0, 'f', 2) : tr("n/a");
    case Colour::kLatency:
      return c.median_us ? tr("%1 ms").arg(formatMs(*c.median_us)) : tr("n/a");
    case Colour::kAccuracy:
      if (c.is_cpu) return tr("reference");
      return c.max_abs_error ? Sci(*c.max_abs_error) : tr("no comparison");
    case Colour::kVerdict:
      return c.verdict ? QString::fromLatin1(gate::VerdictName(*c.verdict)) : tr("no verdict");
  }
  return {};
}

QVariant MatrixModel::background(const MatrixCell& c) const {
  if (c.ok == 0) return QColor(QString::fromLatin1(reports::JobStatusColours(c.bad).background));
  switch (m_colour) {
    case Colour::kSpeedup: {
      if (c.is_cpu || !c.speedup || c.not_delegated) return QColor(0xee, 0xee, 0xee);
      return QColor(Q(reports::SpeedupColours(*c.speedup).first));
    }
    case Colour::kLatency: {
      if (!c.median_us || m_maxMedian <= m_minMedian) return QColor(0xee, 0xee, 0xee);
      return Ramp(std::log(*c.median_us / m_minMedian) / std::log(m_maxMedian / m_minMedian));
    }
    case Colour::kAccuracy: {
      if (c.is_cpu || !c.max_abs_error) return QColor(0xee, 0xee, 0xee);
      // 1e-6 and below white, 1e-1 and above red.
      return Ramp((std::log10(std::max(*c.max_abs_error, 1e-12)) + 6.0) / 5.0);
    }
    case Colour::kVerdict:
      return QColor(QString::fromLatin1(VerdictColours(c.verdict).background));
  }
  return {};
}

QVariant MatrixModel::cellData(const MatrixCell& c, int role) const {
  switch (role) {
    case Qt::DisplayRole:
      return figure(c);
    case DetailRole: {
      QStringList parts;
      if (c.median_us && m_colour != Colour::kLatency)
        parts << tr("%1 ms").arg(formatMs(*c.median_us));
      if (c.trials > 1) parts << tr("%1/%2 ok").arg(c.ok).arg(c.trials);
      if (!c.bad.empty() && c.ok > 0) parts << QStringLiteral("⚠ ") + Q(c.bad);
      return parts.join(QStringLiteral(" · "));
    }
    case PartialRole:
      return c.partial_count.empty() || c.ok == 0 ? QString()
                                                  : QStringLiteral("⚠ ") + Q(c.partial_count);
    case Qt::BackgroundRole:
      return background(c);
    case Qt::ForegroundRole: {
      if (c.ok == 0) {
        return QColor(QString::fromLatin1(reports::JobStatusColours(c.bad).foreground));
      }
      if (m_colour == Colour::kSpeedup && c.speedup && !c.is_cpu && !c.not_delegated) {
        return QColor(Q(reports::SpeedupColours(*c.speedup).second));
      }
      if (m_colour == Colour::kVerdict) {
        return QColor(QString::fromLatin1(VerdictColours(c.verdict).foreground));
      }
      return QColor(0x22, 0x22, 0x22);
    }
    case Qt::ToolTipRole: {
      QStringList lines{Q(c.cell.Label())};
      lines << tr("median: %1").arg(c.median_us ? formatMs(*c.median_us) + " ms" : tr("n/a"));
      if (!c.partial_label.empty()) {
        lines << tr("partly delegated: %1 (the latency is not the delegate's alone)")
                     .arg(Q(c.partial_label));
      }
      if (c.speedup && !c.is_cpu) lines << tr("speed-up vs cpu: %1×").arg(*c.speedup, 0, 'f', 2);
      lines << tr("trials ok: %1 of %2").arg(c.ok).arg(c.trials);
      if (c.max_abs_error) lines << tr("max abs error vs cpu: %1").arg(Sci(*c.max_abs_error));
      if (!c.bad.empty()) lines << tr("%1: %2").arg(Q(c.bad), Q(c.error));
      if (c.verdict) {
        lines << tr("gate: %1").arg(QString::fromLatin1(gate::VerdictName(*c.verdict)));
      }
      if (!c.verdict_detail.empty()) lines << Q(c.verdict_detail);
      return plainToolTip(lines.join('\n'));
    }
    case JobIdRole:
      return QVariant::fromValue<qint64>(c.first_job);
    case FailedRole:
      return c.ok == 0;
    case Qt::TextAlignmentRole:
      return QVariant::fromValue(Qt::AlignCenter);
    default:
      return {};
  }
}

QVariant MatrixModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const auto& row = m_data.rows[static_cast<size_t>(index.row())];
  if (index.column() == ModelColumn || index.column() == ConfigColumn) {
    const QString text = Q(index.column() == ModelColumn ? row.first : row.second);
    // A model's name once over its configurations, as the HTML heatmap.
    const bool repeated = index.column() == ModelColumn && index.row() > 0 &&
                          m_data.rows[static_cast<size_t>(index.row() - 1)].first == row.first;
    if (role == Qt::DisplayRole) return repeated ? QString() : text;
    if (role == Qt::ToolTipRole) return plainToolTip(text);
    if (role == JobIdRole) return QVariant::fromValue<qint64>(0);
    return {};
  }
  const MatrixCell& c = m_data.cells[static_cast<size_t>(index.row())]
                                    [static_cast<size_t>(index.column() - FirstDeviceColumn)];
  if (!c.present) {
    if (role == Qt::DisplayRole) return QStringLiteral("–");
    if (role == JobIdRole) return QVariant::fromValue<qint64>(0);
    if (role == Qt::TextAlignmentRole) return QVariant::fromValue(Qt::AlignCenter);
    return {};
  }
  return cellData(c, role);
}

QVariant MatrixModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  if (section == ModelColumn) return tr("Model");
  if (section == ConfigColumn) return tr("Delegate configuration");
  const int d = section - FirstDeviceColumn;
  if (d >= 0 && d < static_cast<int>(m_data.devices.size())) {
    return Q(m_data.devices[static_cast<size_t>(d)]);
  }
  return {};
}

void MatrixDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                           const QModelIndex& index) const {
  if (index.column() < MatrixModel::FirstDeviceColumn) {
    QStyledItemDelegate::paint(painter, option, index);
    return;
  }
  painter->save();
  const QRect box = option.rect.adjusted(1, 1, -1, -1);
  const QVariant bg = index.data(Qt::BackgroundRole);
  painter->fillRect(box, bg.isValid() ? bg.value<QColor>() : option.palette.base().color());
  if (option.state & QStyle::State_Selected) {
    painter->setPen(QPen(option.palette.highlight().color(), 2));
    painter->drawRect(box.adjusted(1, 1, -1, -1));
  }
  const QVariant fg = index.data(Qt::ForegroundRole);
  painter->setPen(fg.isValid() ? fg.value<QColor>() : option.palette.text().color());
  QFont bold = option.font;
  bold.setBold(true);
  const QString detail = index.data(MatrixModel::DetailRole).toString();
  const QString partial = index.data(MatrixModel::PartialRole).toString();
  if (!partial.isEmpty()) {
    paintThreeLines(painter, option, box, index.data(Qt::DisplayRole).toString(), detail, partial);
    painter->restore();
    return;
  }
  const int half = box.height() / 2;
  painter->setFont(bold);
  painter->drawText(detail.isEmpty() ? box : box.adjusted(0, 2, 0, -half + 4), Qt::AlignCenter,
                    index.data(Qt::DisplayRole).toString());
  if (!detail.isEmpty()) {
    QFont small = option.font;
    small.setPointSizeF(option.font.pointSizeF() * 0.85);
    painter->setFont(small);
    painter->drawText(box.adjusted(0, half - 2, 0, -2), Qt::AlignCenter, detail);
  }
  painter->restore();
}

// The figure, the detail and the partial delegation's line, each a third
// of the box.
void MatrixDelegate::paintThreeLines(QPainter* painter, const QStyleOptionViewItem& option,
                                     const QRect& box, const QString& figure, const QString& detail,
                                     const QString& partial) const {
  QFont bold = option.font;
  bold.setBold(true);
  QFont small = option.font;
  small.setPointSizeF(option.font.pointSizeF() * 0.85);
  const int third = box.height() / 3;
  painter->setFont(bold);
  painter->drawText(box.adjusted(0, 2, 0, -2 * third), Qt::AlignCenter, figure);
  painter->setFont(small);
  painter->drawText(box.adjusted(0, third, 0, -third), Qt::AlignCenter, detail);
  // On a light badge, readable on every cell colour (a dark blue speed-up too).
  small.setBold(true);
  painter->setFont(small);
  const QRect line = box.adjusted(0, 2 * third - 2, 0, -2);
  const QFontMetrics fm(small);
  QRect badge(0, 0, fm.horizontalAdvance(partial) + 8, fm.height() + 2);
  badge.moveCenter(line.center());
  painter->setPen(Qt::NoPen);
  painter->setBrush(QColor(0xff, 0xf0, 0xc2));
  painter->drawRoundedRect(badge, 3, 3);
  painter->setPen(QColor(0x7a, 0x3b, 0x00));
  painter->drawText(badge, Qt::AlignCenter, partial);
}

QSize MatrixDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const {
  if (index.column() < MatrixModel::FirstDeviceColumn) {
    return QStyledItemDelegate::sizeHint(option, index);
  }
  // Every line in the font paint() draws it in, never clipped: the figure
  // bold, the detail (with a warning such as "⚠ crashed") and the partial
  // line small, the partial one bold on its badge.
  const QFontMetrics fm(option.font);
  QFont bold = option.font;
  bold.setBold(true);
  QFont small = option.font;
  small.setPointSizeF(option.font.pointSizeF() * 0.85);
  QFont smallBold = small;
  smallBold.setBold(true);
  const QString detail = index.data(MatrixModel::DetailRole).toString();
  const QString partial = index.data(MatrixModel::PartialRole).toString();
  int width = std::max(fm.horizontalAdvance(QStringLiteral("000.000 ms · 10/10 ok")) + 12, 110);
  width = std::max(
      width, QFontMetrics(bold).horizontalAdvance(index.data(Qt::DisplayRole).toString()) + 12);
  width = std::max(width, QFontMetrics(small).horizontalAdvance(detail) + 12);
  if (partial.isEmpty()) return {width, fm.height() * 2 + 10};
  width = std::max(width, QFontMetrics(smallBold).horizontalAdvance(partial) + 16);
  return {width, fm.height() * 3 + 12};
}

MatrixView::MatrixView(QWidget* parent)
    : View(parent),
      m_model(new MatrixModel(this)),
      m_table(new QTableView(this)),
      m_title(new QLabel(this)),
      m_message(new QLabel(this)),
      m_colourSwitch(new QComboBox(this)) {
  m_colourSwitch->addItem(tr("Speed-up vs cpu"));
  m_colourSwitch->addItem(tr("Latency (p50)"));
  m_colourSwitch->addItem(tr("Accuracy drift (max abs error vs cpu)"));
  m_colourSwitch->addItem(tr("Gate verdict"));
  m_table->setModel(m_model);
  m_table->setItemDelegate(new MatrixDelegate(m_table));
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setContextMenuPolicy(Qt::CustomContextMenu);
  m_table->verticalHeader()->hide();
  m_table->setMouseTracking(true);
  m_table->setWordWrap(false);
  QFont big = m_title->font();
  big.setBold(true);
  big.setPointSizeF(big.pointSizeF() * 1.15);
  m_title->setFont(big);
  m_message->setWordWrap(true);
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_title, 1);
  bar->addWidget(new QLabel(tr("Colour by:"), this));
  bar->addWidget(m_colourSwitch);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(m_message);
  layout->addWidget(m_table, 1);
  connect(m_colourSwitch, &QComboBox::currentIndexChanged, this, &MatrixView::colourChanged);
  connect(m_table, &QTableView::clicked, this, &MatrixView::activateCell);
  connect(m_table, &QTableView::activated, this, &MatrixView::activateCell);
  connect(m_table, &QTableView::customContextMenuRequested, this, &MatrixView::contextMenu);
}

View* MakeMatrixView(QWidget* parent) { return new MatrixView(parent); }

void MatrixView::open(const Location& where) { showRun(where.runId); }

void MatrixView::showRun(qint64 runId) {
  m_runId = runId;
  m_gateLoaded = false;
  m_gateNote.clear();
  markLoading();
  load();
}

void MatrixView::refresh() {
  if (m_runId) load();
}

void MatrixView::load() {
  const quint64 generation = ++m_generation;
  const qint64 runId = m_runId;
  LoadAsync<MatrixData>(
      database(), this, [runId](store::Reader& s) { return ReadMatrix(s, runId); },
      [this, generation](const Result<MatrixData>& result) {
        if (generation == m_generation) applied(result);
      });
}

void MatrixView::applied(const Result<MatrixData>& result) {
  if (!result) {
    m_title->setText(tr("Run %1").arg(m_runId));
    m_message->setText(tr("Cannot read run %1: %2").arg(m_runId).arg(Q(result.message())));
    m_message->setStyleSheet(QStringLiteral("color: #b02020;"));
    m_model->setMatrix({});
    markReady(m_message->text());
    return;
  }
  const QModelIndex current = m_table->currentIndex();
  const store::RunRow& run = result->run;
  QString title = tr("Run %1 · %2 · %3").arg(run.id).arg(Q(run.name), Q(run.status));
  if (!run.tags.empty()) {
    QStringList tags;
    for (const std::string& t : run.tags) tags << Q(t);
    title += tr(" · tags: %1").arg(tags.join(QStringLiteral(", ")));
  }
  m_title->setText(title);
  m_message->setStyleSheet({});
  m_message->setText(result->rows.empty() ? tr("This run has no jobs.") : legend());
  m_model->setMatrix(*result);
  if (current.isValid() && current.row() < m_model->rowCount() &&
      current.column() < m_model->columnCount()) {
    m_table->setCurrentIndex(m_model->index(current.row(), current.column()));
  }
  m_table->resizeColumnsToContents();
  m_table->resizeRowsToContents();
  m_table->viewport()->repaint();
  // Coloured by verdict, the view is ready once the gate painted too: a
  // refresh never supersedes the gate's read in flight.
  if (m_model->colour() == MatrixModel::Colour::kVerdict) {
    markLoading();
    loadGate();
  } else {
    markReady();
  }
}

void MatrixView::loadGate() {
  const store::RunRow run = m_model->matrix().run;
  const quint64 generation = m_generation;
  LoadAsync<MatrixGate>(
      database(), this, [run](store::Reader& s) { return ReadMatrixGate(s, run); },
      [this, generation](const Result<MatrixGate>& gate) {
        if (generation != m_generation) return;
        m_gateLoaded = true;
        m_gateNote = gate ? Q(gate->note) : tr("gate: %1").arg(Q(gate.message()));
        if (gate) m_model->setGate(*gate);
        m_message->setText(legend());
        m_table->resizeColumnsToContents();
        m_table->resizeRowsToContents();
        emit gateLoaded();
        if (!isReady()) markReady(gate ? QString() : m_gateNote);
      });
}

QString MatrixView::legend() const {
  switch (m_model->colour()) {
    case MatrixModel::Colour::kSpeedup:
      return tr(
          "Median latency of the cpu cell of the same model, device, threads and runner "
          "divided by the cell's: blue faster, orange slower (log scale, 4× saturates); "
          "red: no trial ok (grey: unsupported).");
    case MatrixModel::Colour::kLatency:
      return tr(
          "Median latency (pooled samples of the cell's trials): white fastest, red "
          "slowest of this run (log scale); red box: no trial ok (grey: unsupported).");
    case MatrixModel::Colour::kAccuracy:
      return tr(
          "Worst max abs error of the cell's outputs against the CPU reference: white "
          "≤ 1e-6, red ≥ 0.1 (log scale).");
    case MatrixModel::Colour::kVerdict:
      return m_gateLoaded ? m_gateNote : tr("Running the gate…");
  }
  return {};
}

void MatrixView::colourChanged(int index) {
  m_model->setColour(static_cast<MatrixModel::Colour>(index));
  if (m_model->colour() == MatrixModel::Colour::kVerdict && !m_gateLoaded && m_runId) {
    loadGate();
  }
  m_message->setText(legend());
  m_table->resizeColumnsToContents();
}

void MatrixView::activateCell(const QModelIndex& index) {
  const qint64 job = index.data(MatrixModel::JobIdRole).toLongLong();
  if (job > 0) emit openJob(job);
}

void MatrixView::trendOfCell(const QModelIndex& index) {
  if (const MatrixCell* c = m_model->cellAt(index)) emit openCell(c->cell);
}

void MatrixView::contextMenu(const QPoint& pos) {
  const QModelIndex index = m_table->indexAt(pos);
  if (!m_model->cellAt(index)) return;
  QMenu menu(this);
  menu.addAction(tr("Trend of this cell"), this, [this, index] { trendOfCell(index); });
  menu.addAction(tr("Open first job"), this, [this, index] { activateCell(index); });
  menu.exec(m_table->viewport()->mapToGlobal(pos));
}

}  // namespace dfarm::gui
