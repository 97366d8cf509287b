#include "gui/views/location.h"

#include <QStringList>
#include <QUrl>
#include <algorithm>

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
         a.jobId == b.jobId && a.cell == b.cell && a.moreCells == b.moreCells && a.trend == b.trend;
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

namespace {

constexpr char kScheme[] = "dfarm://";

QString cellParameter(const store::Cell& c) {
  QStringList fields;
  for (const std::string& f :
       {c.model_sha256, c.delegate, c.delegate_options, std::to_string(c.num_threads), c.runner,
        c.device, c.inputs, c.model}) {
    fields << QString::fromLatin1(QUrl::toPercentEncoding(QString::fromStdString(f)));
  }
  return fields.join(',');
}

Error linkError(const QString& link, const QString& why) {
  return MakeError(ErrorKind::kInvalidInput,
                   QStringLiteral("link '%1': %2").arg(link, why).toStdString());
}

Result<int64_t> idParameter(const QString& link, const QString& key, const QString& value) {
  bool ok = false;
  const qint64 id = value.toLongLong(&ok);
  if (!ok || id <= 0) {
    return linkError(link,
                     QStringLiteral("%1=%2 is not an id (a positive number)").arg(key, value));
  }
  return int64_t{id};
}

Result<store::Cell> cellFromParameter(const QString& link, const QString& value) {
  const QStringList parts = value.split(',');
  if (parts.size() != 8) {
    return linkError(link, QStringLiteral("cell=%1 has %2 fields, not 8 (model sha256, delegate, "
                                          "options, threads, runner, device, inputs, model)")
                               .arg(value)
                               .arg(parts.size()));
  }
  std::vector<std::string> f;
  for (const QString& p : parts) f.push_back(QUrl::fromPercentEncoding(p.toLatin1()).toStdString());
  bool ok = false;
  const uint threads = QString::fromStdString(f[3]).toUInt(&ok);
  if (!ok || f[0].empty()) {
    return linkError(link,
                     QStringLiteral("cell=%1 needs a model sha256 and a thread count").arg(value));
  }
  store::Cell c;
  c.model_sha256 = f[0];
  c.delegate = f[1];
  c.delegate_options = f[2];
  c.num_threads = threads;
  c.runner = f[4];
  c.device = f[5];
  c.inputs = f[6];
  c.model = f[7];
  return c;
}

QDate dateParameter(const QString& value) {
  return QDate::fromString(value, QStringLiteral("yyyy-MM-dd"));
}

// Reads a trend setting (metric, from, to, zoom) of a link into trend;
// false when key is none of them.
Result<bool> readTrendParameter(const QString& link, const QString& key, const QString& value,
                                TrendSettings& trend) {
  if (key == QLatin1String("metric")) {
    auto metric = reports::ParseHistoryMetric(value.toStdString());
    if (!metric) {
      return linkError(link, QStringLiteral("metric=%1 is not a metric (mean, p50, p90, peak_rss, "
                                            "max_abs_error, top1 or top5)")
                                 .arg(value));
    }
    trend.metric = *metric;
    return true;
  }
  if (key == QLatin1String("from") || key == QLatin1String("to")) {
    const QDate date = dateParameter(value);
    if (!date.isValid()) {
      return linkError(link, QStringLiteral("%1=%2 is not a date (YYYY-MM-DD)").arg(key, value));
    }
    (key == QLatin1String("from") ? trend.from : trend.to) = date;
    return true;
  }
  if (key != QLatin1String("zoom")) return false;
  const QStringList runs = value.split('-');
  bool okFirst = false, okLast = false;
  const qint64 first = runs.size() == 2 ? runs[0].toLongLong(&okFirst) : 0;
  const qint64 last = runs.size() == 2 ? runs[1].toLongLong(&okLast) : 0;
  if (!okFirst || !okLast || first <= 0 || last < first) {
    return linkError(link, QStringLiteral("zoom=%1 is not FIRST-LAST, the run ids at the chart's "
                                          "edges (FIRST <= LAST)")
                               .arg(value));
  }
  trend.zoomFirstRun = first;
  trend.zoomLastRun = last;
  return true;
}

// Reads one key=value of a link's query into where.
Result<void> readParameter(const QString& link, const QString& key, const QString& value,
                           Location& where) {
  auto setting = readTrendParameter(link, key, value, where.trend);
  if (!setting) return setting.error();
  if (*setting) return {};
  if (key == QLatin1String("cell")) {
    auto cell = cellFromParameter(link, value);
    if (!cell) return cell.error();
    if (where.cell.model_sha256.empty()) {
      where.cell = std::move(*cell);
    } else if (where.moreCells.size() + 1 < kMaxTrendSeries) {
      where.moreCells.push_back(std::move(*cell));
    } else {
      return linkError(link, QStringLiteral("more than %1 cells").arg(kMaxTrendSeries));
    }
    return {};
  }
  qint64* id = key == QLatin1String("run")        ? &where.runId
               : key == QLatin1String("baseline") ? &where.baselineId
               : key == QLatin1String("job")      ? &where.jobId
                                                  : nullptr;
  if (id == nullptr) {
    return linkError(
        link, QStringLiteral("unknown parameter '%1' (run, baseline, job, cell, metric, from, to "
                             "or zoom)")
                  .arg(key));
  }
  auto value_id = idParameter(link, key, value);
  if (!value_id) return value_id.error();
  *id = *value_id;
  return {};
}

const char* subjectNeeds(Subject subject) {
  switch (subject) {
    case Subject::Database:
      return "";
    case Subject::Run:
      return "run=ID";
    case Subject::RunPair:
      return "baseline=ID and run=ID";
    case Subject::Job:
      return "job=ID";
    case Subject::Cell:
      return "cell=CELL";
  }
  return "";
}

QStringList trendParameters(const TrendSettings& t) {
  QStringList query;
  if (t.metric) {
    query << QStringLiteral("metric=") + QLatin1String(reports::HistoryMetricName(*t.metric));
  }
  if (t.from.isValid() && t.to.isValid()) {
    query << QStringLiteral("from=") + t.from.toString(Qt::ISODate)
          << QStringLiteral("to=") + t.to.toString(Qt::ISODate);
  }
  if (t.zoomFirstRun > 0) {
    query << QStringLiteral("zoom=%1-%2").arg(t.zoomFirstRun).arg(t.zoomLastRun);
  }
  return query;
}

// What is wrong with a link's trend settings for its page ("" when nothing).
QString trendSettingsProblem(const Location& where) {
  const TrendSettings& t = where.trend;
  const bool any = t.metric || t.from.isValid() || t.to.isValid() || t.zoomFirstRun > 0;
  if (any && pageInfo(where.page).subject != Subject::Cell) {
    return QStringLiteral("metric, from, to and zoom belong to a cell's view (trend), not to %1")
        .arg(pageName(where.page));
  }
  if (t.from.isValid() != t.to.isValid()) {
    return QStringLiteral("a date range needs both from=YYYY-MM-DD and to=YYYY-MM-DD");
  }
  if (t.from.isValid() && t.from > t.to) {
    return QStringLiteral("from=%1 is after to=%2")
        .arg(t.from.toString(Qt::ISODate), t.to.toString(Qt::ISODate));
  }
  return {};
}

}  // namespace

