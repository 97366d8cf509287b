// Task accuracy end to end on a real labelled set (tests/eval: scikit-learn's
// digits and a classifier trained on them, float and int8): the real
// `dfarm sweep` over cpu, xnnpack and gpu stores top-1/top-5 per job, equal to
// what numpy computes for the same weights on the cpu path; `dfarm show`
// prints them; and `dfarm gate` with task.max_top1_drop_vs_cpu fails a
// delegate that perturbs the hidden layer (libdfarm_perturb_plugin.so) and
// passes the same plugin with no perturbation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/store/store.h"
#include "tests/e2e/e2e_util.h"
#include "tests/eval/digits_fixture.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

constexpr int kImages = 120;

class EvalE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("dfarm_eval_e2e_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    auto f = testing::MakeDigitsFixture((*dir_ / "digits").string());
    if (f) fixture_ = new testing::DigitsFixture(std::move(*f));
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(*dir_);
    delete fixture_;
    delete dir_;
    fixture_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(fixture_, nullptr) << "the digits fixture failed";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    work_ = *dir_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(work_);
    db_ = (work_ / "x.db").string();
  }

  static json Eval() {
    return {{"dataset", fixture_->list_file},
            {"labels", fixture_->labels_file},
            {"limit", kImages},
            {"preprocess", {{"size", {8, 8}}, {"channels", "GRAY"}, {"scale", {1.0 / 255, 0}}}}};
  }

  // `dfarm sweep` of `spec`, which must exit `code`; its run id (0 after a failure).
  int64_t Sweep(const json& spec, int code = 0) {
    std::ofstream(work_ / "spec.json") << spec.dump(2);
    Outcome o = RunToEnd({(BinDir() / "dfarm").string(), "sweep", (work_ / "spec.json").string(),
                          "--db", db_, "--json", "--agent-store", (work_ / "store").string()},
                         work_ / "sweep.out", work_ / "sweep.err");
    EXPECT_EQ(o.code, code) << o.out << o.err;
    sweep_err_ = o.err;
    const json summary = json::parse(o.out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) return 0;
    return summary["run_id"].get<int64_t>();
  }

  Outcome Dfarm(std::vector<std::string> args) {
    args.insert(args.begin(), (BinDir() / "dfarm").string());
    args.insert(args.end(), {"--db", db_});
    return RunToEnd(args, work_ / "cmd.out", work_ / "cmd.err");
  }

  // numpy's top-1 accuracy on the first kImages held-out images.
  static double NumpyTop1() {
    int correct = 0;
    for (int i = 0; i < kImages; ++i) {
      correct += fixture_->images[i].numpy_top1 == fixture_->images[i].label ? 1 : 0;
    }
    return static_cast<double>(correct) / kImages;
  }

  static fs::path* dir_;
  static testing::DigitsFixture* fixture_;
  fs::path work_;
  std::string db_;
  std::string sweep_err_;  // the last sweep's stderr
};
fs::path* EvalE2eTest::dir_ = nullptr;
testing::DigitsFixture* EvalE2eTest::fixture_ = nullptr;

