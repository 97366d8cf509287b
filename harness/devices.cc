#include "harness/devices.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "harness/agent_process.h"
#include "harness/spec.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;

class Session final : public DeviceSession {
 public:
  Session(std::string name, std::unique_ptr<AgentProcess> process,
          std::unique_ptr<agent::AgentClient> client)
      : name_(std::move(name)), process_(std::move(process)), client_(std::move(client)) {}
  // The connection closes before the agent is stopped.
  ~Session() override {
    client_.reset();
    process_.reset();
  }
  const std::string& name() const override { return name_; }
  agent::AgentClient& client() override { return *client_; }

 private:
  std::string name_;
  std::unique_ptr<AgentProcess> process_;  // null for tcp devices
  std::unique_ptr<agent::AgentClient> client_;
};

class Provider final : public DeviceProvider {
 public:
  explicit Provider(ProviderOptions options) : options_(std::move(options)) {}

  std::vector<std::string> KnownDevices() const override { return {"local"}; }

  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    if (name == "local") return OpenLocal(name, options_.agent_store);
    if (name.rfind("local:", 0) == 0 && CheckDeviceName(name).empty()) {
      std::string base = options_.agent_store;
      while (base.size() > 1 && base.back() == '/') base.pop_back();
      return OpenLocal(name, base + "-" + name.substr(6));
    }
    const std::string tcp = "tcp://";
    if (name.rfind(tcp, 0) == 0) {
      std::string rest = name.substr(tcp.size());
      size_t colon = rest.rfind(':');
      if (colon != std::string::npos && colon > 0) {
        std::string host = rest.substr(0, colon);
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
          host = host.substr(1, host.size() - 2);
        }
        unsigned long port = std::strtoul(rest.c_str() + colon + 1, nullptr, 10);
        if (port > 0 && port <= 65535) {
          auto client = agent::AgentClient::Connect(host, static_cast<uint16_t>(port),
                                                    options_.connect_timeout);
          if (!client) return MakeError("device '" + name + "': " + client.message());
          return std::unique_ptr<DeviceSession>(
              std::make_unique<Session>(name, nullptr, std::move(*client)));
        }
      }
    }
    return MakeError("unknown device '" + name + "' (known: local, local:NAME, tcp://HOST:PORT)");
  }

 private:
  Result<std::unique_ptr<DeviceSession>> OpenLocal(const std::string& name,
                                                    const std::string& store_dir) {
    std::error_code ec;
    fs::create_directories(store_dir, ec);
    if (ec) {
      return MakeError("device '" + name + "': cannot create agent store '" + store_dir +
                       "': " + ec.message());
    }
    auto process = AgentProcess::Start(options_.agent_path, store_dir, options_.connect_timeout);
    if (!process) return MakeError("device '" + name + "': " + process.message());
    auto client =
        agent::AgentClient::Connect("127.0.0.1", (*process)->port(), options_.connect_timeout);
    if (!client) return MakeError("device '" + name + "': " + client.message());
    return std::unique_ptr<DeviceSession>(
        std::make_unique<Session>(name, std::move(*process), std::move(*client)));
  }

  ProviderOptions options_;
};

}  // namespace

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
  return o;
}

std::unique_ptr<DeviceProvider> MakeDeviceProvider(const ProviderOptions& options) {
  return std::make_unique<Provider>(options);
}

}  // namespace dfarm::harness
