#include "gui/store_loader.h"

#include <QFileInfo>
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "reports/report.h"

namespace dfarm::gui {

namespace {

QString missingDatabase(const QString& dbPath) {
  return QObject::tr("database '%1' does not exist").arg(dbPath);
}

}  // namespace

Result<std::unique_ptr<store::Store>> OpenDashboardStore(const QString& dbPath) {
  if (!QFileInfo::exists(dbPath)) {
    return MakeError(ErrorKind::kNotFound, missingDatabase(dbPath).toStdString());
  }
  return store::OpenSqliteStore(dbPath.toStdString());
}

RunsSnapshot readRuns(const QString& dbPath) {
  RunsSnapshot snapshot;
  if (!QFileInfo::exists(dbPath)) {
    snapshot.error = missingDatabase(dbPath);
    return snapshot;
  }
  auto store = store::OpenSqliteStore(dbPath.toStdString());
  if (!store) {
    snapshot.error = QString::fromStdString(store.message());
    return snapshot;
  }
  auto runs = (*store)->ListRuns();
  if (!runs) {
    snapshot.error = QString::fromStdString(runs.message());
    return snapshot;
  }
  snapshot.runs = std::move(*runs);
  return snapshot;
}

JobsSnapshot readJobs(const QString& dbPath, qint64 runId) {
  JobsSnapshot snapshot;
  snapshot.runId = runId;
  if (!QFileInfo::exists(dbPath)) {
    snapshot.error = missingDatabase(dbPath);
    return snapshot;
  }
  auto store = store::OpenSqliteStore(dbPath.toStdString());
  if (!store) {
    snapshot.error = QString::fromStdString(store.message());
    return snapshot;
  }
  auto jobs = (*store)->ListJobs(runId);
  if (!jobs) {
    snapshot.error = QString::fromStdString(jobs.message());
    return snapshot;
  }
  auto accuracy = reports::LoadAccuracy(**store, *jobs);
  if (!accuracy) {
    snapshot.error = QString::fromStdString(accuracy.message());
    return snapshot;
  }
  snapshot.jobs = std::move(*jobs);
  snapshot.accuracy = std::move(*accuracy);
  return snapshot;
}

StoreLoader::StoreLoader(QObject* parent) : QObject(parent) {}

void StoreLoader::loadRuns(const QString& dbPath) {
  const quint64 generation = ++m_runsGeneration;
  auto* watcher = new QFutureWatcher<RunsSnapshot>(this);
  connect(watcher, &QFutureWatcher<RunsSnapshot>::finished, this, [this, watcher, generation] {
    watcher->deleteLater();
    if (generation == m_runsGeneration) emit runsLoaded(watcher->result());
  });
  watcher->setFuture(QtConcurrent::run(readRuns, dbPath));
}

void StoreLoader::loadJobs(const QString& dbPath, qint64 runId) {
  const quint64 generation = ++m_jobsGeneration;
  auto* watcher = new QFutureWatcher<JobsSnapshot>(this);
  connect(watcher, &QFutureWatcher<JobsSnapshot>::finished, this, [this, watcher, generation] {
    watcher->deleteLater();
    if (generation == m_jobsGeneration) emit jobsLoaded(watcher->result());
  });
  watcher->setFuture(QtConcurrent::run(readJobs, dbPath, runId));
}

}  // namespace dfarm::gui
