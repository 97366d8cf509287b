#include "gui/jobs_model.h"

#include <QBrush>
#include <QColor>

#include "gui/format.h"
#include "reports/report.h"

namespace dfarm::gui {

JobsModel::JobsModel(QObject* parent) : QAbstractTableModel(parent) {}

void JobsModel::setJobs(std::vector<store::JobRow> jobs,
                        std::map<int64_t, store::Accuracy> accuracy) {
  beginResetModel();
  m_jobs = std::move(jobs);
  m_accuracy = std::move(accuracy);
  endResetModel();
}

int JobsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_jobs.size());
}

int JobsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant JobsModel::number(const store::JobRow& job, int column) const {
  if (column == AccuracyColumn) {
    auto it = m_accuracy.find(job.id);
    if (it == m_accuracy.end()) return {};
    const std::optional<double> worst = reports::MaxAbsError(it->second);
    return worst ? QVariant(*worst) : QVariant();
  }
  if (!job.metrics) return {};
  const store::JobMetrics& m = *job.metrics;
  switch (column) {
    case InitColumn:
      return m.init_us;
    case FirstColumn:
      return m.first_us;
    case MeanColumn:
      return m.mean_us;
    case P50Column:
      return m.p50_us;
    case P90Column:
      return m.p90_us;
    case P99Column:
      return m.p99_us;
    case PeakRssColumn:
      return static_cast<double>(m.peak_rss_bytes);
    default:
      return {};
  }
}

QVariant JobsModel::display(const store::JobRow& job, int column) const {
  switch (column) {
    case ModelColumn:
      return QString::fromStdString(job.model);
    case DelegateColumn:
      return QString::fromStdString(job.delegate);
    case OptionsColumn:
      return QString::fromStdString(job.delegate_options);
    case DeviceColumn:
      return QString::fromStdString(job.device);
    case StatusColumn:
      return QString::fromStdString(job.status);
    case ErrorColumn:
      return QString::fromStdString(job.error);
    case PlacementColumn:
      return QString::fromStdString(reports::PlacementLabel(job));
    case DeviceStateColumn: {
      QStringList flags;
      if (job.started_hot) flags << tr("hot");
      if (job.throttled) flags << tr("throttled");
      return flags.join(QStringLiteral(", "));
    }
    case PeakRssColumn:
      return job.metrics ? formatMiB(job.metrics->peak_rss_bytes) : QVariant();
    case AccuracyColumn: {
      auto it = m_accuracy.find(job.id);
      return it == m_accuracy.end() ? QVariant()
                                    : QString::fromStdString(reports::AccuracyLabel(it->second));
    }
    default: {
      const QVariant n = number(job, column);
      return n.isValid() ? formatMs(n.toDouble()) : QVariant();
    }
  }
}

QVariant JobsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const store::JobRow& job = m_jobs[static_cast<size_t>(index.row())];
  const int column = index.column();
  switch (role) {
    case Qt::DisplayRole:
      return display(job, column);
    case Qt::ToolTipRole:
      if (column == DeviceStateColumn && !job.state_note.empty()) {
        return plainToolTip(QString::fromStdString(job.state_note));
      }
      return plainToolTip(display(job, column).toString());
    case SortRole: {
      const QVariant n = number(job, column);
      return n.isValid() ? n : display(job, column);
    }
    case Qt::TextAlignmentRole:
      if ((column >= InitColumn && column <= PeakRssColumn) || column == AccuracyColumn) {
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    case Qt::ForegroundRole:
      if (column == StatusColumn && job.status != store::kJobOk &&
          store::IsFinalJobStatus(job.status)) {
        return QBrush(QColor(0xb0, 0x1c, 0x1c));
      }
      if (column == DeviceStateColumn && (job.started_hot || job.throttled)) {
        return QBrush(QColor(0xa8, 0x5a, 0x00));
      }
      return {};
    default:
      return {};
  }
}

QVariant JobsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case ModelColumn:
      return tr("Model");
    case DelegateColumn:
      return tr("Delegate");
    case OptionsColumn:
      return tr("Options");
    case DeviceColumn:
      return tr("Device");
    case StatusColumn:
      return tr("Status");
    case InitColumn:
      return tr("Init ms");
    case FirstColumn:
      return tr("First ms");
    case MeanColumn:
      return tr("Mean ms");
    case P50Column:
      return tr("p50 ms");
    case P90Column:
      return tr("p90 ms");
    case P99Column:
      return tr("p99 ms");
    case PeakRssColumn:
      return tr("Peak RSS MiB");
    case PlacementColumn:
      return tr("Placement");
    case DeviceStateColumn:
      return tr("Device state");
    case AccuracyColumn:
      return tr("Max abs error vs cpu");
    case ErrorColumn:
      return tr("Error");
    default:
      return {};
  }
}

}  // namespace dfarm::gui
