#include "gui/live.h"

#include <sys/stat.h>

#include <QFile>
#include <QMetaObject>
#include <QTimer>
#include <chrono>

#include "reports/store/store.h"

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

DatabaseWatcher::~DatabaseWatcher() { stopPoller(); }

void DatabaseWatcher::noteChange() {
  m_lastChange = QDateTime::currentDateTime();
  ++m_changes;
  emit changed();
}

void DatabaseWatcher::startPoller(const std::string& url) {
  stopPoller();
  m_pollStop = false;
  const int ms = m_timer->interval();
  m_poller = std::thread([this, url, ms] {
    std::unique_ptr<dfarm::store::Reader> store;
    std::unique_lock lock(m_pollMutex);
    while (!m_pollStop) {
      lock.unlock();
      if (!store) {
        auto opened = dfarm::store::OpenStore(url);
        if (opened) store = std::move(*opened);
      }
      bool changed = false;
      if (store) {
        auto woke = store->WaitForChange(ms);
        if (!woke) store.reset();  // reconnect on the next round
        changed = woke && *woke;
      }
      if (changed)
        QMetaObject::invokeMethod(
            this, [this] { noteChange(); }, Qt::QueuedConnection);
      lock.lock();
      if (!store)
        m_pollCv.wait_for(lock, std::chrono::milliseconds(ms), [this] { return m_pollStop; });
    }
  });
}

void DatabaseWatcher::stopPoller() {
  {
    std::lock_guard lock(m_pollMutex);
    m_pollStop = true;
  }
  m_pollCv.notify_all();
  if (m_poller.joinable()) m_poller.join();
}

void DatabaseWatcher::watch(const QString& dbPath) {
  m_dbPath = dbPath;
  stopPoller();
  if (dbPath.isEmpty()) {
    stop();
    return;
  }
  if (dfarm::store::IsPostgresUrl(dbPath.toStdString())) {
    m_timer->stop();
    startPoller(dbPath.toStdString());
    return;
  }
  m_db = stateOf(dbPath);
  m_wal = stateOf(dbPath + QStringLiteral("-wal"));
  m_timer->start();
}

void DatabaseWatcher::stop() {
  m_timer->stop();
  stopPoller();
}

bool DatabaseWatcher::isWatching() const { return m_timer->isActive() || m_poller.joinable(); }

void DatabaseWatcher::setInterval(int ms) { m_timer->setInterval(ms); }

int DatabaseWatcher::interval() const { return m_timer->interval(); }

bool DatabaseWatcher::check() {
  if (m_dbPath.isEmpty() || m_poller.joinable()) return false;
  const FileState db = stateOf(m_dbPath);
  const FileState wal = stateOf(m_dbPath + QStringLiteral("-wal"));
  if (db == m_db && wal == m_wal) return false;
  m_db = db;
  m_wal = wal;
  noteChange();
  return true;
}

}  // namespace dfarm::gui
