// dfarm_dashboard_benchmark --jobs N --db FILE: builds (or reuses, when FILE
// holds at least N jobs) a generated database of N jobs, then prints one line
// per figure on stdout:
//   first_paint_ms X    MainWindow opened on FILE until its runs view is ready
//   trend_query_ms X    Store::ListCellJobs for one cell across all runs, median of 5
//   matrix_paint_ms X   the matrix of the newest 1,000-job run loaded and painted
//   overview_first_paint_ms X  the overview (every cell, kOverviewRuns runs each)
//                       loaded and painted
//   trend_5_series_ms X the trend of 5 cells (every run of each) loaded and painted
// Progress goes to stderr. Runs headless: QT_QPA_PLATFORM defaults to offscreen.
//
// The generated runs look like nightly sweeps: 10 models x 5 delegate
// configurations x 4 devices x 5 trials = 1,000 jobs a run, 8 hours apart;
// ok jobs have metrics and 20 samples, non-cpu jobs accuracy rows; gpu on one
// model fails (delegate_error) and about 0.3% of the rest crash, time out or
// hit infra; every 50th run is tagged. Rows are written with prepared
// statements, one transaction per run.
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTableView>
#include <QTimer>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "gui/main_window.h"
#include "gui/views/overview_view.h"
#include "gui/views/trend_view.h"
#include "reports/history.h"
#include "reports/report.h"
#include "reports/store/store.h"

#if __has_include("gui/views/matrix_view.h")
#include "gui/views/matrix_view.h"
#define DFARM_HAVE_MATRIX_VIEW 1
#endif