QString locationLink(const Location& where) {
  QStringList query;
  switch (pageInfo(where.page).subject) {
    case Subject::Database:
      break;
    case Subject::RunPair:
      query << QStringLiteral("baseline=%1").arg(where.baselineId);
      [[fallthrough]];
    case Subject::Run:
      query << QStringLiteral("run=%1").arg(where.runId);
      break;
    case Subject::Job:
      query << QStringLiteral("job=%1").arg(where.jobId);
      break;
    case Subject::Cell:
      query << QStringLiteral("cell=") + cellParameter(where.cell);
      for (const store::Cell& c : where.moreCells)
        query << QStringLiteral("cell=") + cellParameter(c);
      query << trendParameters(where.trend);
      break;
  }
  QString link = QLatin1String(kScheme) + pageName(where.page);
  if (!query.isEmpty()) link += '?' + query.join('&');
  return link;
}

Result<Location> parseLocationLink(const QString& link) {
  if (!link.startsWith(QLatin1String(kScheme))) {
    return linkError(link, QStringLiteral("not a dfarm:// link (dfarm://VIEW?run=ID...)"));
  }
  const QString rest = link.mid(static_cast<int>(sizeof(kScheme)) - 1);
  const int q = rest.indexOf('?');
  QString name = q < 0 ? rest : rest.left(q);
  if (name.endsWith('/')) name.chop(1);
  Location where;
  if (!parsePage(name, &where.page)) {
    return linkError(
        link, QStringLiteral("unknown view '%1': choose one of %2").arg(name, pageChoices()));
  }
  if (q >= 0) {
    for (const QString& pair : rest.mid(q + 1).split('&', Qt::SkipEmptyParts)) {
      const int eq = pair.indexOf('=');
      const QString key = eq < 0 ? pair : pair.left(eq);
      const QString value = eq < 0 ? QString() : pair.mid(eq + 1);
      if (auto r = readParameter(link, key, value, where); !r) return r.error();
    }
  }
  const Subject subject = pageInfo(where.page).subject;
  if (const QString problem = trendSettingsProblem(where); !problem.isEmpty()) {
    return linkError(link, problem);
  }
  if (!where.valid()) {
    return linkError(link, QStringLiteral("the %1 view needs %2")
                               .arg(pageName(where.page), QLatin1String(subjectNeeds(subject))));
  }
  return where;
}

Result<Location> checkLocation(store::Reader& store, const Location& where, const std::string& db) {
  const Subject subject = pageInfo(where.page).subject;
  const auto missing = [&db](const std::string& what) {
    return MakeError(ErrorKind::kNotFound, what + " does not exist in '" + store::RedactUrl(db) +
                                               "' (deleted, or a link to another database)");
  };
  if (subject == Subject::Run || subject == Subject::RunPair) {
    for (int64_t id : {where.runId, where.baselineId}) {
      if (id == 0) continue;
      if (!store.GetRun(id)) return missing("run " + std::to_string(id));
    }
  }
  if (subject == Subject::Job && !store.GetJob(where.jobId)) {
    return missing("job " + std::to_string(where.jobId));
  }
  Location checked = where;
  if (subject == Subject::Cell) {
    std::vector<store::Cell*> cells = {&checked.cell};
    for (store::Cell& c : checked.moreCells) cells.push_back(&c);
    for (store::Cell* c : cells) {
      store::CellFilter f;
      f.model = c->model_sha256;
      f.delegate = c->delegate;
      f.delegate_options = c->delegate_options;
      f.device = c->device;
      f.runner = c->runner;
      f.num_threads = c->num_threads;
      f.inputs = c->inputs;
      auto found = store.ListCells(f);
      if (!found) return found.error();
      auto it = std::find(found->begin(), found->end(), *c);
      if (it == found->end()) return missing("the cell " + c->Label());
      if (c->model.empty()) c->model = it->model;
    }
  }
  return checked;
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
