// EventLoopProbe: measures the dashboard's live mode from inside
// (dfarm-dashboard with DFARM_DASHBOARD_PROBE=FILE). A timer on the GUI
// thread ticks every kTickMs; the largest lateness of a tick is the longest
// the GUI thread was blocked. FILE gets one line per event, each starting
// with the wall clock in ms since the epoch:
//   <ms> seen                       the watcher saw a change
//   <ms> updated                    the open view painted its re-read
//   <ms> gap <max ms> cpu <max ms> polls <n>
//                                   every second: the largest tick lateness
//                                   in that second, the most CPU time the GUI
//                                   thread used between two ticks (its own
//                                   work; a gap with little CPU is the thread
//                                   not scheduled, on a loaded machine) and
//                                   the polls so far
// The numbers are for a person or a script to read; nothing checks them.
#pragma once

#include <QElapsedTimer>
#include <QFile>
#include <QObject>
#include <QTimer>

namespace dfarm::gui {

class MainWindow;

class EventLoopProbe : public QObject {
  Q_OBJECT

 public:
  static constexpr int kTickMs = 10;
  // Starts writing to file (truncated); false when it cannot be opened.
  EventLoopProbe(MainWindow* window, const QString& file);
  bool ok() const { return m_file.isOpen(); }

 private:
  void tick();
  void write(const QString& event);

  MainWindow* m_window;
  QFile m_file;
  QTimer m_timer;
  QElapsedTimer m_sinceTick;
  QElapsedTimer m_sinceReport;
  qint64 m_maxLateMs = 0;
  qint64 m_lastCpuNs = 0;
  qint64 m_maxCpuNs = 0;
};

}  // namespace dfarm::gui
