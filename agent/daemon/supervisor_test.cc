#include "agent/daemon/supervisor.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/protocol/input_set.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using testing::HashOf;
using ::testing::HasSubstr;
using testing::TempDir;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ArtifactStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
    model_sha_ = Put("not really a model");
  }

  std::string Put(const std::string& bytes) {
    std::string sha = HashOf(bytes);
    EXPECT_TRUE(store_->Put(sha, bytes).ok());
    return sha;
  }

  JobSpec Job(const std::string& runner_script, uint32_t timeout_ms = 10000) {
    JobSpec job;
    job.runner_sha256 = Put(runner_script);
    job.model_sha256 = model_sha_;
    job.num_runs = 3;
    job.timeout_ms = timeout_ms;
    return job;
  }

  TempDir dir_;
  std::unique_ptr<ArtifactStore> store_;
  std::string model_sha_;
};

TEST_F(SupervisorTest, OkRunner) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.delegate = "xnnpack";
  job.delegate_options = "a:1;b:2";
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.signal, 0);
  EXPECT_THAT(r.runner_json, HasSubstr("\"mean_us\":12.5"));
  EXPECT_THAT(r.stderr_tail,
              HasSubstr("args: --model " + *store_->PathOf(model_sha_) +
                        " --delegate xnnpack --delegate-options a:1;b:2 --num-threads 1"
                        " --warmup-runs 1 --num-runs 3 --json"));
  EXPECT_GT(r.wall_ms, 0);
}

// Each job runs in <store>/work, emptied before it starts, so a
// relative path a runner writes (a delegate's serialization_dir) is fresh.
TEST_F(SupervisorTest, EachJobStartsInAnEmptyWorkingDirectory) {
  Supervisor sup(store_.get());
  const std::string script =
      "#!/bin/sh\necho \"cwd=$(pwd) files=$(ls -A | wc -l)\" >&2\nmkdir cache && touch "
      "cache/programs\n" +
      std::string(testing::kOkRunner).substr(std::string("#!/bin/sh\n").size());
  for (int k = 0; k < 2; ++k) {
    JobResult r = sup.Run(Job(script));
    EXPECT_EQ(r.status, "ok") << r.error << r.stderr_tail;
    EXPECT_THAT(r.stderr_tail, HasSubstr("cwd=" + store_->root() + "/work files=0"));
  }
}