namespace dfarm::gui::bench {
namespace {

constexpr int kModels = 10;
constexpr int kDevices = 4;
constexpr int kTrials = 5;
constexpr int kSamples = 20;
constexpr int64_t kJobsPerRun = 1000;  // kModels x configs (5) x kDevices x kTrials

struct Config {
  const char* delegate;
  const char* options;
  int threads;
  double speed;  // latency factor against cpu x1
};
constexpr Config kConfigs[] = {{"cpu", "", 1, 1.0},
                               {"cpu", "", 4, 0.4},
                               {"xnnpack", "", 4, 0.25},
                               {"xnnpack", "fp16:true", 4, 0.2},
                               {"gpu", "precision:fp16", 0, 0.15}};
constexpr const char* kDeviceNames[kDevices] = {"local", "pixel-7", "galaxy-s23",
                                                "tcp://10.0.0.7:7000"};

// 64 lowercase hex digits derived from text: a stand-in sha256, cheap
// enough for a million job keys.
std::string Hex64(const std::string& text) {
  uint64_t x = 14695981039346656037ULL;  // FNV-1a: the same digits on every build
  for (unsigned char c : text) x = (x ^ c) * 1099511628211ULL;
  std::string out;
  for (int i = 0; i < 4; ++i) {
    x += 0x9e3779b97f4a7c15ULL;  // splitmix64
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(z));
    out += buf;
  }
  return out;
}

std::string ModelName(int m) { return "model_" + std::to_string(m) + ".tflite"; }
std::string ModelSha(int m) { return Hex64("benchmark model " + std::to_string(m)); }

std::string Iso(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A prepared statement for the generator: binds, steps and resets.
class Insert {
 public:
  Insert(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Insert() { sqlite3_finalize(stmt_); }
  Insert& I(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Insert& D(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Insert& T(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Insert& N(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  bool Run(sqlite3* db) {
    int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    if (rc != SQLITE_DONE) std::cerr << "generate: " << sqlite3_errmsg(db) << "\n";
    return rc == SQLITE_DONE;
  }
  bool ok() const { return stmt_ != nullptr; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

struct Inserts {
  explicit Inserts(sqlite3* db)
      : run(db,
            "INSERT INTO runs(id, name, created_at, finished_at, status, spec_json) "
            "VALUES(?, ?, ?, ?, ?, ?)"),
        job(db,
            "INSERT INTO jobs(id, run_id, job_key, model, model_path, model_sha256, delegate, "
            "delegate_options, device, status, error, wall_ms, started_at, num_threads, attempts, "
            "trial, runner, runner_sha256) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,1,?,'',?)"),
        result(db,
               "INSERT INTO results(job_id, init_us, first_us, warmup_mean_us, mean_us, std_us, "
               "min_us, max_us, p50_us, p90_us, p99_us, num_runs, peak_rss_bytes, arena_bytes, "
               "exit_code, signal, runner_json, stderr_tail, finished_at, threads_used) "
               "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        sample(db, "INSERT INTO samples(job_id, idx, value_us) VALUES(?, ?, ?)"),
        accuracy(db,
                 "INSERT INTO output_accuracy(job_id, output_index, name, reference, compared, "
                 "mean_abs_error, std_abs_error, max_abs_error, rmse, top1_agree, top5_agree) "
                 "VALUES(?, ?, ?, 'cpu', ?, ?, ?, ?, ?, 1, 1)"),
        tag(db, "INSERT OR REPLACE INTO run_tags(name, run_id, tagged_at) VALUES(?, ?, ?)") {}
  bool ok() const {
    return run.ok() && job.ok() && result.ok() && sample.ok() && accuracy.ok() && tag.ok();
  }
  Insert run, job, result, sample, accuracy, tag;
};

struct JobPlan {
  int model, config, device, trial;
};

// Latency of a cell in a run: a base by model, config and device, a +15%
// step at run 600 for model 2 on xnnpack, and run-to-run noise.
double CellLatencyUs(const JobPlan& p, int64_t run, std::mt19937_64& rng) {
  const double base = 2000.0 * (1 + p.model) * kConfigs[p.config].speed * (1 + 0.3 * p.device);
  const double step = (p.model == 2 && p.config >= 2 && p.config <= 3 && run >= 600) ? 1.15 : 1.0;
  return base * step * std::normal_distribution<double>(1.0, 0.02)(rng);
}

bool WriteJob(sqlite3* db, Inserts& in, int64_t run, int64_t job_id, const JobPlan& p,
              const std::string& at, std::mt19937_64& rng) {
  const Config& c = kConfigs[p.config];
  const bool gpu_fails = std::string(c.delegate) == "gpu" && p.model == 3;
  const double roll = std::uniform_real_distribution<double>(0, 1)(rng);
  std::string status = gpu_fails      ? "delegate_error"
                       : roll < 0.001 ? "crashed"
                       : roll < 0.002 ? "timeout"
                       : roll < 0.003 ? "infra"
                                      : "ok";
  const std::string error =
      status == "ok" ? "" : status + ": " + (gpu_fails ? "GATHER_ND is not supported" : "exit");
  const std::string sha = ModelSha(p.model);
  const std::string key = Hex64(sha + c.delegate + c.options + std::to_string(c.threads) +
                                kDeviceNames[p.device] + std::to_string(p.trial));
  in.job.I(1, job_id).I(2, run).T(3, key).T(4, ModelName(p.model));
  in.job.T(5, "/models/" + ModelName(p.model)).T(6, sha).T(7, c.delegate).T(8, c.options);
  in.job.T(9, kDeviceNames[p.device]).T(10, status).T(11, error);
  const double mean = CellLatencyUs(p, run, rng);
  in.job.D(12, mean * (kSamples + 5) / 1000 + 50).T(13, at).I(14, c.threads).I(15, p.trial);
  in.job.T(16, Hex64("runner build " + std::to_string(run / 100)));
  if (!in.job.Run(db)) return false;
  if (status != "ok") {
    in.result.I(1, job_id);
    for (int i = 2; i <= 14; ++i) in.result.N(i);
    in.result.I(15, status == "crashed" ? -1 : 1).I(16, status == "crashed" ? 11 : 0);
    in.result.T(17, "").T(18, "E runner: " + error + "\n").T(19, at).N(20);
    return in.result.Run(db);
  }
  std::vector<double> s(kSamples);
  std::normal_distribution<double> noise(1.0, 0.05);
  for (double& v : s) v = mean * std::max(0.5, noise(rng));
  for (int i = 0; i < kSamples; ++i) {
    if (!in.sample.I(1, job_id).I(2, i).D(3, s[i]).Run(db)) return false;
  }
  std::vector<double> sorted = s;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0, sq = 0;
  for (double v : s) sum += v;
  const double avg = sum / kSamples;
  for (double v : s) sq += (v - avg) * (v - avg);
  auto q = [&](double f) { return sorted[static_cast<size_t>(f * (kSamples - 1))]; };
  in.result.I(1, job_id).D(2, mean * 20).D(3, mean * 1.8).D(4, mean * 1.1).D(5, avg);
  in.result.D(6, std::sqrt(sq / kSamples)).D(7, sorted.front()).D(8, sorted.back());
  in.result.D(9, q(0.5)).D(10, q(0.9)).D(11, q(0.99)).I(12, kSamples);
  in.result.I(13, (40 + 8 * p.model) << 20).I(14, (4 + p.model) << 20).I(15, 0).I(16, 0);
  in.result.T(17, "{\"metrics\":{\"mean_us\":" + std::to_string(avg) + ",\"num_runs\":20}}");
  in.result.T(18, "").T(19, at).I(20, std::max(1, c.threads));
  if (!in.result.Run(db)) return false;
  if (std::string(c.delegate) == "cpu") return true;
  for (int o = 0; o < 2; ++o) {
    const double err = 1e-5 * (1 + p.model) * (std::string(c.options).empty() ? 1 : 30) * (o + 1);
    in.accuracy.I(1, job_id).I(2, o).T(3, "output_" + std::to_string(o)).I(4, 1000);
    in.accuracy.D(5, err / 4).D(6, err / 8).D(7, err).D(8, err / 3);
    if (!in.accuracy.Run(db)) return false;
  }
  return true;
}

// The jobs of a run, in the order a sweep plans them.
std::vector<JobPlan> PlanRun() {
  std::vector<JobPlan> plan;
  for (int m = 0; m < kModels; ++m) {
    for (int c = 0; c < static_cast<int>(std::size(kConfigs)); ++c) {
      for (int d = 0; d < kDevices; ++d) {
        for (int t = 0; t < kTrials; ++t) plan.push_back({m, c, d, t});
      }
    }
  }
  return plan;
}

bool WriteRun(sqlite3* db, Inserts& in, int64_t run, int64_t jobs, int64_t first_job,
              std::time_t created, std::mt19937_64& rng) {
  const std::string at = Iso(created);
  in.run.I(1, run).T(2, (run % 7 == 0 ? "release-candidate-" : "nightly-") + std::to_string(run));
  in.run.T(3, at).T(4, Iso(created + 3600)).T(5, "finished");
  in.run.T(6, "{\"name\":\"nightly\",\"models\":[\"model_*.tflite\"],\"benchmark\":{}}");
  if (!in.run.Run(db)) return false;
  const std::vector<JobPlan> plan = PlanRun();
  for (int64_t i = 0; i < jobs; ++i) {
    if (!WriteJob(db, in, run, first_job + i, plan[static_cast<size_t>(i)], at, rng)) return false;
  }
  if (run % 50 == 0) {
    return in.tag.T(1, "release-" + std::to_string(run / 50)).I(2, run).T(3, at).Run(db);
  }
  return true;
}

bool Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) == SQLITE_OK) return true;
  std::cerr << "generate: " << sql << ": " << (err ? err : "?") << "\n";
  sqlite3_free(err);
  return false;
}

// Jobs in the database at path; -1 when it cannot be read.
int64_t CountJobs(const std::string& path) {
  sqlite3* db = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM jobs", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

// Writes a fresh database of `jobs` jobs at path (schema by OpenSqliteStore,
// devices through the Store API, the rest with prepared statements).
bool Generate(const std::string& path, int64_t jobs) {
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  {
    auto store = store::OpenSqliteStore(path);
    if (!store) {
      std::cerr << "generate: " << store.error().message << "\n";
      return false;
    }
    for (const char* d : kDeviceNames) {
      store::DeviceRow row;
      row.name = d;
      row.os = "Android 14";
      row.abi = "arm64-v8a";
      row.cores = 8;
      if (!(*store)->UpsertDevice(row).ok()) return false;
      if (!(*store)->SetDeviceState(d, store::kDeviceOk, "").ok()) return false;
    }
    if (!(*store)
             ->SetDeviceState(kDeviceNames[3], store::kDeviceQuarantined, "3 infra failures")
             .ok()) {
      return false;
    }
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return false;
  bool ok = Exec(db, "PRAGMA synchronous = OFF; PRAGMA cache_size = -1000000;");
  Inserts in(db);
  ok = ok && in.ok();
  std::mt19937_64 rng(14);
  const int64_t runs = (jobs + kJobsPerRun - 1) / kJobsPerRun;
  const std::time_t start = std::time(nullptr) - static_cast<std::time_t>(runs) * 8 * 3600;
  for (int64_t r = 1; ok && r <= runs; ++r) {
    const int64_t n = std::min(kJobsPerRun, jobs - (r - 1) * kJobsPerRun);
    ok = Exec(db, "BEGIN") &&
         WriteRun(db, in, r, n, (r - 1) * kJobsPerRun + 1, start + (r - 1) * 8 * 3600, rng) &&
         Exec(db, "COMMIT");
    if (r % 50 == 0 || r == runs) {
      std::cerr << "generate: run " << r << "/" << runs << " (" << (r - 1) * kJobsPerRun + n
                << " jobs)\n";
    }
  }
  ok = ok && Exec(db, "PRAGMA wal_checkpoint(TRUNCATE);");
  sqlite3_close(db);
  return ok;
}

double Ms(const std::chrono::steady_clock::time_point& since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

// Runs the event loop until ready() was called or timeout_ms passed; false on timeout.
bool WaitFor(const std::function<void(std::function<void()>)>& connect, int timeout_ms) {
  QEventLoop loop;
  bool done = false;
  connect([&] {
    done = true;
    loop.quit();
  });
  if (done) return true;
  QTimer::singleShot(timeout_ms, &loop, &QEventLoop::quit);
  loop.exec();
  return done;
}

double FirstPaintMs(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  const bool ready = WaitFor(
      [&](std::function<void()> done) {
        QObject::connect(&window, &MainWindow::pageReady, &window, [done](Page page) {
          if (page == Page::Runs) done();
        });
        window.openDatabase(QString::fromStdString(path));
      },
      120000);
  window.repaint();  // forced: the painted frame is in the figure
  const double ms = Ms(t0);
  for (const QTableView* table : window.view(Page::Runs)->findChildren<QTableView*>()) {
    std::cerr << "first paint: the runs view shows " << table->model()->rowCount() << " rows\n";
  }
  if (!ready) std::cerr << "first paint: the runs view was not ready within 120 s\n";
  return ready ? ms : -1;
}

double TrendQueryMs(const std::string& path) {
  auto store = store::OpenSqliteStore(path);
  if (!store) {
    std::cerr << "trend query: " << store.error().message << "\n";
    return -1;
  }
  store::Cell cell;
  cell.model_sha256 = ModelSha(2);
  cell.delegate = "xnnpack";
  cell.delegate_options = "fp16:true";
  cell.device = kDeviceNames[1];
  cell.num_threads = 4;
  {
    const auto t0 = std::chrono::steady_clock::now();
    auto runs = (*store)->ListRunSummaries();
    if (runs) {
      std::cerr << "runs query: ListRunSummaries gave " << runs->size() << " runs in " << Ms(t0)
                << " ms\n";
    }
  }
  std::vector<double> times;
  size_t jobs = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto rows = (*store)->ListCellJobs(cell);
    times.push_back(Ms(t0));
    if (!rows) {
      std::cerr << "trend query: " << rows.error().message << "\n";
      return -1;
    }
    jobs = rows->size();
  }
  std::sort(times.begin(), times.end());
  std::cerr << "trend query: " << jobs << " jobs of one cell (" << kTrials
            << " trials a run), median of 5\n";
  return times[2];
}

double MatrixPaintMs(const std::string& path, int64_t run_id) {
#ifdef DFARM_HAVE_MATRIX_VIEW
  MatrixView view;
  view.resize(1400, 900);
  view.setDatabase(QString::fromStdString(path));
  view.show();
  const auto t0 = std::chrono::steady_clock::now();
  const bool ready = WaitFor(
      [&](std::function<void()> done) {
        QObject::connect(&view, &View::ready, &view, done);
        view.showRun(run_id);
      },
      120000);
  view.repaint();
  std::cerr << "matrix: MatrixView::showRun(" << run_id << ") until ready() and a repaint\n";
  return ready ? Ms(t0) : -1;
#else
  // Without the MatrixView: the store read and the report's cell aggregation.
  const auto t0 = std::chrono::steady_clock::now();
  auto store = store::OpenSqliteStore(path);
  if (!store) return -1;
  auto report = reports::LoadRunReport(**store, run_id);
  if (!report) return -1;
  const std::vector<reports::CellGroup> cells = reports::GroupCells(report->jobs);
  const reports::CellMatrix matrix = reports::LayoutMatrix(cells);
  size_t medians = 0;
  for (const reports::CellGroup& c : cells)
    medians += reports::CellMedianUs(*report, c).has_value();
  std::cerr << "matrix: no MatrixView; store read + cell aggregation (" << cells.size()
            << " cells, " << medians << " with a median, " << matrix.rows.size() << " rows)\n";
  return Ms(t0);
#endif
}

// Shows view (made and sized), runs start and waits for its ready() and a repaint.
double PaintMs(View& view, const std::string& path, const std::function<void()>& start) {
  view.resize(1400, 900);
  view.setDatabase(QString::fromStdString(path));
  view.show();
  const auto t0 = std::chrono::steady_clock::now();
  const bool ready = WaitFor(
      [&](std::function<void()> done) {
        QObject::connect(&view, &View::ready, &view, done);
        start();
      },
      120000);
  view.repaint();
  return ready ? Ms(t0) : -1;
}

double OverviewPaintMs(const std::string& path) {
  OverviewView view;
  const double ms = PaintMs(view, path, [&] { view.open(Location()); });
  std::cerr << "overview: " << view.model()->rowCount() << " cells, "
            << view.message().toStdString() << "\n";
  return ms;
}

double TrendSeriesMs(const std::string& path) {
  std::vector<store::Cell> cells;
  for (int d = 0; d < kDevices; ++d) {
    store::Cell cell;
    cell.model_sha256 = ModelSha(2);
    cell.delegate = "xnnpack";
    cell.delegate_options = "fp16:true";
    cell.device = kDeviceNames[d];
    cell.num_threads = 4;
    cells.push_back(cell);
  }
  cells.push_back(cells[1]);
  cells.back().delegate_options = "";
  if (auto store = store::OpenSqliteStore(path)) {
    auto t0 = std::chrono::steady_clock::now();
    auto runs = reports::LoadRunsById(**store);
    std::cerr << "trend: LoadRunsById " << Ms(t0) << " ms\n";
    t0 = std::chrono::steady_clock::now();
    for (const store::Cell& c : cells) (void)(*store)->ListCellTrials(c);
    std::cerr << "trend: ListCellTrials of " << cells.size() << " cells " << Ms(t0) << " ms\n";
    t0 = std::chrono::steady_clock::now();
    auto trends = loadTrends(**store, cells, TrendMetric::kP50);
    std::cerr << "trend: loadTrends of " << cells.size() << " cells (the read and the series) "
              << Ms(t0) << " ms" << (trends ? "" : ": " + trends.error().message) << "\n";
  }
  TrendView view;
  const double ms = PaintMs(view, path, [&] { view.showCells(cells); });
  size_t points = 0;
  for (const TrendData& d : view.series()) points += d.points.size();
  std::cerr << "trend: " << view.series().size() << " series, " << points << " points "
            << view.message().toStdString() << "\n";
  return ms;
}

int Main(int argc, char** argv) {
  CLI::App app{"Builds (or reuses) a generated database of N jobs and times the dashboard on it"};
  int64_t jobs = 1000000;
  std::string db;
  app.add_option("--jobs", jobs, "jobs in the generated database")->check(CLI::PositiveNumber);
  app.add_option("--db", db, "the database file (reused when it holds at least N jobs)")
      ->required();
  CLI11_PARSE(app, argc, argv);
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  const int64_t have = std::filesystem::exists(db) ? CountJobs(db) : -1;
  if (have >= jobs) {
    std::cerr << "reusing " << db << " (" << have << " jobs)\n";
    jobs = have;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    if (!Generate(db, jobs)) {
      std::cerr << "cannot generate " << db << "\n";
      return 1;
    }
    std::error_code ec;
    std::cerr << "generated " << jobs << " jobs in " << Ms(t0) / 1000 << " s, "
              << std::filesystem::file_size(db, ec) / (1 << 20) << " MiB\n";
  }
  int qargc = 1;
  QApplication qapp(qargc, argv);
  const int64_t full_runs = std::max<int64_t>(1, jobs / kJobsPerRun);
  const double first_paint = FirstPaintMs(db);
  const double trend = TrendQueryMs(db);
  const double matrix = MatrixPaintMs(db, full_runs);
  const double overview = OverviewPaintMs(db);
  const double series = TrendSeriesMs(db);
  std::printf(
      "first_paint_ms %.1f\ntrend_query_ms %.1f\nmatrix_paint_ms %.1f\noverview_first_paint_ms "
      "%.1f\ntrend_5_series_ms %.1f\n",
      first_paint, trend, matrix, overview, series);
  return first_paint < 0 || trend < 0 || matrix < 0 || overview < 0 || series < 0 ? 1 : 0;
}

}  // namespace
}  // namespace dfarm::gui::bench

int main(int argc, char** argv) { return dfarm::gui::bench::Main(argc, argv); }
