#include "gui/main_window.h"

#include <QAction>
#include <QClipboard>
#include <QDateTime>
#include <QFileDialog>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTimer>
#include <algorithm>

#include "gui/chart_export.h"
#include "gui/live.h"
#include "gui/store_loader.h"
#include "gui/table_copy.h"

namespace dfarm::gui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_watcher(new DatabaseWatcher(this)) {
  qRegisterMetaType<dfarm::store::Cell>();
  qRegisterMetaType<dfarm::gui::Page>();
  setWindowTitle(tr("DelegateFarm dashboard"));
  resize(1440, 900);

  m_nav = new QListWidget(this);
  m_stack = new QStackedWidget(this);
  buildViews();
  for (int i = 0; i < kPageCount; ++i) {
    const QString title = tr(pageInfo(static_cast<Page>(i)).title);
    m_nav->addItem(i < kPageKeys ? tr("%1\tCtrl+%2").arg(title).arg(i + 1) : title);
  }
  m_nav->setSpacing(3);
  m_nav->setFixedWidth(m_nav->sizeHintForColumn(0) + 16);
  m_nav->setCurrentRow(0);
  connect(m_nav, &QListWidget::currentRowChanged, this, [this](int row) {
    if (row >= 0 && row != static_cast<int>(m_here.page)) goToPage(static_cast<Page>(row));
  });

  // The list keeps its width; the view takes the rest.
  auto* central = new QWidget(this);
  auto* layout = new QHBoxLayout(central);
  layout->setContentsMargins(4, 4, 4, 0);
  layout->addWidget(m_nav);
  layout->addWidget(m_stack, 1);
  setCentralWidget(central);

  buildActions();
  m_dbLabel = new QLabel(tr("No database open"), this);
  m_liveLabel = new QLabel(this);
  statusBar()->addWidget(m_dbLabel, 1);
  statusBar()->addPermanentWidget(m_liveLabel);
  connect(m_watcher, &DatabaseWatcher::changed, this, &MainWindow::onDatabaseChanged);
  connect(m_watcher, &DatabaseWatcher::errorChanged, this, &MainWindow::updateLiveLabel);
  connect(this, &MainWindow::openFailed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  updateLiveLabel();
}

void MainWindow::buildViews() {
  for (int i = 0; i < kPageCount; ++i) {
    const Page page = static_cast<Page>(i);
    View* v = pageInfo(page).make(this);
    m_views[i] = v;
    m_stack->addWidget(v);
    connect(v, &View::ready, this, [this, page] { onViewReady(page); });
    connect(v, &View::openRun, this, [this](qint64 runId) {
      Location where;
      where.runId = runId;
      goToSubject(Subject::Run, where);
    });
    connect(v, &View::openJob, this, [this](qint64 jobId) {
      Location where;
      where.jobId = jobId;
      goToSubject(Subject::Job, where);
    });
    connect(v, &View::openCell, this, [this](const store::Cell& cell) {
      Location where;
      where.cell = cell;
      goToSubject(Subject::Cell, where);
    });
    connect(v, &View::openCells, this,
            [this](const QList<store::Cell>& cells) { goToCells(Location(), cells); });
    connect(v, &View::addToTrend, this, [this](const QList<store::Cell>& cells) {
      const PageInfo* trend = pageShowing(Subject::Cell);
      const int index = trend ? static_cast<int>(trend->page) : 0;
      goToCells(trend && m_shown[index] ? m_last[index] : Location(), cells);
    });
    connect(v, &View::compareRuns, this, [this](qint64 baseline, qint64 candidate) {
      Location where;
      where.baselineId = baseline;
      where.runId = candidate;
      goToSubject(Subject::RunPair, where);
    });
  }
}

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open database…"), this, &MainWindow::chooseDatabase);
  open->setShortcut(QKeySequence::Open);
  QAction* exportAction =
      file->addAction(tr("&Export chart as PNG/SVG…"), this, &MainWindow::chooseExportFile);
  exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* copy = edit->addAction(tr("&Copy table as TSV"), this, &MainWindow::copyTable);
  copy->setShortcut(QKeySequence::Copy);
  // Before the table's own Ctrl+C (which copies one cell).
  copy->setShortcutContext(Qt::WindowShortcut);
  QAction* copyLinkAction =
      edit->addAction(tr("Copy &link to this view"), this, &MainWindow::copyLink);
  copyLinkAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));

  QMenu* go = menuBar()->addMenu(tr("&Go"));
  for (int i = 0; i < kPageCount; ++i) {
    const Page page = static_cast<Page>(i);
    QAction* a = go->addAction(tr(pageInfo(page).title), this, [this, page] { goToPage(page); });
    if (i < kPageKeys) a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  go->addSeparator();
  QAction* backAction = go->addAction(tr("&Back"), this, &MainWindow::back);
  backAction->setShortcuts({QKeySequence(Qt::ALT | Qt::Key_Left), QKeySequence(Qt::Key_Back)});
  QAction* refreshAction = go->addAction(tr("&Refresh"), this, &MainWindow::refresh);
  refreshAction->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_R), QKeySequence(Qt::Key_F5)});
}

