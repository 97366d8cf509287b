// End to end against the real adb server (a private one on a free port, killed
// at the end, so a user's server on 5037 is never touched) and
// dfarm-adb-test-peer, which the server reaches with `host:connect`. Everything
// after starting the server goes through our AdbClient.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "harness/devices/adb/adb_client.h"
#include "harness/devices/adb/adb_provider.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::harness::adb {
namespace {

namespace fs = std::filesystem;
namespace tfl = ::dfarm::tflite;

fs::path BinDir() { return fs::path(DFARM_BINARY_DIR) / "bin"; }

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Runs the adb binary (tests only) and waits for it.
int RunAdb(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  copy.insert(copy.begin(), DFARM_ADB_EXECUTABLE);
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class AdbEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("dfarm-adb-e2e-" + std::to_string(::getpid())));
    fs::create_directories(*dir_ / "phone");
    root_ = new fs::path(fs::canonical(*dir_ / "phone"));
    server_.port = FreePort();
    ASSERT_EQ(RunAdb({"-P", std::to_string(server_.port), "start-server"}), 0);
    // The peer, on a free port; its stdout gives the port.
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    peer_pid_ = ::fork();
    if (peer_pid_ == 0) {
      ::dup2(p[1], 1);
      int err = ::open((*dir_ / "peer.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, 2);
      std::string bin = (BinDir() / "dfarm-adb-test-peer").string();
      std::string root = root_->string();
      ::execl(bin.c_str(), bin.c_str(), "--root", root.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(p[1]);
    std::string text;
    char buf[128];
    std::smatch m;
    static const std::regex kLine(R"(listening on 127\.0\.0\.1:(\d+))");
    while (!std::regex_search(text, m, kLine)) {
      ssize_t n = ::read(p[0], buf, sizeof buf);
      ASSERT_GT(n, 0) << "dfarm-adb-test-peer did not start";
      text.append(buf, static_cast<size_t>(n));
    }
    serial_ = new std::string("127.0.0.1:" + m[1].str());
    AdbClient client(server_);
    auto said = client.Connect(*serial_);
    ASSERT_TRUE(said) << said.message();
    ASSERT_NE(said->find("connected to"), std::string::npos) << *said;
    // The server completes CNXN in the background: wait for state "device".
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    std::string state;
    while (std::chrono::steady_clock::now() < deadline && state != "device") {
      auto devices = client.ListDevices();
      ASSERT_TRUE(devices) << devices.message();
      for (const AdbDevice& d : *devices) {
        if (d.serial == *serial_) state = d.state;
      }
      if (state != "device") std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(state, "device");
  }

  static void TearDownTestSuite() {
    RunAdb({"-P", std::to_string(server_.port), "kill-server"});
    if (peer_pid_ > 0) {
      ::kill(peer_pid_, SIGKILL);
      ::waitpid(peer_pid_, nullptr, 0);
    }
    std::error_code ec;
    if (dir_) fs::remove_all(*dir_, ec);
    delete dir_;
    delete root_;
    delete serial_;
  }

  void SetUp() override {
    if (!serial_) GTEST_SKIP() << "adb server or peer did not come up";
  }

  static inline ServerAddress server_;
  static inline fs::path* dir_ = nullptr;
  static inline fs::path* root_ = nullptr;
  static inline std::string* serial_ = nullptr;
  static inline pid_t peer_pid_ = -1;
};

TEST_F(AdbEndToEnd, DevicesListsThePeerOnline) {
  AdbClient client(server_);
  auto version = client.Version();
  ASSERT_TRUE(version) << version.message();
  EXPECT_EQ(*version, 41);  // adb 29.0.6 (Android Debug Bridge 1.0.41)
  auto devices = client.ListDevices();
  ASSERT_TRUE(devices) << devices.message();
  ASSERT_EQ(devices->size(), 1u);
  const AdbDevice& d = devices->front();
  EXPECT_EQ(d.serial, *serial_);
  EXPECT_EQ(d.state, "device");
  EXPECT_EQ(d.model, "DFarm_Test_Peer");
  EXPECT_EQ(d.product, "dfarm_peer");
  EXPECT_EQ(d.device, "dfarm_peer");
  EXPECT_FALSE(d.transport_id.empty());

  auto listing = ListAdbDevices(server_, /*start_server=*/false);
  ASSERT_TRUE(listing) << listing.message();
  ASSERT_GE(listing->size(), 1u);
  EXPECT_EQ((*listing)[0].name, "adb:" + *serial_);
  EXPECT_EQ((*listing)[0].state, "online");
  EXPECT_NE((*listing)[0].description.find("DFarm_Test_Peer"), std::string::npos);
}

TEST_F(AdbEndToEnd, SyncPushArrivesByteIdenticalWithModeAndMtime) {
  // 3 MiB + 17 bytes of pseudo-random data: many 64 KiB DATA chunks, a short tail.
  std::string data(3 * 1024 * 1024 + 17, '\0');
  std::mt19937 rng(7);
  for (char& c : data) c = static_cast<char>(rng() & 0xff);
  fs::path local = *dir_ / "big.bin";
  std::ofstream(local, std::ios::binary)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
  const std::string remote = (*root_ / "data/local/tmp/x/big.bin").string();
  AdbClient client(server_);
  auto before = client.Stat(*serial_, remote);
  ASSERT_TRUE(before) << before.message();
  EXPECT_FALSE(before->exists());

  auto sent = client.Push(*serial_, local.string(), remote, 0640, 1600000000);
  ASSERT_TRUE(sent) << sent.message();
  EXPECT_EQ(*sent, data.size());
  EXPECT_EQ(Slurp(remote), data);

  auto st = client.Stat(*serial_, remote);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(st->size, data.size());
  EXPECT_EQ(st->mtime, 1600000000u);
  EXPECT_EQ(st->mode & 0777, 0640u);
  EXPECT_TRUE(S_ISREG(st->mode));
}

TEST_F(AdbEndToEnd, SyncPushRefusedByTheDeviceIsAnError) {
  fs::path local = *dir_ / "small.txt";
  std::ofstream(local) << "hello";
  AdbClient client(server_);
  auto sent = client.Push(*serial_, local.string(), "/etc/dfarm-should-not-exist", 0644, 0);
  ASSERT_FALSE(sent);
  EXPECT_NE(sent.message().find("outside this device's storage"), std::string::npos)
      << sent.message();
  EXPECT_FALSE(fs::exists("/etc/dfarm-should-not-exist"));
}

TEST_F(AdbEndToEnd, ExecReturnsTheCommandsOutput) {
  AdbClient client(server_);
  // exec: carries stderr in the same stream, as adbd does.
  auto out = client.ExecOutput(*serial_, "echo hello; echo oops 1>&2; printf '%s' \"$((6*7))\"");
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(*out, "hello\noops\n42");
}

TEST_F(AdbEndToEnd, ExecStreamIsBinaryCleanBothWays) {
  AdbClient client(server_);
  auto fd = client.Exec(*serial_, "cat");
  ASSERT_TRUE(fd) << fd.message();
  // 1 MiB with every byte value, written while reading the echo.
  std::string data(1024 * 1024, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131 + i / 256) & 0xff);
  int raw = fd->get();
  std::thread writer([&] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(raw, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  });
  std::string back;
  char buf[65536];
  while (back.size() < data.size()) {
    ssize_t n = ::recv(raw, buf, sizeof buf, 0);
    if (n <= 0) break;
    back.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  EXPECT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data);
}

TEST_F(AdbEndToEnd, OpenUnknownSerialNamesIt) {
  AdbProviderOptions o;
  o.server = server_;
  o.agent_path = (BinDir() / "dfarm-agent").string();
  auto provider = MakeAdbProvider(o);
  auto session = provider->Open("adb:no-such-phone");
  ASSERT_FALSE(session);
  EXPECT_NE(session.message().find("'no-such-phone'"), std::string::npos) << session.message();
  auto known = provider->KnownDevices();
  ASSERT_EQ(known.size(), 1u);
  EXPECT_EQ(known[0], "adb:" + *serial_);
}

TEST_F(AdbEndToEnd, OpenRefusesAnAgentBuiltForAnotherAbi) {
  // An ELF header for EM_AARCH64 (183): the peer runs on this host's machine.
  std::string elf(64, '\0');
  elf[0] = 0x7f;
  elf[1] = 'E';
  elf[2] = 'L';
  elf[3] = 'F';
  elf[4] = 2;  // 64-bit
  elf[5] = 1;  // little-endian
  elf[18] = static_cast<char>(183);
  fs::path fake = *dir_ / "arm64-agent";
  std::ofstream(fake, std::ios::binary) << elf;
  utsname u{};
  ASSERT_EQ(::uname(&u), 0);
  if (std::string(u.machine) == "aarch64") GTEST_SKIP() << "this host is aarch64";
  AdbProviderOptions o;
  o.server = server_;
  o.agent_path = fake.string();
  o.device_dir = (*root_ / "data/local/tmp/abi").string();
  auto session = MakeAdbProvider(o)->Open("adb:" + *serial_);
  ASSERT_FALSE(session);
  EXPECT_NE(session.message().find(std::string("is ") + u.machine), std::string::npos)
      << session.message();
  EXPECT_NE(session.message().find("built for aarch64"), std::string::npos) << session.message();
  EXPECT_FALSE(fs::exists(*root_ / "data/local/tmp/abi/dfarm-agent"));  // nothing pushed
}

// The agent's log on the device is kept to two generations: past the limit
// it moves to agent.log.1 when a session starts; under it, it is kept.
TEST_F(AdbEndToEnd, AgentLogIsRotatedPastItsLimit) {
  AdbProviderOptions o;
  o.server = server_;
  o.agent_path = (BinDir() / "dfarm-agent").string();
  o.device_dir = (*root_ / "data/local/tmp/logs").string();
  o.agent_log_max_bytes = 100;
  fs::create_directories(o.device_dir);
  const fs::path log = fs::path(o.device_dir) / "agent.log";
  const fs::path old = fs::path(o.device_dir) / "agent.log.1";
  {
    std::ofstream(log) << std::string(50, 's');  // small: kept
  }
  auto provider = MakeAdbProvider(o);
  {
    auto session = provider->Open("adb:" + *serial_);
    ASSERT_TRUE(session) << session.message();
  }
  EXPECT_FALSE(fs::exists(old));
  EXPECT_EQ(Slurp(log).substr(0, 50), std::string(50, 's'));
  {
    std::ofstream(log, std::ios::trunc) << std::string(300, 'b');  // past the limit
  }
  {
    auto session = provider->Open("adb:" + *serial_);
    ASSERT_TRUE(session) << session.message();
  }
  // The first session's agent may still append its last lines to the moved file.
  EXPECT_EQ(Slurp(old).substr(0, 300), std::string(300, 'b'));
  EXPECT_LT(fs::file_size(log), 300u);
}

TEST_F(AdbEndToEnd, ProviderPushesTheAgentAndRunsAJob) {
  AdbProviderOptions o;
  o.server = server_;
  o.agent_path = (BinDir() / "dfarm-agent").string();
  o.device_dir = (*root_ / "data/local/tmp/dfarm").string();
  auto provider = MakeAdbProvider(o);

  // A model of one ADD: out = in + [1,2,3,4].
  testing::ModelBuilder b;
  int in = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "in");
  int c = b.AddConstFloat32({1, 4}, {1, 2, 3, 4}, "c");
  int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4}, "out");
  b.AddAdd(in, c, out);
  b.SetInputs({in});
  b.SetOutputs({out});
  const std::string model = (*dir_ / "add.tflite").string();
  ASSERT_TRUE(b.WriteFile(model));
  const std::string runner = (BinDir() / "dfarm-runner").string();

