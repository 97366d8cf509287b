#include "harness/spec/matrix.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "harness/test_util.h"

namespace dfarm::harness {
namespace {

SweepSpec TwoByTwoByTwo() {
  SweepSpec s;
  s.name = "m";
  s.models = {{"/m/a.tflite", "a.tflite"}, {"/m/b.tflite", "b.tflite"}};
  s.delegates = {{"cpu", {}}, {"xnnpack", {{"threads", "2"}}}};
  s.devices = {"local", "tcp://127.0.0.1:7000"};
  return s;
}

TEST(MatrixTest, ExpandsEveryCellInOrder) {
  auto jobs = ExpandMatrix(TwoByTwoByTwo(), {"aaaa", "bbbb"});
  ASSERT_EQ(jobs.size(), 8u);
  EXPECT_EQ(jobs[0].device, "local");
  EXPECT_EQ(jobs[0].model.file, "a.tflite");
  EXPECT_EQ(jobs[0].delegate.name, "cpu");
  EXPECT_EQ(jobs[1].delegate.name, "xnnpack");
  EXPECT_EQ(jobs[2].model.file, "b.tflite");
  EXPECT_EQ(jobs[2].model_sha256, "bbbb");
  EXPECT_EQ(jobs[4].device, "tcp://127.0.0.1:7000");
  std::set<std::string> keys;
  for (const auto& j : jobs) {
    EXPECT_EQ(j.job_key.size(), 16u);
    keys.insert(j.job_key);
  }
  EXPECT_EQ(keys.size(), 8u);
}

// The size of the matrix comes from its axes, without expanding it.
TEST(MatrixTest, CountsJobsFromTheAxes) {
  SweepSpec spec = TwoByTwoByTwo();
  spec.num_threads = {1, 2, 4};
  spec.benchmark.repeats = 5;
  auto axes = MatrixAxes(spec, spec.devices.size(), 3);
  auto n = CountMatrixJobs(axes);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(*n, 2u * 3 * 2 * 2 * 3 * 5);
  EXPECT_EQ(MatrixAxesText(axes),
            "devices 2 x runners 3 x models 2 x delegates 2 x num_threads 3 x repeats 5");
  EXPECT_EQ(ExpandMatrix(spec, {"aaaa", "bbbb"}).size(), 2u * 2 * 2 * 3 * 5);  // one runner
  auto over = CountMatrixJobs(axes, 359);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().kind, ErrorKind::kInvalidInput);
  EXPECT_EQ(over.message(),
            "the matrix has 360 jobs (devices 2 x runners 3 x models 2 x delegates 2 x "
            "num_threads 3 x repeats 5), more than 359 per sweep; shorten an axis or split the "
            "sweep");
  EXPECT_TRUE(CountMatrixJobs(axes, 360).ok());
}

// A product past 2^64 is refused, not wrapped around to a small count.
TEST(MatrixTest, CountPastTwoToTheSixtyFourIsRefused) {
  const uint64_t big = uint64_t{1} << 32;
  auto wrapped = CountMatrixJobs({{"devices", big}, {"models", big}, {"repeats", 1}}, UINT64_MAX);
  ASSERT_FALSE(wrapped.ok());
  EXPECT_EQ(wrapped.message(),
            "the matrix has at least 2^64 jobs (devices 4294967296 x models 4294967296 x "
            "repeats 1), more than 18446744073709551615 per sweep; shorten an axis or "
            "split the sweep");
  auto just = CountMatrixJobs({{"devices", big - 1}, {"models", big + 1}}, UINT64_MAX);
  ASSERT_TRUE(just.ok()) << just.message();
  EXPECT_EQ(*just, UINT64_MAX);
  auto zero = CountMatrixJobs({{"devices", 0}, {"models", UINT64_MAX}, {"repeats", 2}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, 0u);
}

TEST(MatrixTest, KeysAreDeterministic) {
  auto a = ExpandMatrix(TwoByTwoByTwo(), {"aaaa", "bbbb"});
  auto b = ExpandMatrix(TwoByTwoByTwo(), {"aaaa", "bbbb"});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].job_key, b[i].job_key);

