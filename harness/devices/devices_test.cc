// The devices this host starts itself (`local`, `local:NAME`, `qemu-arm64`):
// their agent child speaks to dfarm over a private socketpair, never a TCP
// port that any local process could reach; and a child that fails says why.
#include "harness/devices/devices.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/spec/spec.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The pids whose parent is this process.
std::vector<pid_t> Children() {
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid()) children.push_back(std::stoi(name));
  }
  return children;
}

// The command line of `pid`, its words joined by spaces.
std::string CommandLine(pid_t pid) {
  std::string raw = agent::testing::ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : raw) c = c == '\0' ? ' ' : c;
  return raw;
}

// The socket inodes of /proc/net/tcp and tcp6 (every TCP socket of this
// network namespace, listening or not).
std::set<std::string> TcpSocketInodes() {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string field;
      for (int i = 0; i < 10 && fields >> field; ++i) {
      }
      inodes.insert(field);  // the 10th field
    }
  }
  return inodes;
}

// "socket:[INODE]" targets of `pid`'s open descriptors.
std::vector<std::string> SocketInodesOf(pid_t pid) {
  std::vector<std::string> inodes;
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::string target = fs::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.push_back(target.substr(8, target.size() - 9));
  }
  return inodes;
}

// Opens `device`, then checks that its agent child runs with --stdio, holds
// sockets (the socketpair) but no TCP socket, and is gone once the session is.
void ExpectPrivateChannel(DeviceProvider& provider, const std::string& device) {
  auto session = provider.Open(device);
  ASSERT_TRUE(session.ok()) << session.message();
  EXPECT_EQ((*session)->client().device().protocol_version, 1u);
  std::vector<pid_t> children = Children();
  ASSERT_EQ(children.size(), 1u);
  const pid_t agent = children[0];
  EXPECT_THAT(CommandLine(agent), HasSubstr(" --stdio "));
  EXPECT_THAT(CommandLine(agent), Not(HasSubstr("--listen")));
  std::vector<std::string> sockets = SocketInodesOf(agent);
  EXPECT_FALSE(sockets.empty()) << "no socketpair to dfarm";
  std::set<std::string> tcp = TcpSocketInodes();
  for (const std::string& inode : sockets) {
    EXPECT_EQ(tcp.count(inode), 0u) << "the agent holds TCP socket " << inode;
  }
  // Still usable after the checks, then stopped and reaped with the session.
  EXPECT_TRUE((*session)->client().Have({std::string(64, '0')}).ok());
  session->reset();
  EXPECT_EQ(::kill(agent, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

ProviderOptions TestOptions(const agent::testing::TempDir& dir) {
  ProviderOptions o = DefaultProviderOptions();
  o.agent_path = agent::testing::kAgentBinary;
  o.agent_store = dir.path() + "/agent-store";
  o.arm64_agent_path = DFARM_BINARY_DIR "/arm64/bin/dfarm-agent";
  return o;
}

TEST(LocalDeviceTest, AgentSpeaksOverASocketpairNotTcp) {
  agent::testing::TempDir dir;
  auto provider = MakeDeviceProvider(TestOptions(dir));
  ExpectPrivateChannel(*provider, "local");
  ExpectPrivateChannel(*provider, "local:b");
  EXPECT_TRUE(fs::is_directory(dir.path() + "/agent-store-b"));
}

TEST(LocalDeviceTest, QemuAgentSpeaksOverASocketpairNotTcp) {
  agent::testing::TempDir dir;
  ProviderOptions options = TestOptions(dir);
  if (auto available = QemuArm64Available(options); !available) {
    GTEST_SKIP() << available.message();
  }
  auto provider = MakeDeviceProvider(options);
  ExpectPrivateChannel(*provider, kQemuArm64Device);
}

TEST(LocalDeviceTest, AnAgentThatFailsToStartSaysWhy) {
  agent::testing::TempDir dir;
  ProviderOptions options = TestOptions(dir);
  options.agent_path = dir.path() + "/broken-agent";
  agent::testing::WriteFile(options.agent_path,
                            "#!/bin/sh\necho 'dfarm-agent: the store is unusable' >&2\nexit 1\n");
  ::chmod(options.agent_path.c_str(), 0755);
  auto session = MakeDeviceProvider(options)->Open("local");
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.message(), HasSubstr("device 'local': "));
  EXPECT_THAT(session.message(), HasSubstr("exited with code 1"));
  EXPECT_THAT(session.message(), HasSubstr("its stderr ends: dfarm-agent: the store is unusable"));
  EXPECT_TRUE(Children().empty());
}

// Tokens go to tcp:// devices only; a device's own file wins over the global one.
TEST(TokenFileForTest, PerDeviceWinsAndOnlyTcpGetsTheGlobalOne) {
  ProviderOptions o;
  o.token_file = "/global.token";
  o.device_token_files["tcp://10.0.0.7:7000"] = "/lab.token";
  EXPECT_EQ(TokenFileFor(o, "tcp://10.0.0.7:7000"), "/lab.token");
  EXPECT_EQ(TokenFileFor(o, "tcp://10.0.0.8:7000"), "/global.token");
  for (const char* other : {"local", "local:b", "qemu-arm64", "adb", "adb:SERIAL"}) {
    EXPECT_EQ(TokenFileFor(o, other), "") << other;
  }
  o.token_file.clear();
  EXPECT_EQ(TokenFileFor(o, "tcp://10.0.0.8:7000"), "");
}

}  // namespace
}  // namespace dfarm::harness

namespace dfarm::harness {
namespace {

// Each kind of device URI is served by exactly one row of the provider
// table, and the providers as one list `local` first and open nothing they
// do not serve.
TEST(ProviderTableTest, EveryDeviceUriHasExactlyOneProvider) {
  ProviderOptions options;
  options.agent_path = "/nonexistent/dfarm-agent";
  options.arm64_agent_path = "/nonexistent/dfarm-agent-arm64";
  std::vector<std::pair<std::string, std::unique_ptr<DeviceProvider>>> providers;
  for (const ProviderRow& row : ProviderTable())
    providers.emplace_back(row.name, row.make(options));
  std::set<std::string> names;
  for (const auto& [name, p] : providers) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"local", "qemu-arm64", "tcp", "adb"}));
  for (const std::string uri : {"local", "local:b", "qemu-arm64", "tcp://127.0.0.1:7000",
                                "tcp://[::1]:7000", "adb", "adb:0123456789ABCDEF"}) {
    std::vector<std::string> serving;
    for (const auto& [name, p] : providers) {
      if (p->Serves(uri)) serving.push_back(name);
    }
    EXPECT_EQ(serving.size(), 1u) << uri << " is served by " << ::testing::PrintToString(serving);
  }
  for (const auto& [name, p] : providers) EXPECT_FALSE(p->Serves("nonsense://x")) << name;
  auto all = MakeDeviceProvider(options);
  std::vector<ListedDevice> listed = all->List();
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.front().name, "local");
  EXPECT_EQ(listed.front().state, "");  // ask its agent
  EXPECT_EQ(all->KnownAbi("qemu-arm64"), kArm64Abi);
  EXPECT_EQ(all->KnownAbi("local:b"), HostAbi());
  EXPECT_EQ(all->KnownAbi("tcp://127.0.0.1:7000"), "");
  auto bad = all->Open("nonsense://x");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("nonsense://x"));
}

}  // namespace
}  // namespace dfarm::harness
