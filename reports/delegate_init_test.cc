// "Delegate init and fp16 cost": the cells, the fp16 twin and its
// per-output cost, the report rows' keys, and both renderers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "reports/report.h"

namespace dfarm::reports {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

store::JobRow GpuJob(int64_t id, const std::string& delegate, const std::string& options,
                     double mean_us, std::optional<double> cold, std::optional<double> warm) {
  store::JobRow j;
  j.id = id;
  j.run_id = 1;
  j.model = "face.tflite";
  j.model_sha256 = "abc";
  j.delegate = delegate;
  j.delegate_options = options;
  j.device = "phone";
  j.status = store::kJobOk;
  j.num_threads = 1;
  store::JobMetrics m;
  m.mean_us = mean_us;
  m.p50_us = mean_us;
  m.first_us = mean_us * 4;
  m.init_us = cold.value_or(warm.value_or(500));
  m.init_cold_us = cold;
  m.init_warm_us = warm;
  j.metrics = m;
  return j;
}

store::Accuracy TwoOutputs(double boxes, double scores) {
  store::OutputAccuracy a;
  a.index = 0;
  a.name = "boxes";
  a.compared = 10;
  a.max_abs_error = boxes;
  store::OutputAccuracy b = a;
  b.index = 1;
  b.name = "scores";
  b.max_abs_error = scores;
  return store::Accuracy{"cpu", {a, b}};
}

RunReport GpuRun() {
  RunReport r;
  r.run.id = 1;
  r.run.name = "gpu";
  r.run.status = "finished";
  r.jobs = {
      GpuJob(1, "cpu", "", 4000, std::nullopt, std::nullopt),
      GpuJob(2, "gpu", "serialization_dir:cache", 2000, 90000, 12000),
      GpuJob(3, "gpu", "precision_loss_allowed:true;serialization_dir:cache", 1500, 95000, 13000),
      GpuJob(4, "xnnpack", "", 2500, std::nullopt, std::nullopt)};
  r.accuracy[2] = TwoOutputs(1e-6, 2e-6);
  r.accuracy[3] = TwoOutputs(4e-3, 1e-4);
  r.accuracy[4] = TwoOutputs(3e-6, 1e-6);
  store::DeviceRow phone;
  phone.name = "phone";
  phone.opencl.push_back(store::OpenClDevice{"QUALCOMM Snapdragon(TM)", "Adreno (TM) 740",
                                             "QUALCOMM", "0800.22", "OpenCL 3.0", true, true, 6,
                                             1 << 30});
  r.devices = {phone};
  return r;
}

TEST(DelegateInitTest, CellsTwinsAndPerOutputCost) {
  const RunReport r = GpuRun();
  const std::vector<CellGroup> cells = GroupCells(r.jobs);
  const std::vector<InitCell> rows = DelegateInitCells(r, cells);
  ASSERT_EQ(rows.size(), 4u);  // every cell of the model
  const InitCell* fp16 = nullptr;
  const InitCell* fp32 = nullptr;
  for (const InitCell& c : rows) {
    if (c.reduced_precision) fp16 = &c;
    if (c.config.rfind("gpu[serialization", 0) == 0) fp32 = &c;
  }
  ASSERT_NE(fp16, nullptr);
  ASSERT_NE(fp32, nullptr);
  EXPECT_EQ(fp32->init_cold_us, std::optional<double>(90000));
  EXPECT_EQ(fp32->init_warm_us, std::optional<double>(12000));
  EXPECT_EQ(fp32->first_us, std::optional<double>(8000));
  EXPECT_EQ(fp32->gpu, "Adreno (TM) 740 (driver 0800.22)");
  ASSERT_TRUE(fp16->twin.has_value());
  EXPECT_EQ(*fp16->twin, fp32->cell);
  ASSERT_EQ(fp16->costs.size(), 2u);
  EXPECT_EQ(fp16->costs[0].name, "boxes");
  EXPECT_DOUBLE_EQ(fp16->costs[0].cost, 4e-3 - 1e-6);
  EXPECT_DOUBLE_EQ(fp16->costs[1].fp32_max_abs_error, 2e-6);
  EXPECT_EQ(fp16->max_abs_error, std::optional<double>(4e-3));
  EXPECT_TRUE(fp32->costs.empty());
  EXPECT_TRUE(IsReducedPrecision(GpuJob(9, "xnnpack", "fp16:1", 1, {}, {})));
  EXPECT_FALSE(IsReducedPrecision(GpuJob(9, "gpu", "precision_loss_allowed:false", 1, {}, {})));
}

TEST(DelegateInitTest, NoSectionWithoutInitFiguresOrReducedPrecision) {
  RunReport r = GpuRun();
  r.jobs = {r.jobs[0], r.jobs[3]};  // cpu and xnnpack only
  EXPECT_TRUE(DelegateInitCells(r, GroupCells(r.jobs)).empty());
  EXPECT_THAT(RenderMarkdown(r), Not(HasSubstr("Delegate init")));
  EXPECT_THAT(RenderHtml(r), Not(HasSubstr("Delegate init")));
}

TEST(DelegateInitTest, MarkdownAndHtmlShowTheSection) {
  const RunReport r = GpuRun();
  const std::string md = RenderMarkdown(r);
  EXPECT_THAT(md, HasSubstr("## Delegate init and fp16 cost"));
  EXPECT_THAT(md, HasSubstr("OpenCL device of **phone**: Adreno (TM) 740 (driver 0800.22)"));
  EXPECT_THAT(md, HasSubstr("| 2.00 | 8.00 | 90.00 | 90.00 | 12.00 | 2e-06 | – |"));
  EXPECT_THAT(md, HasSubstr("boxes: +0.004 (0.004 vs 1e-06); scores: +9.8e-05 (0.0001 vs 2e-06)"));
  const std::string html = RenderHtml(r);
  EXPECT_THAT(html, HasSubstr("<h2>Delegate init and fp16 cost</h2>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">90.00</td><td class=\"num\">12.00</td>"));
  EXPECT_THAT(html, HasSubstr("boxes: +0.004 <span class=\"dim\">(0.004 vs 1e-06)</span>"));
  // The heatmap's device column names the device's GPU.
  EXPECT_THAT(html, HasSubstr("<th>phone<br><small>Adreno (TM) 740 (driver 0800.22)</small></th>"));
}

TEST(DelegateInitTest, RowsCarryColdWarmInitAndTheGpu) {
  const RunReport r = GpuRun();
  const std::vector<std::string>& columns = TableColumns();
  // Appended after top_ops (schema 17); later columns (inputs) come after them.
  auto top_ops = std::find(columns.begin(), columns.end(), "top_ops");
  ASSERT_LE(top_ops + 4, columns.end());
  EXPECT_EQ(std::vector<std::string>(top_ops + 1, top_ops + 4),
            (std::vector<std::string>{"init_cold_us", "init_warm_us", "gpu_device"}));
  const nlohmann::json doc = nlohmann::json::parse(RenderJson(r));
  EXPECT_EQ(doc["jobs"][1]["init_cold_us"], 90000.0);
  EXPECT_EQ(doc["jobs"][1]["init_warm_us"], 12000.0);
  EXPECT_TRUE(doc["jobs"][0]["init_cold_us"].is_null());
  EXPECT_EQ(doc["jobs"][0]["gpu_device"], "Adreno (TM) 740 (driver 0800.22)");
  EXPECT_THAT(RenderCsv(r), HasSubstr(",90000.0,12000.0,Adreno (TM) 740 (driver 0800.22),"));
}

}  // namespace
}  // namespace dfarm::reports
