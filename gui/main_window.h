// MainWindow: the dashboard's shell. A navigation list over a stack of Views,
// one per row of the page table (gui/views/pages.inc), in its order; the
// views' signals move between them (openRun to the first page showing a
// Subject::Run, openJob a Job, openCell a Cell, compareRuns a RunPair) with a
// Back history; a DatabaseWatcher refreshes the open view when a sweep writes
// to the database. The window reads the store only through LoadAsync (off
// the GUI thread). A change re-reads the open view at once when it is
// ready, else once its read in flight is painted (one read in flight per
// view, at most one pending); the status bar says "Live: updated HH:MM:SS"
// only once the re-read view painted, and says when a read is pending or
// failed.
#pragma once

#include <QDateTime>
#include <QMainWindow>
#include <QString>
#include <array>
#include <vector>

#include "gui/views/location.h"
#include "gui/views/pages.h"
#include "gui/views/view.h"

class QLabel;
class QListWidget;
class QStackedWidget;

namespace dfarm::gui {

class DatabaseWatcher;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Opens the database at dbPath and shows its runs (reads are asynchronous).
  void openDatabase(const QString& dbPath);
  const QString& database() const { return m_dbPath; }

  // Shows a location, remembering the current one for back().
  void go(const Location& where);
  // Shows page on what it shows last, or for a page not shown yet, on
  // NewestLocation (the newest run, job or cell), resolved off the GUI
  // thread. openFailed(message) when the database has nothing to show there.
  void goToPage(Page page);
  bool canGoBack() const { return !m_history.empty(); }
  void back();
  // Opens a dfarm:// link (locationLink) once what it names is found in the
  // database; openFailed(message) when the link is bad or names something
  // the database does not hold.
  void openLink(const QString& link);
  // The open view's link (Ctrl+L copies it to the clipboard).
  // The link of the view shown, with what the view adds (View::describe).
  QString link() const;
  void copyLink();
  // Re-reads the open view (Ctrl+R; the watcher calls it too); while its
  // read is in flight, once that one painted.
  void refresh();
  // Copies the focused table of the open view as TSV (Ctrl+C).
  bool copyTable();
  // Exports the open view's chart to file (PNG or SVG by its suffix).
  bool exportChart(const QString& file);

  View* view(Page page) const { return m_views[static_cast<int>(page)]; }
  View* currentView() const { return view(m_here.page); }
  const Location& location() const { return m_here; }
  DatabaseWatcher* watcher() const { return m_watcher; }

 signals:
  // The view a go() showed is ready (it painted its data or an error).
  void pageReady(dfarm::gui::Page page);
  void openFailed(const QString& message);
  // The open view painted what it read after a change the watcher saw.
  void liveUpdated();

 private:
  void buildViews();
  void buildActions();
  // Goes to the first page showing subject, on where's ids.
  void goToSubject(Subject subject, Location where);
  // Goes to the trend of where's cells and `cells` (the first kMaxTrendSeries).
  void goToCells(Location where, const QList<store::Cell>& cells);
  void showLocation(const Location& where);
  void onDatabaseChanged();
  void onViewReady(Page page);
  void chooseDatabase();
  void chooseExportFile();
  void updateLiveLabel();

  QString m_dbPath;
  QListWidget* m_nav = nullptr;
  QStackedWidget* m_stack = nullptr;
  std::array<View*, kPageCount> m_views{};
  // The last location each page showed (invalid: never shown).
  std::array<Location, kPageCount> m_last{};
  std::array<bool, kPageCount> m_shown{};
  std::array<bool, kPageCount> m_stale{};
  // The window asked the view to read and it has not painted yet.
  std::array<bool, kPageCount> m_reading{};
  Location m_here;
  std::vector<Location> m_history;
  DatabaseWatcher* m_watcher = nullptr;
  QLabel* m_dbLabel = nullptr;
  QLabel* m_liveLabel = nullptr;
  bool m_livePending = false;  // a change seen, its re-read not painted yet
  QDateTime m_liveSeen;
  QDateTime m_liveUpdated;
  quint64 m_resolveGeneration = 0;
};

}  // namespace dfarm::gui