  // Pinned: a key must not change between builds, or reruns stop being comparable.
  EXPECT_EQ(JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{}), "d0a0f2560355c57d");
  const std::string base = JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{});
  BenchmarkSpec more_runs;
  more_runs.num_runs = 51;
  BenchmarkSpec longer_timeout;
  longer_timeout.timeout_s = 999;
  EXPECT_NE(JobKey("aaab", {"cpu", {}}, "local", BenchmarkSpec{}), base);
  EXPECT_NE(JobKey("aaaa", {"cpu", {{"k", "v"}}}, "local", BenchmarkSpec{}), base);
  EXPECT_NE(JobKey("aaaa", {"cpu", {}}, "tcp://h:1", BenchmarkSpec{}), base);
  EXPECT_NE(JobKey("aaaa", {"cpu", {}}, "local", more_runs), base);
  EXPECT_EQ(JobKey("aaaa", {"cpu", {}}, "local", longer_timeout), base);
  // The model's content, not its path, goes into the key.
  SweepSpec moved = TwoByTwoByTwo();
  moved.models[0].path = "/elsewhere/a.tflite";
  EXPECT_EQ(ExpandMatrix(moved, {"aaaa", "bbbb"})[0].job_key, a[0].job_key);
}

TEST(MatrixTest, Sha256) {
  EXPECT_EQ(Sha256OfBytes("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir dir;
  auto path = dir.Write("f", "abc");
  auto h = Sha256OfFile(path);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, Sha256OfBytes("abc"));
  EXPECT_FALSE(Sha256OfFile(path + ".missing").ok());
}

TEST(MatrixTest, ThreadsAxis) {
  SweepSpec s = TwoByTwoByTwo();
  s.num_threads = {1, 2, 4};
  auto jobs = ExpandMatrix(s, {"aaaa", "bbbb"});
  ASSERT_EQ(jobs.size(), 24u);
  EXPECT_EQ(jobs[0].benchmark.num_threads, 1u);
  EXPECT_EQ(jobs[1].benchmark.num_threads, 2u);
  EXPECT_EQ(jobs[2].benchmark.num_threads, 4u);
  EXPECT_EQ(jobs[3].delegate.name, "xnnpack");
  EXPECT_NE(jobs[0].job_key, jobs[1].job_key);
}

TEST(MatrixTest, RunnerAxis) {
  SweepSpec s = TwoByTwoByTwo();
  const std::string x86a(64, 'a'), arm_a(64, 'b'), x86b(64, 'c');
  DeviceRunnerBuilds builds;
  builds["local"] = {{"A", "x86_64", "/b/x86/dfarm-runner", x86a},
                     {"B", "x86_64", "/b2/x86/dfarm-runner", x86b}};
  builds["qemu-arm64"] = {{"A", "arm64-v8a", "/b/arm64/dfarm-runner", arm_a},
                          {"B", "arm64-v8a", "/b2/arm64/dfarm-runner", arm_a}};
  std::vector<std::string> devices = {"local", "qemu-arm64"};
  auto jobs = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, devices);
  // 2 devices x 2 runners x 2 models x 2 delegates.
  ASSERT_EQ(jobs.size(), 16u);
  EXPECT_EQ(jobs[0].device, "local");
  EXPECT_EQ(jobs[0].runner, "A");
  EXPECT_EQ(jobs[0].runner_path, "/b/x86/dfarm-runner");
  EXPECT_EQ(jobs[0].runner_sha256, x86a);
  EXPECT_EQ(jobs[3].runner, "A");
  EXPECT_EQ(jobs[4].runner, "B");
  EXPECT_EQ(jobs[4].runner_sha256, x86b);
  EXPECT_EQ(jobs[8].device, "qemu-arm64");
  EXPECT_EQ(jobs[8].runner_path, "/b/arm64/dfarm-runner");
  EXPECT_EQ(jobs[8].runner_sha256, arm_a);
  std::set<std::string> keys;
  for (const auto& j : jobs) keys.insert(j.job_key);
  EXPECT_EQ(keys.size(), 16u);  // runner B with the same arm64 bytes still differs by name

  // The key of a runner job, computed by hand from the key text format.
  std::string text = "dfarm-job-v1\n4:aaaa\n3:cpu\n0:\n5:local\n1:1\n2:50\n1:1\n1:A\n64:" + x86a;
  EXPECT_EQ(jobs[0].job_key, Sha256OfBytes(text).substr(0, 16));
  // Without runner fields the key is the pre-runner one.
  EXPECT_EQ(JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{}, "", "", ""), "d0a0f2560355c57d");

  // Deterministic across two expansions.
  auto again = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, devices);
  ASSERT_EQ(again.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(again[i].job_key, jobs[i].job_key);

  // A device without builds gets one job set without runner fields.
  auto plain = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, {"tcp://127.0.0.1:7000"});
  ASSERT_EQ(plain.size(), 4u);
  EXPECT_EQ(plain[0].runner, "");
  EXPECT_EQ(plain[0].job_key, ExpandMatrix(s, {"aaaa", "bbbb"})[4].job_key);
}

