// Location: where the dashboard is, a page and the ids of what it shows. The
// window keeps the history of Locations; a View opens one (View::open).
#pragma once

#include <QDate>
#include <QString>
#include <QtGlobal>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "gui/views/pages.h"
#include "reports/history.h"
#include "reports/store/cell.h"
#include "reports/store/store.h"

namespace dfarm::gui {

// How a trend shows its cells, beyond which cells: unset fields leave the
// view as it is (a new window: p50, every date, no zoom).
struct TrendSettings {
  std::optional<reports::HistoryMetric> metric;
  QDate from;  // the date range (both set, from <= to); null: every date
  QDate to;
  // The zoom: the runs at the chart's left and right edges (ids, first <=
  // last); 0: not zoomed.
  qint64 zoomFirstRun = 0;
  qint64 zoomLastRun = 0;
  bool operator==(const TrendSettings&) const = default;
};

struct Location {
  Page page = kFirstPage;
  qint64 runId = 0;       // Subject::Run: the run; Subject::RunPair: the candidate
  qint64 baselineId = 0;  // Subject::RunPair
  qint64 jobId = 0;       // Subject::Job
  store::Cell cell;       // Subject::Cell
  // Subject::Cell: further cells drawn beside `cell` (the trend's other
  // series, at most kMaxTrendSeries - 1).
  std::vector<store::Cell> moreCells;
  TrendSettings trend;  // Subject::Cell
  // The ids subject needs are set.
  bool names(Subject subject) const;
  // The ids its page's subject needs are set.
  bool valid() const { return names(pageInfo(page).subject); }
};

bool sameLocation(const Location& a, const Location& b);

// The most cells one trend draws (Location::cell and moreCells).
constexpr int kMaxTrendSeries = 8;

// A link to a location, for a colleague on the same database:
// "dfarm://PAGE?run=ID&baseline=ID&job=ID&cell=CELL&cell=CELL", with only
// the ids the page's subject needs; CELL is the cell's identity (model
// sha256, delegate, options, threads, runner, device, inputs) and its model's
// file name, each percent-encoded, joined by ",". A cell's page adds the
// trend's settings that are set: "&metric=NAME" (reports::HistoryMetricName),
// "&from=YYYY-MM-DD&to=YYYY-MM-DD", "&zoom=FIRST-LAST" (run ids).
QString locationLink(const Location& where);
// The location a link names; kInvalidInput naming what is wrong (not a
// dfarm:// link, an unknown page, a parameter missing, unknown or not a
// number, too many cells, a trend setting malformed or on another page).
Result<Location> parseLocationLink(const QString& link);
// Whether what `where` names is in the database (the run, both runs, the
// job, a job of each cell); kNotFound naming the missing thing and database
// db otherwise. Blocking: call it off the GUI thread.
Result<Location> checkLocation(store::Reader& store, const Location& where, const std::string& db);

// The location page opens on when it was not shown yet: the newest run
// (Subject::RunPair: the two newest, older as baseline; Job and Cell: the
// newest run's first job and its cell). Blocking: call it off the GUI
// thread. kNotFound, naming the database db, when it has nothing to show.
Result<Location> NewestLocation(store::Reader& store, Page page, const std::string& db);
// What NewestLocation picks for subject, for --help ("the newest run"); ""
// for Subject::Database.
const char* newestDescription(Subject subject);

}  // namespace dfarm::gui
