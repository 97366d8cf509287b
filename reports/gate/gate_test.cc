#include "reports/gate/gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "reports/eval/task_metrics.h"
#include "reports/gate/policy.h"

namespace dfarm::gate {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// One synthetic job: a trial of a cell.
struct FakeJob {
  std::string model = "net.tflite";
  std::string delegate = "xnnpack";
  std::string options;
  std::string device = "local";
  std::string device_class;  // the class a farm job aimed at `any` recorded ("" = none)
  int64_t trial = 0;
  std::string status = "ok";
  std::vector<double> samples;
  std::vector<store::OutputAccuracy> outputs;
  std::optional<store::JobPlacement> placement;
  int64_t peak_rss = 100 << 20;
  std::optional<int64_t> sets;  // input sets the accuracy was compared over
  std::string runner;           // the spec's runner name ("" = the default runner)
  bool noisy = false;           // started with the device busier than the cooldown allowed
  int64_t pair = 0;             // a paired run's pair (spec "pairing")
  std::vector<size_t> ranks;    // task accuracy (spec "eval"): each image's label rank
  std::optional<store::TaskAccuracy> task;  // task accuracy as given (detection, segmentation)
};

class GateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("dfarm_gate_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = store::OpenSqliteStore((dir_ / "gate.db").string());
    ASSERT_TRUE(s) << s.message();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  int64_t AddRun(const std::vector<FakeJob>& jobs, const std::string& spec_json = "{}") {
    auto run = store_->CreateRun("r", spec_json);
    EXPECT_TRUE(run) << run.message();
    for (const auto& j : jobs) {
      store::JobRow row;
      row.model = j.model;
      row.model_sha256 = "sha-" + j.model;
      row.delegate = j.delegate;
      row.delegate_options = j.options;
      row.device = j.device;
      row.device_class = j.device_class;
      row.num_threads = 1;
      row.trial = j.trial;
      row.runner = j.runner;
      row.pair = j.pair;
      row.job_key =
          j.model + j.delegate + j.options + j.device + j.runner + std::to_string(j.trial);
      auto id = store_->AddJob(*run, row);
      EXPECT_TRUE(id) << id.message();
      EXPECT_TRUE(store_->MarkJobRunning(*id, 0));
      store::JobOutcome out;
      out.status = j.status;
      out.error = j.status == "ok" ? "" : "runner killed by signal 11 (SIGSEGV)";
      out.samples_us = j.samples;
      out.noisy = j.noisy;
      if (j.status == "ok") {
        store::JobMetrics m;
        m.num_runs = static_cast<int64_t>(j.samples.size());
        m.peak_rss_bytes = j.peak_rss;
        m.arena_bytes = 1 << 20;
        out.metrics = m;
        if (!j.outputs.empty()) {
          out.accuracy = store::Accuracy{"cpu", j.outputs};
          out.accuracy->sets = j.sets;
        }
        out.placement = j.placement;
        if (!j.ranks.empty()) {
          store::TaskAccuracy t;
          t.task = "classification";
          t.dataset = "set@000000000000";
          t.images = static_cast<int64_t>(j.ranks.size());
          t.per_image = eval::RanksJson(j.ranks);
          out.task = t;
        }
        if (j.task) out.task = j.task;
      }
      auto r = store_->RecordJobResult(*id, out);
      EXPECT_TRUE(r) << r.message();
    }
    EXPECT_TRUE(store_->FinishRun(*run, store::kRunFinished));
    return *run;
  }

  // `trials` jobs of a cell whose samples are `median` * trial factor (jitter) * noise.
  static std::vector<FakeJob> Cell(FakeJob base, int trials, int samples, double median,
                                   double trial_jitter, double sample_noise, uint32_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> trial_dist(1.0, trial_jitter), noise(1.0, sample_noise);
    std::vector<FakeJob> jobs;
    for (int t = 0; t < trials; ++t) {
      FakeJob j = base;
      j.trial = t;
      const double f = trial_dist(rng);
      for (int s = 0; s < samples; ++s) j.samples.push_back(median * f * noise(rng));
      jobs.push_back(j);
    }
    return jobs;
  }

  static store::OutputAccuracy Output(const std::string& name, double max_abs) {
    store::OutputAccuracy o;
    o.index = 0;
    o.name = name;
    o.compared = 100;
    o.max_abs_error = max_abs;
    o.mean_abs_error = max_abs / 10;
    o.rmse = max_abs / 8;
    return o;
  }

  const CellResult* Find(const GateResult& r, const std::string& delegate,
                         const std::string& options = "") {
    for (const auto& c : r.cells) {
      if (c.cell.delegate == delegate && c.cell.delegate_options == options) return &c;
    }
    return nullptr;
  }

  fs::path dir_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(GateTest, EqualRunsPass) {
  FakeJob j;
  j.outputs = {Output("scores", 1e-5)};
  auto base = AddRun(Cell(j, 5, 30, 1000, 0.01, 0.02, 1));
  auto cand = AddRun(Cell(j, 5, 30, 1000, 0.01, 0.02, 2));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_TRUE(r->passed) << RenderGateText(*r);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kPass) << RenderGateText(*r);
  EXPECT_EQ(r->cells[0].baseline_trials, 5u);
  EXPECT_FALSE(r->cells[0].within_run_only);
}

TEST_F(GateTest, TenPercentSlowerIsRegressed) {
  FakeJob j;
  auto base = AddRun(Cell(j, 5, 30, 1000, 0.01, 0.02, 3));
  auto cand = AddRun(Cell(j, 5, 30, 1100, 0.01, 0.02, 4));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  const auto& c = r->cells[0];
  EXPECT_EQ(c.verdict, Verdict::kRegressed) << RenderGateText(*r);
  EXPECT_NEAR(c.ratio, 1.1, 0.03);
  EXPECT_GT(c.ci_low, 1.05);
  EXPECT_LT(c.q_value, 0.05);
  EXPECT_FALSE(r->passed);
  // The other way round is an improvement.
  auto back = RunGate(*store_, base, cand, DefaultPolicy());
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->cells[0].verdict, Verdict::kImproved) << RenderGateText(*back);
  EXPECT_TRUE(back->passed);
}

