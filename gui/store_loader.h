// StoreLoader: reads the store off the GUI thread. Each load opens its own
// Store in a pool thread (a Store is not thread-safe) and hands value types
// back to the GUI thread through a signal; a newer request supersedes an
// older one still in flight.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>
#include <functional>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "reports/store/store.h"

namespace dfarm::gui {

struct RunsSnapshot {
  QString error;  // empty on success
  std::vector<store::RunRow> runs;
};

struct JobsSnapshot {
  qint64 runId = 0;
  QString error;  // empty on success
  std::vector<store::JobRow> jobs;
  // Each job's outputs against the reference, by job id (absent: none).
  std::map<int64_t, store::Accuracy> accuracy;
};

// Synchronous reads (blocking; call them off the GUI thread). A database
// file that does not exist is an error: the dashboard never creates one.
RunsSnapshot readRuns(const QString& dbPath);
// Opens an existing database for reading; an error names the file when it
// does not exist or cannot be opened.
Result<std::unique_ptr<store::Store>> OpenDashboardStore(const QString& dbPath);
JobsSnapshot readJobs(const QString& dbPath, qint64 runId);

// Runs read(store) on a pool thread with its own Store opened on dbPath, then
// done(result) on receiver's thread; dropped when receiver is gone by then.
// A database that cannot be opened gives an error result (the dashboard
// never creates one). T must be a value type (copied across threads).
template <typename T>
void LoadAsync(const QString& dbPath, QObject* receiver,
               std::function<Result<T>(store::Store&)> read,
               std::function<void(const Result<T>&)> done) {
  auto* watcher = new QFutureWatcher<std::shared_ptr<Result<T>>>(receiver);
  QObject::connect(watcher, &QFutureWatcher<std::shared_ptr<Result<T>>>::finished, receiver,
                   [watcher, done = std::move(done)] {
                     watcher->deleteLater();
                     done(*watcher->result());
                   });
  watcher->setFuture(QtConcurrent::run([dbPath, read = std::move(read)] {
    auto store = OpenDashboardStore(dbPath);
    if (!store) return std::make_shared<Result<T>>(store.error());
    return std::make_shared<Result<T>>(read(**store));
  }));
}

class StoreLoader : public QObject {
  Q_OBJECT

 public:
  explicit StoreLoader(QObject* parent = nullptr);

  void loadRuns(const QString& dbPath);
  void loadJobs(const QString& dbPath, qint64 runId);

 signals:
  void runsLoaded(const dfarm::gui::RunsSnapshot& snapshot);
  void jobsLoaded(const dfarm::gui::JobsSnapshot& snapshot);

 private:
  quint64 m_runsGeneration = 0;
  quint64 m_jobsGeneration = 0;
};

}  // namespace dfarm::gui
