#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/report.h"

namespace dfarm::reports {
namespace {

RunReport Sample() {
  RunReport r;
  r.run = {7, "nightly <b>", "2024-05-01T12:00:00Z", "2024-05-01T12:05:00Z", "finished", "{}", 0,
           ""};
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

}  // namespace
}  // namespace dfarm::reports
