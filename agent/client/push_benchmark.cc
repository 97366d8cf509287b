// dfarm_push_benchmark: the first push of a runner build and the model corpus
// to a fresh dfarm-agent on loopback. Not a ctest: run it by hand.
//
//   dfarm_push_benchmark [--agent build/bin/dfarm-agent] [--runner build/bin/dfarm-runner]
//       [--models models] [--dir /var/tmp] [--runs 3]
//
// Each run starts a real dfarm-agent (`--listen 127.0.0.1:0 --insecure`) on a
// fresh store under --dir, connects (not timed) and pushes the runner and
// every *.tflite in --models, timed from the first push to the last reply:
//   sweep:  as a sweep pushes them: the runner by path (its sha256 unknown),
//           each model under the sha256 its plan already holds (hashed before
//           the timed window, as the plan does);
//   cold:   to a second fresh agent, every sha256 computed inside the window;
//   pipelined: as sweep, in one AgentClient::PutArtifacts call (each upload
//           sent without waiting for the previous one's reply; the agent
//           syncs one file while it receives the next).
// Each line gives bytes, seconds and MB/s (10^6 bytes per second), and the CPU
// time host and agent spent in the window (the agent's threads' schedstat):
// what of the wall time neither spent is waiting (the disk's fsyncs, the other
// process, a busy machine's scheduler). Then where
// the time goes, each part timed alone over the same files (page cache warm):
//   host hash:          Sha256File of every file;
//   link:               the bytes in 1 MiB writes over a loopback TCP
//                       connection to a reader that drops them;
//   agent write+verify: an ArtifactStore (the agent's code, in this process) on
//                       a fresh store under --dir taking each file in 1 MiB
//                       chunks: write (write and hash) and commit (size and
//                       sha256 check, fsync, rename) apart.
// Exit 1 on any error.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/base/sha256.h"
#include "agent/base/unique_fd.h"
#include "agent/client/agent_process.h"
#include "agent/client/client.h"
#include "agent/daemon/artifact_store.h"

namespace dfarm::agent::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 1 << 20;

struct Options {
  std::string agent = "build/bin/dfarm-agent";
  std::string runner = "build/bin/dfarm-runner";
  std::string models = "models";
  std::string dir = "/var/tmp";
  int runs = 3;
};

struct File {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // what a sweep's plan holds (empty for the runner)
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// User plus system CPU seconds of this process.
double HostCpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// CPU seconds the threads of process pid have run (/proc/PID/task/*/schedstat).
double ProcessCpuSeconds(pid_t pid) {
  uint64_t ns = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    uint64_t on_cpu = 0;
    if (in >> on_cpu) ns += on_cpu;
  }
  return static_cast<double>(ns) / 1e9;
}

// One push: wall seconds and the CPU seconds of host and agent, all in the window.
struct PushTimes {
  double wall = 0, host_cpu = 0, agent_cpu = 0;
};

double Mbps(uint64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e6 : 0; }

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "dfarm_push_benchmark: %s\n", why.c_str());
  std::exit(1);
}

// A fresh folder under dir, removed with what it holds at the end of scope.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& dir) {
    std::string tmpl = (fs::path(dir) / "dfarm_push_benchmark.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) Die("cannot create a folder under '" + dir + "'");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<File> ListFiles(const Options& o) {
  std::vector<File> files;
  files.push_back({o.runner, 0, ""});
  std::vector<std::string> models;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.models, ec)) {
    if (e.path().extension() == ".tflite") models.push_back(e.path().string());
  }
  if (ec) Die("cannot list '" + o.models + "': " + ec.message());
  std::sort(models.begin(), models.end());
  for (const auto& m : models) {
    auto sha = Sha256File(m);
    if (!sha) Die(sha.message());
    files.push_back({m, 0, *sha});
  }
  for (File& f : files) {
    f.size = fs::file_size(f.path, ec);
    if (ec) Die("cannot read '" + f.path + "': " + ec.message());
  }
  return files;
}

enum class Mode { kSweep, kCold, kPipelined };

// Each file, one call each (PutArtifactAs with a known sha256, else PutArtifact).
uint64_t PushOneByOne(AgentClient& client, const std::vector<File>& files, bool known_shas) {
  uint64_t bytes = 0;
  for (const File& f : files) {
    std::string sha;
    auto sent = known_shas && !f.sha256.empty() ? client.PutArtifactAs(f.path, f.sha256, &sha)
                                                : client.PutArtifact(f.path, &sha);
    if (!sent) Die(sent.message());
    if (*sent != f.size) Die("'" + f.path + "' was not sent whole");
    bytes += *sent;
  }
  return bytes;
}

uint64_t PushPipelined(AgentClient& client, const std::vector<File>& files) {
  std::vector<ArtifactPush> list;
  for (const File& f : files) list.push_back({f.path, f.sha256});
  uint64_t bytes = 0;
  auto results = client.PutArtifacts(list, nullptr);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!results[i]) Die(results[i].message());
    if (*results[i] != files[i].size) Die("'" + files[i].path + "' was not sent whole");
    bytes += *results[i];
  }
  return bytes;
}

