#include "harness/devices/devices.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <mutex>
#include <system_error>

#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"
#include "agent/client/agent_process.h"
#include "agent/protocol/auth.h"
#include "harness/devices/adb/adb_provider.h"
#include "harness/devices/device_uri.h"
#include "harness/spec/runner_builds.h"  // Arm64ProgramOf
#include "harness/spec/spec.h"

namespace dfarm::harness {

std::string FindProgram(const std::string& name);

namespace {

namespace fs = std::filesystem;

// Creates `dir` and the folders above it that are missing, each 0700 (the
// agent refuses a store its group or others can write, which
// fs::create_directories would make under umask 002); folders that exist
// are left as they are.
Result<void> CreatePrivateDirectories(const std::string& dir) {
  fs::path at;
  for (const fs::path& part : fs::path(dir).lexically_normal()) {
    at /= part;
    if (part.empty() || part == "/" || part == "." || part == "..") continue;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      return MakeError("mkdir '" + at.string() + "': " + std::strerror(errno));
    }
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return MakeError("'" + dir + "' is not a folder");
  return Ok();
}

// Why connecting to tcp:// device `device` failed, with what to do when the
// agent asked for a token and none was given, or refused the one given.
// `why` is AgentClient's message (agent/client/client.cc and the agent's
// refusal in agent/daemon/server.cc, whose wording these matches follow).
std::string TcpConnectError(const std::string& device, const std::string& token_file,
                            const std::string& why) {
  std::string head = "device '" + device + "': ";
  if (token_file.empty() && why.find("requires a token") != std::string::npos) {
    return head +
           "the agent requires a token and none was given; pass the agent's token file with "
           "--token-file FILE, the environment variable DFARM_TOKEN_FILE=FILE, or the spec's "
           "device entry {\"uri\": \"" +
           device + "\", \"token_file\": FILE}";
  }
  if (!token_file.empty() && why.find("does not match this agent's token") != std::string::npos) {
    return head + "the agent refused the token from '" + token_file + "' (" + why +
           "); check the file given by --token-file, DFARM_TOKEN_FILE or the spec's token_file";
  }
  return head + why;
}

class AgentSession final : public DeviceSession {
 public:
  AgentSession(std::string name, std::unique_ptr<agent::AgentProcess> process,
               std::unique_ptr<agent::AgentClient> client)
      : name_(std::move(name)), process_(std::move(process)), client_(std::move(client)) {}
  // The connection closes before the agent is stopped.
  ~AgentSession() override {
    client_.reset();
    process_.reset();
  }
  const std::string& name() const override { return name_; }
  agent::AgentClient& client() override { return *client_; }

 private:
  std::string name_;
  std::unique_ptr<agent::AgentProcess> process_;  // null for tcp devices
  std::unique_ptr<agent::AgentClient> client_;
};

// Starts a dfarm-agent as our child on a socketpair and connects to it: the
// local, local:NAME and qemu-arm64 devices.
class ChildAgentStarter {
 public:
  explicit ChildAgentStarter(const ProviderOptions& options) : options_(options) {}

  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name, const std::string& store_dir,
                                              const std::string& agent_path,
                                              const std::vector<std::string>& prefix = {},
                                              const std::vector<std::string>& extra_args = {}) {
    if (auto made = CreatePrivateDirectories(store_dir); !made) {
      return MakeError("device '" + name + "': cannot create agent store '" + store_dir +
                       "': " + made.message());
    }
    // The agent speaks to us alone, on a socketpair: a port on 127.0.0.1
    // would let any local process run code as this user.
    agent::AgentProcessOptions start;
    start.agent_binary = agent_path;
    start.transport = agent::AgentTransport::kStdio;
    start.store_dir = store_dir;
    start.prefix = prefix;
    start.extra_args = extra_args;
    auto process = agent::AgentProcess::Start(start);
    if (!process) return MakeError("device '" + name + "': " + process.message());
    agent::ConnectOptions connect;
    connect.timeout = options_.connect_timeout;
    int stream = (*process)->TakeStream().release();
    auto client = agent::AgentClient::ConnectFds(stream, stream, "stdio:" + agent_path, connect);
    if (!client) {
      std::string report = (*process)->ExitReport();
      const int status = (*process)->wait_status();
      if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == agent::kAgentExitStoreInUse) {
        // Another dfarm's agent runs on this store (a sweep in another
        // terminal): it keeps its device, and this dfarm hears why it cannot.
        return MakeError(ErrorKind::kConflict,
                         "device '" + name + "' is busy: another dfarm-agent is using its store '" +
                             store_dir + "' (another dfarm running a sweep?); wait for it to end" +
                             report);
      }
      return MakeError("device '" + name + "': " + client.message() + report);
    }
    return std::unique_ptr<DeviceSession>(
        std::make_unique<AgentSession>(name, std::move(*process), std::move(*client)));
  }

  // agent_store without trailing slashes, for the stores beside it.
  std::string StoreBase() const {
    std::string base = options_.agent_store;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    return base;
  }

