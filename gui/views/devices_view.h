// DevicesView: every device the store has seen (the node serving it, state
// and who set it, description, last seen, quarantine reason) and, below, the
// selected device's state history.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <string>
#include <vector>

#include "gui/views/view.h"
#include "reports/store/store.h"

class QLabel;
class QTableView;

namespace dfarm::gui {

class DevicesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    NameColumn,
    NodeColumn,  // the farm node that serves it; "(local sweep)" for none
    StateColumn,
    SetByColumn,  // who set the state (setByText)
    AbiColumn,
    OsColumn,
    CpuColumn,
    OpenClColumn,  // the OpenCL devices its agent saw
    CoresColumn,
    MemoryColumn,
    AgentColumn,
    LastSeenColumn,
    ReasonColumn,
    ColumnCount
  };
  static constexpr int NameRole = Qt::UserRole + 1;
  static constexpr int SortRole = Qt::UserRole + 2;

  explicit DevicesModel(QObject* parent = nullptr);
  void setDevices(std::vector<store::DeviceRow> devices);
  const std::vector<store::DeviceRow>& devices() const { return m_devices; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;
  // The OpenCL column's text: "NAME (driver V), GPU, fp16" joined by "; ";
  // detailed (the tooltip): one device per line with vendor, version and
  // compute units.
  static QString openClText(const std::vector<store::OpenClDevice>& devices, bool detailed);
  // Who set a device's stored state: "operator USER@HOST", "health",
  // "dfarm"; "" when nobody has. The fleet view shows the same.
  static QString setByText(const store::DeviceRow& device);

 private:
  std::vector<store::DeviceRow> m_devices;
};

class DeviceEventsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { AtColumn, StateColumn, ReasonColumn, ColumnCount };

  explicit DeviceEventsModel(QObject* parent = nullptr);
  void setEvents(std::vector<store::DeviceEvent> events);
  const std::vector<store::DeviceEvent>& events() const { return m_events; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<store::DeviceEvent> m_events;
};

class DevicesView : public View {
  Q_OBJECT

 public:
  explicit DevicesView(QWidget* parent = nullptr);

  void showDevices();
  void open(const Location& where) override;
  void refresh() override;

  DevicesModel* model() const { return m_model; }
  DeviceEventsModel* eventsModel() const { return m_events; }
  QTableView* table() const { return m_table; }
  // Selects a device by name (its history loads); false when absent.
  bool selectDevice(const QString& name);

 signals:
  void historyLoaded();

 private:
  void load();
  void applied(const Result<std::vector<store::DeviceRow>>& result, const QString& keep);
  void loadHistory();
  QString selectedName() const;

  DevicesModel* m_model;
  QSortFilterProxyModel* m_proxy;
  DeviceEventsModel* m_events;
  QTableView* m_table;
  QTableView* m_history;
  QLabel* m_message;
  QLabel* m_historyTitle;
  quint64 m_generation = 0, m_historyGeneration = 0;
};

}  // namespace dfarm::gui
