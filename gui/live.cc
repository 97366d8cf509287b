#include "gui/live.h"

#include <sys/stat.h>

#include <QFile>
#include <QTimer>

namespace dfarm::gui {

DatabaseWatcher::DatabaseWatcher(QObject* parent) : QObject(parent), m_timer(new QTimer(this)) {
  m_timer->setInterval(500);
  connect(m_timer, &QTimer::timeout, this, &DatabaseWatcher::check);
}

DatabaseWatcher::FileState DatabaseWatcher::stateOf(const QString& path) {
  // stat() directly: nanosecond mtimes, and no cached QFileInfo.
  struct stat st {};
  if (::stat(QFile::encodeName(path).constData(), &st) != 0) return {};
  // An empty log is no write: SQLite creates one when a reader (the
  // dashboard's own loads) opens the database and removes it on close.
  if (st.st_size == 0) return {};
  FileState state;
  state.size = static_cast<qint64>(st.st_size);
  state.mtimeNs = static_cast<qint64>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return state;
}

void DatabaseWatcher::watch(const QString& dbPath) {
  m_dbPath = dbPath;
  if (dbPath.isEmpty()) {
    stop();
    return;
  }
  m_db = stateOf(dbPath);
  m_wal = stateOf(dbPath + QStringLiteral("-wal"));
  m_timer->start();
}

void DatabaseWatcher::stop() { m_timer->stop(); }

bool DatabaseWatcher::isWatching() const { return m_timer->isActive(); }

void DatabaseWatcher::setInterval(int ms) { m_timer->setInterval(ms); }

int DatabaseWatcher::interval() const { return m_timer->interval(); }

bool DatabaseWatcher::check() {
  if (m_dbPath.isEmpty()) return false;
  const FileState db = stateOf(m_dbPath);
  const FileState wal = stateOf(m_dbPath + QStringLiteral("-wal"));
  if (db == m_db && wal == m_wal) return false;
  m_db = db;
  m_wal = wal;
  m_lastChange = QDateTime::currentDateTime();
  ++m_changes;
  emit changed();
  return true;
}

}  // namespace dfarm::gui