TEST_F(EvalE2eTest, SweepStoresTopKPerJobOnEveryDelegate) {
  json spec = {{"name", "digits"},
               {"models",
                {{{"path", fixture_->float_model}, {"eval", Eval()}},
                 {{"path", fixture_->int8_model}, {"eval", Eval()}}}},
               {"delegates", {"cpu", "xnnpack", "gpu"}},
               {"devices", {"local"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"timeout_s", 120}}}};
  const int64_t run = Sweep(spec);
  ASSERT_GT(run, 0);
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 6u);
  auto tasks = (*store)->ListRunTaskAccuracy(run);
  ASSERT_TRUE(tasks.ok()) << tasks.message();
  double float_cpu_top1 = -1, int8_cpu_top1 = -1;
  for (const store::JobRow& j : *jobs) {
    SCOPED_TRACE(j.model + " " + j.delegate + ": " + j.status + " " + j.error);
    if (j.status == "unsupported" && j.delegate == "gpu") continue;  // no OpenCL device here
    ASSERT_EQ(j.status, "ok");
    ASSERT_TRUE(tasks->count(j.id)) << j.state_note;
    const store::TaskAccuracy& t = tasks->at(j.id);
    EXPECT_EQ(t.task, "classification");
    EXPECT_EQ(t.images, kImages);
    EXPECT_EQ(t.dataset.rfind("images@", 0), 0u) << t.dataset;
    ASSERT_NE(t.Find("top1"), nullptr);
    ASSERT_NE(t.Find("top5"), nullptr);
    EXPECT_GE(t.Find("top5")->value, t.Find("top1")->value);
    EXPECT_LE(t.Find("top1")->low, t.Find("top1")->value);
    EXPECT_GE(t.Find("top1")->high, t.Find("top1")->value);
    EXPECT_GT(t.Find("top1")->value, 0.85);  // a working classifier, on every delegate
    if (j.delegate == "cpu") {
      (j.model == "digits_float.tflite" ? float_cpu_top1 : int8_cpu_top1) = t.Find("top1")->value;
    }
  }
  // Our cpu path gives numpy's answers for the same weights and images.
  EXPECT_DOUBLE_EQ(float_cpu_top1, NumpyTop1());
  ASSERT_GE(int8_cpu_top1, 0);
  RecordProperty("int8_top1_drop_points", std::to_string((float_cpu_top1 - int8_cpu_top1) * 100));
  Outcome shown =
      Dfarm({"show", std::to_string(run), "--job", std::to_string(jobs->front().id), "--json"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  const json job = json::parse(shown.out)["jobs"][0];
  ASSERT_TRUE(job.contains("task")) << shown.out;
  EXPECT_EQ(job["task"]["images"], kImages);
  EXPECT_DOUBLE_EQ(job["task"]["metrics"][0]["value"].get<double>(), float_cpu_top1);
  Outcome text = Dfarm({"show", std::to_string(run)});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("task accuracy"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("TOP-1"), std::string::npos) << text.out;
}

// A model whose labelled set is broken (a label its labels file lacks, or a
// file that is no image) fails alone: its jobs end model_error naming the
// file and the line, with no task metrics, while the other model's jobs run
// and score; `dfarm show` says why.
TEST_F(EvalE2eTest, BadDatasetFailsOnlyThatModelsJobs) {
  std::ifstream in(fixture_->list_file);
  std::ofstream out(work_ / "broken.csv");
  const fs::path images = fs::path(fixture_->list_file).parent_path();
  std::string line;
  for (int n = 1; std::getline(in, line) && n <= 8; ++n) {
    if (n == 1) {  // the header
      out << line << "\n";
      continue;
    }
    const size_t comma = line.rfind(',');
    out << (images / line.substr(0, comma)).string() << (n == 6 ? ",42" : line.substr(comma))
        << "\n";
  }
  out.close();
  json broken = Eval();
  broken["dataset"] = (work_ / "broken.csv").string();
  // A third model's set lists a file that is no image: found when the
  // images are decoded, after the spec loaded.
  std::ofstream(work_ / "garbage.png") << "not an image";
  std::ofstream(work_ / "garbage.csv") << "image,label\ngarbage.png,3\n";
  fs::copy_file(fixture_->float_model, work_ / "digits_copy.tflite");
  json garbage = Eval();
  garbage["dataset"] = (work_ / "garbage.csv").string();
  json spec = {{"name", "broken"},
               {"models",
                {{{"path", fixture_->float_model}, {"eval", Eval()}},
                 {{"path", fixture_->int8_model}, {"eval", broken}},
                 {{"path", (work_ / "digits_copy.tflite").string()}, {"eval", garbage}}}},
               {"delegates", {"cpu", "xnnpack"}},
               {"devices", {"local"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}, {"timeout_s", 120}}}};
  const int64_t run = Sweep(spec, 1);  // some jobs failed
  ASSERT_GT(run, 0);
  const std::string why =
      "models[1] 'digits_int8.tflite'.eval.dataset: broken.csv line 6: label '42' is neither a "
      "class of the labels file nor a class index below 10";
  EXPECT_NE(sweep_err_.find(why), std::string::npos) << sweep_err_;
  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 6u);
  auto tasks = (*store)->ListRunTaskAccuracy(run);
  ASSERT_TRUE(tasks.ok()) << tasks.message();
  int64_t bad_job = 0;
  for (const store::JobRow& j : *jobs) {
    SCOPED_TRACE(j.model + " " + j.delegate + ": " + j.status + " " + j.error);
    if (j.model == "digits_float.tflite") {
      EXPECT_EQ(j.status, "ok");
      ASSERT_TRUE(tasks->count(j.id));
      ASSERT_NE(tasks->at(j.id).Find("top1"), nullptr);
      EXPECT_GT(tasks->at(j.id).Find("top1")->value, 0.85);
    } else if (j.model == "digits_copy.tflite") {
      EXPECT_EQ(j.status, "model_error");
      EXPECT_EQ(j.error.rfind("model 'digits_copy.tflite' eval images: ", 0), 0u);
      EXPECT_NE(j.error.find("garbage.png' is neither a PNG nor a JPEG file"), std::string::npos);
      EXPECT_EQ(tasks->count(j.id), 0u);
    } else {
      EXPECT_EQ(j.status, "model_error");
      EXPECT_EQ(j.error, why);
      EXPECT_FALSE(j.metrics.has_value());
      EXPECT_EQ(tasks->count(j.id), 0u);
      bad_job = j.id;
    }
  }
  ASSERT_GT(bad_job, 0);
  Outcome shown = Dfarm({"show", std::to_string(run), "--job", std::to_string(bad_job)});
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_NE(shown.out.find("model_error"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("broken.csv line 6: label '42'"), std::string::npos) << shown.out;
}

