#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/report.h"

namespace dfarm::reports {
namespace {

RunReport Sample() {
  RunReport r;
  r.run.id = 7;
  r.run.name = "nightly <b>";
  r.run.created_at = "2024-05-01T12:00:00Z";
  r.run.finished_at = "2024-05-01T12:05:00Z";
  r.run.status = "finished";
  r.run.spec_json = "{}";
  store::JobRow ok;
  ok.id = 1;
  ok.run_id = 7;
  ok.model = "<script>alert(1)</script>.tflite";
  ok.delegate = "cpu";
  ok.device = "local";
  ok.status = "ok";
  store::JobMetrics m;
  m.init_us = 4321;
  m.first_us = 15000;
  m.mean_us = 12345;
  m.p50_us = 12000;
  m.p90_us = 13500;
  m.p99_us = 14990;
  m.peak_rss_bytes = 42 * 1024 * 1024 + 512 * 1024;
  ok.metrics = m;
  store::JobRow bad;
  bad.id = 2;
  bad.run_id = 7;
  bad.model = "broken.tflite";
  bad.delegate = "gpu";
  bad.delegate_options = "precision:fp16";
  bad.device = "local";
  bad.status = "delegate_error";
  bad.error = "unknown delegate 'gpu' | try cpu";
  r.jobs = {ok, bad};
  return r;
}

TEST(ReportsTest, HtmlEscapesEverything) {
  std::string html = RenderHtml(Sample());
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;.tflite"), std::string::npos);
  EXPECT_NE(html.find("nightly &lt;b&gt;"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);  // self-contained
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
}

TEST(ReportsTest, HtmlHasTheFigures) {
  std::string html = RenderHtml(Sample());
  for (const char* s : {"4.32", "15.00", "12.35", "12.00", "13.50", "14.99", "42.5",
                        "delegate_error", "unknown delegate &#39;gpu&#39; | try cpu",
                        "gpu (precision:fp16)", "2024-05-01T12:00:00Z", "finished"}) {
    EXPECT_NE(html.find(s), std::string::npos) << s;
  }
}

TEST(ReportsTest, MarkdownHasTableAndFailures) {
  std::string md = RenderMarkdown(Sample());
  EXPECT_NE(md.find("# DelegateFarm run 7"), std::string::npos);
  EXPECT_NE(md.find("| ok | 4.32 | 15.00 | 12.35 | 12.00 | 13.50 | 14.99 | 42.5 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("## Failures"), std::string::npos);
  EXPECT_NE(md.find("unknown delegate 'gpu' \\| try cpu"), std::string::npos) << md;
  EXPECT_NE(md.find("2 (1 ok, 1 failed)"), std::string::npos);
}

RunReport Flagged() {
  RunReport r = Sample();
  store::PlacementSummary p;
  p.partitions = 2;
  p.nodes = 40;
  p.delegated_nodes = 12;
  p.cpu_nodes = 28;
  p.delegates = "ex<ample>";
  r.jobs[0].placement = p;
  r.jobs[0].started_hot = true;
  r.jobs[0].throttled = true;
  r.jobs[0].state_note = "zone <0> at 91 C";
  return r;
}

TEST(ReportsTest, PlacementAndDeviceStateLabels) {
  RunReport r = Flagged();
  EXPECT_EQ(PlacementLabel(r.jobs[0]), "12/40 on ex<ample>");
  EXPECT_EQ(PlacementLabel(r.jobs[1]), "");
  EXPECT_EQ(DeviceStateFlags(r.jobs[0]), "hot, throttled");
  EXPECT_EQ(DeviceStateFlags(r.jobs[1]), "");
  store::JobRow cpu;
  cpu.placement = store::PlacementSummary{0, 64, 0, 64, ""};
  cpu.throttled = true;
  EXPECT_EQ(PlacementLabel(cpu), "all 64 on cpu");
  EXPECT_EQ(DeviceStateFlags(cpu), "throttled");
  cpu.noisy = true;
  EXPECT_EQ(DeviceStateFlags(cpu), "noisy, throttled");
}

TEST(ReportsTest, MarkdownShowsPlacementAndWarnings) {
  std::string md = RenderMarkdown(Flagged());
  EXPECT_NE(md.find("| placement | max abs error vs cpu | device state |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| 42.5 | 12/40 on ex\\<ample\\> | – | ⚠ hot, throttled |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("## Device state warnings"), std::string::npos);
  EXPECT_NE(md.find("zone \\<0\\> at 91 C"), std::string::npos) << md;
  EXPECT_EQ(RenderMarkdown(Sample()).find("Device state warnings"), std::string::npos);
}

TEST(ReportsTest, HtmlShowsPlacementAndWarningsEscaped) {
  std::string html = RenderHtml(Flagged());
  EXPECT_NE(html.find("<td>12/40 on ex&lt;ample&gt;</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("title=\"zone &lt;0&gt; at 91 C\">&#9888; hot, throttled</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<h2>Device state warnings</h2>"), std::string::npos);
  EXPECT_EQ(html.find("<ample>"), std::string::npos);
  EXPECT_EQ(html.find("<0>"), std::string::npos);
  EXPECT_EQ(RenderHtml(Sample()).find("Device state warnings"), std::string::npos);
}

// The accuracy column: the worst output's max abs error, in LSB too when
// quantized; non-finite values the reference lacks are named.
TEST(ReportsTest, AccuracyLabelShowsTheWorstOutput) {
  RunReport r = Sample();
  EXPECT_EQ(AccuracyLabel(r, r.jobs[0]), "");  // no comparison
  store::OutputAccuracy a, b;
  a.index = 0;
  a.max_abs_error = 6.9e-5;
  b.index = 1;
  b.max_abs_error = 0.0078125;
  b.max_abs_error_lsb = runner::Number(int64_t{2});
  r.accuracy[1].outputs = {a, b};
  EXPECT_EQ(AccuracyLabel(r, r.jobs[0]), "0.00781 (2 LSB)");
  r.accuracy[1].outputs = {a};
  EXPECT_EQ(AccuracyLabel(r, r.jobs[0]), "6.9e-05");
  EXPECT_NE(RenderMarkdown(r).find("| 6.9e-05 |"), std::string::npos) << RenderMarkdown(r);
  EXPECT_NE(RenderHtml(r).find("<td class=\"num\">6.9e-05</td>"), std::string::npos);
  a.nan_count = 3;
  r.accuracy[1].outputs = {a};
  EXPECT_EQ(AccuracyLabel(r, r.jobs[0]), "NaN/Inf");
}

TEST(ReportsTest, ParseFormat) {
  EXPECT_TRUE(ParseFormat("md").ok());
  EXPECT_TRUE(ParseFormat("html").ok());
  EXPECT_EQ(*ParseFormat("json"), Format::kJson);
  EXPECT_EQ(*ParseFormat("csv"), Format::kCsv);
  auto bad = ParseFormat("pdf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'pdf'"), std::string::npos);
}

TEST(ReportsTest, FromStoreToFile) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("dfarm_reports_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto store = store::OpenSqliteStore((dir / "r.db").string());
  ASSERT_TRUE(store.ok()) << store.message();
  auto run = (*store)->CreateRun("r", "{}");
  ASSERT_TRUE(run.ok());
  store::JobRow j;
  j.model = "m.tflite";
  j.delegate = "cpu";
  j.device = "local";
  auto id = (*store)->AddJob(*run, j);
  ASSERT_TRUE(id.ok());
  store::JobOutcome o;
  o.status = "ok";
  o.metrics = store::JobMetrics{};
  o.metrics->mean_us = 2500;
  store::OutputAccuracy acc;
  acc.name = "out";
  acc.compared = 4;
  acc.max_abs_error = 0.00025;
  o.accuracy = store::Accuracy{"cpu", {acc}};
  ASSERT_TRUE((*store)->RecordJobResult(*id, o).ok());

  auto report = LoadRunReport(**store, *run);
  ASSERT_TRUE(report.ok()) << report.message();
  ASSERT_TRUE(WriteReport(*report, Format::kHtml, (dir / "r.html").string()).ok());
  std::ifstream in(dir / "r.html");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("m.tflite"), std::string::npos);
  EXPECT_NE(text.str().find("2.50"), std::string::npos);
  EXPECT_NE(text.str().find("<td class=\"num\">0.00025</td>"), std::string::npos) << text.str();

  EXPECT_FALSE(LoadRunReport(**store, 999).ok());
  EXPECT_FALSE(WriteReport(*report, Format::kHtml, (dir / "no/such/r.html").string()).ok());
  fs::remove_all(dir);
}

TEST(ReportsTest, SummarizeQuantiles) {
  SampleSummary s = Summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.p25, 2);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.p75, 4);
  EXPECT_DOUBLE_EQ(s.p95, 4.8);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_EQ(Summarize({}).count, 0u);
}

// A real store in a temp dir: a cpu cell and an xnnpack cell with two trials
// each on one device, and a crashed job with a stderr tail.
class StoreReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dfarm_reports_store_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto store = store::OpenSqliteStore((dir_ / "r.db").string());
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
    auto run = store_->CreateRun("ci, \"nightly\"", R"({"benchmark":{"num_runs":4,"repeats":2}})");
    ASSERT_TRUE(run.ok());
    run_ = *run;
    std::vector<store::JobRow> jobs;
    for (const char* delegate : {"cpu", "xnnpack"}) {
      for (int trial = 0; trial < 2; ++trial) {
        store::JobRow j;
        j.model = "m,1.tflite";
        j.model_sha256 = "abc";
        j.delegate = delegate;
        j.device = "local";
        j.num_threads = 1;
        j.trial = trial;
        j.runner = "main";
        j.job_key = std::string(delegate) + std::to_string(trial);
        jobs.push_back(j);
      }
    }
    store::JobRow bad = jobs.back();
    bad.delegate = "external";
    bad.delegate_options = "path:libbad.so";
    bad.trial = 0;
    bad.job_key = "bad";
    jobs.push_back(bad);
    auto ids = store_->AddJobs(run_, jobs);
    ASSERT_TRUE(ids.ok()) << ids.message();
    ids_ = *ids;
    for (size_t i = 0; i < 4; ++i) {
      const bool cpu = i < 2;
      store::JobOutcome o;
      o.status = "ok";
      o.metrics = store::JobMetrics{};
      o.metrics->p50_us = cpu ? 4000 : 2000;
      o.samples_us = cpu ? std::vector<double>{3900, 4000, 4100, 4000}
                         : std::vector<double>{1900, 2000, 2100, 2000};
      o.telemetry = {store::TelemetryRow{"before", 1, 41.0, 0.25, std::nullopt, std::nullopt}};
      if (!cpu) {
        store::OutputAccuracy acc;
        acc.name = "scores<0>";
        acc.compared = 10;
        acc.max_abs_error = i == 2 ? 0.001 : 0.004;
        acc.mean_abs_error = 0.0005;
        acc.rmse = 0.0007;
        acc.top1_agree = true;
        acc.top5_agree = true;
        o.accuracy = store::Accuracy{"cpu", {acc}};
      }
      ASSERT_TRUE(store_->RecordJobResult(ids_[i], o).ok());
    }
    store::JobOutcome crash;
    crash.status = "crashed";
    crash.error = "runner died, signal 11";
    crash.signal = 11;
    crash.stderr_tail = "loading <plugin>\nSegmentation fault & more\n";
    ASSERT_TRUE(store_->RecordJobResult(ids_[4], crash).ok());
    store::DeviceRow d;
    d.name = "local";
    d.abi = "x86_64";
    d.os = "Linux <test>";
    d.cpu = "Xeon";
    d.cores = 8;
    d.memory_bytes = int64_t{16} << 30;
    ASSERT_TRUE(store_->UpsertDevice(d).ok());
    ASSERT_TRUE(store_->RecordRunRunner(run_, "/b/dfarm-runner", "feedface", false).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RunReport Load() {
    auto r = LoadRunReport(*store_, run_);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : RunReport{};
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> store_;
  int64_t run_ = 0;
  std::vector<int64_t> ids_;
};

TEST_F(StoreReportTest, LoadGroupsTrialsIntoCells) {
  RunReport r = Load();
  ASSERT_EQ(r.jobs.size(), 5u);
  ASSERT_EQ(r.cells.size(), 3u);
  EXPECT_EQ(r.cells[0].jobs, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(r.cells[0].latency.count, 8u);
  EXPECT_DOUBLE_EQ(r.cells[0].latency.p50, 4000);
  // By model, cpu first, then delegate: cpu, external, xnnpack.
  EXPECT_EQ(r.jobs[r.cells[1].jobs[0]].delegate, "external");
  ASSERT_TRUE(SpeedupVsCpu(r, r.cells, r.cells[2]).has_value());
  EXPECT_DOUBLE_EQ(*SpeedupVsCpu(r, r.cells, r.cells[2]), 2.0);
  EXPECT_FALSE(SpeedupVsCpu(r, r.cells, r.cells[1]).has_value());  // no ok trial
  EXPECT_EQ(r.samples.size(), 4u);
  EXPECT_EQ(r.telemetry.size(), 4u);
  ASSERT_EQ(r.stderr_tails.count(ids_[4]), 1u);
  EXPECT_NE(r.stderr_tails[ids_[4]].find("Segmentation fault"), std::string::npos);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.runner_builds.size(), 1u);
  EXPECT_EQ(store::CellOf(r.jobs[0]).Label(), "m,1.tflite (abc) cpu x1 @local (runner main)");
}

TEST_F(StoreReportTest, HtmlShowsEverySection) {
  ASSERT_TRUE(store_->FinishRun(run_, store::kRunFinished).ok());
  std::string html = RenderHtml(Load());
  for (const char* s : {"banner-red",
                        "Speed-up vs cpu",
                        "2.00&times;",
                        "cpu ref",
                        "2/2 trials ok",
                        "class=\"hc fail\"",
                        ">crashed<",
                        "Latency distributions",
                        "<svg",
                        "<rect",
                        "(n=8)",
                        "Accuracy",
                        "scores&lt;0&gt;",
                        "0.004",
                        "Placement",
                        "Environment",
                        "x86_64",
                        "Linux &lt;test&gt;",
                        "feedface",
                        "main",
                        "num_runs",
                        "repeats",
                        "load 0.25",
                        "41 &deg;C",
                        "Failures",
                        "loading &lt;plugin&gt;\nSegmentation fault &amp; more"}) {
    EXPECT_NE(html.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(html.find("banner banner-green"), std::string::npos);
  EXPECT_EQ(html.find("<plugin>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);  // nothing fetched or linked
}

// Per-op profiles: the cell's op types averaged over its profiled trials,
// largest first; the Markdown and HTML "Profiles" sections show the top 3
// of each profiled cell (escaped), and a run without profiles has neither.
TEST_F(StoreReportTest, ProfilesShowTheTopOpsPerCell) {
  EXPECT_EQ(RenderMarkdown(Load()).find("## Profiles"), std::string::npos);
  EXPECT_EQ(RenderHtml(Load()).find("<h2>Profiles</h2>"), std::string::npos);
  for (size_t i : {2, 3}) {  // the xnnpack trials
    store::JobOutcome o;
    o.status = "ok";
    o.metrics = store::JobMetrics{};
    store::JobProfile p;
    p.runs = 3;
    p.nodes.push_back(store::ProfileNode{0, "DELEGATE", "xnnpack", 0, {0, 1}, 900});
    const double conv = i == 2 ? 600 : 800;
    p.by_op = {{"DELEGATE", 1, 900, 100 * 900 / (900 + conv + 100)},
               {"<CONV>", 2, conv, 100 * conv / (900 + conv + 100)},
               {"ADD", 1, 100, 100 * 100 / (900 + conv + 100)},
               {"MEAN", 1, 1, 0.1}};
    o.profile = p;
    ASSERT_TRUE(store_->RecordJobResult(ids_[i], o).ok());
  }
  RunReport r = Load();
  ASSERT_EQ(r.profiles.size(), 2u);
  std::vector<store::ProfileOp> ops = CellProfileOps(r, r.cells[2]);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].op, "DELEGATE");
  EXPECT_EQ(ops[1].op, "<CONV>");
  EXPECT_DOUBLE_EQ(ops[1].total_us, 700);
  EXPECT_EQ(ops[1].count, 2);
  EXPECT_EQ(CellProfiledTrials(r, r.cells[2]), 2u);
  EXPECT_TRUE(CellProfileOps(r, r.cells[0]).empty());
  EXPECT_EQ(TopOpsLabel({{"A", 1, 1, 62.06}, {"B", 1, 1, 30}}), "A 62.1%, B 30.0%");

  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("## Profiles"), std::string::npos) << md;
  EXPECT_NE(md.find("| m,1.tflite (abc) xnnpack x1 @local (runner main) | 2 | DELEGATE 53.1%, "
                    "\\<CONV\\> 41.0%, ADD 5.9% |"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("MEAN"), std::string::npos);  // not in the top 3
  // The table rows' top_ops: the job's own top 3; null without a profile.
  auto rows = nlohmann::json::parse(RenderJson(r))["jobs"];
  EXPECT_TRUE(rows[0]["top_ops"].is_null());
  EXPECT_EQ(rows[2]["top_ops"], "DELEGATE 56.2%, <CONV> 37.5%, ADD 6.2%");
  // top_ops comes before init_cold_us, init_warm_us and gpu_device.
  const std::vector<std::string>& columns = TableColumns();
  EXPECT_LT(std::find(columns.begin(), columns.end(), "top_ops"),
            std::find(columns.begin(), columns.end(), "init_cold_us"));
  EXPECT_NE(std::find(columns.begin(), columns.end(), "init_cold_us"), columns.end());
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<h2>Profiles</h2>"), std::string::npos);
  EXPECT_NE(html.find("<b>&lt;CONV&gt;</b>"), std::string::npos);
  EXPECT_EQ(html.find("<CONV>"), std::string::npos);
}

// Sustained mode: a job's curve in brief (first, last, slowest window, the
// hottest zone from its telemetry) in the Markdown and HTML reports, the
// HTML with the latency and temperature curves; a run without has neither.
TEST_F(StoreReportTest, SustainedJobsShowTheirCurve) {
  EXPECT_EQ(RenderMarkdown(Load()).find("## Sustained"), std::string::npos);
  EXPECT_EQ(RenderHtml(Load()).find("<h2>Sustained</h2>"), std::string::npos);
  store::JobOutcome o;
  o.status = "ok";
  o.metrics = store::JobMetrics{};
  store::JobSustained curve;
  curve.secs = 60;
  curve.window_ms = 500;
  for (int i = 0; i < 120; ++i) {
    const double p50 = i < 40 ? 8000 : 8000 + (i - 40) * 25.0;  // throttles after 20 s
    curve.windows.push_back({i * 500.0, 50, p50 + 10, p50, p50 + 900});
  }
  o.sustained = curve;
  for (int k = 0; k <= 6; ++k) {
    store::TelemetryRow t;
    t.phase = k == 0 ? "before" : k == 6 ? "after" : "during:000" + std::to_string(k);
    t.unix_ms = 1'700'000'000'000 + k * 10'000;
    t.hottest_temp_c = 40.0 + k * 5;
    o.telemetry.push_back(t);
  }
  ASSERT_TRUE(store_->RecordJobResult(ids_[0], o).ok());
  RunReport r = Load();
  auto s = SummarizeSustained(r, r.jobs[0]);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->windows, 120u);
  EXPECT_DOUBLE_EQ(s->first_p50_us, 8000);
  EXPECT_DOUBLE_EQ(s->last_p50_us, 8000 + 79 * 25.0);
  EXPECT_NEAR(s->change_pct, 24.6875, 1e-9);
  EXPECT_DOUBLE_EQ(s->slowest_t_s, 59.5);
  EXPECT_EQ(s->start_temp_c, std::optional<double>(40));
  EXPECT_EQ(s->peak_temp_c, std::optional<double>(70));
  EXPECT_FALSE(SummarizeSustained(r, r.jobs[1]).has_value());
  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("## Sustained"), std::string::npos) << md;
  EXPECT_NE(
      md.find(" | 60.0 s | 8.00 ms | 9.97 ms | +24.7% | 9.97 ms at 59.5 s | 40.0 → 70.0 °C |"),
      std::string::npos)
      << md;
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<h2>Sustained</h2>"), std::string::npos);
  EXPECT_NE(html.find("stroke=\"#1f5fa8\""), std::string::npos);  // latency
  EXPECT_NE(html.find("stroke=\"#d9822b\""), std::string::npos);  // temperature
  if (const char* out = std::getenv("DFARM_SUSTAINED_HTML")) std::ofstream(out) << html;
}

// A failed or partial run never shows green: failed jobs or a failed run are
// red, jobs not run (or a run still running) amber, a failing gate red.
TEST(ReportsTest, OnlyAFinishedAllOkRunIsGreen) {
  RunReport r = Sample();
  r.jobs.pop_back();  // all ok now
  EXPECT_EQ(HealthOf(r), RunHealth::kGreen);
  EXPECT_NE(RenderHtml(r).find("banner banner-green"), std::string::npos);
  EXPECT_NE(RenderMarkdown(r).find("✅ passed"), std::string::npos);
  r.run.status = store::kRunFailed;
  EXPECT_EQ(HealthOf(r), RunHealth::kRed);
  r.run.status = store::kRunCancelled;
  EXPECT_EQ(HealthOf(r), RunHealth::kAmber);
  r.run.status = store::kRunFinished;
  store::JobRow queued = r.jobs[0];
  queued.id = 9;
  queued.status = store::kJobQueued;
  queued.metrics.reset();
  r.jobs.push_back(queued);
  EXPECT_EQ(HealthOf(r), RunHealth::kAmber);
  std::string html = RenderHtml(r);
  EXPECT_NE(html.find("banner banner-amber"), std::string::npos);
  EXPECT_EQ(html.find("banner banner-green"), std::string::npos);
  EXPECT_NE(RenderMarkdown(r).find("⚠️ incomplete"), std::string::npos);
  r.jobs.pop_back();
  r.comparison = Comparison{};
  r.comparison->passed = false;
  EXPECT_EQ(HealthOf(r), RunHealth::kRed);
  // Sample() has a delegate_error job: red, never green.
  html = RenderHtml(Sample());
  EXPECT_NE(html.find("banner banner-red"), std::string::npos);
  EXPECT_NE(html.find("1 delegate_error"), std::string::npos);
  EXPECT_NE(html.find("<dd class=\"st st-fail\">finished</dd>"), std::string::npos) << html;
  EXPECT_EQ(html.find("banner banner-green"), std::string::npos);
  EXPECT_NE(RenderMarkdown(Sample()).find("❌ failed"), std::string::npos);
}

TEST(ReportsTest, ComparisonShowsVerdictsAndDeltas) {
  RunReport r = Sample();
  Comparison c;
  c.baseline_run = 3;
  c.baseline_name = "release-1.2";
  c.passed = false;
  CellVerdict v;
  v.cell = store::CellOf(r.jobs[0]);
  v.cell.model = "cell | one";
  v.verdict = gate::Verdict::kRegressed;
  v.latency_verdict = gate::Verdict::kRegressed;
  v.baseline_median_us = 10000;
  v.candidate_median_us = 12000;
  v.ratio = 1.2;
  v.ci_low = 1.15;
  v.ci_high = 1.25;
  v.q_value = 0.001;
  v.baseline_trials = v.candidate_trials = 5;
  v.findings = {"accuracy.max_abs_error of 'out' 0.3 > 0.01"};
  v.passed = {"rmse within 0.1"};
  c.cells = {v};
  c.notes = {"verdicts rest on within-run samples only"};
  r.comparison = c;
  std::string md = RenderMarkdown(r);
  EXPECT_LT(md.find("## Verdicts"), md.find("## Jobs"));  // the verdict table comes first
  EXPECT_NE(md.find("| cell \\| one cpu @local | **regressed** | 10.00 | 12.00 | +20.0% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("gate against run 3 (release-1.2): **failed**"), std::string::npos) << md;
  EXPECT_NE(md.find("within-run"), std::string::npos);
  EXPECT_NE(md.find("accuracy.max\\_abs\\_error of 'out' 0.3 \\> 0.01"), std::string::npos) << md;
  EXPECT_EQ(md.find("rmse within 0.1"), std::string::npos);  // only failing findings
  std::string html = RenderHtml(r);
  EXPECT_NE(html.find("Against the baseline (run 3)"), std::string::npos);
  EXPECT_NE(html.find("<span class=\"badge v-regressed\">regressed</span>"), std::string::npos);
  EXPECT_NE(html.find("20.0%"), std::string::npos);
  EXPECT_NE(html.find("accuracy.max_abs_error of &#39;out&#39; 0.3 &gt; 0.01"), std::string::npos);
  EXPECT_NE(html.find("1 within thresholds"), std::string::npos);
}

// The task table with a baseline: each cell's baseline value and the paired
// change from it beside the same run's cpu, in Markdown and HTML.
TEST(ReportsTest, TaskTableShowsTheBaselineBesideEachCell) {
  RunReport r = Sample();
  r.jobs.resize(1);  // the cpu job
  const auto ranks = [](int wrong) {
    nlohmann::json v = nlohmann::json::array();
    for (int i = 0; i < 20; ++i) v.push_back(i < wrong ? 3 : 0);
    return nlohmann::json{{"ranks", v}}.dump();
  };
  const auto task = [&](int wrong) {
    const double top1 = (20.0 - wrong) / 20;
    return store::TaskAccuracy{"classification",
                               "digits@0123456789ab",
                               20,
                               {{"top1", top1, top1 - 0.1, top1}},
                               ranks(wrong)};
  };
  r.task[1] = task(5);
  Comparison c;
  c.baseline_run = 3;
  c.passed = false;
  CellVerdict v;
  v.cell = store::CellOf(r.jobs[0]);
  v.baseline_jobs = {30, 31};  // 30 has no task accuracy: the first that has it counts
  c.cells = {v};
  c.baseline_task[31] = task(0);
  std::string md = RenderMarkdown(r);
  EXPECT_EQ(md.find("against baseline"), std::string::npos) << md;  // no baseline: no column
  r.comparison = c;
  md = RenderMarkdown(r);
  EXPECT_NE(md.find("| against cpu | baseline | against baseline |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 75.0% (65.0-75.0) | - | - | 100.0% (90.0-100.0) | **-25.0 pt ("),
            std::string::npos)
      << md;
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<th>baseline</th><th>against baseline</th>"), std::string::npos) << html;
  EXPECT_NE(html.find("<span style=\"white-space:nowrap\">100.0%</span> <span "
                      "style=\"white-space:nowrap\">(90.0-100.0)</span></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("color:#b00\"><span style=\"white-space:nowrap\">-25.0 pt</span>"),
            std::string::npos)
      << html;
  // A baseline cell on another set: no value, no change.
  r.comparison->baseline_task[31].dataset = "other@0123456789ab";
  md = RenderMarkdown(r);
  EXPECT_NE(md.find("| 100.0% (90.0-100.0) | - |"), std::string::npos) << md;
}

// No control characters in Markdown cells: a name with an escape
// sequence, a bell, CR/LF or a C1 control must not reach the comment.
TEST(ReportsTest, MarkdownStripsControlCharacters) {
  RunReport r = Sample();
  r.jobs[0].model = "evil\x1b[31m|red\x07\r\nname\x7f\xc2\x9b.tflite";
  r.jobs[1].error = "line one\nline two\ttab\x1b]0;title\x07";
  r.run.name = "run\x1b[2J";
  std::string md = RenderMarkdown(r);
  for (char c : md) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 || c == '\n') << "control byte " << int(u) << " in\n" << md;
    EXPECT_NE(u, 0x7f);
  }
  EXPECT_EQ(md.find("\xc2\x9b"), std::string::npos);
  EXPECT_NE(md.find("evil \\[31m\\|red   name  .tflite"), std::string::npos) << md;
  EXPECT_NE(md.find("line one line two tab \\]0;title "), std::string::npos) << md;
  std::string html = RenderHtml(r);
  EXPECT_EQ(html.find('\x1b'), std::string::npos);
  EXPECT_EQ(html.find('\x07'), std::string::npos);
}

// A big run stays a small file: samples are drawn from quantiles, and the job
// table lists only the jobs that need a look.
TEST(ReportsTest, BigRunsKeepTheHtmlSmall) {
  RunReport r = Sample();
  const store::JobRow ok = r.jobs[0];
  r.jobs.clear();
  for (int cell = 0; cell < 10; ++cell) {
    for (int trial = 0; trial < 100; ++trial) {
      store::JobRow j = ok;
      j.id = cell * 100 + trial + 1;
      j.model = std::to_string(cell) + "m.tflite";
      j.trial = trial;
      if (cell == 3 && trial == 7) {
        j.status = "timeout";
        j.metrics.reset();
      }
      r.jobs.push_back(j);
    }
  }
  r.cells = GroupCells(r.jobs);
  for (CellGroup& c : r.cells) {
    std::vector<double> samples(100000);
    for (size_t i = 0; i < samples.size(); ++i) samples[i] = 1000 + static_cast<double>(i % 977);
    c.latency = Summarize(samples);
  }
  std::string html = RenderHtml(r);
  EXPECT_LT(html.size(), 150u * 1024) << html.size();
  EXPECT_NE(html.find("1000 jobs: only those not ok or flagged are listed"), std::string::npos);
  EXPECT_NE(html.find(">timeout<"), std::string::npos);
  EXPECT_NE(html.find("(n=100000)"), std::string::npos);
}

// RFC 4180 with one reader: fields split on commas outside quotes, "" in quotes.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
      ++i;
    } else {
      field += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

TEST_F(StoreReportTest, CsvRowsQuoteAndKeepColumnOrder) {
  RunReport r = Load();
  std::string csv = RenderCsv(r);
  auto rows = ParseCsv(csv);
  ASSERT_EQ(rows.size(), 6u) << csv;  // header + 5 jobs
  EXPECT_EQ(rows[0], TableColumns());
  for (const auto& row : rows) EXPECT_EQ(row.size(), TableColumns().size());
  auto col = [&](const std::string& name) {
    return std::find(rows[0].begin(), rows[0].end(), name) - rows[0].begin();
  };
  EXPECT_EQ(rows[0][0], "run_id");
  EXPECT_EQ(rows[0][2], "job_key");
  EXPECT_EQ(rows[1][col("model")], "m,1.tflite");
  EXPECT_NE(csv.find("\"m,1.tflite\""), std::string::npos);
  EXPECT_EQ(rows[4][col("trial")], "1");
  EXPECT_EQ(rows[4][col("runner")], "main");
  EXPECT_EQ(rows[4][col("max_abs_error")], "0.004");
  EXPECT_EQ(rows[4][col("top1_agree")], "true");
  EXPECT_EQ(rows[1][col("max_abs_error")], "");  // no comparison: empty
  EXPECT_EQ(rows[5][col("status")], "crashed");
  EXPECT_EQ(rows[5][col("error")], "runner died, signal 11");
  EXPECT_EQ(rows[1][col("load_avg_1m_before")], "0.25");
  // Quotes and line breaks survive a round trip.
  r.jobs[0].error = "say \"hi\",\nthen go";
  EXPECT_EQ(ParseCsv(RenderCsv(r))[1][col("error")], "say \"hi\",\nthen go");
  EXPECT_NE(RenderCsv(r).find("\"say \"\"hi\"\",\nthen go\""), std::string::npos);
}

TEST_F(StoreReportTest, JsonHasTheRunAndOneFlatRowPerJob) {
  RunReport r = Load();
  auto doc = nlohmann::ordered_json::parse(RenderJson(r));
  EXPECT_EQ(doc["run"]["id"], run_);
  EXPECT_EQ(doc["run"]["name"], "ci, \"nightly\"");
  ASSERT_EQ(doc["jobs"].size(), 5u);
  std::vector<std::string> keys;
  for (const auto& [k, v] : doc["jobs"][2].items()) {
    keys.push_back(k);
    EXPECT_FALSE(v.is_object() || v.is_array()) << k;  // flat
  }
  EXPECT_EQ(keys, TableColumns());
  EXPECT_EQ(doc["jobs"][2]["job_key"], "xnnpack0");
  EXPECT_EQ(doc["jobs"][2]["p50_us"], 2000.0);
  EXPECT_EQ(doc["jobs"][2]["max_abs_error"], 0.001);
  EXPECT_EQ(doc["jobs"][2]["nonfinite"], false);
  EXPECT_TRUE(doc["jobs"][4]["p50_us"].is_null());
  for (const char* k :
       {"run_id", "job_id", "model_sha256", "delegate_options", "num_threads", "runner_sha256",
        "attempts", "wall_ms", "init_us", "arena_bytes", "threads_used", "folded_nodes",
        "started_hot", "throttled", "noisy", "state_note", "top5_agree"}) {
    EXPECT_TRUE(doc["jobs"][0].contains(k)) << k;
  }
}

}  // namespace
}  // namespace dfarm::reports
