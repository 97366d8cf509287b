#include "gui/views/devices_view.h"

#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSplitter>
#include <QStringList>
#include <QTableView>
#include <QVBoxLayout>

#include "gui/format.h"
#include "gui/store_loader.h"

namespace dfarm::gui {

namespace {

QVariant StateColour(const std::string& state) {
  if (state == store::kDeviceQuarantined || state == store::kDeviceOffline) {
    return QColor(0xb0, 0x20, 0x20);
  }
  if (state == store::kDeviceOk) return QColor(0x1a, 0x6b, 0x1a);
  return {};
}

void SetUpTable(QTableView* t) {
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->verticalHeader()->hide();
  t->horizontalHeader()->setStretchLastSection(true);
  t->setAlternatingRowColors(true);
}

}  // namespace

DevicesModel::DevicesModel(QObject* parent) : QAbstractTableModel(parent) {}

void DevicesModel::setDevices(std::vector<store::DeviceRow> devices) {
  const bool same = devices.size() == m_devices.size() &&
                    std::equal(devices.begin(), devices.end(), m_devices.begin(),
                               [](const store::DeviceRow& a, const store::DeviceRow& b) {
                                 return a.name == b.name;
                               });
  if (!same) beginResetModel();
  m_devices = std::move(devices);
  if (!same) {
    endResetModel();
  } else if (!m_devices.empty()) {
    emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
  }
}

int DevicesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_devices.size());
}

int DevicesModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DevicesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const store::DeviceRow& d = m_devices[static_cast<size_t>(index.row())];
  if (role == NameRole) return Q(d.name);
  if (role == Qt::ForegroundRole && index.column() == StateColumn) return StateColour(d.state);
  if (role == Qt::ToolTipRole && index.column() == OpenClColumn && !d.opencl.empty()) {
    return plainToolTip(openClText(d.opencl, true));
  }
  if (role == Qt::ToolTipRole) return plainToolTip(data(index, Qt::DisplayRole).toString());
  if (role == SortRole) {
    if (index.column() == CoresColumn) return QVariant::fromValue<qint64>(d.cores);
    if (index.column() == MemoryColumn) return QVariant::fromValue<qint64>(d.memory_bytes);
    return data(index, Qt::DisplayRole);
  }
  if (role == Qt::TextAlignmentRole &&
      (index.column() == CoresColumn || index.column() == MemoryColumn)) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case NameColumn:
      return Q(d.name);
    case NodeColumn:
      return d.node.empty() ? tr("(local sweep)") : Q(d.node);
    case StateColumn:
      return d.state.empty() ? tr("(none recorded)") : Q(d.state);
    case SetByColumn:
      return setByText(d);
    case AbiColumn:
      return Q(d.abi);
    case OsColumn:
      return Q(d.os);
    case CpuColumn:
      return Q(d.cpu);
    case CoresColumn:
      return QVariant::fromValue<qint64>(d.cores);
    case MemoryColumn:
      return d.memory_bytes > 0 ? formatMiB(d.memory_bytes) : QString();
    case AgentColumn:
      return Q(d.agent_version);
    case LastSeenColumn:
      return Q(d.last_seen);
    case ReasonColumn:
      return Q(d.state_reason);
    case OpenClColumn:
      return openClText(d.opencl, false);
    default:
      return {};
  }
}

QString DevicesModel::setByText(const store::DeviceRow& d) {
  if (d.state_by.empty()) return QString();
  return d.state_user.empty() ? Q(d.state_by) : Q(d.state_by + " " + d.state_user);
}

// "Adreno (TM) 740 (driver 0800.22), fp16; ..." on one line, or one device
// per line with vendor, OpenCL version and compute units for the tooltip.
QString DevicesModel::openClText(const std::vector<store::OpenClDevice>& devices, bool detailed) {
  QStringList parts;
  for (const store::OpenClDevice& c : devices) {
    QString text = Q(c.name) + " (" + tr("driver %1").arg(Q(c.driver_version)) + ")";
    if (c.gpu) text += ", GPU";
    if (c.fp16) text += ", fp16";
    if (detailed) {
      text += QString(", %1, %2, %3 compute units")
                  .arg(Q(c.vendor), Q(c.opencl_version))
                  .arg(c.compute_units);
    }
    parts << text;
  }
  return parts.join(detailed ? "\n" : "; ");
}

QVariant DevicesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case NameColumn:
      return tr("Device");
    case NodeColumn:
      return tr("Node");
    case StateColumn:
      return tr("State");
    case SetByColumn:
      return tr("Set by");
    case AbiColumn:
      return tr("ABI");
    case OsColumn:
      return tr("OS");
    case CpuColumn:
      return tr("CPU");
    case CoresColumn:
      return tr("Cores");
    case MemoryColumn:
      return tr("Memory MiB");
    case AgentColumn:
      return tr("Agent");
    case LastSeenColumn:
      return tr("Last seen (UTC)");
    case ReasonColumn:
      return tr("Quarantine reason");
    case OpenClColumn:
      return tr("OpenCL");
    default:
      return {};
  }
}

DeviceEventsModel::DeviceEventsModel(QObject* parent) : QAbstractTableModel(parent) {}

void DeviceEventsModel::setEvents(std::vector<store::DeviceEvent> events) {
  beginResetModel();
  m_events = std::move(events);
  endResetModel();
}

int DeviceEventsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_events.size());
}

int DeviceEventsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DeviceEventsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const store::DeviceEvent& e = m_events[static_cast<size_t>(index.row())];
  if (role == Qt::ForegroundRole && index.column() == StateColumn) return StateColour(e.state);
  if (role == Qt::ToolTipRole) return plainToolTip(data(index, Qt::DisplayRole).toString());
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case AtColumn:
      return Q(e.at);
    case StateColumn:
      return Q(e.state);
    case ReasonColumn:
      return Q(e.reason);
    default:
      return {};
  }
}

QVariant DeviceEventsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case AtColumn:
      return tr("At (UTC)");
    case StateColumn:
      return tr("State");
    case ReasonColumn:
      return tr("Reason");
    default:
      return {};
  }
}

DevicesView::DevicesView(QWidget* parent)
    : View(parent),
      m_model(new DevicesModel(this)),
      m_proxy(new QSortFilterProxyModel(this)),
      m_events(new DeviceEventsModel(this)),
      m_table(new QTableView(this)),
      m_history(new QTableView(this)),
      m_message(new QLabel(this)),
      m_historyTitle(new QLabel(this)) {
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(DevicesModel::SortRole);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(DevicesModel::NameColumn, Qt::AscendingOrder);
  m_history->setModel(m_events);
  SetUpTable(m_table);
  SetUpTable(m_history);
  m_message->setWordWrap(true);
  m_message->hide();
  auto* lower = new QWidget(this);
  auto* lowerLayout = new QVBoxLayout(lower);
  lowerLayout->setContentsMargins(0, 0, 0, 0);
  lowerLayout->addWidget(m_historyTitle);
  lowerLayout->addWidget(m_history);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_table);
  split->addWidget(lower);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_message);
  layout->addWidget(split, 1);
  connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &DevicesView::loadHistory);
}

View* MakeDevicesView(QWidget* parent) { return new DevicesView(parent); }

void DevicesView::open(const Location& /*where*/) { showDevices(); }

void DevicesView::showDevices() {
  markLoading();
  load();
}

void DevicesView::refresh() { load(); }

QString DevicesView::selectedName() const {
  const QModelIndex i = m_table->currentIndex();
  return i.isValid() ? i.data(DevicesModel::NameRole).toString() : QString();
}

bool DevicesView::selectDevice(const QString& name) {
  for (int r = 0; r < m_proxy->rowCount(); ++r) {
    const QModelIndex i = m_proxy->index(r, 0);
    if (i.data(DevicesModel::NameRole).toString() != name) continue;
    m_table->setCurrentIndex(i);
    m_table->selectRow(r);
    return true;
  }
  return false;
}

void DevicesView::load() {
  const quint64 generation = ++m_generation;
  const QString keep = selectedName();
  LoadAsync<std::vector<store::DeviceRow>>(
      database(), this, [](store::Reader& s) { return s.ListDevices(); },
      [this, generation, keep](const Result<std::vector<store::DeviceRow>>& result) {
        if (generation == m_generation) applied(result, keep);
      });
}

void DevicesView::applied(const Result<std::vector<store::DeviceRow>>& result,
                          const QString& keep) {
  if (!result) {
    m_message->setText(tr("Cannot read the devices: %1").arg(Q(result.message())));
    m_message->setStyleSheet(QStringLiteral("color: #b02020;"));
    m_message->show();
    m_model->setDevices({});
    m_events->setEvents({});
    markReady(m_message->text());
    return;
  }
  m_message->setStyleSheet({});
  m_message->setText(tr("No device has been seen yet: a sweep records each device it reaches."));
  m_message->setVisible(result->empty());
  m_model->setDevices(*result);
  m_table->resizeColumnsToContents();
  if ((keep.isEmpty() || !selectDevice(keep)) && m_proxy->rowCount() > 0) {
    selectDevice(m_proxy->index(0, 0).data(DevicesModel::NameRole).toString());
  }
  loadHistory();  // the same device's history may have grown
  markReady();
}

void DevicesView::loadHistory() {
  const QString name = selectedName();
  const quint64 generation = ++m_historyGeneration;
  if (name.isEmpty()) {
    m_historyTitle->setText(tr("Select a device to see its state history."));
    m_events->setEvents({});
    emit historyLoaded();
    return;
  }
  const std::string key = name.toStdString();
  LoadAsync<std::vector<store::DeviceEvent>>(
      database(), this, [key](store::Reader& s) { return s.ListDeviceEvents(key); },
      [this, generation, name](const Result<std::vector<store::DeviceEvent>>& result) {
        if (generation != m_historyGeneration) return;
        if (!result) {
          m_historyTitle->setText(
              tr("Cannot read the history of %1: %2").arg(name, Q(result.message())));
          m_events->setEvents({});
        } else {
          m_historyTitle->setText(
              result->empty()
                  ? tr("State history of %1: no state change recorded (states set before "
                       "schema v9 have none).")
                        .arg(name)
                  : tr("State history of %1 (oldest first):").arg(name));
          m_events->setEvents(*result);
          m_history->resizeColumnsToContents();
        }
        emit historyLoaded();
      });
}

}  // namespace dfarm::gui
