// Runner kinds benchmark_model and inference_diff through the supervisor
// (agent/protocol/runner_kinds.h): a stand-in tool (a shell script) gets the
// tool's flags, its stderr and stdout together come back verbatim as
// runner_json, and its exit is classified without a JSON document.
#include <signal.h>

#include "agent/daemon/supervisor.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

// What benchmark_model prints: its log on stderr, nothing on stdout.
constexpr char kBenchmarkLog[] =
    "INFO: STARTING!\n"
    "INFO: Graph: [MODEL]\n"
    "INFO: Loaded model MODEL\n"
    "INFO: Inference timings in us: Init: 1200, First inference: 800, Warmup (avg): 750, "
    "Inference (avg): 700.5\n"
    "INFO: Memory footprint delta from the start of the tool (MB): init=2.5 overall=3.1\n";

class ToolKindsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ArtifactStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
    options_.record_device_state = false;
  }

  std::string Put(const std::string& bytes) {
    std::string sha = testing::HashOf(bytes);
    EXPECT_TRUE(store_->Put(sha, bytes).ok());
    return sha;
  }

  JobSpec Job(const std::string& tool_script, const char* kind = "benchmark_model") {
    JobSpec job;
    job.runner_sha256 = Put(tool_script);
    job.model_sha256 = Put("model bytes");
    job.runner_kind = kind;
    job.num_runs = 7;
    job.timeout_ms = 10000;
    return job;
  }

  TempDir dir_;
  std::unique_ptr<ArtifactStore> store_;
  SupervisorOptions options_;
};

TEST_F(ToolKindsTest, BenchmarkModelLogComesBackVerbatim) {
  Supervisor sup(store_.get(), options_);
  JobSpec job = Job(std::string("#!/bin/sh\necho \"argv0: $0\" >&2\necho \"args: $*\" >&2\n") +
                    "cat >&2 <<'EOF'\n" + kBenchmarkLog + "EOF\n");
  job.delegate = "xnnpack";
  job.delegate_options = "fp16:true";
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.runner_json, HasSubstr(kBenchmarkLog));
  EXPECT_THAT(r.runner_json,
              HasSubstr("args: --graph=" + *store_->PathOf(job.model_sha256) +
                        " --num_threads=1 --num_runs=7 --warmup_runs=1 --min_secs=0"));
  EXPECT_THAT(r.runner_json, HasSubstr("--use_xnnpack=true --xnnpack_force_fp16=true\n"));
  EXPECT_THAT(r.stderr_tail, HasSubstr("Inference (avg): 700.5"));
}

TEST_F(ToolKindsTest, InferenceDiffGetsItsFlags) {
  Supervisor sup(store_.get(), options_);
  JobSpec job = Job("#!/bin/sh\necho \"args: $*\"\n", "inference_diff");
  job.delegate = "gpu";
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_EQ(r.runner_json, "args: --model_file=" + *store_->PathOf(job.model_sha256) +
                               " --num_runs=7 --num_interpreter_threads=1 --delegate=gpu\n");
}

TEST_F(ToolKindsTest, AFailedToolIsCrashedWithItsErrorLine) {
  Supervisor sup(store_.get(), options_);
  JobResult r = sup.Run(
      Job("#!/bin/sh\necho 'INFO: STARTING!' >&2\necho 'ERROR: Failed to apply GPU delegate.' >&2\n"
          "echo 'INFO: Benchmarking failed.' >&2\nexit 1\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.error, "ERROR: Failed to apply GPU delegate.");
  EXPECT_THAT(r.runner_json, HasSubstr("INFO: Benchmarking failed."));

  r = sup.Run(Job("#!/bin/sh\necho 'some text' >&2\nexit 3\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.error, "tool exited with code 3");

  r = sup.Run(Job("#!/bin/sh\necho 'about to die' >&2\nkill -SEGV $$\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_THAT(r.error, HasSubstr("signal 11 (SIGSEGV): about to die"));

  JobSpec slow = Job("#!/bin/sh\nsleep 30\n");
  slow.timeout_ms = 200;
  EXPECT_EQ(sup.Run(slow).status, "timeout");
}

TEST_F(ToolKindsTest, WhatAToolCannotDoIsInfra) {
  Supervisor sup(store_.get(), options_);
  JobSpec job = Job("#!/bin/sh\nexit 0\n");
  job.delegate = "ethos";
  JobResult r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("benchmark_model has no flag for delegate 'ethos'"));

  job = Job("#!/bin/sh\nexit 0\n", "mystery");
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_EQ(r.error,
            "agent does not know runner kind 'mystery' (known: dfarm, tflite, benchmark_model, "
            "inference_diff)");
}

TEST_F(ToolKindsTest, TfliteKindSpeaksTheRunnerContract) {
  Supervisor sup(store_.get(), options_);
  JobResult r = sup.Run(Job(testing::kOkRunner, "tflite"));
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_THAT(r.stderr_tail, HasSubstr(" --json"));
  r = sup.Run(Job("#!/bin/sh\necho not json\n", "dfarm"));
  EXPECT_EQ(r.status, "crashed");  // the JSON check still holds
}

}  // namespace
}  // namespace dfarm::agent
