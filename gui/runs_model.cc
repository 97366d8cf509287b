#include "gui/runs_model.h"

#include "gui/format.h"

namespace dfarm::gui {

RunsModel::RunsModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunsModel::setRuns(std::vector<store::RunRow> runs) {
  beginResetModel();
  m_runs = std::move(runs);
  endResetModel();
}

int RunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int RunsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const store::RunRow& run = m_runs[static_cast<size_t>(index.row())];
  if (role == RunIdRole) return QVariant::fromValue<qint64>(run.id);
  if (role == Qt::TextAlignmentRole && index.column() == IdColumn) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::ToolTipRole) return plainToolTip(data(index, Qt::DisplayRole).toString());
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case IdColumn:
      return QVariant::fromValue<qint64>(run.id);
    case NameColumn:
      return QString::fromStdString(run.name);
    case CreatedColumn:
      return QString::fromStdString(run.created_at);
    case FinishedColumn:
      return QString::fromStdString(run.finished_at);
    case StatusColumn:
      return QString::fromStdString(run.status);
    default:
      return {};
  }
}

QVariant RunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case IdColumn:
      return tr("Run");
    case NameColumn:
      return tr("Name");
    case CreatedColumn:
      return tr("Created (UTC)");
    case FinishedColumn:
      return tr("Finished (UTC)");
    case StatusColumn:
      return tr("Status");
    default:
      return {};
  }
}

}  // namespace dfarm::gui