TEST_F(SupervisorTest, SegfaultIsCrashedAndNextJobRuns) {
  Supervisor sup(store_.get());
  JobResult r = sup.Run(Job("#!/bin/sh\necho 'about to die' >&2\nkill -SEGV $$\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_THAT(r.error, HasSubstr("signal 11 (SIGSEGV)"));
  EXPECT_THAT(r.stderr_tail, HasSubstr("about to die"));

  EXPECT_EQ(sup.Run(Job(testing::kOkRunner)).status, "ok");
}

TEST_F(SupervisorTest, TimeoutKillsTheWholeGroup) {
  Supervisor sup(store_.get());
  auto start = std::chrono::steady_clock::now();
  JobResult r = sup.Run(Job("#!/bin/sh\necho started >&2\nsleep 30\necho never\n", 300));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, "timeout");
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_THAT(r.error, HasSubstr("timeout of 300 ms"));
  EXPECT_THAT(r.stderr_tail, HasSubstr("started"));
  // The sleeping grandchild (30 s) did not hold the pipes; a margin for a busy machine.
  EXPECT_LT(took, std::chrono::seconds(20));

  EXPECT_EQ(sup.Run(Job(testing::kOkRunner)).status, "ok");
}

TEST_F(SupervisorTest, ExitZeroWithoutSuccessIsCrashed) {
  Supervisor sup(store_.get());
  JobResult r = sup.Run(Job("#!/bin/sh\nexit 0\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.error, "runner exited 0 without reporting success");
}

// The agent is the one classifier: an "ok" the runner cannot back with a
// readable document and metrics is `crashed` here, with the messages the
// harness used to give.
TEST_F(SupervisorTest, OkWithoutMetricsIsCrashed) {
  Supervisor sup(store_.get());
  JobResult r = sup.Run(Job("#!/bin/sh\necho '{\"status\":\"ok\"}'\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.error, "runner reported ok without metrics");
  EXPECT_EQ(r.runner_json, "{\"status\":\"ok\"}\n");
}

TEST_F(SupervisorTest, OkWithAnUnreadableDocumentIsCrashed) {
  Supervisor sup(store_.get());
  JobResult r =
      sup.Run(Job("#!/bin/sh\necho '{\"status\":\"ok\",\"metrics\":{\"mean_us\":\"fast\"}}'\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.error, ::testing::StartsWith("runner reported ok but its JSON is unreadable: "));
  EXPECT_THAT(r.error, HasSubstr("runner JSON"));  // the codec's message
}

TEST_F(SupervisorTest, ModelErrorUsesTheJsonError) {
  Supervisor sup(store_.get());
  JobResult r =
      sup.Run(Job("#!/bin/sh\necho '{\"status\":\"model_error\",\"error\":\"failed to load model: "
                  "bad magic\"}'\n"
                  "exit 1\n"));
  EXPECT_EQ(r.status, "model_error");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.error, "failed to load model: bad magic");
}

TEST_F(SupervisorTest, DelegateErrorAndUnsupportedFallBackToStderr) {
  Supervisor sup(store_.get());
  JobResult r = sup.Run(Job("#!/bin/sh\necho 'xnnpack: prepare failed' >&2\nexit 3\n"));
  EXPECT_EQ(r.status, "delegate_error");
  EXPECT_EQ(r.error, "runner exited with code 3: xnnpack: prepare failed");
  r = sup.Run(
      Job("#!/bin/sh\necho '{\"status\":\"unsupported\",\"error\":\"op CUSTOM\"}'\nexit 4\n"));
  EXPECT_EQ(r.status, "unsupported");
  EXPECT_EQ(r.error, "op CUSTOM");
}

TEST_F(SupervisorTest, MissingArtifactsAreInfra) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.model_sha256 = std::string(64, '0');
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("is not in the store"));

  job = Job(testing::kOkRunner);
  job.runner_sha256 = "../../bin/sh";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("invalid artifact name"));
}

TEST_F(SupervisorTest, UnexecutableRunnerIsInfra) {
  Supervisor sup(store_.get());
  JobResult r = sup.Run(Job("not a script and not an ELF"));
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("cannot start runner"));
}

TEST_F(SupervisorTest, BadSpecIsInfra) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.delegate = "--evil flag";
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("delegate name"));
}

// RunJob.profile is dfarm-runner's (--profile); the runner passes it on to
// an ok runner, and a job asking a tflite runner for it is refused.
TEST_F(SupervisorTest, ProfileOnlyForDfarmRunners) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.profile = true;
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_THAT(r.stderr_tail, HasSubstr("--profile --json"));
  job.runner_kind = "tflite";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("runners of kind 'tflite' cannot profile"));
}

// RunJob.sustained_ms is --sustained-secs (our contract's runners only), and
// it must end before the timeout.
TEST_F(SupervisorTest, SustainedModeIsPassedInSeconds) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.sustained_ms = 1500;
  EXPECT_EQ(Supervisor::RunnerArgs(job, "/m", "", {}),
            (std::vector<std::string>{"--model", "/m", "--delegate", "cpu", "--num-threads", "1",
                                      "--warmup-runs", "1", "--num-runs", "3", "--sustained-secs",
                                      "1.500", "--json"}));
  job.sustained_ms = 2000;
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_THAT(r.stderr_tail, HasSubstr("--sustained-secs 2 --json"));
  job.sustained_ms = job.timeout_ms;
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("sustained_ms " + std::to_string(job.timeout_ms) +
                                 " must be below timeout_ms"));
  job.sustained_ms = 10;
  job.runner_kind = "benchmark_model";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("have no sustained mode"));
}

