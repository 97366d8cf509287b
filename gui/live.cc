#include "gui/live.h"

#include <QMetaObject>
#include <QPointer>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "gui/store_loader.h"
#include "reports/store/store.h"

namespace dfarm::gui {

// What the watcher shares with its poller thread. The thread holds it to its
// end, so the watcher can let go (stop) without waiting for a poll in
// flight; `stopped` under `mutex` guarantees nothing is posted after stop().
struct DatabaseWatcher::Poll {
  std::mutex mutex;
  std::condition_variable cv;
  bool stopped = false;
  std::atomic<quint64> polls{0};
  QPointer<DatabaseWatcher> watcher;

  // Posts f to the watcher's thread unless stopped.
  template <typename F>
  void post(F f) {
    std::lock_guard lock(mutex);
    if (stopped || watcher.isNull()) return;
    QMetaObject::invokeMethod(watcher.data(), std::move(f), Qt::QueuedConnection);
  }

  void run(const QString& dbPath, int intervalMs);
};

void DatabaseWatcher::Poll::run(const QString& dbPath, int intervalMs) {
  std::unique_ptr<store::Reader> store;
  std::optional<int64_t> seen;
  bool failing = false;
  std::unique_lock lock(mutex);
  while (!stopped) {
    lock.unlock();
    QString failure;
    if (!store) {
      auto opened = OpenDashboardStore(dbPath);
      if (opened) {
        store = std::move(*opened);
      } else {
        failure = QString::fromStdString(opened.message());
      }
    }
    if (store) {
      auto count = store->ChangeCount();
      polls.fetch_add(1);
      if (!count) {
        failure = QString::fromStdString(count.message());
        store.reset();  // reconnect on the next round
      } else {
        const bool grew = seen && *count > *seen;
        seen = *count;
        if (grew) post([w = watcher] { w->noteChange(); });
      }
    }
    if (!failure.isEmpty() || failing) {
      failing = !failure.isEmpty();
      post([w = watcher, failure] { w->noteError(failure); });
    }
    lock.lock();
    cv.wait_for(lock, std::chrono::milliseconds(intervalMs), [this] { return stopped; });
  }
}

DatabaseWatcher::DatabaseWatcher(QObject* parent) : QObject(parent) {}

DatabaseWatcher::~DatabaseWatcher() { stop(); }

int DatabaseWatcher::interval() const {
  if (m_intervalMs > 0) return m_intervalMs;
  return store::IsPostgresUrl(m_dbPath.toStdString()) ? kPostgresIntervalMs : kSqliteIntervalMs;
}

quint64 DatabaseWatcher::polls() const { return m_poll ? m_poll->polls.load() : 0; }

void DatabaseWatcher::noteChange() {
  m_lastChange = QDateTime::currentDateTime();
  ++m_changes;
  emit changed();
}

void DatabaseWatcher::noteError(const QString& message) {
  if (message == m_error) return;
  m_error = message;
  emit errorChanged(message);
}

void DatabaseWatcher::watch(const QString& dbPath) {
  stop();
  m_dbPath = dbPath;
  m_error.clear();
  if (dbPath.isEmpty()) return;
  auto poll = std::make_shared<Poll>();
  poll->watcher = this;
  m_poll = poll;
  std::thread([poll, dbPath, ms = interval()] { poll->run(dbPath, ms); }).detach();
}

void DatabaseWatcher::stop() {
  if (!m_poll) return;
  {
    std::lock_guard lock(m_poll->mutex);
    m_poll->stopped = true;
  }
  m_poll->cv.notify_all();
  m_poll.reset();
}

}  // namespace dfarm::gui
