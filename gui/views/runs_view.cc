#include "gui/views/runs_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <memory>

#include "gui/format.h"
#include "gui/store_loader.h"

namespace dfarm::gui {

namespace {

QString Counts(const std::map<std::string, int64_t>& by_status) {
  QStringList parts;
  auto ok = by_status.find(store::kJobOk);
  if (ok != by_status.end()) parts << QStringLiteral("%1 ok").arg(ok->second);
  for (const auto& [status, n] : by_status) {
    if (status != store::kJobOk) parts << QStringLiteral("%1 %2").arg(n).arg(status.c_str());
  }
  return parts.join(QStringLiteral(", "));
}

}  // namespace

Result<std::vector<RunSummaryRow>> ReadRunSummaries(store::Reader& store,
                                                    const RunsFilter& filter) {
  return store.ListRunSummaries(filter);
}

RunSummariesModel::RunSummariesModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunSummariesModel::setRuns(std::vector<RunSummaryRow> runs) {
  const bool same = runs.size() == m_runs.size() &&
                    std::equal(runs.begin(), runs.end(), m_runs.begin(),
                               [](const RunSummaryRow& a, const RunSummaryRow& b) {
                                 return a.run.id == b.run.id;
                               });
  if (!same) {
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
    return;
  }
  m_runs = std::move(runs);
  if (!m_runs.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

int RunSummariesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int RunSummariesModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunSummariesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const RunSummaryRow& row = m_runs[static_cast<size_t>(index.row())];
  const store::RunRow& run = row.run;
  if (role == RunIdRole) return QVariant::fromValue<qint64>(run.id);
  if (role == Qt::TextAlignmentRole &&
      (index.column() == IdColumn || index.column() == JobsColumn)) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ForegroundRole && index.column() == StatusColumn) {
    if (run.status == store::kRunFailed) return QColor(0xb0, 0x20, 0x20);
    if (run.status == store::kRunRunning) return QColor(0x20, 0x60, 0xb0);
    return {};
  }
  if (role == Qt::ToolTipRole) return plainToolTip(data(index, Qt::DisplayRole).toString());
  if (role == SortRole) {
    if (index.column() == IdColumn) return QVariant::fromValue<qint64>(run.id);
    if (index.column() == JobsColumn) return QVariant::fromValue<qint64>(row.jobs);
    return data(index, Qt::DisplayRole);
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case IdColumn:
      return QVariant::fromValue<qint64>(run.id);
    case NameColumn:
      return QString::fromStdString(run.name);
    case CreatedColumn:
      return QString::fromStdString(run.created_at);
    case StatusColumn:
      return QString::fromStdString(run.status);
    case JobsColumn:
      return QVariant::fromValue<qint64>(row.jobs);
    case CountsColumn:
      return Counts(row.by_status);
    case TagsColumn: {
      QStringList tags;
      for (const std::string& t : run.tags) tags << QString::fromStdString(t);
      return tags.join(QStringLiteral(", "));
    }
    default:
      return {};
  }
}

QVariant RunSummariesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case IdColumn:
      return tr("Run");
    case NameColumn:
      return tr("Name");
    case CreatedColumn:
      return tr("Created (UTC)");
    case StatusColumn:
      return tr("Status");
    case JobsColumn:
      return tr("Jobs");
    case CountsColumn:
      return tr("By status");
    case TagsColumn:
      return tr("Tags");
    default:
      return {};
  }
}

namespace {

// Enter/Return on the table opens the current run (QAbstractItemView only
// activates on Enter on some platforms).
class RunsTable : public QTableView {
 public:
  using QTableView::QTableView;

 protected:
  void keyPressEvent(QKeyEvent* event) override {
    if ((event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter) &&
        currentIndex().isValid()) {
      emit activated(currentIndex());
      return;
    }
    QTableView::keyPressEvent(event);
  }
};

QLineEdit* FilterField(const QString& placeholder, int width) {
  auto* edit = new QLineEdit;
  edit->setPlaceholderText(placeholder);
  edit->setClearButtonEnabled(true);
  edit->setMaximumWidth(width);
  return edit;
}

}  // namespace

