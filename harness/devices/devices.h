// Devices: where jobs run. A provider turns a device name from the spec (a
// device URI, harness/devices/device_uri.h: "local", "local:NAME", "tcp://HOST:PORT",
// "qemu-arm64", "adb", "adb:SERIAL") into a session with a connected
// AgentClient. Open() may be called from several threads at once (one device
// worker each); a session belongs to the thread that opened it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "agent/client/client.h"

namespace dfarm::harness {

// One open connection to one device's agent. Destroying the session closes
// the connection and, for `local`, stops and reaps the agent it started.
class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  virtual const std::string& name() const = 0;
  virtual agent::AgentClient& client() = 0;
};

// A device a provider lists without being told about it, with what the
// provider knows of its state without asking its agent.
struct ListedDevice {
  std::string name;
  // "": ask its agent (open it); else "unauthorized" or "offline" (a phone
  // adb lists but cannot reach), with what to do about it in `reason`.
  std::string state;
  std::string reason;
};

class DeviceProvider {
 public:
  virtual ~DeviceProvider() = default;
  // Whether `name` is one of this provider's devices (its URI kind); a
  // provider used alone serves every name. (optional)
  virtual bool Serves(const std::string& name) const {
    (void)name;
    return true;
  }
  // Devices this provider can list without being told about them ("local").
  virtual std::vector<std::string> KnownDevices() const = 0;
  // KnownDevices() with their state, plus devices it sees that cannot run a
  // job now (`dfarm devices`). (optional)
  virtual std::vector<ListedDevice> List() const {
    std::vector<ListedDevice> listed;
    for (std::string& name : KnownDevices()) listed.push_back({std::move(name), "", ""});
    return listed;
  }
  // Connects to `name`; the error names the device and why it is unreachable.
  // ErrorKind::kConflict: a local or qemu-arm64 device whose agent store
  // another live agent holds (another dfarm's sweep): busy, not broken.
  virtual Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) = 0;
  // The ABI `name`'s agent reports, when the provider knows it without
  // asking the agent ("local": this host's, "qemu-arm64": "arm64-v8a"), else
  // "" (the sweep then asks the agent). (optional)
  virtual std::string KnownAbi(const std::string& name) const {
    (void)name;
    return {};
  }
};

struct ProviderOptions {
  std::string agent_path;   // the dfarm-agent binary for `local`
  std::string agent_store;  // the local agent's artifact store folder
  std::chrono::milliseconds connect_timeout{10000};
  // The qemu-arm64 device: the aarch64 dfarm-agent (the cross build), run as
  // `qemu_path -L qemu_sysroot arm64_agent_path ... --runner-prefix
  // "qemu_path -L qemu_sysroot"` with store agent_store-qemu-arm64.
  std::string arm64_agent_path;
  std::string qemu_path = "qemu-aarch64";  // a bare name is looked up in PATH
  std::string qemu_sysroot = "/usr/aarch64-linux-gnu";
  // Token files (agent/protocol/auth.h, ReadTokenFile: private, >= 32 bytes)
  // for agents that ask for a token. They apply to tcp:// devices only:
  // local, local:NAME and qemu-arm64 agents are our children on a private
  // socketpair and adb agents ride adb's channel, so for those a token is
  // ignored. token_file (dfarm --token-file, DFARM_TOKEN_FILE) is for every
  // tcp:// device; device_token_files (device URI -> file, the spec's
  // {"uri":..., "token_file":...}) wins over it for its device. Each file is
  // read when its device is opened.
  std::string token_file;
  std::map<std::string, std::string> device_token_files;
};

// Defaults: agent_path from $DFARM_AGENT or `dfarm-agent` beside this
// executable; agent_store $XDG_CACHE_HOME/dfarm/agent-store or
// ~/.cache/dfarm/agent-store; arm64_agent_path from $DFARM_ARM64_AGENT or
// Arm64ProgramOf(agent_path) (harness/spec/runner_builds.h: the cross build, or an
// installed tree's); qemu_path from $DFARM_QEMU.
ProviderOptions DefaultProviderOptions();

// A file beside the running executable (/proc/self/exe), e.g. "dfarm-runner".
std::string BesideSelf(const std::string& file_name);

inline constexpr const char* kQemuArm64Device = "qemu-arm64";

// The token file `options` give for `device` ("" when none): its entry in
// device_token_files, else token_file for a tcp:// device, else "".
std::string TokenFileFor(const ProviderOptions& options, const std::string& device);

// Whether the qemu-arm64 device can start with `options`; the error says why
// not (no qemu-aarch64, no cross-built agent, no sysroot).
Result<void> QemuArm64Available(const ProviderOptions& options);

// The device providers, one row each; a new kind of device is its provider
// (its own file or folder) plus its row in ProviderTable() (devices.cc):
//   local       "local" (the agent as a child process speaking over a
//               socketpair on its stdin/stdout, never a TCP port; store
//               agent_store) and "local:NAME" (store agent_store-NAME)
//   qemu-arm64  "qemu-arm64": the aarch64 agent under qemu-user (store
//               agent_store-qemu-arm64); listed when it is available
//   tcp         "tcp://HOST:PORT": an agent started elsewhere
//   adb         "adb", "adb:SERIAL": a phone through the adb server (adb/)
struct ProviderRow {
  const char* name;
  std::unique_ptr<DeviceProvider> (*make)(const ProviderOptions& options);
};
const std::vector<ProviderRow>& ProviderTable();

// Every provider of ProviderTable() as one: Open() and KnownAbi() go to the
// provider that serves the name; KnownDevices() and List() join theirs in
// table order.
std::unique_ptr<DeviceProvider> MakeDeviceProvider(const ProviderOptions& options);

}  // namespace dfarm::harness
