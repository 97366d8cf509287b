// End to end, with the real dfarm-agent binary: features
// "bundles" and "runner_kinds" at hello, a runner kind refused from a host
// that did not negotiate it, and a bundled benchmark_model stand-in run
// through its bundled "loader" under --bundle-prefix.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "agent/client/client.h"
#include "agent/protocol/bundle.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestAgent;

using testing::kTimeout;

class RunnerKindsE2eTest : public ::testing::Test {
 protected:
  void StartAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--store", Path("store")};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<TestAgent>(args, Path("agent.log"));
    port_ = agent_->ReadPort();
    ASSERT_GT(port_, 0) << testing::ReadFile(Path("agent.log"));
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::unique_ptr<AgentClient> Connect() {
    ConnectOptions options;
    options.timeout = kTimeout;
    auto client = AgentClient::Connect("127.0.0.1", port_, options);
    EXPECT_TRUE(client.ok()) << client.message();
    return client.ok() ? std::move(*client) : nullptr;
  }
  std::string Script(const std::string& name, const std::string& text) {
    testing::WriteFile(Path(name), text);
    EXPECT_EQ(::chmod(Path(name).c_str(), 0755), 0);
    return Path(name);
  }
  std::string Put(AgentClient& client, const std::string& path) {
    std::string sha;
    auto r = client.PutArtifact(path, &sha);
    EXPECT_TRUE(r.ok()) << r.message();
    return sha;
  }

  TempDir dir_;
  std::unique_ptr<TestAgent> agent_;
  uint16_t port_ = 0;
};

TEST_F(RunnerKindsE2eTest, ABundledToolRunsThroughItsLoaderUnderTheBundlePrefix) {
  // The prefix and the "loader" record their argv, then run the rest as
  // qemu-aarch64 and ld-linux would.
  const std::string prefix =
      Script("prefix.sh", "#!/bin/sh\necho \"$@\" > " + Path("prefix.args") + "\nexec \"$@\"\n");
  const std::string loader = Script(
      "ld.sh", "#!/bin/sh\necho \"$@\" > " + Path("loader.args") + "\nshift 2\nexec \"$@\"\n");
  const std::string tool = Script("tool.sh",
                                  "#!/bin/sh\necho 'INFO: STARTING!' >&2\necho \"args: $*\" >&2\n"
                                  "echo 'INFO: Inference timings in us: Init: 5, First "
                                  "inference: 4, Warmup (avg): 3, Inference (avg): 2.5' >&2\n");
  ASSERT_TRUE(PackBundleFile({"bin/benchmark_model", "lib/ld.sh", "lib"},
                             {{"bin/benchmark_model", 0755, tool}, {"lib/ld.sh", 0755, loader}},
                             Path("tool.bundle")));
  testing::WriteFile(Path("m.tflite"), "model bytes");
  StartAgent({"--bundle-prefix", prefix, "--runner-prefix", "/no/such/prefix"});
  auto client = Connect();
  ASSERT_TRUE(client);
  EXPECT_THAT(client->device().features,
              ::testing::IsSupersetOf({std::string("bundles"), std::string("runner_kinds")}));
  JobSpec job;
  job.runner_sha256 = Put(*client, Path("tool.bundle"));
  job.model_sha256 = Put(*client, Path("m.tflite"));
  job.runner_kind = "benchmark_model";
  job.delegate = "nnapi";
  job.delegate_options = "accelerator_name:npu";
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error << "\n" << testing::ReadFile(Path("agent.log"));
  EXPECT_THAT(r->runner_json, HasSubstr("Inference (avg): 2.5"));
  EXPECT_THAT(r->runner_json, HasSubstr("--use_nnapi=true --use_xnnpack=false "
                                        "--nnapi_accelerator_name=npu"));
  const std::string dir = Path("store") + "/bundles/" + job.runner_sha256;
  EXPECT_THAT(testing::ReadFile(Path("prefix.args")),
              ::testing::StartsWith(dir + "/lib/ld.sh --library-path " + dir + "/lib " + dir +
                                    "/bin/benchmark_model --graph="));
  EXPECT_THAT(testing::ReadFile(Path("agent.log")),
              HasSubstr("runner " + job.runner_sha256.substr(0, 12) + " (benchmark_model)"));
}

TEST_F(RunnerKindsE2eTest, AHostWithoutRunnerKindsCannotSendAKind) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  testing::WriteFile(Path("ok.sh"), testing::kOkRunner);
  testing::WriteFile(Path("m"), "model");
  JobSpec job;
  job.runner_sha256 = Put(*client, Path("ok.sh"));
  job.model_sha256 = Put(*client, Path("m"));
  job.runner_kind = "tflite";

  UniqueFd raw(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port_);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(raw.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  {  // a host without features "bundles" and "runner_kinds"
    flatbuffers::FlatBufferBuilder fbb;
    auto f = fbb.CreateVectorOfStrings({"artifacts", "run_job", "plugin", "inputs"});
    FinishFrame(fbb, 1, wire::CreateHello(fbb, kProtocolVersion, f));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto hello = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(hello.ok() && !hello->eof);
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, 2, BuildRunJob(fbb, job));
    ASSERT_TRUE(WriteFrame(raw.get(), fbb).ok());
    auto got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    ASSERT_EQ(got->frame()->body_type(), wire::Body::ErrorReply);
    EXPECT_THAT(Str(got->frame()->body_as_ErrorReply()->message()),
                HasSubstr("runner kind 'tflite' but the host did not negotiate feature "
                          "'runner_kinds'"));
  }
  // The same job from a host that speaks it runs (kind tflite: dfarm-runner's contract).
  auto r = client->RunJob(job);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, "ok") << r->error;
}

}  // namespace
}  // namespace dfarm::agent
