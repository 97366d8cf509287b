#include "agent/daemon/tool_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dfarm::agent {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

JobSpec Job(const char* kind, const char* delegate, const char* options = "") {
  JobSpec job;
  job.runner_kind = kind;
  job.delegate = delegate;
  job.delegate_options = options;
  job.num_threads = 4;
  job.warmup_runs = 2;
  job.num_runs = 30;
  return job;
}

std::vector<std::string> Args(const JobSpec& job, const std::string& plugin = "") {
  auto args = ToolArgs(job, "/s/model", plugin);
  EXPECT_TRUE(args) << args.message();
  return args ? *args : std::vector<std::string>{};
}

std::string Error(const JobSpec& job, const std::string& plugin = "") {
  auto args = ToolArgs(job, "/s/model", plugin);
  EXPECT_FALSE(args);
  return args ? "(no error)" : args.message();
}

TEST(ToolArgsTest, BenchmarkModelOnTheCpu) {
  EXPECT_THAT(
      Args(Job("benchmark_model", "cpu")),
      ElementsAre("--graph=/s/model", "--num_threads=4", "--num_runs=30", "--warmup_runs=2",
                  "--min_secs=0", "--warmup_min_secs=0", "--report_peak_memory_footprint=true",
                  "--enable_op_profiling=false", "--use_xnnpack=false"));
}

TEST(ToolArgsTest, BenchmarkModelDelegatesAndTheirOptions) {
  EXPECT_THAT(Args(Job("benchmark_model", "xnnpack", "fp16:true;threads:4")),
              IsSupersetOf({"--use_xnnpack=true", "--xnnpack_force_fp16=true"}));
  EXPECT_THAT(Args(Job("benchmark_model", "xnnpack", "force_fp16:0")),
              Contains("--xnnpack_force_fp16=false"));
  EXPECT_THAT(
      Args(Job("benchmark_model", "gpu", "precision_loss_allowed:true")),
      IsSupersetOf({"--use_gpu=true", "--use_xnnpack=false", "--gpu_precision_loss_allowed=true"}));
  EXPECT_THAT(Args(Job("benchmark_model", "gpu", "quantized_models_allowed:false")),
              Contains("--gpu_experimental_enable_quant=false"));
  EXPECT_THAT(Args(Job("benchmark_model", "nnapi", "accelerator_name:google-edgetpu")),
              IsSupersetOf({"--use_nnapi=true", "--nnapi_accelerator_name=google-edgetpu"}));
  EXPECT_THAT(Args(Job("benchmark_model", "hexagon", "max_delegated_partitions:2")),
              IsSupersetOf({"--use_hexagon=true", "--max_delegated_partitions=2"}));
  EXPECT_THAT(Args(Job("benchmark_model", "cpu", "op_profiling:true")),
              Contains("--enable_op_profiling=true"));
}

TEST(ToolArgsTest, BenchmarkModelRunsAPluginAsAnExternalDelegate) {
  auto args = Args(Job("benchmark_model", "external", "precision:fp16;op_profiling:true;b:x:y"),
                   "/store/artifacts/abc");
  EXPECT_THAT(args, IsSupersetOf({"--use_xnnpack=false", "--enable_op_profiling=true",
                                  "--external_delegate_path=/store/artifacts/abc",
                                  "--external_delegate_options=precision:fp16;b:x:y"}));
  EXPECT_THAT(Args(Job("benchmark_model", "external"), "/p"),
              Not(Contains(HasSubstr("--external_delegate_options"))));
}

TEST(ToolArgsTest, InferenceDiff) {
  EXPECT_THAT(Args(Job("inference_diff", "cpu")),
              ElementsAre("--model_file=/s/model", "--num_runs=30", "--num_interpreter_threads=4"));
  EXPECT_THAT(Args(Job("inference_diff", "gpu")), Contains("--delegate=gpu"));
  EXPECT_THAT(Args(Job("inference_diff", "xnnpack")), Contains("--delegate=xnnpack"));
  JobSpec compare = Job("inference_diff", "nnapi");
  compare.accuracy_reference = "cpu";
  EXPECT_THAT(Args(compare), Contains("--delegate=nnapi"));
  EXPECT_THAT(Args(Job("inference_diff", "external", "k:v"), "/p"),
              IsSupersetOf({"--external_delegate_path=/p", "--external_delegate_options=k:v"}));
}

TEST(ToolArgsTest, RefusesWhatTheToolHasNoFlagFor) {
  EXPECT_THAT(Error(Job("benchmark_model", "ethos")),
              HasSubstr("benchmark_model has no flag for delegate 'ethos'"));
  EXPECT_THAT(Error(Job("benchmark_model", "gpu", "fp16:true")),
              HasSubstr("option 'fp16:true' of delegate 'gpu': the tool has no flag for it"));
  EXPECT_THAT(Error(Job("benchmark_model", "xnnpack", "fp16:maybe")),
              HasSubstr("expected true or false"));
  EXPECT_THAT(Error(Job("benchmark_model", "xnnpack", "threads:2")), HasSubstr("threads"));
  EXPECT_THAT(Error(Job("benchmark_model", "nnapi", "accelerator_name:")),
              HasSubstr("needs a value"));
  EXPECT_THAT(Error(Job("inference_diff", "xnnpack", "fp16:true")),
              HasSubstr("inference_diff: option 'fp16:true'"));
  EXPECT_THAT(Error(Job("inference_diff", "cpu", "op_profiling:true")),
              HasSubstr("no flag for it"));
  JobSpec compare = Job("benchmark_model", "cpu");
  compare.accuracy_reference = "cpu";
  EXPECT_THAT(Error(compare), HasSubstr("benchmark_model cannot compare outputs"));
  JobSpec inputs = Job("inference_diff", "cpu");
  inputs.input_set_sha256s = {std::string(64, 'a')};
  EXPECT_THAT(Error(inputs), HasSubstr("takes no input sets"));
  EXPECT_THAT(Error(Job("dfarm", "cpu")), HasSubstr("is not a tool"));
}

}  // namespace
}  // namespace dfarm::agent