TEST_F(SupervisorTest, PluginIsPassedAsItsStorePath) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.delegate = "external";
  job.delegate_options = "max_delegated_partitions:1";
  job.plugin_sha256 = Put("not really a shared library");
  const std::string plugin = *store_->PathOf(job.plugin_sha256);
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_THAT(r.stderr_tail,
              HasSubstr("--delegate external --delegate-options max_delegated_partitions:1;path:" +
                        plugin + " --num-threads 1"));

  job.delegate_options.clear();
  EXPECT_EQ(Supervisor::RunnerArgs(job, "/m.tflite", plugin),
            (std::vector<std::string>{"--model", "/m.tflite", "--delegate", "external",
                                      "--delegate-options", "path:" + plugin, "--num-threads", "1",
                                      "--warmup-runs", "1", "--num-runs", "3", "--json"}));
  job.accuracy_reference = "cpu";
  EXPECT_EQ(Supervisor::RunnerArgs(job, "/m.tflite", "").back(), "--json");
  const std::vector<std::string> args = Supervisor::RunnerArgs(job, "/m.tflite", "");
  EXPECT_EQ(args[args.size() - 3], "--accuracy-reference");
  EXPECT_EQ(args[args.size() - 2], "cpu");
  job.accuracy_reference = "gpu";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(
      r.error,
      HasSubstr("accuracy_reference 'gpu' (the runner compares with 'cpu' or 'layers' only)"));
  job.accuracy_reference = "layers";
  EXPECT_EQ(Supervisor::RunnerArgs(job, "/m.tflite", "")[args.size() - 2], "layers");
}

TEST_F(SupervisorTest, MissingPluginIsInfra) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.delegate = "external";
  job.plugin_sha256 = std::string(64, 'a');
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("plugin: artifact " + job.plugin_sha256 + " is not in the store"));
  EXPECT_FALSE(r.state_before.has_value());  // no runner was started

  job.plugin_sha256 = "../lib/libevil.so";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("plugin: invalid artifact name"));
}

TEST_F(SupervisorTest, PathOptionFromTheHostIsRefused) {
  Supervisor sup(store_.get());
  JobSpec job = Job(testing::kOkRunner);
  job.delegate = "external";
  job.delegate_options = "a:1;path:/tmp/libevil.so";
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("delegate_options name a 'path'"));
  EXPECT_THAT(r.error, HasSubstr("never as a device path"));

  job.plugin_sha256 = Put("a plugin");
  job.delegate_options = "path:/tmp/libevil.so";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("beside plugin_sha256"));

  job.delegate_options = "xpath:1;a:path";  // not a path key
  EXPECT_EQ(sup.Run(job).status, "ok");
}