void MainWindow::openDatabase(const QString& dbPath) {
  m_dbPath = dbPath;
  const QString shown = QString::fromStdString(store::RedactUrl(dbPath.toStdString()));
  setWindowTitle(tr("DelegateFarm dashboard — %1").arg(shown));
  m_dbLabel->setText(tr("Database: %1").arg(shown));
  for (View* v : m_views) v->setDatabase(dbPath);
  m_last = {};
  m_shown = {};
  m_stale = {};
  m_reading = {};
  m_history.clear();
  m_livePending = false;
  m_liveUpdated = {};
  m_watcher->watch(dbPath);
  updateLiveLabel();
  showLocation(Location());  // kFirstPage, a Subject::Database page
}

void MainWindow::go(const Location& where) {
  if (!where.valid()) return;
  if (!m_dbPath.isEmpty() && !sameLocation(where, m_here)) m_history.push_back(m_here);
  showLocation(where);
}

void MainWindow::goToPage(Page page) {
  const int index = static_cast<int>(page);
  if (m_shown[index]) {
    // Back to what the page showed last, re-read only if the database changed.
    if (!sameLocation(m_last[index], m_here)) m_history.push_back(m_here);
    m_here = m_last[index];
    m_nav->blockSignals(true);
    m_nav->setCurrentRow(index);
    m_nav->blockSignals(false);
    m_stack->setCurrentIndex(index);
    if (m_stale[index]) {
      refresh();
    } else if (view(page)->isReady()) {
      emit pageReady(page);
    }
    return;
  }
  if (pageInfo(page).subject == Subject::Database) {
    Location where;
    where.page = page;
    go(where);
    return;
  }
  if (m_dbPath.isEmpty()) return;
  const quint64 generation = ++m_resolveGeneration;
  const std::string db = m_dbPath.toStdString();
  LoadAsync<Location>(
      m_dbPath, this, [page, db](store::Reader& s) { return NewestLocation(s, page, db); },
      [this, generation](const Result<Location>& where) {
        if (generation != m_resolveGeneration) return;
        if (!where) {
          emit openFailed(QString::fromStdString(where.message()));
          return;
        }
        go(*where);
      });
}

void MainWindow::openLink(const QString& link) {
  auto where = parseLocationLink(link);
  if (!where) {
    // Next turn of the event loop, as a failed read would: a caller may
    // connect openFailed after this call, or quit on it before exec().
    const QString message = QString::fromStdString(where.message());
    QTimer::singleShot(0, this, [this, message] { emit openFailed(message); });
    return;
  }
  if (m_dbPath.isEmpty()) return;
  const quint64 generation = ++m_resolveGeneration;
  const std::string db = m_dbPath.toStdString();
  LoadAsync<Location>(
      m_dbPath, this,
      [checked = *where, db](store::Reader& s) { return checkLocation(s, checked, db); },
      [this, generation](const Result<Location>& found) {
        if (generation != m_resolveGeneration) return;
        if (!found) {
          emit openFailed(QString::fromStdString(found.message()));
          return;
        }
        go(*found);
      });
}

QString MainWindow::link() const {
  Location here = m_here;
  if (View* v = currentView()) v->describe(here);
  return locationLink(here);
}

void MainWindow::copyLink() {
  const QString copied = link();
  QGuiApplication::clipboard()->setText(copied);
  statusBar()->showMessage(tr("Copied %1").arg(copied), 5000);
}

void MainWindow::goToCells(Location where, const QList<store::Cell>& cells) {
  std::vector<store::Cell> all;
  if (!where.cell.model_sha256.empty()) all.push_back(where.cell);
  all.insert(all.end(), where.moreCells.begin(), where.moreCells.end());
  for (const store::Cell& c : cells) {
    if (std::find(all.begin(), all.end(), c) == all.end()) all.push_back(c);
  }
  if (all.empty()) return;
  if (all.size() > kMaxTrendSeries) all.resize(kMaxTrendSeries);
  where.cell = all.front();
  where.moreCells.assign(all.begin() + 1, all.end());
  goToSubject(Subject::Cell, where);
}

