// The `adb` / `adb:SERIAL` device provider: a phone (or anything the adb
// server lists) as a DeviceProvider. Open() pushes dfarm-agent with the sync
// protocol (skipped when the device's copy has the same size and mtime) and
// starts it with `exec:` as `dfarm-agent --stdio --store DIR/store`, whose
// stdin/stdout become the AgentClient's transport (its stderr is appended to
// DIR/agent.log on the device, since exec: would merge it into the stream).
// The runner and models then reach the agent's store by sha256 as for any
// device (PutArtifact).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/devices/adb/adb_client.h"
#include "harness/devices/adb/device_name.h"
#include "harness/devices/devices.h"

namespace dfarm::harness::adb {

struct AdbProviderOptions {
  ServerAddress server;  // $ADB_SERVER_SOCKET or 127.0.0.1:5037
  // The dfarm-agent binary pushed to devices (built for the device's ABI).
  std::string agent_path;
  // The folder on the device that holds the agent, its store and its log.
  std::string device_dir = "/data/local/tmp/dfarm";
  std::chrono::milliseconds connect_timeout{10000};
  // The agent's log (DIR/agent.log) is moved to DIR/agent.log.1 (replacing
  // the previous one) when a session starts and it is larger than this.
  uint64_t agent_log_max_bytes = 1 << 20;
  // Set by DefaultAdbProviderOptions when $ADB_SERVER_SOCKET is unparsable;
  // Open() then fails with it.
  std::string config_error;
};

// server from $ADB_SERVER_SOCKET (a bad value sets config_error),
// agent_path from $DFARM_ADB_AGENT or else base.agent_path, device_dir from
// $DFARM_ADB_DIR when set.
AdbProviderOptions DefaultAdbProviderOptions(const ProviderOptions& base);

// Opens "adb" (the one device adb lists; an error when there are none or
// several) and "adb:SERIAL". KnownDevices() lists "adb:SERIAL" for every
// device the adb server has online (none when no server runs; it does not
// start one). Open() starts the adb server when needed.
std::unique_ptr<DeviceProvider> MakeAdbProvider(const ProviderOptions& options);
std::unique_ptr<DeviceProvider> MakeAdbProvider(const AdbProviderOptions& options);

// One line for `dfarm devices`: state is dfarm's word (online: adb says
// "device"; unauthorized; offline otherwise, with adb's word in the
// description). USB-only entries (phones adb does not list, fastboot) are
// named "usb:PATH" with state offline and the hint as description.
struct AdbDeviceListing {
  std::string name;         // "adb:SERIAL" or "usb:1-2.3"
  std::string state;        // online | unauthorized | offline
  std::string description;  // "DFarm_Test_Peer (product dfarm_peer, tcp)", or a hint
};

// Lists adb devices through the server at `server` (starting it when
// start_server and it is loopback) plus USB hints. An unreachable server is
// an error naming its address.
Result<std::vector<AdbDeviceListing>> ListAdbDevices(const ServerAddress& server,
                                                     bool start_server = true);

}  // namespace dfarm::harness::adb
