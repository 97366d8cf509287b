// FleetView: the farm at a glance. Its nodes (name, host, last heartbeat,
// alive or lost, their devices), every device with the node serving it, its
// state, the reason and who set it (an operator, the health check, dfarm),
// and the job it runs now (a node's claim), and the queue: the priority and
// the queued and running jobs of each unfinished run, highest priority
// first, and the queue's depth by priority above it. A database
// without a farm (a local sweep's) shows its devices and "no farm nodes".
// Activating a device's running job opens it, a queue row opens its run.
#pragma once

#include <QString>
#include <vector>

#include "agent/base/result.h"
#include "gui/views/view.h"
#include "reports/store/store.h"

class QLabel;
class QTableWidget;

namespace dfarm::gui {

struct FleetData {
  std::vector<store::NodeRow> nodes;
  std::vector<store::DeviceRow> devices;
  std::vector<store::JobRow> claimed;         // ListClaimedJobs: by device
  std::vector<store::RunSummary> unfinished;  // runs still running, newest first
};

// Reads the fleet (blocking; off the GUI thread).
Result<FleetData> loadFleet(store::Reader& store);

class FleetView : public View {
  Q_OBJECT

 public:
  explicit FleetView(QWidget* parent = nullptr);

  void open(const Location& where) override;
  void refresh() override;

  QTableWidget* nodesTable() const { return m_nodes; }
  QTableWidget* devicesTable() const { return m_devices; }
  QTableWidget* queueTable() const { return m_queue; }
  // The line above the nodes ("2 nodes, 1 alive" or "no farm nodes").
  QString nodesSummary() const;
  QString queueSummary() const;

 private:
  void load();
  void showFleet(const Result<FleetData>& data);
  void fillNodes(const FleetData& d);
  void fillDevices(const FleetData& d);
  void fillQueue(const FleetData& d);

  quint64 m_generation = 0;
  QLabel* m_message = nullptr;
  QLabel* m_nodesLabel = nullptr;
  QLabel* m_queueLabel = nullptr;
  QTableWidget* m_nodes = nullptr;
  QTableWidget* m_devices = nullptr;
  QTableWidget* m_queue = nullptr;
};

}  // namespace dfarm::gui