  ino_t agent_inode = 0;
  for (int round = 0; round < 2; ++round) {
    // "adb" names the only device the server lists.
    auto session = provider->Open(round == 0 ? "adb:" + *serial_ : "adb");
    ASSERT_TRUE(session) << session.message();
    EXPECT_EQ((*session)->name(), "adb:" + *serial_);
    EXPECT_FALSE((*session)->client().device().abi.empty());

    const fs::path pushed_agent = *root_ / "data/local/tmp/dfarm/dfarm-agent";
    EXPECT_EQ(Slurp(pushed_agent), Slurp(o.agent_path));
    struct stat st {};
    ASSERT_EQ(::stat(pushed_agent.c_str(), &st), 0);
    EXPECT_TRUE(st.st_mode & S_IXUSR);
    // The second Open finds the same size and mtime and does not push again.
    if (round == 0) {
      agent_inode = st.st_ino;
    } else {
      EXPECT_EQ(st.st_ino, agent_inode);
    }

    agent::AgentClient& client = (*session)->client();
    agent::JobSpec job;
    auto runner_sent = client.PutArtifact(runner, &job.runner_sha256);
    ASSERT_TRUE(runner_sent) << runner_sent.message();
    auto model_sent = client.PutArtifact(model, &job.model_sha256);
    ASSERT_TRUE(model_sent) << model_sent.message();
    if (round == 0) {
      EXPECT_EQ(*runner_sent, fs::file_size(runner));
    } else {
      EXPECT_EQ(*runner_sent, 0u);  // the device's store kept it
    }
    // The runner landed in the device's store, byte for byte.
    EXPECT_EQ(Slurp(*root_ / "data/local/tmp/dfarm/store/artifacts" / job.runner_sha256),
              Slurp(runner));
    job.num_runs = 3;
    job.warmup_runs = 1;
    auto result = client.RunJob(job);
    ASSERT_TRUE(result) << result.message();
    EXPECT_EQ(result->status, "ok") << result->error << "\n" << result->stderr_tail;
    auto doc = nlohmann::json::parse(result->runner_json, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << result->runner_json;
    EXPECT_EQ(doc.value("status", ""), "ok");
    EXPECT_EQ(doc["metrics"].value("num_runs", 0), 3);
    ASSERT_EQ(doc["outputs"].size(), 1u);
    EXPECT_EQ(doc["outputs"][0]["shape"], nlohmann::json::array({1, 4}));
  }
}

}  // namespace
}  // namespace dfarm::harness::adb