// The digits network with an ADD of zeros between the hidden layer and its
// RELU, for the perturbing plugin to claim: delta d there moves every hidden
// unit by d, which reorders the classes.
std::string PerturbableModel(const testing::DigitsWeights& w, const fs::path& path) {
  testing::ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 8, 8, 1}, "x");
  const int w1 = b.AddConstFloat32({32, 64}, w.w1, "w1");
  const int b1 = b.AddConstFloat32({32}, w.b1, "b1");
  const int h = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32}, "h");
  b.AddFullyConnected(x, w1, b1, h);
  const int zeros = b.AddConstFloat32({1, 32}, std::vector<float>(32, 0.0f), "zeros");
  const int shifted = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32}, "shifted");
  b.AddAdd(h, zeros, shifted);
  const int relu = b.AddTensor(tfl::TensorType::FLOAT32, {1, 32}, "relu");
  b.AddUnary(tfl::BuiltinOperator::RELU, shifted, relu);
  const int w2 = b.AddConstFloat32({10, 32}, w.w2, "w2");
  const int b2 = b.AddConstFloat32({10}, w.b2, "b2");
  const int logits = b.AddTensor(tfl::TensorType::FLOAT32, {1, 10}, "logits");
  b.AddFullyConnected(relu, w2, b2, logits);
  b.SetInputs({x});
  b.SetOutputs({logits});
  EXPECT_TRUE(b.WriteFile(path.string()));
  return path.string();
}