// Four of seven candidate trials ran on a busy device (noisy) and are 40%
// slower: left out, the quiet three match the baseline; counted in, they
// make the cell regress.
TEST_F(GateTest, NoisyTrialsAreLeftOutOfLatency) {
  FakeJob j;
  auto base = AddRun(Cell(j, 5, 30, 1000, 0.01, 0.02, 5));
  std::vector<FakeJob> cand = Cell(j, 3, 30, 1000, 0.01, 0.02, 6);
  FakeJob noisy = j;
  noisy.noisy = true;
  for (FakeJob& n : Cell(noisy, 4, 30, 1400, 0.01, 0.02, 7)) {
    n.trial += 3;
    cand.push_back(n);
  }
  const int64_t cand_run = AddRun(cand);
  auto r = RunGate(*store_, cand_run, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kPass) << RenderGateText(*r);
  EXPECT_EQ(r->cells[0].noisy_trials_excluded, 4u);
  EXPECT_EQ(r->cells[0].candidate_trials, 3u);
  EXPECT_NE(RenderGateJson(*r).find(R"("noisy_trials_excluded": 4)"), std::string::npos)
      << RenderGateJson(*r);
  Policy all = DefaultPolicy();
  all.latency.exclude_noisy = false;
  auto counted = RunGate(*store_, cand_run, base, all);
  ASSERT_TRUE(counted) << counted.message();
  EXPECT_NE(counted->cells[0].verdict, Verdict::kPass) << RenderGateText(*counted);
  EXPECT_GT(counted->cells[0].ratio, 1.3);
  EXPECT_EQ(counted->cells[0].noisy_trials_excluded, 0u);
}

// --candidate-runner/--baseline-runner: one runner against another, here
// within one run (ours 10% slower than tflite).
TEST_F(GateTest, OneRunnerAgainstAnotherInOneRun) {
  FakeJob ours, tflite;
  ours.runner = "ours";
  tflite.runner = "tflite";
  std::vector<FakeJob> jobs = Cell(tflite, 5, 30, 1000, 0.01, 0.02, 11);
  for (const FakeJob& j : Cell(ours, 5, 30, 1100, 0.01, 0.02, 12)) jobs.push_back(j);
  auto run = AddRun(jobs);
  // Matched by name, each runner is its own cell, equal to itself.
  auto self = RunGate(*store_, run, run, DefaultPolicy());
  ASSERT_TRUE(self) << self.message();
  EXPECT_EQ(self->cells.size(), 2u);
  Policy paired = DefaultPolicy();
  paired.candidate_runner = "ours";
  paired.baseline_runner = "tflite";
  auto r = RunGate(*store_, run, run, paired);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u) << RenderGateText(*r);
  const auto& c = r->cells[0];
  EXPECT_EQ(c.cell.runner, "ours vs tflite");
  EXPECT_EQ(c.candidate_trials, 5u);
  EXPECT_EQ(c.baseline_trials, 5u);
  EXPECT_NEAR(c.ratio, 1.1, 0.03);
  EXPECT_EQ(c.verdict, Verdict::kRegressed) << RenderGateText(*r);
  // A runner the run does not have leaves nothing to judge.
  paired.candidate_runner = "nope";
  EXPECT_FALSE(RunGate(*store_, run, run, paired));
}

// A paired run: each pair shares a machine level between 0.6 and 1.4 (drift
// that moves both of its trials), the candidate runner is 10% slower.
std::vector<FakeJob> PairedJobs(int pairs, double slowdown) {
  std::vector<FakeJob> jobs;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(1.0, 0.01);
  for (int p = 0; p < pairs; ++p) {
    const double level = 0.6 + 0.8 * ((p * 5) % pairs) / std::max(1, pairs - 1);
    for (const char* runner : {"base", "cand"}) {
      FakeJob j;
      j.runner = runner;
      j.trial = p;
      j.pair = p + 1;
      const double median = 1000 * level * (j.runner == "cand" ? slowdown : 1.0) * noise(rng);
      for (int s = 0; s < 30; ++s) j.samples.push_back(median * noise(rng));
      jobs.push_back(j);
    }
  }
  return jobs;
}

constexpr const char* kPairedSpec =
    R"({"runners":[{"name":"base"},{"name":"cand"}],"pairing":{"baseline_runner":"base"}})";

TEST_F(GateTest, PairedRunIsJudgedPairByPair) {
  const int64_t run = AddRun(PairedJobs(8, 1.10), kPairedSpec);
  // Gated against itself with no runner named: paired, cand against base.
  auto r = RunGate(*store_, run, run, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u) << RenderGateText(*r);
  const CellResult& c = r->cells[0];
  EXPECT_EQ(r->paired_baseline_runner, "base");
  EXPECT_EQ(r->paired_candidate_runner, "cand");
  EXPECT_EQ(c.cell.runner, "cand vs base");
  EXPECT_TRUE(c.paired);
  EXPECT_EQ(c.pairs, 8u);
  EXPECT_NEAR(c.ratio, 1.10, 0.02);
  EXPECT_NEAR(c.p_value, 2.0 / 256, 1e-12);  // every pair slower: the exact signed-rank p
  EXPECT_NEAR(c.smallest_p, 2.0 / 256, 1e-12);
  EXPECT_GT(c.ci_low, 1.05);
  EXPECT_EQ(c.verdict, Verdict::kRegressed) << RenderGateText(*r);
  EXPECT_FALSE(r->passed);
  EXPECT_THAT(r->notes.front(), HasSubstr("paired: runner 'cand' against 'base'"));
  const auto doc = nlohmann::json::parse(RenderGateJson(*r));
  EXPECT_EQ(doc["cells"][0]["latency"]["paired"], true);
  EXPECT_EQ(doc["cells"][0]["latency"]["pairs"], 8);
  EXPECT_EQ(doc["paired"]["baseline_runner"], "base");
  EXPECT_THAT(RenderGateText(*r), HasSubstr("8 pairs"));
  // The same runners named, or --paired: the same verdict.
  Policy named = DefaultPolicy();
  named.baseline_runner = "base";
  named.candidate_runner = "cand";
  named.paired = true;
  auto again = RunGate(*store_, run, run, named);
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again->cells[0].paired);
  EXPECT_EQ(again->cells[0].verdict, Verdict::kRegressed);
  // Unpaired, the drift (0.6x to 1.4x) hides the 10%: not regressed.
  Policy unpaired = named;
  unpaired.paired = false;
  auto apart = RunGate(*store_, run, run, unpaired);
  ASSERT_TRUE(apart) << apart.message();
  ASSERT_EQ(apart->cells.size(), 1u);
  EXPECT_FALSE(apart->cells[0].paired);
  EXPECT_TRUE(apart->paired_baseline_runner.empty());
  EXPECT_EQ(apart->cells[0].verdict, Verdict::kUnknown) << RenderGateText(*apart);
}