RunsView::RunsView(QWidget* parent)
    : View(parent),
      m_model(new RunSummariesModel(this)),
      m_proxy(new QSortFilterProxyModel(this)),
      m_table(new RunsTable(this)),
      m_message(new QLabel(this)),
      m_name(FilterField(tr("name contains"), 180)),
      m_tag(FilterField(tr("tag"), 110)),
      m_device(FilterField(tr("device"), 130)),
      m_modelName(FilterField(tr("model (file or sha256)"), 160)),
      m_delegate(FilterField(tr("delegate"), 100)),
      m_status(new QComboBox(this)),
      m_from(FilterField(tr("from YYYY-MM-DD"), 130)),
      m_to(FilterField(tr("to YYYY-MM-DD"), 130)),
      m_compare(new QPushButton(tr("Compare"), this)) {
  m_status->addItem(tr("any run status"), QString());
  for (const char* s :
       {store::kRunRunning, store::kRunFinished, store::kRunFailed, store::kRunCancelled}) {
    m_status->addItem(QString::fromLatin1(s), QString::fromLatin1(s));
  }
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(RunSummariesModel::SortRole);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(RunSummariesModel::IdColumn, Qt::DescendingOrder);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setAlternatingRowColors(true);
  m_message->setWordWrap(true);
  m_message->hide();

  auto* bar = new QHBoxLayout;
  for (QWidget* w : std::initializer_list<QWidget*>{m_name, m_tag, m_from, m_to, m_device,
                                                    m_modelName, m_delegate, m_status}) {
    bar->addWidget(w);
  }
  bar->addStretch();
  bar->addWidget(m_compare);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(m_message);
  layout->addWidget(m_table);

  for (QLineEdit* e : {m_name, m_tag, m_from, m_to, m_device, m_modelName, m_delegate}) {
    connect(e, &QLineEdit::editingFinished, this, &RunsView::refresh);
  }
  connect(m_status, &QComboBox::currentIndexChanged, this, &RunsView::refresh);
  connect(m_table, &QTableView::activated, this, [this](const QModelIndex& index) {
    emit openRun(index.data(RunSummariesModel::RunIdRole).toLongLong());
  });
  connect(m_table, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    emit openRun(index.data(RunSummariesModel::RunIdRole).toLongLong());
  });
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &RunsView::updateButtons);
  connect(m_compare, &QPushButton::clicked, this, &RunsView::compareSelected);
  updateButtons();
}

RunsFilter RunsView::filter() const {
  RunsFilter f;
  f.name_contains = m_name->text().trimmed().toStdString();
  f.tag = m_tag->text().trimmed().toStdString();
  f.created_from = m_from->text().trimmed().toStdString();
  f.created_to = m_to->text().trimmed().toStdString();
  f.device = m_device->text().trimmed().toStdString();
  f.model = m_modelName->text().trimmed().toStdString();
  f.delegate = m_delegate->text().trimmed().toStdString();
  f.status = m_status->currentData().toString().toStdString();
  return f;
}

View* MakeRunsView(QWidget* parent) { return new RunsView(parent); }

void RunsView::open(const Location& /*where*/) { showRuns(); }

void RunsView::showRuns() {
  markLoading();
  load();
}

void RunsView::refresh() { load(); }

void RunsView::load() {
  const quint64 generation = ++m_generation;
  std::vector<qint64> keep = selectedRuns();
  const RunsFilter f = filter();
  LoadAsync<std::vector<RunSummaryRow>>(
      database(), this, [f](store::Reader& s) { return ReadRunSummaries(s, f); },
      [this, generation, keep](const Result<std::vector<RunSummaryRow>>& result) {
        if (generation == m_generation) applied(result, keep);
      });
}

void RunsView::applied(const Result<std::vector<RunSummaryRow>>& result, std::vector<qint64> keep) {
  if (!result) {
    m_message->setText(
        tr("Cannot read the runs: %1").arg(QString::fromStdString(result.message())));
    m_message->setStyleSheet(QStringLiteral("color: #b02020;"));
    m_message->show();
    m_model->setRuns({});
  } else {
    m_model->setRuns(*result);
    m_message->setStyleSheet({});
    m_message->setVisible(result->empty());
    m_message->setText(tr("No run matches the filter."));
    m_table->resizeColumnsToContents();
    if (!keep.empty()) {
      selectRuns(keep);
    } else if (!m_table->currentIndex().isValid() && m_proxy->rowCount() > 0) {
      m_table->setCurrentIndex(m_proxy->index(0, 0));
    }
  }
  updateButtons();
  m_table->viewport()->update();
  markReady(result ? QString() : m_message->text());
}

std::vector<qint64> RunsView::selectedRuns() const {
  std::vector<qint64> ids;
  for (const QModelIndex& i : m_table->selectionModel()->selectedRows()) {
    ids.push_back(i.data(RunSummariesModel::RunIdRole).toLongLong());
  }
  return ids;
}

void RunsView::selectRuns(const std::vector<qint64>& ids) {
  QItemSelection selection;
  QModelIndex first;
  for (int r = 0; r < m_proxy->rowCount(); ++r) {
    const QModelIndex i = m_proxy->index(r, 0);
    if (std::find(ids.begin(), ids.end(), i.data(RunSummariesModel::RunIdRole).toLongLong()) ==
        ids.end()) {
      continue;
    }
    selection.select(i, m_proxy->index(r, RunSummariesModel::ColumnCount - 1));
    if (!first.isValid()) first = i;
  }
  if (first.isValid()) m_table->setCurrentIndex(first);
  m_table->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

void RunsView::compareSelected() {
  std::vector<qint64> ids = selectedRuns();
  if (ids.size() != 2) return;
  std::sort(ids.begin(), ids.end());
  emit compareRuns(ids[0], ids[1]);
}

void RunsView::updateButtons() {
  m_compare->setEnabled(m_table->selectionModel()->selectedRows().size() == 2);
  m_compare->setToolTip(tr("Select two runs to compare them (the older one is the baseline)."));
}

}  // namespace dfarm::gui
