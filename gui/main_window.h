// MainWindow: runs on top, the selected run's jobs below. A thin shell over
// RunsModel, JobsModel and StoreLoader.
#pragma once

#include <QMainWindow>
#include <QString>

class QTableView;

namespace dfarm::gui {

class JobsModel;
class RunsModel;
class StoreLoader;
struct JobsSnapshot;
struct RunsSnapshot;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Opens the database at dbPath (asynchronously) and selects its newest run.
  void openDatabase(const QString& dbPath);
  void reload();

  RunsModel* runsModel() const { return m_runs; }
  JobsModel* jobsModel() const { return m_jobs; }
  StoreLoader* loader() const { return m_loader; }

 private:
  void chooseDatabase();
  void onRunsLoaded(const RunsSnapshot& snapshot);
  void onJobsLoaded(const JobsSnapshot& snapshot);
  void onRunSelected();

  QString m_dbPath;
  RunsModel* m_runs = nullptr;
  JobsModel* m_jobs = nullptr;
  StoreLoader* m_loader = nullptr;
  QTableView* m_runsView = nullptr;
  QTableView* m_jobsView = nullptr;
};

}  // namespace dfarm::gui