TEST_F(GateTest, PairedAlikeRunnersPass) {
  const int64_t run = AddRun(PairedJobs(8, 1.0), kPairedSpec);
  Policy paired = DefaultPolicy();
  paired.paired = true;
  auto r = RunGate(*store_, run, run, paired);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_TRUE(r->cells[0].paired);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kPass) << RenderGateText(*r);
  EXPECT_TRUE(r->passed);
}

TEST_F(GateTest, TooFewPairsAreNamedWithTheirSmallestP) {
  const int64_t run = AddRun(PairedJobs(5, 1.10), kPairedSpec);
  auto r = RunGate(*store_, run, run, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_TRUE(r->cells[0].paired);
  EXPECT_NEAR(r->cells[0].smallest_p, 0.0625, 1e-12);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kUnknown) << RenderGateText(*r);
  bool named = false;
  for (const auto& n : r->notes) {
    named = named || n.find(
                         "1 paired cell(s) have too few pairs for a latency verdict: with 5 "
                         "pairs the smallest p is 0.0625, above alpha 0.05") == 0;
    EXPECT_THAT(n, Not(HasSubstr("trials a side are needed")));
  }
  EXPECT_TRUE(named) << RenderGateText(*r);
  EXPECT_THAT(RenderGateText(*r), HasSubstr("6 pairs are needed (benchmark.repeats >= 6)"));
}

TEST_F(GateTest, PairedErrorsSayWhy) {
  const int64_t paired_run = AddRun(PairedJobs(6, 1.0), kPairedSpec);
  const int64_t plain_run = AddRun(PairedJobs(6, 1.0));  // same jobs, no "pairing" in its spec
  Policy paired = DefaultPolicy();
  paired.paired = true;
  auto r = RunGate(*store_, plain_run, plain_run, paired);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(r.message(), HasSubstr("--paired: run " + std::to_string(plain_run) +
                                     " is not paired (its spec has no \"pairing\")"));
  r = RunGate(*store_, paired_run, plain_run, paired);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("the baseline is the paired run itself"));
  paired.baseline_runner = "cand";
  r = RunGate(*store_, paired_run, paired_run, paired);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("--baseline-runner 'cand' is not run " +
                                     std::to_string(paired_run) + "'s pairing baseline 'base'"));
  // Not asked for: a paired run against another run is judged unpaired.
  auto other = RunGate(*store_, paired_run, plain_run, DefaultPolicy());
  ASSERT_TRUE(other) << other.message();
  for (const auto& c : other->cells) EXPECT_FALSE(c.paired);
}

TEST_F(GateTest, NoiseOnlyIsNotRegressed) {
  // 20 cells with 10% trial-to-trial jitter and equal distributions on both sides.
  std::vector<FakeJob> base_jobs, cand_jobs;
  for (int m = 0; m < 20; ++m) {
    FakeJob j;
    j.model = "m" + std::to_string(m) + ".tflite";
    auto b = Cell(j, 5, 20, 1000 + 100 * m, 0.10, 0.03, 100 + m);
    auto c = Cell(j, 5, 20, 1000 + 100 * m, 0.10, 0.03, 200 + m);
    base_jobs.insert(base_jobs.end(), b.begin(), b.end());
    cand_jobs.insert(cand_jobs.end(), c.begin(), c.end());
  }
  auto base = AddRun(base_jobs);
  auto cand = AddRun(cand_jobs);
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 20u);
  for (const auto& c : r->cells) {
    EXPECT_NE(c.verdict, Verdict::kRegressed) << c.cell.Label() << "\n" << RenderGateText(*r);
    EXPECT_NE(c.verdict, Verdict::kFail) << c.cell.Label();
  }
  EXPECT_TRUE(r->passed);
}

TEST_F(GateTest, Fp16DriftFailsUnderTheDefaultPolicyWithoutABaselineCell) {
  FakeJob cpu;
  cpu.delegate = "cpu";
  FakeJob fp32;
  fp32.outputs = {Output("scores", 4e-5)};
  FakeJob fp16;
  fp16.options = "fp16:true";
  fp16.outputs = {Output("scores", 5e-3)};
  auto base_jobs = Cell(cpu, 1, 10, 3000, 0, 0.01, 5);
  auto more = Cell(fp32, 1, 10, 1000, 0, 0.01, 6);
  base_jobs.insert(base_jobs.end(), more.begin(), more.end());
  auto cand_jobs = Cell(cpu, 1, 10, 3000, 0, 0.01, 7);
  more = Cell(fp16, 1, 10, 900, 0, 0.01, 8);
  cand_jobs.insert(cand_jobs.end(), more.begin(), more.end());
  auto base = AddRun(base_jobs);
  auto cand = AddRun(cand_jobs);
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  EXPECT_FALSE(r->passed);
  const auto* c = Find(*r, "xnnpack", "fp16:true");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  bool named = false;
  for (const auto& f : c->findings) {
    if (f.fails && f.metric == "accuracy.max_abs_error" && f.output == "scores") {
      named = true;
      EXPECT_DOUBLE_EQ(f.value, 5e-3);
      EXPECT_THAT(f.message, HasSubstr("scores"));
    }
  }
  EXPECT_TRUE(named) << RenderGateText(*r);
  const auto* missing = Find(*r, "xnnpack");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->verdict, Verdict::kMissing);
  EXPECT_THAT(RenderGateJunit(*r), HasSubstr("accuracy.max_abs_error: output &apos;scores&apos;"));
  // Judged alone (no baseline), the same cell fails the same way; fp32 passes alone.
  auto alone = RunGate(*store_, cand, 0, DefaultPolicy());
  ASSERT_TRUE(alone) << alone.message();
  EXPECT_FALSE(alone->passed);
  EXPECT_EQ(Find(*alone, "xnnpack", "fp16:true")->verdict, Verdict::kFail);
  auto base_alone = RunGate(*store_, base, 0, DefaultPolicy());
  ASSERT_TRUE(base_alone) << base_alone.message();
  EXPECT_TRUE(base_alone->passed) << RenderGateText(*base_alone);
}