// Pushes every file to a fresh agent, timed from the first push to the last reply.
PushTimes PushToFreshAgent(const Options& o, const std::vector<File>& files, Mode mode,
                           uint64_t* bytes) {
  ScratchDir dir(o.dir);
  AgentProcessOptions options;
  options.agent_binary = o.agent;
  options.store_dir = dir.path() + "/store";
  options.extra_args = {"--insecure"};
  auto agent = AgentProcess::Start(options);
  if (!agent) Die(agent.message());
  auto client = AgentClient::Connect("127.0.0.1", (*agent)->port(), std::chrono::seconds(30));
  if (!client) Die(client.message());
  *bytes = 0;
  PushTimes times;
  const double host_cpu = HostCpuSeconds();
  const double agent_cpu = ProcessCpuSeconds((*agent)->pid());
  const auto t0 = Clock::now();
  *bytes = mode == Mode::kPipelined ? PushPipelined(**client, files)
                                    : PushOneByOne(**client, files, mode == Mode::kSweep);
  times.wall = Seconds(Clock::now() - t0);
  times.host_cpu = HostCpuSeconds() - host_cpu;
  times.agent_cpu = ProcessCpuSeconds((*agent)->pid()) - agent_cpu;
  client->reset();
  (*agent)->Stop();
  return times;
}

double HostHash(const std::vector<File>& files) {
  const auto t0 = Clock::now();
  for (const File& f : files) {
    if (auto sha = Sha256File(f.path); !sha) Die(sha.message());
  }
  return Seconds(Clock::now() - t0);
}

// A connected loopback TCP pair: {writer, reader}.
std::pair<UniqueFd, UniqueFd> LoopbackPair() {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (!listener || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    Die("cannot listen on 127.0.0.1");
  }
  UniqueFd writer(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!writer || ::connect(writer.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    Die("cannot connect to 127.0.0.1");
  }
  UniqueFd reader(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!reader) Die("cannot accept on 127.0.0.1");
  return {std::move(writer), std::move(reader)};
}

double Link(uint64_t bytes) {
  auto [writer, reader] = LoopbackPair();
  const auto t0 = Clock::now();
  std::thread drain([fd = reader.get()] {
    std::vector<char> buf(kChunk);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
  });
  std::vector<char> buf(kChunk, 'x');
  for (uint64_t left = bytes; left > 0;) {
    ssize_t n = ::send(writer.get(), buf.data(), std::min<uint64_t>(left, buf.size()), 0);
    if (n <= 0) Die("loopback send failed");
    left -= static_cast<uint64_t>(n);
  }
  writer.reset();
  drain.join();
  return Seconds(Clock::now() - t0);
}

// The agent's store taking every file: seconds in Write and in Commit.
std::pair<double, double> AgentStore(const Options& o, const std::vector<File>& files) {
  ScratchDir dir(o.dir);
  auto store = ArtifactStore::Open(dir.path() + "/store");
  if (!store) Die(store.message());
  Clock::duration write{}, commit{};
  std::vector<uint8_t> buf(kChunk);
  for (const File& f : files) {
    auto sha = Sha256File(f.path);
    if (!sha) Die(sha.message());
    auto upload = (*store)->ResumeUpload(*sha, f.size);
    if (!upload) Die(upload.message());
    UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    for (uint64_t offset = 0;;) {
      ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n < 0) Die("cannot read '" + f.path + "'");
      if (n == 0) break;
      const auto t0 = Clock::now();
      if (auto r = (*upload)->Write(offset, buf.data(), static_cast<size_t>(n)); !r) {
        Die(r.message());
      }
      write += Clock::now() - t0;
      offset += static_cast<uint64_t>(n);
    }
    const auto t0 = Clock::now();
    if (auto r = (*upload)->Commit(); !r) Die(r.message());
    commit += Clock::now() - t0;
  }
  return {Seconds(write), Seconds(commit)};
}

void PrintLine(const char* what, uint64_t bytes, double seconds, const char* tail = "") {
  std::printf("%-22s %10llu bytes %8.1f ms %8.1f MB/s%s\n", what,
              static_cast<unsigned long long>(bytes), seconds * 1e3, Mbps(bytes, seconds), tail);
}

void PrintPush(const char* what, uint64_t bytes, const PushTimes& t) {
  char tail[96];
  std::snprintf(tail, sizeof tail, "   cpu: host %.1f ms, agent %.1f ms", t.host_cpu * 1e3,
                t.agent_cpu * 1e3);
  PrintLine(what, bytes, t.wall, tail);
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "The first push of a runner build and the model corpus to a fresh dfarm-agent on "
      "loopback: bytes, seconds, MB/s, and where the time goes"};
  app.add_option("--agent", o.agent, "dfarm-agent binary")->capture_default_str();
  app.add_option("--runner", o.runner, "runner build to push")->capture_default_str();
  app.add_option("--models", o.models, "folder whose *.tflite are pushed")->capture_default_str();
  app.add_option("--dir", o.dir, "where the agents' fresh stores go (its disk is measured)")
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs")->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::vector<File> files = ListFiles(o);
  uint64_t total = 0;
  for (const File& f : files) total += f.size;
  std::printf("%zu files (runner + %zu models), %llu bytes; store under %s\n", files.size(),
              files.size() - 1, static_cast<unsigned long long>(total), o.dir.c_str());
  for (int run = 1; run <= o.runs; ++run) {
    std::printf("run %d\n", run);
    for (auto [what, mode] :
         {std::pair{"  push (sweep)", Mode::kSweep}, std::pair{"  push (cold)", Mode::kCold},
          std::pair{"  push (pipelined)", Mode::kPipelined}}) {
      uint64_t bytes = 0;
      const PushTimes times = PushToFreshAgent(o, files, mode, &bytes);
      PrintPush(what, bytes, times);
    }
    PrintLine("  host hash", total, HostHash(files));
    PrintLine("  link", total, Link(total));
    auto [write, commit] = AgentStore(o, files);
    PrintLine("  agent write+hash", total, write);
    PrintLine("  agent commit", total, commit);
  }
  return 0;
}

}  // namespace
}  // namespace dfarm::agent::bench

int main(int argc, char** argv) { return dfarm::agent::bench::Main(argc, argv); }
