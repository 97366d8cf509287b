// Real input sets end to end, with the real dfarm, dfarm-agent and
// dfarm-runner: a spec model names two images (a PNG and a JPEG written here
// with libpng and libjpeg); dfarm decodes and preprocesses them on the host,
// packs each into an input-set artifact, pushes each once by sha256, and the
// job's accuracy aggregates over both sets ("sets":2). A second sweep finds
// every artifact on the agent again and pushes nothing.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/store/store.h"
#include "tests/e2e/e2e_util.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::e2e {
namespace {

using nlohmann::json;
namespace tfl = ::dfarm::tflite;

class InputsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner"}) {
      ASSERT_TRUE(fs::exists(BinDir() / exe)) << exe << " is not built";
    }
    dir_ = fs::temp_directory_path() /
           ("dfarm_inputs_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "specs" / "images");
    db_ = (dir_ / "x.db").string();
  }
  void TearDown() override {
    if (!dir_.empty() && !std::getenv("DFARM_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }

  // A classification-shaped model: image [1,4,4,3] -> RESHAPE [1,48] ->
  // FULLY_CONNECTED [1,4] -> ADD a bias -> scores [1,4] (the example plugin
  // takes the ADD).
  std::string ClassifierModel() {
    testing::ModelBuilder b;
    int image = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 3}, "image");
    int flat = b.AddTensor(tfl::TensorType::FLOAT32, {1, 48}, "flat");
    std::vector<float> w(4 * 48);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37 % 11) - 5) / 10.0f;
    int weights = b.AddConstFloat32({4, 48}, w, "weights");
    int logits = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "logits");
    int bias = b.AddConstFloat32({1, 4}, {0.1f, -0.2f, 0.3f, 0.0f}, "bias");
    int scores = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "scores");
    b.AddReshape(image, flat, {1, 48});
    b.AddFullyConnected(flat, weights, -1, logits);
    b.AddAdd(logits, bias, scores);
    b.SetInputs({image});
    b.SetOutputs({scores});
    std::string path = (dir_ / "specs" / "classifier.tflite").string();
    EXPECT_TRUE(b.WriteFile(path));
    return path;
  }

  // An 8x8 RGB gradient, shifted by `shift`.
  static std::vector<uint8_t> Pixels(int shift) {
    std::vector<uint8_t> rgb;
    for (int y = 0; y < 8; ++y) {
      for (int x = 0; x < 8; ++x) {
        rgb.insert(rgb.end(), {static_cast<uint8_t>(x * 30 + shift), static_cast<uint8_t>(y * 30),
                               static_cast<uint8_t>(255 - x * 20 - shift)});
      }
    }
    return rgb;
  }

  void WritePng(const fs::path& path, const std::vector<uint8_t>& rgb) {
    png_image png;
    std::memset(&png, 0, sizeof png);
    png.version = PNG_IMAGE_VERSION;
    png.width = 8;
    png.height = 8;
    png.format = PNG_FORMAT_RGB;
    ASSERT_TRUE(png_image_write_to_file(&png, path.c_str(), 0, rgb.data(), 0, nullptr))
        << png.message;
  }

  void WriteJpeg(const fs::path& path, const std::vector<uint8_t>& rgb) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    jpeg_compress_struct cinfo;
    jpeg_error_mgr err;
    cinfo.err = jpeg_std_error(&err);
    jpeg_create_compress(&cinfo);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = 8;
    cinfo.image_height = 8;
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
      JSAMPROW row = const_cast<uint8_t*>(rgb.data()) + cinfo.next_scanline * 8 * 3;
      jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    std::fclose(f);
  }

  // Runs `dfarm sweep` on the spec; returns its --json summary.
  json Sweep(const json& spec) {
    fs::path spec_path = dir_ / "specs" / "spec.json";
    std::ofstream(spec_path) << spec.dump(2);
    Child c = Child::Spawn({(BinDir() / "dfarm").string(), "sweep", spec_path.string(), "--db", db_,
                            "--json", "--agent-store", (dir_ / "agent-store").string()},
                           (dir_ / "out").string(), (dir_ / "err").string());
    int status = c.Wait();
    std::string out = Slurp(dir_ / "out");
    std::string err = Slurp(dir_ / "err");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << out << err;
    json summary = json::parse(out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) {
      ADD_FAILURE() << "no summary: " << out << "\n" << err;
      return json::object();
    }
    return summary;
  }

  struct Ran {
    int code = -1;
    std::string out, err;
  };
  // Runs `dfarm ARGS... --db DB`.
  Ran Dfarm(std::vector<std::string> args) {
    args.insert(args.begin(), (BinDir() / "dfarm").string());
    args.insert(args.end(), {"--db", db_});
    Child c = Child::Spawn(args, (dir_ / "cli.out").string(), (dir_ / "cli.err").string());
    int status = c.Wait();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(dir_ / "cli.out"),
            Slurp(dir_ / "cli.err")};
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(InputsE2eTest, ImageSetsTravelOnceAndAccuracyCoversBoth) {
  ClassifierModel();
  WritePng(dir_ / "specs" / "images" / "a.png", Pixels(0));
  WriteJpeg(dir_ / "specs" / "images" / "b.jpg", Pixels(40));
  const json spec = {
      {"name", "inputs"},
      {"models",
       {{{"path", "classifier.tflite"},
         {"inputs", {{"images", "images"}, {"size", {4, 4}}, {"scale", {1.0 / 255, -0.5}}}}}}},
      {"delegates",
       {{{"name", "cpu"}}, {{"name", "external"}, {"options", {{"path", DFARM_EXAMPLE_PLUGIN}}}}}},
      {"devices", {"local"}},
      {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"timeout_s", 60}}},
      {"scheduler", {{"retries", 0}}}};
  // The packed sets go to a cache of this test's own.
  ::setenv("DFARM_INPUTS_CACHE", (dir_ / "inputs-cache").c_str(), 1);
  json summary = Sweep(spec);
  ASSERT_TRUE(summary.contains("run_id"));
  const int64_t run_id = summary["run_id"].get<int64_t>();

  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto jobs = (*store)->ListJobs(run_id);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 2u);
  for (const store::JobRow& j : *jobs) ASSERT_EQ(j.status, "ok") << j.delegate << ": " << j.error;
  const store::JobRow& ext = (*jobs)[1];
  ASSERT_EQ(ext.delegate, "external");
  auto detail = (*store)->GetJobDetail(ext.id);
  ASSERT_TRUE(detail.ok()) << detail.message();
  const json doc = json::parse(detail->runner_json);
  ASSERT_TRUE(doc.contains("accuracy")) << detail->runner_json;
  EXPECT_EQ(doc["accuracy"]["sets"], 2) << doc["accuracy"].dump();
  const json& scores = doc["accuracy"]["outputs"][0];
  EXPECT_EQ(scores["name"], "scores");
  EXPECT_EQ(scores["compared"], 8);  // 4 scores x 2 sets
  EXPECT_EQ(scores["top1_agreement"], 1.0);
  EXPECT_EQ(doc["inputs"][0]["shape"], json({1, 4, 4, 3}));

  // Two input-set artifacts, each pushed once: every byte pushed is one
  // artifact's (runner, model, plugin, 2 sets), none twice.
  auto sets = QueryRows(db_, "SELECT size_bytes FROM artifacts WHERE kind = 'inputs'");
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0][0], std::to_string(8 + 4 + 8 + 4 * 4 * 3 * 4));
  auto total = QueryRows(db_, "SELECT SUM(size_bytes) FROM artifacts");
  ASSERT_EQ(total.size(), 1u);
  EXPECT_EQ(std::to_string(summary["bytes_pushed"].get<int64_t>()), total[0][0]);
  // The job keys differ from a run without inputs (the sets are keyed).
  EXPECT_EQ((*jobs)[0].job_key.size(), 16u);

  // Again: the agent has every artifact (found by sha256), nothing is pushed,
  // and the jobs keep their keys.
  json again = Sweep(spec);
  ASSERT_TRUE(again.contains("run_id"));
  EXPECT_EQ(again["bytes_pushed"], 0);
  auto jobs2 = (*store)->ListJobs(again["run_id"].get<int64_t>());
  ASSERT_TRUE(jobs2.ok());
  ASSERT_EQ(jobs2->size(), 2u);
  EXPECT_EQ((*jobs2)[1].job_key, ext.job_key);
  ::unsetenv("DFARM_INPUTS_CACHE");
}

