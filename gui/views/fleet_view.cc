#include "gui/views/fleet_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <functional>
#include <map>

#include "gui/format.h"
#include "gui/store_loader.h"
#include "gui/views/devices_view.h"

namespace dfarm::gui {

namespace {

constexpr int kIdRole = Qt::UserRole + 1;  // a job or run id to open
constexpr int kRunningJobColumn = 6;       // of the devices table
constexpr int kPriorityColumn = 2;         // of the queue table

QTableWidget* makeTable(QWidget* parent, const QStringList& headers) {
  auto* t = new QTableWidget(0, static_cast<int>(headers.size()), parent);
  t->setHorizontalHeaderLabels(headers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setAlternatingRowColors(true);
  t->verticalHeader()->hide();
  t->horizontalHeader()->setStretchLastSection(true);
  t->horizontalHeader()->setSortIndicator(0, Qt::AscendingOrder);
  return t;
}

QTableWidgetItem* item(const QString& text, const QColor& colour = QColor()) {
  auto* i = new QTableWidgetItem(text);
  i->setToolTip(text);
  if (colour.isValid()) i->setForeground(colour);
  return i;
}

QTableWidgetItem* number(qint64 n) {
  auto* i = new QTableWidgetItem;
  i->setData(Qt::DisplayRole, n);
  i->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return i;
}

const QColor kGood(0x1a, 0x6b, 0x1a);
const QColor kBad(0xb0, 0x20, 0x20);

QString age(int64_t seconds) {
  if (seconds < 120) return QObject::tr("%1 s ago").arg(seconds);
  if (seconds < 7200) return QObject::tr("%1 min ago").arg(seconds / 60);
  return QObject::tr("%1 h ago").arg(seconds / 3600);
}

// Refills t with rows, keeping its sort column.
void refill(QTableWidget* t, int rows) {
  t->setSortingEnabled(false);
  t->clearContents();
  t->setRowCount(rows);
}

// The widest a column gets from its contents: a long reason does not push
// the running job out of sight (the tooltip has it whole).
constexpr int kMaxColumnWidth = 360;

void done(QTableWidget* t) {
  t->setSortingEnabled(true);
  t->resizeColumnsToContents();
  for (int c = 0; c < t->columnCount(); ++c) {
    if (t->columnWidth(c) > kMaxColumnWidth) t->setColumnWidth(c, kMaxColumnWidth);
  }
}

}  // namespace

Result<FleetData> loadFleet(store::Reader& store) {
  FleetData d;
  auto nodes = store.ListNodes();
  if (!nodes) return nodes.error();
  d.nodes = std::move(*nodes);
  auto devices = store.ListDevices();
  if (!devices) return devices.error();
  d.devices = std::move(*devices);
  auto claimed = store.ListClaimedJobs();
  if (!claimed) return claimed.error();
  d.claimed = std::move(*claimed);
  store::RunFilter running;
  running.status = store::kRunRunning;
  auto runs = store.ListRunSummaries(running);
  if (!runs) return runs.error();
  d.unfinished = std::move(*runs);
  return d;
}

FleetView::FleetView(QWidget* parent) : View(parent) {
  m_message = new QLabel(this);
  m_message->setWordWrap(true);
  m_message->setStyleSheet("color: darkred");
  m_message->hide();
  m_nodesLabel = new QLabel(this);
  m_queueLabel = new QLabel(this);
  m_queueLabel->setWordWrap(true);
  m_nodes = makeTable(this, {tr("Node"), tr("Host"), tr("PID"), tr("Started"), tr("Last heartbeat"),
                             tr("State"), tr("Alive"), tr("Devices")});
  m_devices = makeTable(this, {tr("Device"), tr("Node"), tr("State"), tr("Reason"), tr("Set by"),
                               tr("Last seen"), tr("Running job"), tr("Model"), tr("Run")});
  m_queue = makeTable(this, {tr("Run"), tr("Name"), tr("Priority"), tr("Mode"), tr("Queued"),
                             tr("Running"), tr("Done"), tr("Jobs"), tr("Created")});
  // Claim order: the highest priority first.
  m_queue->horizontalHeader()->setSortIndicator(kPriorityColumn, Qt::DescendingOrder);
  connect(m_devices, &QTableWidget::cellActivated, this, [this](int row, int) {
    const QTableWidgetItem* job = m_devices->item(row, kRunningJobColumn);
    if (job != nullptr && job->data(kIdRole).toLongLong() > 0) {
      emit openJob(job->data(kIdRole).toLongLong());
    }
  });
  connect(m_queue, &QTableWidget::cellActivated, this, [this](int row, int) {
    if (const QTableWidgetItem* run = m_queue->item(row, 0)) {
      emit openRun(run->data(kIdRole).toLongLong());
    }
  });
  auto* splitter = new QSplitter(Qt::Vertical, this);
  for (auto [label, table] : {std::pair<QLabel*, QTableWidget*>{m_nodesLabel, m_nodes},
                              {new QLabel(tr("<b>Devices</b>"), this), m_devices},
                              {m_queueLabel, m_queue}}) {
    auto* box = new QWidget(splitter);
    auto* l = new QVBoxLayout(box);
    l->setContentsMargins(0, 0, 0, 0);
    l->addWidget(label);
    l->addWidget(table, 1);
    splitter->addWidget(box);
  }
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_message);
  layout->addWidget(splitter, 1);
}

View* MakeFleetView(QWidget* parent) { return new FleetView(parent); }

void FleetView::open(const Location&) { load(); }

void FleetView::refresh() { load(); }

QString FleetView::nodesSummary() const { return m_nodesLabel->text(); }

QString FleetView::queueSummary() const { return m_queueLabel->text(); }

void FleetView::load() {
  markLoading();
  const quint64 generation = ++m_generation;
  LoadAsync<FleetData>(
      database(), this, [](store::Reader& s) { return loadFleet(s); },
      [this, generation](const Result<FleetData>& data) {
        if (generation == m_generation) showFleet(data);
      });
}

void FleetView::showFleet(const Result<FleetData>& data) {
  if (!data) {
    m_message->setText(tr("Cannot show the fleet: %1").arg(Q(data.message())));
    m_message->show();
  } else {
    m_message->hide();
    fillNodes(*data);
    fillDevices(*data);
    fillQueue(*data);
  }
  QTimer::singleShot(0, this, [this] { markReady(); });
}

void FleetView::fillNodes(const FleetData& d) {
  int alive = 0;
  refill(m_nodes, static_cast<int>(d.nodes.size()));
  for (int r = 0; r < static_cast<int>(d.nodes.size()); ++r) {
    const store::NodeRow& n = d.nodes[static_cast<size_t>(r)];
    const bool up = store::NodeAlive(n);
    alive += up ? 1 : 0;
    m_nodes->setItem(r, 0, item(Q(n.name)));
    m_nodes->setItem(r, 1, item(Q(n.host)));
    m_nodes->setItem(r, 2, number(n.pid));
    m_nodes->setItem(r, 3, item(Q(n.started_at)));
    auto* beat = item(age(n.heartbeat_age_s));
    beat->setData(Qt::UserRole, QVariant::fromValue<qint64>(n.heartbeat_age_s));
    m_nodes->setItem(r, 4, beat);
    m_nodes->setItem(r, 5, item(Q(n.state)));
    m_nodes->setItem(r, 6, item(up ? tr("alive") : tr("lost"), up ? kGood : kBad));
    QStringList devices;
    for (const std::string& dev : n.devices) devices << Q(dev);
    m_nodes->setItem(r, 7, item(devices.join(", ")));
  }
  done(m_nodes);
  m_nodesLabel->setText(d.nodes.empty()
                            ? tr("<b>Nodes</b>: no farm nodes (a local database: `dfarm node` "
                                 "processes register here when they serve a farm)")
                            : tr("<b>Nodes</b>: %1, %2 alive").arg(d.nodes.size()).arg(alive));
}

void FleetView::fillDevices(const FleetData& d) {
  std::map<std::string, const store::JobRow*> running;
  for (const store::JobRow& j : d.claimed) running.emplace(j.device, &j);
  std::map<std::string, bool> nodeAlive;
  for (const store::NodeRow& n : d.nodes) nodeAlive[n.name] = store::NodeAlive(n);
  refill(m_devices, static_cast<int>(d.devices.size()));
  for (int r = 0; r < static_cast<int>(d.devices.size()); ++r) {
    const store::DeviceRow& dev = d.devices[static_cast<size_t>(r)];
    QString state = dev.state.empty() ? tr("unknown") : Q(dev.state);
    QColor colour = dev.state == store::kDeviceQuarantined || dev.state == store::kDeviceOffline
                        ? kBad
                    : dev.state == store::kDeviceOk ? kGood
                                                    : QColor();
    if (!dev.node.empty() && nodeAlive.count(dev.node) && !nodeAlive[dev.node]) {
      state += tr(" (node lost)");
      colour = kBad;
    }
    m_devices->setItem(r, 0, item(Q(dev.name)));
    m_devices->setItem(r, 1, item(dev.node.empty() ? tr("local") : Q(dev.node)));
    m_devices->setItem(r, 2, item(state, colour));
    m_devices->setItem(r, 3, item(Q(dev.state_reason)));
    m_devices->setItem(r, 4, item(DevicesModel::setByText(dev)));
    m_devices->setItem(r, 5, item(Q(dev.last_seen)));
    const auto it = running.find(dev.name);
    if (it == running.end()) {
      m_devices->setItem(r, kRunningJobColumn, item(tr("idle")));
      continue;
    }
    const store::JobRow& job = *it->second;
    auto* jobItem = item(tr("job %1 (%2)").arg(job.id).arg(Q(job.claimed_by)));
    jobItem->setData(kIdRole, QVariant::fromValue<qint64>(job.id));
    m_devices->setItem(r, kRunningJobColumn, jobItem);
    m_devices->setItem(r, 7, item(Q(job.model + " " + job.delegate)));
    m_devices->setItem(r, 8, number(job.run_id));
  }
  done(m_devices);
}

void FleetView::fillQueue(const FleetData& d) {
  int64_t queued = 0;
  int64_t runningJobs = 0;
  // priority -> (queued, running) of the queue runs: what nodes claim next.
  std::map<int64_t, std::pair<int64_t, int64_t>, std::greater<>> byPriority;
  refill(m_queue, static_cast<int>(d.unfinished.size()));
  for (int r = 0; r < static_cast<int>(d.unfinished.size()); ++r) {
    const store::RunSummary& s = d.unfinished[static_cast<size_t>(r)];
    const auto count = [&s](const char* status) {
      const auto it = s.by_status.find(status);
      return it == s.by_status.end() ? int64_t{0} : it->second;
    };
    const int64_t q = count(store::kJobQueued);
    const int64_t run = count(store::kJobRunning);
    queued += q;
    runningJobs += run;
    const bool queueRun = s.run.mode == store::kRunModeQueue;
    if (queueRun) {
      byPriority[s.run.priority].first += q;
      byPriority[s.run.priority].second += run;
    }
    auto* id = number(s.run.id);
    id->setData(kIdRole, QVariant::fromValue<qint64>(s.run.id));
    m_queue->setItem(r, 0, id);
    m_queue->setItem(r, 1, item(Q(s.run.name)));
    // A local sweep runs its own jobs: no priority.
    m_queue->setItem(r, kPriorityColumn, queueRun ? number(s.run.priority) : item(QString()));
    m_queue->setItem(r, 3, item(s.run.mode.empty() ? tr("local sweep") : Q(s.run.mode)));
    m_queue->setItem(r, 4, number(q));
    m_queue->setItem(r, 5, number(run));
    m_queue->setItem(r, 6, number(s.jobs - q - run));
    m_queue->setItem(r, 7, number(s.jobs));
    m_queue->setItem(r, 8, item(Q(s.run.created_at)));
  }
  done(m_queue);
  QStringList depth;
  for (const auto& [priority, counts] : byPriority) {
    depth << tr("priority %1: %2 queued, %3 running")
                 .arg(priority)
                 .arg(counts.first)
                 .arg(counts.second);
  }
  m_queueLabel->setText(
      tr("<b>Queue</b>: %1 jobs queued, %2 running in %3 unfinished run(s)")
          .arg(queued)
          .arg(runningJobs)
          .arg(d.unfinished.size()) +
      (depth.empty() ? QString() : QStringLiteral(" &mdash; ") + depth.join(QStringLiteral("; "))));
}

}  // namespace dfarm::gui
