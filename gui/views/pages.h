// The dashboard's pages: one table (gui/views/pages.inc, which says how to add
// one) gives each page its `--view` name, title, what it shows and how to make
// its View. MainWindow builds its tabs, keys and navigation from it and
// dfarm-dashboard its `--view` choices and `--help`; nothing else lists pages.
#pragma once

#include <QMetaType>
#include <QString>

class QWidget;

namespace dfarm::gui {

class View;

// What a page shows: the whole database, or the one thing a Location names.
enum class Subject {
  Database,  // no id (runs, devices)
  Run,       // Location::runId
  RunPair,   // Location::baselineId and runId (the candidate)
  Job,       // Location::jobId
  Cell,      // Location::cell
};

enum class Page {
#define DFARM_PAGE(id, name, title, shows, subject, make) id,
#include "gui/views/pages.inc"
#undef DFARM_PAGE
};

constexpr int kPageCount = 0
#define DFARM_PAGE(id, name, title, shows, subject, make) +1
#include "gui/views/pages.inc"
#undef DFARM_PAGE
    ;

// Where the window opens a database: the table's first page.
constexpr Page kFirstPage = Page{};
// Ctrl+1..kPageKeys open the first pages.
constexpr int kPageKeys = kPageCount < 9 ? kPageCount : 9;

// Each row's factory, defined in the view's own file: a new view, owned by
// parent.
#define DFARM_PAGE(id, name, title, shows, subject, make) View* make(QWidget* parent);
#include "gui/views/pages.inc"
#undef DFARM_PAGE

// One row of the table (static strings; the table lives for the program).
struct PageInfo {
  Page page;
  const char* name;   // the --view name: "runs"
  const char* title;  // "Runs"
  const char* shows;  // "a run's matrix"
  Subject subject;
  View* (*make)(QWidget* parent);
};

const PageInfo& pageInfo(Page page);
// The first page showing subject (where openRun, openJob, ... go), or null.
const PageInfo* pageShowing(Subject subject);

// "runs", "matrix", ... (the --view names); parsePage is false for others.
QString pageName(Page page);
bool parsePage(const QString& name, Page* page);
// "runs|matrix|trend|compare|job|devices": every name, in tab order.
QString pageChoices();
// What `--view` opens for each page that needs an id: "matrix opens the
// newest run, trend the newest run's first cell, ...".
QString pageDefaults();
// What the pages show, for --help: "runs, a run's matrix, ... and the devices".
QString pagesShown();

}  // namespace dfarm::gui

Q_DECLARE_METATYPE(dfarm::gui::Page)