// A paired spec: per device, every cell's trial t is a pair of jobs (the
// baseline's and the candidate's) side by side; each cell's trials 2k and
// 2k+1 run A B / B A or B A / A B (ABBA blocks) as the seed says; pairs are
// numbered in order; the order changes with the seed.
TEST(MatrixTest, PairingInterleavesRunnersInSeededAbbaBlocks) {
  SweepSpec s = TwoByTwoByTwo();  // 2 models x 2 delegates
  s.runners.resize(2);
  s.runners[0].name = "base";
  s.runners[1].name = "cand";
  s.pairing.baseline_runner = "base";
  s.benchmark.repeats = 6;
  DeviceRunnerBuilds builds;
  for (const char* d : {"local", "local:two"}) {
    builds[d] = {{"base", "x86_64", "/b/base", std::string(64, 'a')},
                 {"cand", "x86_64", "/b/cand", std::string(64, 'c')}};
  }
  const std::vector<std::string> devices = {"local", "local:two"};
  const auto jobs = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, devices);
  // 2 devices x 2 runners x 4 cells x 6 trials.
  ASSERT_EQ(jobs.size(), 96u);
  std::map<int64_t, std::vector<const SweepJob*>> by_pair;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_GT(jobs[i].pair, 0) << i;
    by_pair[jobs[i].pair].push_back(&jobs[i]);
    if (i % 2 == 1) {  // each pair is two neighbours in the plan, so in a device's queue
      EXPECT_EQ(jobs[i].pair, jobs[i - 1].pair) << i;
    }
    if (i >= 2 && i % 2 == 0) {
      EXPECT_EQ(jobs[i].pair, jobs[i - 1].pair + 1) << i;  // numbered in order
    }
  }
  ASSERT_EQ(by_pair.size(), 48u);
  // cell (device, model, delegate) -> per trial: whether the baseline ran first
  std::map<std::string, std::map<uint32_t, bool>> baseline_first;
  for (const auto& [pair, two] : by_pair) {
    ASSERT_EQ(two.size(), 2u);
    const SweepJob& first = *two[0];
    const SweepJob& second = *two[1];
    EXPECT_NE(first.runner, second.runner) << pair;
    EXPECT_EQ(first.device, second.device) << pair;
    EXPECT_EQ(first.trial, second.trial) << pair;
    EXPECT_EQ(first.model_sha256, second.model_sha256) << pair;
    EXPECT_EQ(first.delegate.name, second.delegate.name) << pair;
    EXPECT_NE(first.job_key, second.job_key) << pair;
    const std::string cell = first.device + " " + first.model_sha256 + " " + first.delegate.name;
    EXPECT_EQ(baseline_first[cell].count(first.trial), 0u) << "one pair per trial: " << cell;
    baseline_first[cell][first.trial] = first.runner == "base";
    EXPECT_EQ(first.runner_path, first.runner == "base" ? "/b/base" : "/b/cand");
  }
  ASSERT_EQ(baseline_first.size(), 8u);
  size_t abba = 0, baab = 0;
  for (const auto& [cell, trials] : baseline_first) {
    ASSERT_EQ(trials.size(), 6u) << cell;
    for (uint32_t t = 0; t < 6; t += 2) {
      EXPECT_NE(trials.at(t), trials.at(t + 1)) << cell << " block " << t / 2;  // ABBA or BAAB
      (trials.at(t) ? abba : baab) += 1;
    }
  }
  EXPECT_GT(abba, 0u);  // the seed picks both orders among 24 blocks
  EXPECT_GT(baab, 0u);
  // Deterministic; another seed, another order.
  const auto again = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, devices);
  ASSERT_EQ(again.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(again[i].job_key, jobs[i].job_key);
  s.benchmark.order_seed = 2;
  const auto reseeded = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, devices);
  ASSERT_EQ(reseeded.size(), jobs.size());
  size_t moved = 0;
  for (size_t i = 0; i < jobs.size(); ++i) moved += reseeded[i].job_key != jobs[i].job_key;
  EXPECT_GT(moved, 0u);
  // The coin itself: the same for the same arguments, both faces over blocks.
  std::set<bool> faces;
  for (uint32_t block = 0; block < 16; ++block) faces.insert(PairRunsBaselineFirst(1, 0, block));
  EXPECT_EQ(faces.size(), 2u);
  EXPECT_EQ(PairRunsBaselineFirst(7, 3, 2), PairRunsBaselineFirst(7, 3, 2));
}

