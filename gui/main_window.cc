#include "gui/main_window.h"

#include <QFileDialog>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeySequence>
#include <QMenuBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QToolBar>

#include "gui/jobs_model.h"
#include "gui/runs_model.h"
#include "gui/store_loader.h"

namespace dfarm::gui {

namespace {

QTableView* makeTable(QAbstractItemModel* model, int sortRole, QWidget* parent) {
  auto* proxy = new QSortFilterProxyModel(parent);
  proxy->setSourceModel(model);
  proxy->setSortRole(sortRole);
  auto* view = new QTableView(parent);
  view->setModel(proxy);
  view->setSortingEnabled(true);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setSelectionMode(QAbstractItemView::SingleSelection);
  view->setAlternatingRowColors(true);
  view->verticalHeader()->hide();
  view->horizontalHeader()->setStretchLastSection(true);
  return view;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_runs(new RunsModel(this)),
      m_jobs(new JobsModel(this)),
      m_loader(new StoreLoader(this)) {
  setWindowTitle(tr("DelegateFarm dashboard"));
  resize(1200, 720);

  m_runsView = makeTable(m_runs, Qt::DisplayRole, this);
  m_runsView->sortByColumn(RunsModel::IdColumn, Qt::DescendingOrder);
  m_jobsView = makeTable(m_jobs, JobsModel::SortRole, this);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(m_runsView);
  splitter->addWidget(m_jobsView);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 2);
  setCentralWidget(splitter);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open database…"), this, &MainWindow::chooseDatabase);
  open->setShortcut(QKeySequence::Open);
  QAction* refresh = file->addAction(tr("&Reload"), this, &MainWindow::reload);
  refresh->setShortcut(QKeySequence::Refresh);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QToolBar* tools = addToolBar(tr("Database"));
  tools->addAction(open);
  tools->addAction(refresh);

  connect(m_loader, &StoreLoader::runsLoaded, this, &MainWindow::onRunsLoaded);
  connect(m_loader, &StoreLoader::jobsLoaded, this, &MainWindow::onJobsLoaded);
  connect(m_runsView->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &MainWindow::onRunSelected);
  statusBar()->showMessage(tr("No database open"));
}

void MainWindow::openDatabase(const QString& dbPath) {
  m_dbPath = dbPath;
  setWindowTitle(tr("DelegateFarm dashboard — %1").arg(dbPath));
  reload();
}

void MainWindow::reload() {
  if (m_dbPath.isEmpty()) return;
  statusBar()->showMessage(tr("Loading %1…").arg(m_dbPath));
  m_loader->loadRuns(m_dbPath);
}

void MainWindow::chooseDatabase() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open DelegateFarm database"), QString(),
                                   tr("SQLite databases (*.db *.sqlite);;All files (*)"));
  if (!path.isEmpty()) openDatabase(path);
}

void MainWindow::onRunsLoaded(const RunsSnapshot& snapshot) {
  if (!snapshot.error.isEmpty()) {
    m_runs->setRuns({});
    m_jobs->setJobs({});
    statusBar()->showMessage(tr("Error: %1").arg(snapshot.error));
    return;
  }
  m_runs->setRuns(snapshot.runs);
  m_runsView->resizeColumnsToContents();
  statusBar()->showMessage(
      tr("%1: %n run(s)", nullptr, static_cast<int>(snapshot.runs.size())).arg(m_dbPath));
  if (!snapshot.runs.empty()) m_runsView->selectRow(0);
}

void MainWindow::onRunSelected() {
  const QModelIndexList rows = m_runsView->selectionModel()->selectedRows();
  if (rows.isEmpty()) {
    m_jobs->setJobs({});
    return;
  }
  const qint64 runId = rows.first().data(RunsModel::RunIdRole).toLongLong();
  m_loader->loadJobs(m_dbPath, runId);
}

void MainWindow::onJobsLoaded(const JobsSnapshot& snapshot) {
  if (!snapshot.error.isEmpty()) {
    m_jobs->setJobs({});
    statusBar()->showMessage(tr("Error: %1").arg(snapshot.error));
    return;
  }
  m_jobs->setJobs(snapshot.jobs, snapshot.accuracy);
  m_jobsView->resizeColumnsToContents();
  statusBar()->showMessage(
      tr("Run %1: %n job(s)", nullptr, static_cast<int>(snapshot.jobs.size())).arg(snapshot.runId));
}

}  // namespace dfarm::gui
