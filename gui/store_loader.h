// LoadAsync: reads the store off the GUI thread. Each load opens its own
// Store in a pool thread (a Store is not thread-safe) and hands a value type
// back to the receiver's thread; views keep their own generation counters so
// a newer request supersedes an older one still in flight.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>
#include <functional>
#include <memory>
#include <utility>

#include "agent/base/result.h"
#include "reports/store/store.h"

namespace dfarm::gui {

// Opens an existing database as a store::Reader (the dashboard has no write to
// call); an error names the file when it does not exist or cannot be opened.
// The dashboard never creates one.
Result<std::unique_ptr<store::Reader>> OpenDashboardStore(const QString& dbPath);

// Runs read(store) on a pool thread with its own Store opened on dbPath, then
// done(result) on receiver's thread; dropped when receiver is gone by then.
// A database that cannot be opened gives an error result. T must be a value
// type (copied across threads).
template <typename T>
void LoadAsync(const QString& dbPath, QObject* receiver,
               std::function<Result<T>(store::Reader&)> read,
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

}  // namespace dfarm::gui
