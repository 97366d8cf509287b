// DatabaseWatcher: tells the dashboard when another process (a sweep) wrote
// to its database, so the open view re-reads without a manual reload.
//
// It polls, every interval (500 ms by default), the size and modification
// time of the database file and of its write-ahead log (FILE-wal, where every
// commit of a WAL-mode SQLite database lands first): two stat() calls on the
// GUI thread, no SQLite connection, no lock, nothing that can block. A change
// seen on a tick is reported once as changed(); writes within one interval
// coalesce into one report.
//
// A farm's PostgreSQL database (a postgresql:// URL) has no file here: a
// thread of the watcher's own, with its own connection, waits for a change
// (Store::WaitForChange: the server's current snapshot, polled) instead, so
// the GUI thread never waits on the network; a change is reported the same
// way. The thread wakes each interval to see whether it
// should stop.
#pragma once

#include <QDateTime>
#include <QObject>
#include <QString>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

class QTimer;

namespace dfarm::gui {

class DatabaseWatcher : public QObject {
  Q_OBJECT

 public:
  explicit DatabaseWatcher(QObject* parent = nullptr);
  ~DatabaseWatcher() override;

  // Starts watching dbPath (an empty path stops); the state now is the
  // baseline, so only later writes are reported.
  void watch(const QString& dbPath);
  void stop();
  bool isWatching() const;
  const QString& database() const { return m_dbPath; }

  void setInterval(int ms);
  int interval() const;
  // Reports the writes since the last check now (the timer calls it).
  // Returns true when it saw one.
  bool check();

  // When changed() was last emitted (invalid before the first).
  const QDateTime& lastChange() const { return m_lastChange; }
  quint64 changeCount() const { return m_changes; }

 signals:
  void changed();

 private:
  struct FileState {
    qint64 size = -1;  // -1: absent
    qint64 mtimeNs = 0;
    bool operator==(const FileState& o) const { return size == o.size && mtimeNs == o.mtimeNs; }
  };
  static FileState stateOf(const QString& path);
  // The PostgreSQL poller (a postgresql:// database).
  void startPoller(const std::string& url);
  void stopPoller();
  void noteChange();

  QString m_dbPath;
  QTimer* m_timer = nullptr;
  FileState m_db;
  FileState m_wal;
  QDateTime m_lastChange;
  quint64 m_changes = 0;
  std::thread m_poller;
  std::mutex m_pollMutex;
  std::condition_variable m_pollCv;
  bool m_pollStop = false;
};

}  // namespace dfarm::gui