  const ProviderOptions& options() const { return options_; }

 private:
  ProviderOptions options_;
};

bool IsKind(const std::string& name, std::initializer_list<DeviceUri::Kind> kinds) {
  auto uri = ParseDeviceUri(name);
  return uri && std::find(kinds.begin(), kinds.end(), uri->kind) != kinds.end();
}

// "local" and "local:NAME": this host's agent as our child.
class LocalProvider final : public DeviceProvider {
 public:
  explicit LocalProvider(const ProviderOptions& options) : agents_(options) {}

  bool Serves(const std::string& name) const override {
    return IsKind(name, {DeviceUri::Kind::kLocal, DeviceUri::Kind::kLocalNamed});
  }
  std::vector<std::string> KnownDevices() const override { return {"local"}; }
  std::string KnownAbi(const std::string& name) const override {
    return Serves(name) ? HostAbi() : std::string();
  }

  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    auto uri = ParseDeviceUri(name);
    if (!uri) return uri.error();
    const std::string store = uri->kind == DeviceUri::Kind::kLocalNamed
                                  ? agents_.StoreBase() + "-" + uri->name
                                  : agents_.options().agent_store;
    return agents_.Open(name, store, agents_.options().agent_path);
  }

 private:
  ChildAgentStarter agents_;
};

// "qemu-arm64": the aarch64 agent under qemu-user. The agent cannot exec an
// aarch64 runner by itself (no binfmt_misc here), so it runs the runner
// through the same qemu (dfarm-agent --runner-prefix); a runner bundle brings
// its own loader and libraries, so it runs through qemu with no sysroot
// (--bundle-prefix), as on a device whose libc it must not need. An agent
// built before --bundle-prefix is started without it.
class QemuProvider final : public DeviceProvider {
 public:
  explicit QemuProvider(const ProviderOptions& options) : agents_(options) {}

  bool Serves(const std::string& name) const override {
    return IsKind(name, {DeviceUri::Kind::kQemuArm64});
  }
  std::vector<std::string> KnownDevices() const override {
    if (QemuArm64Available(agents_.options())) return {kQemuArm64Device};
    return {};
  }
  std::string KnownAbi(const std::string& name) const override {
    return Serves(name) ? kArm64Abi : std::string();
  }

  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    const ProviderOptions& o = agents_.options();
    if (auto available = QemuArm64Available(o); !available) {
      return MakeError("device '" + name + "' is unavailable: " + available.message());
    }
    std::string qemu = FindProgram(o.qemu_path);
    std::vector<std::string> prefix = {qemu, "-L", o.qemu_sysroot};
    std::vector<std::string> args = {"--runner-prefix", qemu + " -L " + o.qemu_sysroot};
    if (AgentHelpLists(prefix, o.arm64_agent_path, "--bundle-prefix")) {
      args.insert(args.end(), {"--bundle-prefix", qemu});
    }
    return agents_.Open(name, agents_.StoreBase() + "-" + name, o.arm64_agent_path, prefix, args);
  }

 private:
  // Whether `agent --help`, run under `prefix`, lists `flag`; asked once per
  // agent file (and its modification time).
  bool AgentHelpLists(const std::vector<std::string>& prefix, const std::string& agent,
                      const std::string& flag) {
    std::error_code ec;
    const auto stamp = fs::last_write_time(agent, ec);
    const std::string key =
        agent + " " + flag + " " + std::to_string(ec ? 0 : stamp.time_since_epoch().count());
    std::lock_guard<std::mutex> lock(help_mu_);
    if (auto it = help_lists_.find(key); it != help_lists_.end()) return it->second;
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {agent, "--help"});
    return help_lists_[key] = HelpText(argv).find(flag) != std::string::npos;
  }

  // What `argv` prints on stdout ("" when it cannot start).
  static std::string HelpText(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return {};
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    SpawnOptions spawn;
    spawn.stdout_fd = write_end.get();
    auto pid = SpawnProcess(argv, spawn);
    write_end.reset();
    if (!pid) return {};
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(read_end.get(), buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    ReapProcess(*pid, std::chrono::seconds(5));
    return text;
  }

  ChildAgentStarter agents_;
  std::mutex help_mu_;
  std::map<std::string, bool> help_lists_;  // AgentHelpLists' answers
};

// "tcp://HOST:PORT": an agent started elsewhere, with the device's token
// when one is given (TokenFileFor).
class TcpProvider final : public DeviceProvider {
 public:
  explicit TcpProvider(const ProviderOptions& options) : options_(options) {}

  bool Serves(const std::string& name) const override {
    return IsKind(name, {DeviceUri::Kind::kTcp});
  }
  std::vector<std::string> KnownDevices() const override { return {}; }

  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    auto uri = ParseDeviceUri(name);
    if (!uri) return uri.error();
    agent::ConnectOptions connect;
    connect.timeout = options_.connect_timeout;
    const std::string token_file = TokenFileFor(options_, uri->text);
    if (!token_file.empty()) {
      auto token = agent::ReadTokenFile(token_file);
      if (!token) return MakeError("device '" + uri->text + "': " + token.message());
      connect.token = std::move(*token);
    }
    auto client = agent::AgentClient::Connect(uri->host, uri->port, connect);
    if (!client) return MakeError(TcpConnectError(uri->text, token_file, client.message()));
    return std::unique_ptr<DeviceSession>(
        std::make_unique<AgentSession>(uri->text, nullptr, std::move(*client)));
  }

 private:
  ProviderOptions options_;
};