TEST_F(SupervisorTest, PluginIsPinnedWhileTheJobRuns) {
  store_->SetQuota(1000);
  Supervisor sup(store_.get());
  TempDir flags;  // outside the store, so the quota does not count them
  const std::string started = flags.path() + "/started";
  const std::string go = flags.path() + "/go";
  JobSpec job = Job("#!/bin/sh\ntouch " + started + "\nwhile [ ! -f " + go +
                    " ]; do sleep 0.01; done\n"
                    "echo '{\"status\":\"ok\",\"metrics\":{\"mean_us\":1,\"num_runs\":1}}'\n");
  job.delegate = "external";
  job.plugin_sha256 = Put(std::string(400, 'p'));
  JobResult r;
  std::thread t([&] { r = sup.Run(job); });
  for (int i = 0; i < 500 && !std::filesystem::exists(started); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Only evicting the plugin would make room for 500 more bytes.
  std::string big(500, 'b');
  auto upload = store_->BeginUpload(HashOf(big), big.size());
  EXPECT_FALSE(upload.ok());
  EXPECT_TRUE(store_->Has(job.plugin_sha256));
  std::ofstream(go).put('x');
  t.join();
  EXPECT_EQ(r.status, "ok") << r.error;
}

// Each input set is unpacked into its own folder, passed as one --inputs,
// and removed when the job ends; a set missing from the store is infra.
TEST_F(SupervisorTest, InputSetsAreUnpackedAndPassedInOrder) {
  Supervisor sup(store_.get());
  const char* script =
      "#!/bin/sh\n"
      "while [ $# -gt 0 ]; do\n"
      "  if [ \"$1\" = --inputs ]; then echo \"set $2: $(cat \"$2/input_0.bin\")"
      "$(cat \"$2/input_1.bin\" 2>/dev/null)\" >&2; fi\n"
      "  shift\n"
      "done\n"
      "echo '{\"status\":\"ok\",\"metrics\":{\"mean_us\":1,\"num_runs\":1},"
      "\"samples_us\":[1]}'\n";
  JobSpec job = Job(script);
  auto a = PackInputSet({"first", "+one"});
  auto b = PackInputSet({"second"});
  ASSERT_TRUE(a && b);
  job.input_set_sha256s = {Put(*a), Put(*b)};
  JobResult r = sup.Run(job);
  ASSERT_EQ(r.status, "ok") << r.error << r.stderr_tail;
  const std::string inputs = store_->root() + "/inputs";
  EXPECT_THAT(r.stderr_tail, HasSubstr("set " + inputs + "/set_0: first+one"));
  EXPECT_THAT(r.stderr_tail, HasSubstr("set " + inputs + "/set_1: second"));
  EXPECT_FALSE(std::filesystem::exists(inputs));
  EXPECT_EQ(Supervisor::RunnerArgs(job, "/m", "", {"/x", "/y"}),
            (std::vector<std::string>{"--model", "/m", "--delegate", "cpu", "--num-threads", "1",
                                      "--warmup-runs", "1", "--num-runs", "3", "--inputs", "/x",
                                      "--inputs", "/y", "--json"}));

  job.profile = true;  // --profile just before --json
  EXPECT_EQ(Supervisor::RunnerArgs(job, "/m", "", {"/x"}),
            (std::vector<std::string>{"--model", "/m", "--delegate", "cpu", "--num-threads", "1",
                                      "--warmup-runs", "1", "--num-runs", "3", "--inputs", "/x",
                                      "--profile", "--json"}));
  job.profile = false;

  job.input_set_sha256s = {std::string(64, 'a')};
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("input set 0"));
  job.input_set_sha256s = {"nope"};
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("input set 'nope' is not a sha256"));
  job.input_set_sha256s = {Put("not a packed set")};
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("not an input set"));
}

TEST_F(SupervisorTest, StderrTailKeepsTheEnd) {
  Supervisor sup(store_.get());
  JobResult r =
      sup.Run(Job("#!/bin/sh\ni=0\nwhile [ $i -lt 2000 ]; do echo \"line $i\" >&2; i=$((i+1)); "
                  "done\nexit 5\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_THAT(r.error, HasSubstr("internal error"));
  EXPECT_LE(r.stderr_tail.size(), 4096u);
  EXPECT_THAT(r.stderr_tail, HasSubstr("line 1999"));
  EXPECT_THAT(r.stderr_tail, ::testing::Not(HasSubstr("line 10\n")));
}

TEST(SupervisorClassifyTest, Table) {
  JobResult r;
  Supervisor::Classify(0, 0, R"({"status":"ok"})", "", &r);
  EXPECT_EQ(r.status, "ok");
  Supervisor::Classify(0, 0, R"({"status":"model_error"})", "", &r);
  EXPECT_EQ(r.status, "crashed");
  Supervisor::Classify(2, 0, R"({"status":"usage_error","error":"unknown flag --x"})", "", &r);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("unknown flag --x"));
  Supervisor::Classify(-1, SIGABRT, "", "", &r);
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.error, "runner killed by signal 6 (SIGABRT)");
  Supervisor::Classify(42, 0, "", "", &r);
  EXPECT_EQ(r.status, "crashed");
  EXPECT_THAT(r.error, HasSubstr("unexpected code 42"));
}

}  // namespace
}  // namespace dfarm::agent
