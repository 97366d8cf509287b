// Cancelling a real job end to end: the real dfarm-agent runs the real
// dfarm-runner with an external delegate plugin that hangs in its kernel
// (delegates/external/testing/bad_plugin.c, kind "hang"); the host cancels;
// the runner process must be gone, the job infra "cancelled by host", and the
// agent must serve the next job.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <thread>

#include "agent/client/client.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

TEST(CancelEndToEndTest, HangingPluginJobIsCancelledAndTheDeviceServesTheNext) {
  const std::string runner = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-runner";
  const std::string plugin = std::string(DFARM_BINARY_DIR) + "/lib/libdfarm_bad_plugin_hang.so";
  ASSERT_TRUE(fs::exists(runner)) << runner;
  ASSERT_TRUE(fs::exists(plugin)) << plugin;
  testing::TempDir dir;

  // out = a + b, float32 [1,4]: the plugin claims ADD and hangs in it.
  dfarm::testing::ModelBuilder b;
  int a = b.AddTensor(dfarm::testing::tfl::TensorType::FLOAT32, {1, 4}, "a");
  int c = b.AddTensor(dfarm::testing::tfl::TensorType::FLOAT32, {1, 4}, "b");
  int out = b.AddTensor(dfarm::testing::tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.AddAdd(a, c, out);
  b.SetInputs({a, c});
  b.SetOutputs({out});
  const std::string model = dir.path() + "/add.tflite";
  ASSERT_TRUE(b.WriteFile(model));

  testing::TestAgent agent({"--listen", "127.0.0.1:0", "--store", dir.path() + "/store"},
                           dir.path() + "/agent.log");
  uint16_t port = agent.ReadPort();
  ASSERT_GT(port, 0);
  auto client = AgentClient::Connect("127.0.0.1", port, milliseconds(10000));
  ASSERT_TRUE(client.ok()) << client.message();
  JobSpec job;
  ASSERT_TRUE((*client)->PutArtifact(runner, &job.runner_sha256).ok());
  ASSERT_TRUE((*client)->PutArtifact(model, &job.model_sha256).ok());
  ASSERT_TRUE((*client)->PutArtifact(plugin, &job.plugin_sha256).ok());
  job.delegate = "external";
  job.num_runs = 1;
  job.warmup_runs = 0;
  job.timeout_ms = 120000;
  const std::string stored_runner = dir.path() + "/store/artifacts/" + job.runner_sha256;

  // Cancel once the runner process exists and has been in the plugin a while.
  std::atomic<bool> cancel{false};
  std::vector<pid_t> seen;
  RunJobOptions options;
  options.cancel = &cancel;
  options.on_progress = [&](const JobProgress& p) {
    if (p.phase != "running" || cancel) return;
    seen = testing::ProcessesOfExe(stored_runner);
    if (!seen.empty()) cancel = true;
  };
  auto r = (*client)->RunJob(job, options);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "infra");
  EXPECT_EQ(r->error, "cancelled by host");
  ASSERT_EQ(seen.size(), 1u) << "the runner was never seen running";
  errno = 0;
  EXPECT_EQ(::kill(seen[0], 0), -1) << "runner " << seen[0] << " still exists";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(testing::ProcessesOfExe(stored_runner).empty());

  // The device is free: the same model on the CPU runs at once.
  job.delegate = "cpu";
  job.plugin_sha256.clear();
  auto next = (*client)->RunJob(job);
  ASSERT_TRUE(next.ok()) << next.message();
  EXPECT_EQ(next->status, "ok") << next->error << next->stderr_tail;
}

}  // namespace
}  // namespace dfarm::agent