// Every row's provider; a name goes to the first that serves it.
class AllProviders final : public DeviceProvider {
 public:
  explicit AllProviders(const ProviderOptions& options) {
    for (const ProviderRow& row : ProviderTable()) providers_.push_back(row.make(options));
  }

  std::vector<std::string> KnownDevices() const override {
    std::vector<std::string> all;
    for (const auto& p : providers_) {
      for (std::string& d : p->KnownDevices()) all.push_back(std::move(d));
    }
    return all;
  }
  std::vector<ListedDevice> List() const override {
    std::vector<ListedDevice> all;
    for (const auto& p : providers_) {
      for (ListedDevice& d : p->List()) all.push_back(std::move(d));
    }
    return all;
  }
  std::string KnownAbi(const std::string& name) const override {
    const DeviceProvider* p = For(name);
    return p ? p->KnownAbi(name) : std::string();
  }
  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    if (DeviceProvider* p = For(name)) return p->Open(name);
    auto uri = ParseDeviceUri(name);
    if (!uri) return uri.error();
    return MakeError("device '" + name + "': no provider serves it");
  }

 private:
  DeviceProvider* For(const std::string& name) const {
    for (const auto& p : providers_) {
      if (p->Serves(name)) return p.get();
    }
    return nullptr;
  }

  std::vector<std::unique_ptr<DeviceProvider>> providers_;
};

template <typename P>
std::unique_ptr<DeviceProvider> Make(const ProviderOptions& options) {
  return std::make_unique<P>(options);
}

std::unique_ptr<DeviceProvider> MakeAdb(const ProviderOptions& options) {
  return adb::MakeAdbProvider(options);
}

}  // namespace

// `name` itself when it holds a '/', else its first executable match in PATH;
// "" when none.
std::string FindProgram(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return {};
}

std::string TokenFileFor(const ProviderOptions& options, const std::string& device) {
  if (auto it = options.device_token_files.find(device); it != options.device_token_files.end()) {
    return it->second;
  }
  auto uri = ParseDeviceUri(device);
  if (uri && uri->kind == DeviceUri::Kind::kTcp) return options.token_file;
  return {};
}

Result<void> QemuArm64Available(const ProviderOptions& options) {
  if (FindProgram(options.qemu_path).empty()) {
    return MakeError("'" + options.qemu_path +
                     "' not found (install qemu-user, or set DFARM_QEMU)");
  }
  if (options.arm64_agent_path.empty() || ::access(options.arm64_agent_path.c_str(), X_OK) != 0) {
    return MakeError(
        "no aarch64 dfarm-agent at '" + options.arm64_agent_path +
        "' (scripts/build.sh cross-builds it when g++-aarch64-linux-gnu and "
        "libssl-dev:arm64 are installed, see scripts/setup.sh; or set DFARM_ARM64_AGENT)");
  }
  std::error_code ec;
  if (!fs::is_directory(options.qemu_sysroot, ec)) {
    return MakeError("no aarch64 sysroot at '" + options.qemu_sysroot +
                     "' (install libc6-arm64-cross, which g++-aarch64-linux-gnu pulls in)");
  }
  return Ok();
}

std::string BesideSelf(const std::string& file_name) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return file_name;
  return (self.parent_path() / file_name).string();
}

ProviderOptions DefaultProviderOptions() {
  ProviderOptions o;
  const char* agent = std::getenv("DFARM_AGENT");
  o.agent_path = agent && *agent ? agent : BesideSelf("dfarm-agent");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path cache = xdg && *xdg     ? fs::path(xdg)
                   : home && *home ? fs::path(home) / ".cache"
                                   : fs::temp_directory_path();
  o.agent_store = (cache / "dfarm" / "agent-store").string();
  const char* arm64_agent = std::getenv("DFARM_ARM64_AGENT");
  o.arm64_agent_path = arm64_agent && *arm64_agent ? arm64_agent : Arm64ProgramOf(o.agent_path);
  const char* qemu = std::getenv("DFARM_QEMU");
  if (qemu && *qemu) o.qemu_path = qemu;
  return o;
}

const std::vector<ProviderRow>& ProviderTable() {
  static const std::vector<ProviderRow> table = {
      {"local", Make<LocalProvider>},
      {"qemu-arm64", Make<QemuProvider>},
      {"tcp", Make<TcpProvider>},
      {"adb", MakeAdb},
  };
  return table;
}

std::unique_ptr<DeviceProvider> MakeDeviceProvider(const ProviderOptions& options) {
  return std::make_unique<AllProviders>(options);
}

}  // namespace dfarm::harness