// min_snr_db judges the lowest snr_db over the cell's trials; the default
// policy sets no dB minimum, so the same run passes under it.
TEST_F(GateTest, SnrBelowTheMinimumFailsOnTheWorstTrial) {
  FakeJob job;
  auto jobs = Cell(job, 3, 10, 1000, 0, 0.01, 9);
  for (size_t t = 0; t < jobs.size(); ++t) {
    store::OutputAccuracy o = Output("scores", 1e-5);
    o.snr_db = t == 1 ? 31.5 : 48.0;
    if (t != 2) o.psnr_db = 60.0;  // trial 2: none reported (error 0)
    jobs[t].outputs = {o};
  }
  auto cand = AddRun(jobs);
  auto policy = ParsePolicy(
      R"({"accuracy": [{"output": "scores", "min_snr_db": 40, "min_psnr_db": 55}]})", "p.json");
  ASSERT_TRUE(policy) << policy.message();
  auto r = RunGate(*store_, cand, 0, *policy);
  ASSERT_TRUE(r) << r.message();
  EXPECT_FALSE(r->passed);
  const auto* c = Find(*r, "xnnpack");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kFail);
  bool snr = false, psnr = false;
  for (const auto& f : c->findings) {
    if (f.metric == "accuracy.snr_db") {
      snr = true;
      EXPECT_TRUE(f.fails);
      EXPECT_EQ(f.output, "scores");
      EXPECT_DOUBLE_EQ(f.value, 31.5);
      EXPECT_DOUBLE_EQ(f.threshold, 40);
      EXPECT_THAT(f.message, HasSubstr("snr_db 31.5 dB"));
    }
    if (f.metric == "accuracy.psnr_db") {
      psnr = true;
      EXPECT_FALSE(f.fails);
      EXPECT_DOUBLE_EQ(f.value, 60.0);
    }
  }
  EXPECT_TRUE(snr && psnr) << RenderGateText(*r);
  auto by_default = RunGate(*store_, cand, 0, DefaultPolicy());
  ASSERT_TRUE(by_default) << by_default.message();
  EXPECT_TRUE(by_default->passed) << RenderGateText(*by_default);
  auto bad = ParsePolicy(R"({"accuracy": [{"min_snr_db": "high"}]})", "p.json");
  EXPECT_FALSE(bad);
}

TEST_F(GateTest, TopOneAgreementCountsEveryInputSet) {
  // Two trials over 4 input sets each: 3 of 4 sets agreed in trial 0, all 4
  // in trial 1, so 7 of 8 comparisons (not "1 of 2 trials").
  FakeJob job;
  job.sets = 4;
  auto jobs = Cell(job, 2, 10, 1000, 0, 0.01, 5);
  for (size_t t = 0; t < jobs.size(); ++t) {
    store::OutputAccuracy o = Output("probs", 1e-5);
    o.top1_agree = t == 1;
    o.top1_agreement = t == 1 ? 1.0 : 0.75;
    jobs[t].outputs = {o};
  }
  auto cand = AddRun(jobs);
  auto policy = ParsePolicy(R"({"accuracy": [{"min_top1_agreement": 0.9}]})", "p.json");
  ASSERT_TRUE(policy) << policy.message();
  auto r = RunGate(*store_, cand, 0, *policy);
  ASSERT_TRUE(r) << r.message();
  const auto* c = Find(*r, "xnnpack");
  ASSERT_NE(c, nullptr);
  bool found = false;
  for (const auto& f : c->findings) {
    if (f.metric != "accuracy.top1_agreement") continue;
    found = true;
    EXPECT_DOUBLE_EQ(f.value, 7.0 / 8.0);
    EXPECT_TRUE(f.fails);
    EXPECT_THAT(f.message, HasSubstr("7/8 comparisons"));
  }
  EXPECT_TRUE(found) << RenderGateText(*r);
}

TEST_F(GateTest, FallbackNodeIsAFinding) {
  store::JobPlacement delegated;
  delegated.partitions = 1;
  delegated.nodes = {{0, "CONV_2D", "xnnpack", 0, false, ""},
                     {1, "SOFTMAX", "xnnpack", 0, false, ""}};
  store::JobPlacement fell_back = delegated;
  fell_back.nodes[1] = {1, "SOFTMAX", "cpu", std::nullopt, false, "not supported"};
  FakeJob j;
  j.placement = delegated;
  auto base = AddRun(Cell(j, 1, 10, 1000, 0, 0.01, 9));
  j.placement = fell_back;
  auto cand = AddRun(Cell(j, 1, 10, 1000, 0, 0.01, 10));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kFail);
  ASSERT_FALSE(r->cells[0].findings.empty());
  const auto& f = r->cells[0].findings[0];
  EXPECT_EQ(f.metric, "placement.fallback");
  EXPECT_EQ(f.value, 1);
  EXPECT_THAT(f.message, HasSubstr("node 1 (SOFTMAX)"));
  EXPECT_TRUE(r->cells[0].within_run_only);
  EXPECT_THAT(RenderGateText(*r), HasSubstr("within-run samples only"));
}

