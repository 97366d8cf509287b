// Devices: where jobs run. A provider turns a device name from the spec
// ("local", "local:NAME", "tcp://HOST:PORT") into a session with a connected
// AgentClient. Open() may be called from several threads at once (one device
// worker each); a session belongs to the thread that opened it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/client.h"
#include "agent/result.h"

namespace dfarm::harness {

// One open connection to one device's agent. Destroying the session closes
// the connection and, for `local`, stops and reaps the agent it started.
class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  virtual const std::string& name() const = 0;
  virtual agent::AgentClient& client() = 0;
};

class DeviceProvider {
 public:
  virtual ~DeviceProvider() = default;
  // Devices this provider can list without being told about them ("local").
  virtual std::vector<std::string> KnownDevices() const = 0;
  // Connects to `name`; the error names the device and why it is unreachable.
  virtual Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) = 0;
};

struct ProviderOptions {
  std::string agent_path;   // the dfarm-agent binary for `local`
  std::string agent_store;  // the local agent's artifact store folder
  std::chrono::milliseconds connect_timeout{10000};
};

// Defaults: agent_path from $DFARM_AGENT or `dfarm-agent` beside this
// executable; agent_store $XDG_CACHE_HOME/dfarm/agent-store or
// ~/.cache/dfarm/agent-store.
ProviderOptions DefaultProviderOptions();

// A file beside the running executable (/proc/self/exe), e.g. "dfarm-runner".
std::string BesideSelf(const std::string& file_name);

// The provider for "local" (the agent as a child process, store agent_store),
// "local:NAME" (another child agent, store agent_store-NAME) and "tcp://HOST:PORT".
std::unique_ptr<DeviceProvider> MakeDeviceProvider(const ProviderOptions& options);

}  // namespace dfarm::harness