// One repeat still pairs: each cell's one trial is a pair in a seeded order.
TEST(MatrixTest, PairingWithOneRepeat) {
  SweepSpec s = TwoByTwoByTwo();
  s.devices = {"local"};
  s.runners.resize(2);
  s.runners[0].name = "cand";
  s.runners[1].name = "base";
  s.pairing.baseline_runner = "base";
  DeviceRunnerBuilds builds;
  builds["local"] = {{"cand", "x86_64", "/b/cand", std::string(64, 'c')},
                     {"base", "x86_64", "/b/base", std::string(64, 'a')}};
  const auto jobs = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds);
  ASSERT_EQ(jobs.size(), 8u);
  for (size_t i = 0; i < jobs.size(); i += 2) {
    EXPECT_EQ(jobs[i].pair, static_cast<int64_t>(i / 2 + 1));
    EXPECT_EQ(jobs[i + 1].pair, jobs[i].pair);
    EXPECT_NE(jobs[i].runner, jobs[i + 1].runner);
    EXPECT_EQ(jobs[i].model_sha256, jobs[i + 1].model_sha256);
    EXPECT_EQ(jobs[i].delegate.name, jobs[i + 1].delegate.name);
  }
}

// A planned job carries everything its key covers: JobKeyOf gives back the
// key the expansion gave it, and a job moved to another device (what
// failover does) gets that device's key.
TEST(MatrixTest, JobKeyOfAPlannedJob) {
  SweepSpec s = TwoByTwoByTwo();
  s.num_threads = {1, 4};
  DeviceRunnerBuilds builds;
  builds["local"] = {{"A", "x86_64", "/b/x86/dfarm-runner", std::string(64, 'a')}};
  auto jobs = ExpandMatrix(s, {"aaaa", "bbbb"}, {}, builds, {"local", "tcp://127.0.0.1:7000"});
  ASSERT_EQ(jobs.size(), 16u);
  for (const SweepJob& j : jobs) {
    EXPECT_EQ(j.id, 0);
    EXPECT_EQ(JobKeyOf(j), j.job_key);
  }
  SweepJob moved = jobs[0];
  moved.device = "tcp://127.0.0.1:7000";
  EXPECT_EQ(JobKeyOf(moved), JobKey("aaaa", {"cpu", {}}, moved.device, moved.benchmark, "", "A",
                                    std::string(64, 'a')));
  EXPECT_NE(JobKeyOf(moved), jobs[0].job_key);
}