TEST_F(GateTest, OkToCrashedFails) {
  FakeJob j;
  auto base = AddRun(Cell(j, 2, 10, 1000, 0, 0.01, 11));
  j.status = "crashed";
  auto cand = AddRun({j});
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kFail);
  ASSERT_FALSE(r->cells[0].findings.empty());
  EXPECT_EQ(r->cells[0].findings[0].metric, "failures.ok_to_failed");
  EXPECT_THAT(r->cells[0].findings[0].message, HasSubstr("crashed"));
  EXPECT_FALSE(r->passed);
}

TEST_F(GateTest, MemoryGrowthFails) {
  FakeJob j;
  auto base = AddRun(Cell(j, 2, 10, 1000, 0, 0.01, 12));
  j.peak_rss = 150 << 20;
  auto cand = AddRun(Cell(j, 2, 10, 1000, 0, 0.01, 13));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->cells[0].verdict, Verdict::kFail);
  EXPECT_EQ(r->cells[0].findings[0].metric, "memory.peak_rss_growth");
}

TEST_F(GateTest, NoComparableCellAndNoSuchRunAreErrors) {
  FakeJob a;
  auto base = AddRun(Cell(a, 1, 10, 1000, 0, 0.01, 14));
  FakeJob b;
  b.model = "other.tflite";
  auto cand = AddRun(Cell(b, 1, 10, 1000, 0, 0.01, 15));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(r.message(), HasSubstr("no comparable cell"));
  auto missing = RunGate(*store_, 99, base, DefaultPolicy());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
}

TEST_F(GateTest, DeviceClassesMatchDevicesAsOneCell) {
  FakeJob j;
  j.device = "adb:ABC123";
  auto base = AddRun(Cell(j, 1, 10, 1000, 0, 0.01, 16));
  j.device = "adb:DEF456";
  auto cand = AddRun(Cell(j, 1, 10, 1000, 0, 0.01, 17));
  auto policy =
      ParsePolicy(R"({"device_classes": {"pixel7": ["adb:ABC*", "adb:DEF*"]}})", "p.json");
  ASSERT_TRUE(policy) << policy.message();
  auto r = RunGate(*store_, cand, base, *policy);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_EQ(r->cells[0].cell.device, "class:pixel7");
  EXPECT_EQ(r->cells[0].verdict, Verdict::kPass) << RenderGateText(*r);
}

// A job that recorded its device's class (a farm job aimed at `any`) is the
// class's cell whatever device ran it, and the policy's classes do not move it.
TEST_F(GateTest, RecordedDeviceClassesMatchAsOneCell) {
  FakeJob j;
  j.device = "tcp://10.0.0.7:7000";
  j.device_class = "pixel7";
  auto base = AddRun(Cell(j, 3, 10, 1000, 0, 0.01, 16));
  j.device = "tcp://10.0.0.8:7000";
  auto cand = AddRun(Cell(j, 3, 10, 1000, 0, 0.01, 17));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u) << RenderGateText(*r);
  EXPECT_EQ(r->cells[0].cell.device, "class:pixel7");
  EXPECT_EQ(r->cells[0].verdict, Verdict::kPass) << RenderGateText(*r);
  auto policy = ParsePolicy(R"({"device_classes": {"lab": ["tcp://*"]}})", "p.json");
  ASSERT_TRUE(policy) << policy.message();
  r = RunGate(*store_, cand, base, *policy);
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u) << RenderGateText(*r);
  EXPECT_EQ(r->cells[0].cell.device, "class:pixel7");
}

TEST_F(GateTest, RerunTrialsJoinTheCandidate) {
  FakeJob j;
  auto base = AddRun(Cell(j, 5, 30, 1000, 0.01, 0.02, 20));
  auto cand = AddRun(Cell(j, 1, 30, 1000, 0.01, 0.02, 21));
  auto rerun = AddRun(Cell(j, 4, 30, 1000, 0.01, 0.02, 22));
  auto first = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(first->cells[0].within_run_only);
  auto r = RunGate(*store_, cand, {rerun}, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_EQ(r->cells[0].candidate_trials, 5u);
  EXPECT_EQ(r->cells[0].candidate_jobs.size(), 5u);
  EXPECT_FALSE(r->cells[0].within_run_only);
  EXPECT_EQ(r->cells[0].verdict, Verdict::kPass) << RenderGateText(*r);
  EXPECT_THAT(RenderGateText(*r), HasSubstr("+ rerun " + std::to_string(rerun)));
  EXPECT_EQ(nlohmann::json::parse(RenderGateJson(*r))["extra_candidate_runs"][0], rerun);
}

TEST(PolicyTest, UnknownKeysAndBadValuesNameTheKeyAndFile) {
  auto r = ParsePolicy(R"({"latency": {"min_efect": 0.1}})", "/tmp/gate.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
  EXPECT_THAT(r.message(), HasSubstr("/tmp/gate.json"));
  EXPECT_THAT(r.message(), HasSubstr("'min_efect'"));
  EXPECT_THAT(r.message(), HasSubstr("latency"));
  auto top = ParsePolicy(R"({"acuracy": []})", "p.json");
  ASSERT_FALSE(top);
  EXPECT_THAT(top.message(), HasSubstr("'acuracy'"));
  auto rule = ParsePolicy(R"({"accuracy": [{"model": "*", "max_abs": 1}]})", "p.json");
  ASSERT_FALSE(rule);
  EXPECT_THAT(rule.message(), HasSubstr("accuracy[0]"));
  auto bad = ParsePolicy(R"({"latency": {"alpha": "x"}})", "p.json");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.message(), HasSubstr("latency.alpha"));
  EXPECT_FALSE(ParsePolicy("{", "p.json"));
  EXPECT_FALSE(LoadPolicy("/nonexistent/policy.json"));
}

// A deep document is a short usage error naming the file, at any depth
// (100,000 levels overflowed the stack; 5,000 quoted the document whole).
TEST(PolicyTest, DeeplyNestedPolicyIsAShortUsageError) {
  for (size_t depth : {100000u, 5000u, 65u}) {
    for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
      std::string text;
      for (size_t i = 0; i < depth; ++i) text += open;
      text += "1";
      for (size_t i = 0; i < depth; ++i) text += close;
      auto r = ParsePolicy(text, "deep.json");
      ASSERT_FALSE(r) << depth;
      EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
      EXPECT_EQ(r.message(), "policy 'deep.json': nested deeper than 64 levels");
    }
  }
  // 64 levels parse (and then fail on what they hold, briefly).
  std::string ok = std::string(64, '[') + std::string(64, ']');
  auto r = ParsePolicy(ok, "deep.json");
  ASSERT_FALSE(r);
  EXPECT_LT(r.message().size(), 300u) << r.message();
}

