// Location: where the dashboard is, a page and the ids of what it shows. The
// window keeps the history of Locations; a View opens one (View::open).
#pragma once

#include <QtGlobal>
#include <string>

#include "agent/base/result.h"
#include "gui/views/pages.h"
#include "reports/store/cell.h"
#include "reports/store/store.h"

namespace dfarm::gui {

struct Location {
  Page page = kFirstPage;
  qint64 runId = 0;       // Subject::Run: the run; Subject::RunPair: the candidate
  qint64 baselineId = 0;  // Subject::RunPair
  qint64 jobId = 0;       // Subject::Job
  store::Cell cell;       // Subject::Cell
  // The ids subject needs are set.
  bool names(Subject subject) const;
  // The ids its page's subject needs are set.
  bool valid() const { return names(pageInfo(page).subject); }
};

bool sameLocation(const Location& a, const Location& b);

// The location page opens on when it was not shown yet: the newest run
// (Subject::RunPair: the two newest, older as baseline; Job and Cell: the
// newest run's first job and its cell). Blocking: call it off the GUI
// thread. kNotFound, naming the database db, when it has nothing to show.
Result<Location> NewestLocation(store::Reader& store, Page page, const std::string& db);
// What NewestLocation picks for subject, for --help ("the newest run"); ""
// for Subject::Database.
const char* newestDescription(Subject subject);

}  // namespace dfarm::gui
