// StoreLoader: reads the store off the GUI thread. Each load opens its own
// Store in a pool thread (a Store is not thread-safe) and hands value types
// back to the GUI thread through a signal; a newer request supersedes an
// older one still in flight.
#pragma once

#include <QObject>
#include <QString>
#include <map>
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
JobsSnapshot readJobs(const QString& dbPath, qint64 runId);

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