// A value quoted in a message is cut to its first 80 characters.
TEST(PolicyTest, QuotedValuesAreAbbreviated) {
  const std::string huge(60000, 'x');
  for (const std::string& text :
       {"{\"latency\": {\"alpha\": \"" + huge + "\"}}", "{\"latency\": [\"" + huge + "\"]}",
        "{\"accuracy\": \"" + huge + "\"}", "{\"device_classes\": {\"c\": \"" + huge + "\"}}",
        "{\"" + huge + "\": 1}", "[\"" + huge + "\"]"}) {
    auto r = ParsePolicy(text, "long.json");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::kInvalidInput);
    EXPECT_LT(r.message().size(), 300u) << r.message().substr(0, 300);
    EXPECT_THAT(r.message(), HasSubstr("long.json"));
  }
}

TEST(PolicyTest, FieldsOverrideDefaultsAndRoundTrip) {
  auto r = ParsePolicy(R"({"latency": {"min_effect": 0.1, "seed": 7},
                           "accuracy": [{"model": "face*", "output": "scores",
                                         "max_abs_error": 0.5}],
                           "accuracy_defaults": true,
                           "memory": {"max_arena_growth": null},
                           "failures": {"missing_is_failure": true}})",
                       "p.json");
  ASSERT_TRUE(r) << r.message();
  EXPECT_DOUBLE_EQ(r->latency.min_effect, 0.1);
  EXPECT_EQ(r->latency.seed, 7u);
  EXPECT_DOUBLE_EQ(r->latency.alpha, 0.05);
  ASSERT_EQ(r->accuracy.size(), DefaultPolicy().accuracy.size() + 1);
  EXPECT_EQ(r->accuracy[0].model, "face*");
  EXPECT_FALSE(r->memory.max_arena_growth);
  EXPECT_TRUE(r->failures.missing_is_failure);
  auto again = ParsePolicy(PolicyToJson(*r), "again.json");
  ASSERT_TRUE(again) << again.message();
  EXPECT_EQ(PolicyToJson(*again), PolicyToJson(*r));
  EXPECT_TRUE(GlobMatch("face*.tflite", "face_detection.tflite"));
  EXPECT_FALSE(GlobMatch("face?", "face"));
}

TEST_F(GateTest, RenderersEscapeAndCarryEveryCell) {
  FakeJob j;
  j.model = "a<b>&\"c'.tflite";
  j.outputs = {Output("out<1>", 1e-2)};
  auto base = AddRun(Cell(j, 1, 10, 1000, 0, 0.01, 18));
  auto cand = AddRun(Cell(j, 1, 10, 1000, 0, 0.01, 19));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  const std::string xml = RenderGateJunit(*r);
  EXPECT_THAT(xml, HasSubstr("classname=\"a&lt;b&gt;&amp;&quot;c&apos;.tflite\""));
  EXPECT_THAT(xml, HasSubstr("<failure message=\""));
  EXPECT_EQ(xml.find("a<b>"), std::string::npos);
  // A real XML parser reads it back when python3 is here.
  if (std::system("python3 -c 'import xml.dom.minidom' >/dev/null 2>&1") == 0) {
    const auto path = dir_ / "gate.xml";
    std::ofstream(path) << xml;
    const std::string cmd =
        "python3 -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
        "assert len(d.getElementsByTagName(\"testcase\")) == 1; "
        "assert len(d.getElementsByTagName(\"failure\")) == 1' " +
        path.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << xml;
  }
  auto json = nlohmann::json::parse(RenderGateJson(*r));
  EXPECT_EQ(json["passed"], false);
  EXPECT_EQ(json["cells"][0]["verdict"], "fail");
  EXPECT_EQ(json["cells"][0]["findings"][0]["output"], "out<1>");
  EXPECT_THAT(RenderGateMarkdown(*r), HasSubstr("| **fail** |"));
  EXPECT_THAT(RenderGateText(*r), HasSubstr("FAILED"));
}

// 3 trials a side can never reach p < 0.05: a 2x slow-down stays unknown,
// and the gate says why and how many trials alpha needs.
TEST_F(GateTest, TooFewTrialsForAlphaAreNamed) {
  FakeJob j;
  auto base = AddRun(Cell(j, 3, 30, 1000, 0.01, 0.02, 1));
  auto cand = AddRun(Cell(j, 3, 30, 2000, 0.01, 0.02, 2));
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->cells.size(), 1u);
  EXPECT_EQ(r->cells[0].latency, Verdict::kUnknown);
  EXPECT_NEAR(r->cells[0].smallest_p, 0.1, 1e-9);
  std::string notes;
  for (const auto& n : r->notes) notes += n + "\n";
  EXPECT_THAT(notes, HasSubstr("with 3/3 trials (baseline/candidate) the smallest p is 0.1, "
                               "above alpha 0.05"));
  EXPECT_THAT(notes, HasSubstr("4 trials a side are needed (benchmark.repeats >= 4)"));
  EXPECT_THAT(notes, Not(HasSubstr("set benchmark.repeats >= 2")));
  // 5 a side can: the same slow-down is regressed, with no such note.
  auto base5 = AddRun(Cell(j, 5, 30, 1000, 0.01, 0.02, 3));
  auto cand5 = AddRun(Cell(j, 5, 30, 2000, 0.01, 0.02, 4));
  auto r5 = RunGate(*store_, cand5, base5, DefaultPolicy());
  ASSERT_TRUE(r5) << r5.message();
  EXPECT_EQ(r5->cells[0].latency, Verdict::kRegressed) << RenderGateText(*r5);
  for (const auto& n : r5->notes) EXPECT_THAT(n, Not(HasSubstr("too few trials")));
}

