// DatabaseWatcher: tells the dashboard when another process (a sweep, a
// farm's nodes) changed what the dashboard shows, so the open view re-reads
// without a manual reload.
//
// It polls the store's change counter (store::Reader::ChangeCount: one
// small SELECT, bumped by results, run and job status and device state
// changes, never by heartbeats) from a thread of its own with its own
// connection, every interval; growth is reported once as changed() on the
// watcher's thread, so writes within one interval coalesce into one report.
// The GUI thread never reads the store and never waits on the poller: stop()
// and the destructor leave a poll in flight to finish on its own thread.
// The default interval keeps an idle farm's cost under one transaction a
// second per dashboard on PostgreSQL (kPostgresIntervalMs) and is shorter on
// a local SQLite file (kSqliteIntervalMs).
#pragma once

#include <QDateTime>
#include <QObject>
#include <QString>
#include <memory>

namespace dfarm::gui {

class DatabaseWatcher : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPostgresIntervalMs = 1200;
  static constexpr int kSqliteIntervalMs = 500;

  explicit DatabaseWatcher(QObject* parent = nullptr);
  ~DatabaseWatcher() override;

  // Starts watching dbPath (an empty path stops); the counter's first read
  // is the baseline, so only later changes are reported.
  void watch(const QString& dbPath);
  void stop();
  bool isWatching() const { return m_poll != nullptr; }
  const QString& database() const { return m_dbPath; }

  // The poll interval; 0 (the default) picks kPostgresIntervalMs or
  // kSqliteIntervalMs by the database. Takes effect at the next watch().
  void setInterval(int ms) { m_intervalMs = ms; }
  int interval() const;

  // When changed() was last emitted (invalid before the first).
  const QDateTime& lastChange() const { return m_lastChange; }
  quint64 changeCount() const { return m_changes; }
  // Why the last poll failed; empty while polls succeed.
  const QString& error() const { return m_error; }
  // The polls made since watch() (each one query), for tests and the probe.
  quint64 polls() const;

 signals:
  void changed();
  // A poll failed (message) or succeeded again after failing (empty).
  void errorChanged(const QString& message);

 private:
  struct Poll;
  void noteChange();
  void noteError(const QString& message);

  QString m_dbPath;
  int m_intervalMs = 0;
  std::shared_ptr<Poll> m_poll;
  QDateTime m_lastChange;
  quint64 m_changes = 0;
  QString m_error;
};

}  // namespace dfarm::gui
