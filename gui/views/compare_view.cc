#include "gui/views/compare_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "gui/format.h"
#include "gui/store_loader.h"
#include "reports/palette.h"
#include "reports/report.h"

namespace dfarm::gui {

namespace {

QString RunLine(const char* role, const store::RunRow& run) {
  QStringList tags;
  for (const std::string& t : run.tags) tags << Q(t);
  QString line = QObject::tr("<b>%1</b>: run %2 · %3 · %4 · %5")
                     .arg(QString::fromLatin1(role))
                     .arg(run.id)
                     .arg(Q(run.name).toHtmlEscaped(), Q(run.created_at).toHtmlEscaped(),
                          Q(run.status).toHtmlEscaped());
  if (!tags.isEmpty()) {
    line += QObject::tr(" · tags: %1").arg(tags.join(QStringLiteral(", ")).toHtmlEscaped());
  }
  return line;
}

QString Err(double v) { return std::isnan(v) ? QStringLiteral("–") : QString::number(v, 'g', 2); }

QString Growth(int64_t base, int64_t cand) {
  if (base <= 0 || cand <= 0) return QStringLiteral("–");
  const double g = static_cast<double>(cand) / static_cast<double>(base) - 1.0;
  return QStringLiteral("%1%2% (%3 MiB)")
      .arg(g >= 0 ? "+" : "")
      .arg(g * 100, 0, 'f', 1)
      .arg(formatMiB(cand));
}

// A cell's task accuracy on both sides, as the accuracy column reads: its
// first two metrics, one a line, "top-1 97.5% (94.2-99.2) → 90.0% (85.0-95.0)"
// (value and 95% interval in percent, "–" for a side without it); "–" when
// neither side has any.
QString TaskChange(const store::TaskAccuracy* base, const store::TaskAccuracy* cand) {
  const store::TaskAccuracy* named = cand != nullptr ? cand : base;
  if (named == nullptr || named->metrics.empty()) return QStringLiteral("–");
  const auto side = [](const store::TaskAccuracy* t, const std::string& name) {
    const store::TaskMetric* m = t != nullptr ? t->Find(name) : nullptr;
    return m != nullptr ? Q(reports::TaskMetricText(*m)) : QStringLiteral("–");
  };
  QStringList lines;
  for (size_t i = 0; i < named->metrics.size() && i < 2; ++i) {
    const std::string& name = named->metrics[i].name;
    lines << QStringLiteral("%1 %2 → %3")
                 .arg(Q(reports::TaskMetricLabel(name)), side(base, name), side(cand, name));
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace

Result<CompareData> ReadCompare(store::Reader& store, int64_t baselineRunId,
                                int64_t candidateRunId) {
  CompareData d;
  auto baseline = store.GetRun(baselineRunId);
  if (!baseline) return baseline.error();
  auto candidate = store.GetRun(candidateRunId);
  if (!candidate) return candidate.error();
  auto gate = gate::RunGate(store, candidateRunId, baselineRunId, gate::DefaultPolicy());
  if (!gate) return gate.error();
  d.baseline = std::move(*baseline);
  d.candidate = std::move(*candidate);
  d.gate = std::move(*gate);
  for (int64_t run : {baselineRunId, candidateRunId}) {
    auto task = store.ListRunTaskAccuracy(run);
    if (!task) return task.error();
    d.task.merge(*task);
  }
  return d;
}

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

const store::TaskAccuracy* CompareModel::taskOf(const std::vector<int64_t>& jobs) const {
  for (int64_t id : jobs) {
    auto it = m_task.find(id);
    if (it != m_task.end()) return &it->second;
  }
  return nullptr;
}

bool CompareModel::hasTask() const {
  return std::any_of(m_cells.begin(), m_cells.end(), [this](const gate::CellResult& c) {
    return taskOf(c.baseline_jobs) != nullptr || taskOf(c.candidate_jobs) != nullptr;
  });
}

void CompareModel::setCells(std::vector<gate::CellResult> cells,
                            std::map<int64_t, store::TaskAccuracy> task) {
  m_task = std::move(task);
  const bool same = cells.size() == m_cells.size() &&
                    std::equal(cells.begin(), cells.end(), m_cells.begin(),
                               [](const gate::CellResult& a, const gate::CellResult& b) {
                                 return a.cell == b.cell;
                               });
  if (!same) beginResetModel();
  m_cells = std::move(cells);
  if (!same) {
    endResetModel();
  } else if (!m_cells.empty()) {
    emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
  }
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_cells.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant CompareModel::display(const gate::CellResult& c, int column) const {
  switch (column) {
    case CellColumn:
      return Q(c.cell.Label());
    case VerdictColumn:
      return QString::fromLatin1(gate::VerdictName(c.verdict));
    case BaselineColumn:
      return c.baseline_median_us > 0 ? formatMs(c.baseline_median_us) : QStringLiteral("–");
    case CandidateColumn:
      return c.candidate_median_us > 0 ? formatMs(c.candidate_median_us) : QStringLiteral("–");
    case RatioColumn:
      if (c.ratio <= 0) return QStringLiteral("–");
      return QStringLiteral("%1 [%2, %3]")
          .arg(c.ratio, 0, 'f', 3)
          .arg(c.ci_low, 0, 'f', 3)
          .arg(c.ci_high, 0, 'f', 3);
    case QColumn:
      return QString::number(c.q_value, 'g', 2);
    case AccuracyColumn:
      if (std::isnan(c.baseline_max_abs_error) && std::isnan(c.candidate_max_abs_error)) {
        return QStringLiteral("–");
      }
      return QStringLiteral("%1 → %2").arg(Err(c.baseline_max_abs_error),
                                           Err(c.candidate_max_abs_error));
    case TaskColumn:
      return TaskChange(taskOf(c.baseline_jobs), taskOf(c.candidate_jobs));
    case MemoryColumn:
      return Growth(c.baseline_peak_rss_bytes, c.candidate_peak_rss_bytes);
    case TrialsColumn:
      return QStringLiteral("%1 / %2").arg(c.baseline_trials).arg(c.candidate_trials);
    case FindingsColumn: {
      QStringList lines;
      for (const gate::Finding& f : c.findings) {
        if (f.fails) lines << Q(f.message);
      }
      return lines.join(QStringLiteral("; "));
    }
    default:
      return {};
  }
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const gate::CellResult& c = m_cells[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return display(c, index.column());
    case SortRole:
      switch (index.column()) {
        case BaselineColumn:
          return c.baseline_median_us;
        case CandidateColumn:
          return c.candidate_median_us;
        case RatioColumn:
          return c.ratio;
        case QColumn:
          return c.q_value;
        default:
          return display(c, index.column());
      }
    case Qt::BackgroundRole:
    case Qt::ForegroundRole: {
      if (index.column() != VerdictColumn) return {};
      const reports::Colours colours = reports::VerdictColours(c.verdict);
      return QColor(QString::fromLatin1(role == Qt::BackgroundRole ? colours.background
                                                                   : colours.foreground));
    }
    case Qt::TextAlignmentRole:
      return index.column() >= TaskColumn && index.column() <= TrialsColumn
                 ? QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter)
                 : QVariant();
    case Qt::ToolTipRole: {
      QStringList lines{Q(c.cell.Label())};
      for (const gate::Finding& f : c.findings) {
        lines << QStringLiteral("%1 %2").arg(f.fails ? "✗" : "✓", Q(f.message));
      }
      if (c.within_run_only) lines << tr("verdict from the samples of one trial per side");
      return plainToolTip(lines.join('\n'));
    }
    case JobIdRole:
      return QVariant::fromValue<qint64>(c.candidate_jobs.empty() ? 0 : c.candidate_jobs.front());
    default:
      return {};
  }
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case CellColumn:
      return tr("Cell");
    case VerdictColumn:
      return tr("Verdict");
    case BaselineColumn:
      return tr("Baseline ms");
    case CandidateColumn:
      return tr("Candidate ms");
    case RatioColumn:
      return tr("Ratio [CI]");
    case QColumn:
      return tr("q");
    case AccuracyColumn:
      return tr("Max abs error");
    case TaskColumn:
      return tr("Task accuracy");
    case MemoryColumn:
      return tr("Peak RSS Δ");
    case TrialsColumn:
      return tr("Trials");
    case FindingsColumn:
      return tr("Findings");
    default:
      return {};
  }
}

CompareView::CompareView(QWidget* parent)
    : View(parent),
      m_model(new CompareModel(this)),
      m_proxy(new QSortFilterProxyModel(this)),
      m_table(new QTableView(this)),
      m_runs(new QLabel(this)),
      m_message(new QLabel(this)) {
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(CompareModel::SortRole);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(-1, Qt::AscendingOrder);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setAlternatingRowColors(true);
  m_runs->setTextFormat(Qt::RichText);
  m_message->setWordWrap(true);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_runs);
  layout->addWidget(m_message);
  layout->addWidget(m_table, 1);
  connect(m_table, &QTableView::activated, this, [this](const QModelIndex& i) {
    const qint64 job = i.data(CompareModel::JobIdRole).toLongLong();
    if (job > 0) emit openJob(job);
  });
}

View* MakeCompareView(QWidget* parent) { return new CompareView(parent); }

void CompareView::open(const Location& where) { showCompare(where.baselineId, where.runId); }

void CompareView::showCompare(qint64 baselineRunId, qint64 candidateRunId) {
  m_baseline = baselineRunId;
  m_candidate = candidateRunId;
  markLoading();
  load();
}

void CompareView::refresh() {
  if (m_candidate) load();
}

QString CompareView::summary() const { return m_message->text(); }

void CompareView::load() {
  const quint64 generation = ++m_generation;
  const qint64 base = m_baseline, cand = m_candidate;
  LoadAsync<CompareData>(
      database(), this, [base, cand](store::Reader& s) { return ReadCompare(s, base, cand); },
      [this, generation](const Result<CompareData>& result) {
        if (generation == m_generation) applied(result);
      });
}

void CompareView::applied(const Result<CompareData>& result) {
  if (!result) {
    m_runs->setText(tr("Baseline run %1, candidate run %2").arg(m_baseline).arg(m_candidate));
    m_message->setText(tr("Cannot compare: %1").arg(Q(result.message())));
    m_message->setStyleSheet(QStringLiteral("color: #b02020;"));
    m_model->setCells({});
    markReady(m_message->text());
    return;
  }
  m_runs->setText(RunLine("Baseline", result->baseline) + "<br>" +
                  RunLine("Candidate", result->candidate));
  // The gate's own outcome and count line: a gate whose cells are unknown
  // says so (not enough data), in the neutral colour, as the HTML report.
  const gate::GateOutcome outcome = gate::OutcomeOf(result->gate);
  QString text =
      tr("Gate (default policy): %1").arg(QString::fromLatin1(gate::OutcomeName(outcome)));
  if (outcome == gate::GateOutcome::kInconclusive) text += tr(" (not enough data to pass)");
  text += QStringLiteral(" · ") + Q(gate::GateCounts(result->gate));
  for (const std::string& n : result->gate.notes) text += "\n" + Q(n);
  m_message->setText(text);
  const gate::Verdict colour = outcome == gate::GateOutcome::kPassed   ? gate::Verdict::kPass
                               : outcome == gate::GateOutcome::kFailed ? gate::Verdict::kFail
                                                                       : gate::Verdict::kUnknown;
  m_message->setStyleSheet(
      QStringLiteral("color: %1;")
          .arg(QString::fromLatin1(reports::VerdictColours(colour).foreground)));
  m_model->setCells(result->gate.cells, result->task);
  m_table->setColumnHidden(CompareModel::TaskColumn, !m_model->hasTask());
  m_table->resizeColumnsToContents();
  // A long cell label wraps within a third of the table (its tooltip has it
  // whole), so that the figures to its right stay in view.
  const int widest = std::max(240, m_table->viewport()->width() / 3);
  if (m_table->columnWidth(CompareModel::CellColumn) > widest) {
    m_table->setColumnWidth(CompareModel::CellColumn, widest);
  }
  m_table->resizeRowsToContents();
  m_table->viewport()->update();
  markReady();
}

}  // namespace dfarm::gui