// Repeats 3 with failed trials is not "set repeats >= 2".
TEST_F(GateTest, FailedTrialsAreNotAskedForMoreRepeats) {
  FakeJob j;
  auto base = AddRun(Cell(j, 3, 30, 1000, 0.01, 0.02, 1));
  auto cand_jobs = Cell(j, 3, 30, 1000, 0.01, 0.02, 2);
  cand_jobs[1].status = cand_jobs[2].status = "crashed";
  auto cand = AddRun(cand_jobs);
  auto r = RunGate(*store_, cand, base, DefaultPolicy());
  ASSERT_TRUE(r) << r.message();
  std::string notes;
  for (const auto& n : r->notes) notes += n + "\n";
  EXPECT_THAT(notes, Not(HasSubstr("set benchmark.repeats >= 2")));
  EXPECT_THAT(notes, HasSubstr("kept fewer than 2 usable ones (the others failed or were noisy)"));
}

// The text summary counts the cells that fail the gate apart from the rest:
// "unknown" never reads as a failure.
TEST(GateRenderTest, SummaryCountsUnknownApartFromFail) {
  GateResult r;
  r.candidate_run = 2;
  r.baseline_run = 1;
  for (Verdict v : {Verdict::kFail, Verdict::kFail, Verdict::kUnknown, Verdict::kUnknown,
                    Verdict::kUnknown, Verdict::kPass}) {
    CellResult c;
    c.verdict = v;
    r.cells.push_back(c);
  }
  r.passed = false;
  EXPECT_THAT(
      RenderGateText(r),
      HasSubstr("FAILED: 6 cell(s); 2 fail the gate (2 fail); 4 do not (1 pass, 3 unknown)"));
  r.cells.erase(r.cells.begin(), r.cells.begin() + 2);
  r.passed = true;
  EXPECT_THAT(RenderGateText(r), HasSubstr("PASSED: 4 cell(s); 0 fail the gate; 4 do not"));
}

// Policy "task": top-1 against the same run's cpu cell on the same images.
// 200 images; the candidate loses `lost` of them. A clear loss fails, none
// passes, a loss near the threshold is unknown.
TEST_F(GateTest, TaskTopOneDropAgainstCpuIsJudgedOnItsPairedInterval) {
  auto run_losing = [&](size_t lost) {
    FakeJob cpu{.delegate = "cpu", .samples = {1000, 1010, 990}};
    cpu.ranks.assign(200, 0);
    FakeJob cand{.samples = {500, 505, 495}};
    cand.ranks.assign(200, 0);
    for (size_t i = 0; i < lost; ++i) cand.ranks[i * (200 / std::max<size_t>(lost, 1))] = 7;
    return AddRun({cpu, cand});
  };
  Policy policy = DefaultPolicy();
  policy.task.max_top1_drop_vs_cpu = 2.0;  // points
  auto judge = [&](int64_t run) {
    auto r = RunGate(*store_, run, 0, policy);
    EXPECT_TRUE(r) << r.message();
    return r ? *Find(*r, "xnnpack") : CellResult{};
  };
  auto finding = [](const CellResult& c) -> const Finding* {
    for (const Finding& f : c.findings) {
      if (f.metric == "task.top1_drop_vs_cpu") return &f;
    }
    return nullptr;
  };
  CellResult bad = judge(run_losing(20));  // 10 points
  ASSERT_NE(finding(bad), nullptr);
  EXPECT_TRUE(finding(bad)->fails);
  EXPECT_DOUBLE_EQ(finding(bad)->value, 10);
  EXPECT_EQ(bad.verdict, Verdict::kFail);
  EXPECT_THAT(finding(bad)->message, HasSubstr("top-1 dropped 10 points against the cpu"));
  CellResult same = judge(run_losing(0));
  ASSERT_NE(finding(same), nullptr);
  EXPECT_FALSE(finding(same)->fails);
  EXPECT_EQ(same.verdict, Verdict::kPass);
  CellResult near = judge(run_losing(4));  // 2 points, on the threshold
  ASSERT_NE(finding(near), nullptr);
  EXPECT_FALSE(finding(near)->fails);
  EXPECT_TRUE(near.task_unknown);
  EXPECT_EQ(near.verdict, Verdict::kUnknown);
  // Without the policy key nothing is judged.
  policy.task.max_top1_drop_vs_cpu.reset();
  EXPECT_EQ(finding(judge(run_losing(20))), nullptr);
}

TEST(GatePolicyTest, TaskKeysParseAndBadOnesAreNamed) {
  auto p =
      ParsePolicy(R"({"task": {"max_top1_drop": 1.5, "max_top5_drop_vs_cpu": 0.5}})", "p.json");
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->task.max_top1_drop, 1.5);
  EXPECT_EQ(p->task.max_top5_drop_vs_cpu, 0.5);
  EXPECT_FALSE(p->task.max_top1_drop_vs_cpu.has_value());
  EXPECT_THAT(PolicyToJson(*p), HasSubstr("\"max_top1_drop\": 1.5"));
  auto bad = ParsePolicy(R"({"task": {"max_top1_drop": 120}})", "p.json");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.message(), HasSubstr("max_top1_drop"));
  bad = ParsePolicy(R"({"task": {"max_top10_drop": 1}})", "p.json");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.message(), HasSubstr("max_top10_drop"));
  p = ParsePolicy(R"({"task": {"max_map_drop": 1, "max_miou_drop_vs_cpu": 0.5}})", "p.json");
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(p->task.max_map_drop, 1);
  EXPECT_EQ(p->task.max_miou_drop_vs_cpu, 0.5);
  EXPECT_THAT(PolicyToJson(*p), HasSubstr("\"max_miou_drop_vs_cpu\": 0.5"));
  bad = ParsePolicy(R"({"task": {"max_miou_drop": -1}})", "p.json");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.message(), HasSubstr("max_miou_drop"));
}