// benchmark.repeats: each cell gives N jobs, trials 0..N-1, in rounds (every
// cell's trial t before any trial t+1), each round shuffled by order_seed.
TEST(MatrixTest, RepeatsGiveTrialsInShuffledRounds) {
  SweepSpec one = TwoByTwoByTwo();
  one.num_threads = {1, 2};
  const auto grouped = ExpandMatrix(one, {"aaaa", "bbbb"});
  ASSERT_EQ(grouped.size(), 16u);
  SweepSpec three = one;
  three.benchmark.repeats = 3;
  const auto jobs = ExpandMatrix(three, {"aaaa", "bbbb"});
  ASSERT_EQ(jobs.size(), 48u);

  std::map<std::string, std::vector<uint32_t>> trials_by_cell;  // trial-0 key -> trials
  std::set<std::string> keys;
  std::set<std::string> trial0_keys;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SweepJob& j = jobs[i];
    EXPECT_EQ(j.trial, i / grouped.size()) << "job " << i << ": rounds in order";
    EXPECT_EQ(JobKeyOf(j), j.job_key);
    keys.insert(j.job_key);
    SweepJob cell = j;
    cell.trial = 0;
    trials_by_cell[JobKeyOf(cell)].push_back(j.trial);
    if (j.trial == 0) trial0_keys.insert(j.job_key);
  }
  EXPECT_EQ(keys.size(), 48u) << "every trial has its own key";
  ASSERT_EQ(trials_by_cell.size(), 16u);
  for (const auto& [key, trials] : trials_by_cell) {
    EXPECT_EQ(trials, (std::vector<uint32_t>{0, 1, 2})) << key;
  }
  // Trial 0 keeps the key of a run without repeats (old runs stay comparable).
  std::set<std::string> plain_keys;
  for (const SweepJob& j : grouped) plain_keys.insert(j.job_key);
  EXPECT_EQ(trial0_keys, plain_keys);
  // A trial > 0 key is pinned too: it must not change between builds.
  EXPECT_EQ(JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{}, "", "", "", 0),
            "d0a0f2560355c57d");
  EXPECT_NE(JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{}, "", "", "", 1),
            "d0a0f2560355c57d");
  EXPECT_NE(JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{}, "", "", "", 1),
            JobKey("aaaa", {"cpu", {}}, "local", BenchmarkSpec{}, "", "", "", 2));

  // Deterministic for a seed, different from the grouped order, and another
  // seed gives another order.
  const auto again = ExpandMatrix(three, {"aaaa", "bbbb"});
  std::vector<std::string> order, order_again, round0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    order.push_back(jobs[i].job_key);
    order_again.push_back(again[i].job_key);
    if (i < grouped.size()) round0.push_back(jobs[i].job_key);
  }
  EXPECT_EQ(order, order_again);
  std::vector<std::string> grouped_keys;
  for (const SweepJob& j : grouped) grouped_keys.push_back(j.job_key);
  EXPECT_NE(round0, grouped_keys);
  SweepSpec reseeded = three;
  reseeded.benchmark.order_seed = 7;
  const auto other = ExpandMatrix(reseeded, {"aaaa", "bbbb"});
  std::vector<std::string> other_order;
  for (const SweepJob& j : other) other_order.push_back(j.job_key);
  EXPECT_NE(other_order, order);
  // Rounds are shuffled independently.
  EXPECT_NE(ShuffledTrialOrder(16, 1, 0), ShuffledTrialOrder(16, 1, 1));
}

// repeats 1 keeps the grouped order exactly, whatever the seed.
TEST(MatrixTest, OneRepeatKeepsTheGroupedOrder) {
  SweepSpec s = TwoByTwoByTwo();
  const auto plain = ExpandMatrix(s, {"aaaa", "bbbb"});
  s.benchmark.order_seed = 99;
  const auto seeded = ExpandMatrix(s, {"aaaa", "bbbb"});
  ASSERT_EQ(plain.size(), seeded.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].job_key, seeded[i].job_key);
    EXPECT_EQ(seeded[i].trial, 0u);
  }
}

TEST(MatrixTest, ShuffledTrialOrderIsAPermutation) {
  for (size_t n : {0u, 1u, 2u, 7u, 100u}) {
    auto order = ShuffledTrialOrder(n, 3, 2);
    ASSERT_EQ(order.size(), n);
    std::set<size_t> seen(order.begin(), order.end());
    EXPECT_EQ(seen.size(), n);
    if (n > 0) {
      EXPECT_EQ(*seen.rbegin(), n - 1);
    }
  }
}

TEST(MatrixTest, InputSetsAreKeyedOnlyWhenThere) {
  SweepJob job;
  job.model_sha256 = std::string(64, 'a');
  job.delegate = DelegateSpec{"cpu", {}};
  job.device = "local";
  const std::string plain = JobKeyOf(job);
  EXPECT_EQ(plain, JobKey(job.model_sha256, job.delegate, job.device, job.benchmark));
  job.input_set_sha256s = {std::string(64, '1')};
  const std::string one = JobKeyOf(job);
  EXPECT_NE(one, plain);
  EXPECT_EQ(one.size(), plain.size());
  job.input_set_sha256s.push_back(std::string(64, '2'));
  EXPECT_NE(JobKeyOf(job), one);
  std::swap(job.input_set_sha256s[0], job.input_set_sha256s[1]);  // order matters
  const std::string swapped = JobKeyOf(job);
  std::swap(job.input_set_sha256s[0], job.input_set_sha256s[1]);
  EXPECT_NE(JobKeyOf(job), swapped);
}

}  // namespace
}  // namespace dfarm::harness