TEST_F(EvalE2eTest, GateFailsADelegateThatCostsTopOneAndPassesAnIdenticalOne) {
  const std::string model = PerturbableModel(fixture_->weights, work_ / "digits_add.tflite");
  fs::copy_file(DFARM_PERTURB_PLUGIN, work_ / "libdfarm_perturb_plugin.so");
  auto run_with = [&](const std::string& delta) {
    json plugin = {{"name", "external"},
                   {"options", {{"path", "libdfarm_perturb_plugin.so"}, {"delta", delta}}}};
    json spec = {{"name", "perturbed"},
                 {"models", {{{"path", model}, {"eval", Eval()}}}},
                 {"delegates", {"cpu", plugin}},
                 {"devices", {"local"}},
                 {"benchmark", {{"warmup_runs", 0}, {"num_runs", 1}, {"timeout_s", 120}}}};
    return Sweep(spec);
  };
  std::ofstream(work_ / "policy.json") << json{{"task", {{"max_top1_drop_vs_cpu", 2.0}}}}.dump();
  auto gate = [&](int64_t run) {
    // Against itself: only the policy's cpu comparison can decide.
    return Dfarm({"gate", std::to_string(run), "--baseline", std::to_string(run), "--policy",
                  (work_ / "policy.json").string(), "--format", "json"});
  };
  const int64_t bad = run_with("3");
  ASSERT_GT(bad, 0);
  // The task finding of the plugin's cell: whether it fails, from the gate's JSON.
  auto task_fails = [](const std::string& out) -> std::optional<bool> {
    const json doc = json::parse(out, nullptr, false);
    if (!doc.is_object()) return std::nullopt;
    for (const json& cell : doc["cells"]) {
      for (const json& f : cell["findings"]) {
        if (f["metric"] == "task.top1_drop_vs_cpu") return f["fails"].get<bool>();
      }
    }
    return std::nullopt;
  };
  Outcome o = gate(bad);
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_EQ(task_fails(o.out), std::optional<bool>(true)) << o.out;
  const int64_t same = run_with("0");
  ASSERT_GT(same, 0);
  o = gate(same);
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_EQ(task_fails(o.out), std::optional<bool>(false)) << o.out;

  // The report of the perturbed run against the clean one shows each cell's
  // baseline beside it: the cpu cell's (the same in both runs) with no change;
  // the plugin's options differ between the runs, so its cell has none.
  for (const char* format : {"md", "html"}) {
    const std::string file = (work_ / ("report." + std::string(format))).string();
    Outcome report = Dfarm({"report", std::to_string(bad), "--baseline", std::to_string(same),
                            "--format", format, "-o", file});
    ASSERT_EQ(report.code, 0) << report.err;
  }
  std::ifstream md_file(work_ / "report.md");
  const std::string md((std::istreambuf_iterator<char>(md_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("| against cpu | baseline | against baseline |"), std::string::npos) << md;
  std::map<std::string, std::vector<std::string>> rows;  // delegate -> the row's columns
  for (size_t at = md.find("## Task accuracy");
       (at = md.find("\n| digits", at)) != std::string::npos; ++at) {
    std::vector<std::string> cols;
    const std::string row = md.substr(at + 3, md.find('\n', at + 1) - at - 3);
    for (size_t from = 0, bar; (bar = row.find(" | ", from)) != std::string::npos; from = bar + 3) {
      cols.push_back(row.substr(from, bar - from));
    }
    if (cols.size() == 7)
      rows[cols[0].find(" cpu ") != std::string::npos ? "cpu" : "plugin"] = cols;
  }
  ASSERT_EQ(rows.size(), 2u) << md;
  EXPECT_EQ(rows["cpu"][6], rows["cpu"][3]) << md;  // the baseline's value: the same top-1
  EXPECT_NE(md.find(rows["cpu"][3] + " | " + rows["cpu"][4] + " | - | " + rows["cpu"][3] +
                    " | 0.0 pt (0.0 to 0.0) |"),
            std::string::npos)
      << md;
  EXPECT_EQ(rows["plugin"][6], "-") << md;
  std::ifstream html_file(work_ / "report.html");
  const std::string html((std::istreambuf_iterator<char>(html_file)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("<th>baseline</th><th>against baseline</th>"), std::string::npos);
}

}  // namespace
}  // namespace dfarm::e2e