// Segmentation (2 classes, 4 pixels an image) whose candidate predicts
// background on `lost` of 100 images; detection (one box an image) whose
// candidate misses `lost` of 50 boxes.
store::TaskAccuracy SegmentationTask(size_t lost) {
  eval::SegmentationCounts counts(2);
  for (size_t i = 0; i < 100; ++i) {
    counts.AddImage({0, 0, 1, 1},
                    i < lost ? std::vector<int32_t>{0, 0, 0, 0} : std::vector<int32_t>{0, 0, 1, 1});
  }
  return {"segmentation", "seg@000000000000", 100, {}, counts.ToJson()};
}
store::TaskAccuracy DetectionTask(size_t lost) {
  eval::DetectionSet set;
  set.images = 50;
  for (size_t i = 0; i < 50; ++i) {
    set.truth.push_back({i, 1, {0, 0, 10, 10}});
    set.detections.push_back({i, 1, i < lost ? eval::Box{50, 50, 60, 60} : eval::Box{0, 0, 10, 10},
                              0.5 + 0.001 * static_cast<double>(i)});
  }
  return {"detection", "coco@000000000000", 50, {}, eval::DetectionJson(set)};
}

// Policy "task" for mAP and mIoU: each key judges the cells of its task
// only; a clear drop against cpu fails, none passes.
TEST_F(GateTest, TaskMapAndMiouDropsAreJudgedOnTheirOwnTasks) {
  Policy policy = DefaultPolicy();
  policy.task.max_top1_drop_vs_cpu = 2.0;
  policy.task.max_map_drop_vs_cpu = 2.0;
  policy.task.max_miou_drop_vs_cpu = 2.0;
  auto judge = [&](const store::TaskAccuracy& cpu_task, const store::TaskAccuracy& cand_task) {
    FakeJob cpu{.delegate = "cpu", .samples = {1000, 1010, 990}};
    cpu.task = cpu_task;
    FakeJob cand{.samples = {500, 505, 495}};
    cand.task = cand_task;
    auto r = RunGate(*store_, AddRun({cpu, cand}), 0, policy);
    EXPECT_TRUE(r) << r.message();
    return r ? *Find(*r, "xnnpack") : CellResult{};
  };
  auto metrics = [](const CellResult& c) {
    std::map<std::string, const Finding*> out;
    for (const Finding& f : c.findings) {
      if (f.metric.rfind("task.", 0) == 0) out[f.metric] = &f;
    }
    return out;
  };
  CellResult seg = judge(SegmentationTask(0), SegmentationTask(20));
  auto found = metrics(seg);
  ASSERT_EQ(found.size(), 1u) << (found.empty() ? "" : found.begin()->first);
  ASSERT_TRUE(found.count("task.miou_drop_vs_cpu"));
  // mIoU 1 -> (200/240 + 160/200) / 2.
  EXPECT_NEAR(found["task.miou_drop_vs_cpu"]->value, 100 * (1 - (200.0 / 240 + 0.8) / 2), 1e-9);
  EXPECT_TRUE(found["task.miou_drop_vs_cpu"]->fails);
  EXPECT_THAT(found["task.miou_drop_vs_cpu"]->message, HasSubstr("mIoU dropped"));
  EXPECT_EQ(seg.verdict, Verdict::kFail);
  seg = judge(SegmentationTask(0), SegmentationTask(0));
  found = metrics(seg);
  ASSERT_TRUE(found.count("task.miou_drop_vs_cpu"));
  EXPECT_FALSE(found["task.miou_drop_vs_cpu"]->fails);
  EXPECT_EQ(seg.verdict, Verdict::kPass);

  CellResult det = judge(DetectionTask(0), DetectionTask(10));
  found = metrics(det);
  ASSERT_EQ(found.size(), 1u);
  ASSERT_TRUE(found.count("task.map_drop_vs_cpu"));
  EXPECT_GT(found["task.map_drop_vs_cpu"]->value, 10);
  EXPECT_TRUE(found["task.map_drop_vs_cpu"]->fails);
  EXPECT_THAT(found["task.map_drop_vs_cpu"]->message, HasSubstr("mAP dropped"));
  det = judge(DetectionTask(0), DetectionTask(0));
  found = metrics(det);
  ASSERT_TRUE(found.count("task.map_drop_vs_cpu"));
  EXPECT_DOUBLE_EQ(found["task.map_drop_vs_cpu"]->value, 0);
  EXPECT_FALSE(found["task.map_drop_vs_cpu"]->fails);
}

// A gate that passes only because no cell could be judged is inconclusive
// (the dashboard's compare headline and the HTML banner are not green).
TEST(GateRenderTest, OutcomeIsInconclusiveWhenACellIsUnknown) {
  GateResult r;
  for (int i = 0; i < 3; ++i) {
    CellResult c;
    c.verdict = Verdict::kUnknown;
    r.cells.push_back(c);
  }
  r.passed = true;
  EXPECT_EQ(OutcomeOf(r), GateOutcome::kInconclusive);
  EXPECT_STREQ(OutcomeName(OutcomeOf(r)), "inconclusive");
  EXPECT_EQ(GateCounts(r), "3 cell(s); 0 fail the gate; 3 do not (3 unknown)");
  for (CellResult& c : r.cells) c.verdict = Verdict::kPass;
  EXPECT_EQ(OutcomeOf(r), GateOutcome::kPassed);
  r.cells[0].verdict = Verdict::kMissing;
  EXPECT_EQ(OutcomeOf(r), GateOutcome::kInconclusive);
  r.cells[1].verdict = Verdict::kFail;
  r.passed = false;
  EXPECT_EQ(OutcomeOf(r), GateOutcome::kFailed);
}

}  // namespace
}  // namespace dfarm::gate