// The same model, delegate and device on the runner's seeded inputs and on
// real images are two cells everywhere: the store lists two, the gate finds
// nothing to compare, history asks which one, and each names its inputs.
TEST_F(InputsE2eTest, SeededAndRealInputsAreTwoCells) {
  ClassifierModel();
  WritePng(dir_ / "specs" / "images" / "a.png", Pixels(0));
  json spec = {{"name", "seeded"},
               {"models", {"classifier.tflite"}},
               {"delegates", {{{"name", "cpu"}}}},
               {"devices", {"local"}},
               {"benchmark", {{"warmup_runs", 0}, {"num_runs", 2}, {"timeout_s", 60}}},
               {"scheduler", {{"retries", 0}}}};
  ::setenv("DFARM_INPUTS_CACHE", (dir_ / "inputs-cache").c_str(), 1);
  const json seeded = Sweep(spec);
  spec["name"] = "images";
  spec["models"] = {
      {{"path", "classifier.tflite"},
       {"inputs", {{"images", "images"}, {"size", {4, 4}}, {"scale", {1.0 / 255, 0}}}}}};
  const json images = Sweep(spec);
  ::unsetenv("DFARM_INPUTS_CACHE");
  ASSERT_TRUE(seeded.contains("run_id") && images.contains("run_id"));
  const std::string base = std::to_string(seeded["run_id"].get<int64_t>());
  const std::string cand = std::to_string(images["run_id"].get<int64_t>());

  auto store = store::OpenSqliteStore(db_);
  ASSERT_TRUE(store.ok()) << store.message();
  auto cells = (*store)->ListCells({});
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 2u);
  EXPECT_EQ((*cells)[0].inputs, store::kSeededInputs);  // "seeded:" sorts before "sets:"
  const store::Cell& real = (*cells)[1];
  EXPECT_EQ(real.inputs.rfind("sets:", 0), 0u) << real.inputs;
  EXPECT_NE(real.Label().find(" on inputs " + real.inputs.substr(5, 8)), std::string::npos)
      << real.Label();

  Ran shown = Dfarm({"show", cand, "--json"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["jobs"][0]["inputs"], real.inputs) << shown.out;

  Ran gate = Dfarm({"gate", cand, "--baseline", base});
  EXPECT_EQ(gate.code, 2) << gate.out << gate.err;
  EXPECT_NE(gate.err.find("no comparable cell"), std::string::npos) << gate.err;

  Ran both = Dfarm({"history", "--model", "classifier.tflite", "--delegate", "cpu"});
  EXPECT_EQ(both.code, 2) << both.out << both.err;
  EXPECT_NE(both.err.find("on inputs " + real.inputs.substr(5, 8)), std::string::npos) << both.err;
  Ran one = Dfarm({"history", "--model", "classifier.tflite", "--delegate", "cpu", "--inputs",
                   real.inputs.substr(5, 8), "--json"});
  ASSERT_EQ(one.code, 0) << one.err;
  const json h = json::parse(one.out);
  EXPECT_EQ(h["cell"]["inputs"], real.inputs);
  EXPECT_EQ(h["points"].size(), 1u) << one.out;
}

}  // namespace
}  // namespace dfarm::e2e