void MainWindow::goToSubject(Subject subject, Location where) {
  const PageInfo* page = pageShowing(subject);
  if (page == nullptr) return;
  where.page = page->page;
  go(where);
}

void MainWindow::back() {
  if (m_history.empty()) return;
  const Location where = m_history.back();
  m_history.pop_back();
  showLocation(where);
}

void MainWindow::showLocation(const Location& where) {
  const int index = static_cast<int>(where.page);
  m_here = where;
  m_last[index] = where;
  m_shown[index] = true;
  m_stale[index] = false;
  m_nav->blockSignals(true);
  m_nav->setCurrentRow(index);
  m_nav->blockSignals(false);
  m_stack->setCurrentIndex(index);
  m_reading[index] = true;
  m_views[index]->open(where);
}

void MainWindow::refresh() {
  if (m_dbPath.isEmpty()) return;
  const int index = static_cast<int>(m_here.page);
  if (m_reading[index]) {
    m_stale[index] = true;  // read again once the read in flight painted
    return;
  }
  m_stale[index] = false;
  m_reading[index] = true;
  currentView()->refresh();
}

void MainWindow::onDatabaseChanged() {
  m_stale.fill(true);
  m_livePending = true;
  m_liveSeen = QDateTime::currentDateTime();
  updateLiveLabel();
  // A view still reading re-reads once it painted (onViewReady): one read
  // in flight and one pending at most, however fast the farm writes.
  if (currentView()->isReady()) refresh();
}

void MainWindow::onViewReady(Page page) {
  m_reading[static_cast<int>(page)] = false;
  if (page != m_here.page) return;
  if (m_stale[static_cast<int>(page)]) {
    refresh();
    return;
  }
  if (m_livePending) {
    m_livePending = false;
    m_liveUpdated = QDateTime::currentDateTime();
    emit liveUpdated();
  }
  updateLiveLabel();
  emit pageReady(page);
}

bool MainWindow::copyTable() {
  if (!copyTableAsTsv(currentView())) {
    statusBar()->showMessage(tr("This view shows no table to copy"), 3000);
    return false;
  }
  statusBar()->showMessage(tr("Table copied as TSV"), 3000);
  return true;
}

bool MainWindow::exportChart(const QString& file) {
  QWidget* chart = currentView()->exportableChart();
  if (chart == nullptr) {
    statusBar()->showMessage(tr("This view shows no chart to export"), 3000);
    return false;
  }
  auto done = ExportChart(chart, file);
  if (!done) {
    statusBar()->showMessage(QString::fromStdString(done.message()));
    return false;
  }
  statusBar()->showMessage(tr("Chart saved to %1").arg(file), 5000);
  return true;
}

void MainWindow::chooseExportFile() {
  if (currentView()->exportableChart() == nullptr) {
    statusBar()->showMessage(tr("This view shows no chart to export"), 3000);
    return;
  }
  const QString file = QFileDialog::getSaveFileName(this, tr("Export chart"),
                                                    pageName(m_here.page) + QStringLiteral(".png"),
                                                    tr("PNG image (*.png);;SVG image (*.svg)"));
  if (!file.isEmpty()) exportChart(file);
}

void MainWindow::chooseDatabase() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open DelegateFarm database"), QString(),
                                   tr("SQLite databases (*.db *.sqlite);;All files (*)"));
  if (!path.isEmpty()) openDatabase(path);
}

void MainWindow::updateLiveLabel() {
  const auto hms = [](const QDateTime& t) { return t.toString(QStringLiteral("HH:mm:ss")); };
  QString text;
  QString why;
  if (!m_watcher->isWatching()) {
    text = tr("Live: off");
  } else if (!m_watcher->error().isEmpty()) {
    text = tr("Live: cannot read the change counter (retrying)");
    why = m_watcher->error();
  } else if (m_livePending) {
    text = tr("Live: change at %1, reading…").arg(hms(m_liveSeen));
  } else if (!currentView()->loadError().isEmpty()) {
    text = tr("Live: read failed");
    why = currentView()->loadError();
  } else if (m_liveUpdated.isValid()) {
    text = tr("Live: updated %1").arg(hms(m_liveUpdated));
  } else {
    text = tr("Live: watching");
  }
  m_liveLabel->setText(text);
  m_liveLabel->setToolTip(why);
  m_liveLabel->setStyleSheet(why.isEmpty() ? QString() : QStringLiteral("color: #b02020;"));
}

}  // namespace dfarm::gui
