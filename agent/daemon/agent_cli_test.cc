// dfarm-agent's command line: the built binary run with good and bad flags,
// its exit code and what it prints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

using ::testing::HasSubstr;

constexpr char kAgentBinary[] = DFARM_BINARY_DIR "/bin/dfarm-agent";

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs dfarm-agent with args (a shell word list) and waits for it.
Outcome RunAgent(const std::string& args) {
  Outcome outcome;
  std::string command = std::string(kAgentBinary) + " " + args + " 2>&1 </dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) outcome.output.append(buf, n);
  int status = ::pclose(pipe);
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  return outcome;
}

std::string StoreDir() { return ::testing::TempDir() + "dfarm_agent_cli_test_store"; }

TEST(AgentCliTest, UnknownFlagIsAUsageErrorWithAHint) {
  Outcome o = RunAgent("--bogus --store " + StoreDir());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_THAT(o.output, HasSubstr("dfarm-agent: "));
  EXPECT_THAT(o.output, HasSubstr("--bogus"));
  EXPECT_THAT(o.output, HasSubstr("run 'dfarm-agent --help'"));
}

TEST(AgentCliTest, MissingStoreAndBadNumberAreUsageErrors) {
  Outcome o = RunAgent("");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_THAT(o.output, HasSubstr("--store is required"));
  o = RunAgent("--store " + StoreDir() + " --heartbeat-ms soon");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_THAT(o.output, HasSubstr("--heartbeat-ms"));
}

TEST(AgentCliTest, Version) {
  Outcome o = RunAgent("--version");
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.output, std::string("dfarm-agent ") + DFARM_VERSION + "\n");
}

TEST(AgentCliTest, HelpExitsZeroAndListsTheExitCodes) {
  Outcome o = RunAgent("--help");
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_THAT(o.output, HasSubstr("--store"));
  EXPECT_THAT(o.output, HasSubstr("Exit codes:"));
  EXPECT_THAT(o.output, HasSubstr("2  command-line error"));
  EXPECT_THAT(o.output, HasSubstr("3  the store is in use"));
}

TEST(AgentCliTest, ATcpListenerWithoutTokenOrInsecureIsAUsageError) {
  // --listen given, and the default listener (127.0.0.1:0) alike.
  for (const std::string& listen : {std::string("--listen 127.0.0.1:0 "), std::string()}) {
    Outcome o = RunAgent(listen + "--store " + StoreDir());
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_THAT(o.output, HasSubstr("dfarm-agent: listening on 127.0.0.1:0 without a token lets "
                                    "anyone who can reach the port run code as this user"));
    EXPECT_THAT(o.output, HasSubstr("--token-file FILE"));
    EXPECT_THAT(o.output, HasSubstr("--stdio"));
    EXPECT_THAT(o.output, HasSubstr("--insecure"));
  }
}

TEST(AgentCliTest, InsecureIsNoTokenAndOnlyForLoopback) {
  Outcome o =
      RunAgent("--listen 127.0.0.1:0 --insecure --token-file /nonexistent --store " + StoreDir());
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_THAT(o.output, HasSubstr("--token-file excludes --insecure"));
  o = RunAgent("--listen 192.0.2.1:0 --insecure --store " + StoreDir());
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_THAT(o.output, HasSubstr("non-loopback listeners need --token-file"));
}

TEST(AgentCliTest, HelpDocumentsInsecure) {
  Outcome o = RunAgent("--help");
  EXPECT_THAT(o.output, HasSubstr("--insecure"));
  EXPECT_THAT(o.output, HasSubstr("can run code as this user"));
}

TEST(AgentCliTest, AStartFailureExitsOne) {
  // A non-loopback listener without --token-file is refused before anything starts.
  Outcome o = RunAgent("--listen 192.0.2.1:0 --store " + StoreDir());
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_THAT(o.output, HasSubstr("non-loopback listeners need --token-file"));
}

}  // namespace
