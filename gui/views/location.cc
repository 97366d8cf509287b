#include "gui/views/location.h"

namespace dfarm::gui {

bool Location::names(Subject subject) const {
  switch (subject) {
    case Subject::Database:
      return true;
    case Subject::Run:
      return runId > 0;
    case Subject::RunPair:
      return runId > 0 && baselineId > 0;
    case Subject::Job:
      return jobId > 0;
    case Subject::Cell:
      return !cell.model.empty();
  }
  return false;
}

bool sameLocation(const Location& a, const Location& b) {
  return a.page == b.page && a.runId == b.runId && a.baselineId == b.baselineId &&
         a.jobId == b.jobId && a.cell == b.cell;
}

Result<Location> NewestLocation(store::Reader& store, Page page, const std::string& db) {
  Location where;
  where.page = page;
  const Subject subject = pageInfo(page).subject;
  if (subject == Subject::Database) return where;
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  if (runs->empty()) {
    return MakeError(
        ErrorKind::kNotFound,
        "database '" + db + "' has no runs yet: run `dfarm sweep SPEC --db " + db + "` first");
  }
  where.runId = runs->back().id;
  if (subject == Subject::RunPair) {
    if (runs->size() < 2) {
      return MakeError(ErrorKind::kNotFound, "database '" + db + "' has one run: the " +
                                                 pageInfo(page).name + " view needs two");
    }
    where.baselineId = (*runs)[runs->size() - 2].id;
  }
  if (subject == Subject::Job || subject == Subject::Cell) {
    auto jobs = store.ListJobs(where.runId);
    if (!jobs) return jobs.error();
    if (jobs->empty()) {
      return MakeError(ErrorKind::kNotFound,
                       "run " + std::to_string(where.runId) + " in '" + db + "' has no jobs");
    }
    where.jobId = jobs->front().id;
    where.cell = store::CellOf(jobs->front());
  }
  return where;
}

const char* newestDescription(Subject subject) {
  switch (subject) {
    case Subject::Database:
      return "";
    case Subject::Run:
      return "the newest run";
    case Subject::RunPair:
      return "the two newest runs (the older as baseline)";
    case Subject::Job:
      return "the newest run's first job";
    case Subject::Cell:
      return "the newest run's first cell";
  }
  return "";
}

}  // namespace dfarm::gui
