#include "harness/devices/adb/adb_provider.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "harness/devices/adb/usb_discovery.h"

namespace dfarm::harness::adb {
namespace {

// The `uname -m` names an ELF e_machine runs on ("x86_64" for EM_X86_64), or
// empty for a file that is not ELF or a machine we do not know.
std::vector<std::string> ElfMachines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[20] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return {};
  if (h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F' || h[5] != 1) return {};
  switch (h[18] | h[19] << 8) {  // e_machine, little-endian
    case 62:
      return {"x86_64"};
    case 183:
      return {"aarch64"};
    case 40:
      return {"armv7l", "armv8l", "aarch64"};
    case 3:
      return {"i686", "i386", "x86_64"};
    default:
      return {};
  }
}

class AdbSession final : public DeviceSession {
 public:
  AdbSession(std::string name, std::unique_ptr<agent::AgentClient> client)
      : name_(std::move(name)), client_(std::move(client)) {}
  const std::string& name() const override { return name_; }
  agent::AgentClient& client() override { return *client_; }

 private:
  std::string name_;
  std::unique_ptr<agent::AgentClient> client_;  // closing it ends the exec: stream
};

// What a user should do about a device in adb state `state`.
std::string StateAdvice(const std::string& state) {
  if (state == "unauthorized") return "unlock it and accept the USB debugging prompt";
  if (state == "no permissions") return "this user may not open it (udev rules, plugdev group)";
  if (state == "offline") return "replug it or run `adb reconnect`";
  if (state == "bootloader" || state == "recovery" || state == "sideload") {
    return "reboot it to Android";
  }
  return "wait for it to come online";
}

class AdbProvider final : public DeviceProvider {
 public:
  explicit AdbProvider(AdbProviderOptions options)
      : options_(std::move(options)), client_(options_.server, options_.connect_timeout) {}

  bool Serves(const std::string& name) const override { return IsAdbDeviceName(name); }

  // Every device the adb server lists (a running server only: one started
  // just to list would outlive dfarm on its port), and USB phones it does
  // not list, with their state and what to do; an online one is asked.
  std::vector<ListedDevice> List() const override {
    std::vector<ListedDevice> out;
    if (!options_.config_error.empty()) return out;
    auto listed = ListAdbDevices(options_.server, /*start_server=*/false);
    if (!listed) return out;
    for (AdbDeviceListing& e : *listed) {
      out.push_back(
          {std::move(e.name), e.state == "online" ? "" : e.state, std::move(e.description)});
    }
    return out;
  }

  std::vector<std::string> KnownDevices() const override {
    AdbClient client(options_.server, options_.connect_timeout);
    std::vector<std::string> names;
    auto devices = client.ListDevices();
    if (!devices) return names;
    for (const AdbDevice& d : *devices) {
      if (d.state == "device") names.push_back("adb:" + d.serial);
    }
    return names;
  }

  Result<std::unique_ptr<DeviceSession>> Open(const std::string& name) override {
    auto uri = ParseAdbDeviceName(name);
    if (!uri) return uri.error();
    if (!options_.config_error.empty()) {
      return MakeError("device '" + name + "': " + options_.config_error);
    }
    if (auto r = client_.EnsureServer(); !r)
      return MakeError("device '" + name + "': " + r.message());
    auto devices = client_.ListDevices();
    if (!devices) return MakeError("device '" + name + "': " + devices.message());
    const AdbDevice* device = nullptr;
    if (uri->kind == DeviceUri::Kind::kAdbAny) {
      if (devices->empty()) {
        return MakeError("device 'adb': the adb server at " + options_.server.ToString() +
                         " lists no device (see `dfarm devices` for phones on USB it does not "
                         "show)");
      }
      if (devices->size() > 1) {
        std::string list;
        for (const AdbDevice& d : *devices)
          list += (list.empty() ? "" : ", ") + ("adb:" + d.serial);
        return MakeError("device 'adb': the adb server lists several devices; name one (" + list +
                         ")");
      }
      device = &devices->front();
    } else {
      const std::string& serial = uri->serial;
      for (const AdbDevice& d : *devices) {
        if (d.serial == serial) device = &d;
      }
      if (!device) {
        return MakeError("device '" + name + "': the adb server at " + options_.server.ToString() +
                         " does not list serial '" + serial + "'");
      }
    }
    const std::string shown = "adb:" + device->serial;
    if (device->state != "device") {
      return MakeError("device '" + shown + "': adb reports it '" + device->state +
                       "': " + StateAdvice(device->state));
    }
    return Start(shown, device->serial);
  }

 private:
  Result<std::unique_ptr<DeviceSession>> Start(const std::string& name, const std::string& serial) {
    struct stat st {};
    if (::stat(options_.agent_path.c_str(), &st) != 0) {
      return MakeError("device '" + name + "': dfarm-agent for the device not found at '" +
                       options_.agent_path + "' (set DFARM_ADB_AGENT)");
    }
    // A binary for another ABI would fail inside the stream with a shell
    // error instead of hello; say so plainly first.
    std::vector<std::string> machines = ElfMachines(options_.agent_path);
    if (!machines.empty()) {
      auto uname = client_.ExecOutput(serial, "uname -m", 256);
      std::string machine = uname ? *uname : "";
      while (!machine.empty() && (machine.back() == '\n' || machine.back() == '\r')) {
        machine.pop_back();
      }
      if (!machine.empty() &&
          std::find(machines.begin(), machines.end(), machine) == machines.end()) {
        return MakeError("device '" + name + "' is " + machine + " but the dfarm-agent at '" +
                         options_.agent_path + "' is built for " + machines.front() +
                         ": set DFARM_ADB_AGENT to a dfarm-agent built for the device");
      }
    }
    const std::string dir = options_.device_dir;
    const std::string remote_agent = dir + "/dfarm-agent";
    auto remote = client_.Stat(serial, remote_agent);
    if (!remote) return MakeError("device '" + name + "': " + remote.message());
    const auto mtime = static_cast<uint32_t>(st.st_mtime);
    if (!remote->exists() || remote->size != static_cast<uint32_t>(st.st_size) ||
        remote->mtime != mtime) {
      auto pushed = client_.Push(serial, options_.agent_path, remote_agent, 0755, mtime);
      if (!pushed) return MakeError("device '" + name + "': " + pushed.message());
    }
    // exec: merges stderr into the stream, so the agent's log goes to a file,
    // kept to two generations of agent_log_max_bytes.
    const std::string log = ShellQuote(dir + "/agent.log");
    std::string command =
        "mkdir -p " + ShellQuote(dir + "/store") + " && { [ ! -f " + log + " ] || [ \"$(wc -c < " +
        log + ")\" -le " + std::to_string(options_.agent_log_max_bytes) + " ] || mv -f " + log +
        " " + ShellQuote(dir + "/agent.log.1") + "; } && exec " + ShellQuote(remote_agent) +
        " --stdio --store " + ShellQuote(dir + "/store") + " 2>>" + ShellQuote(dir + "/agent.log");
    auto fd = client_.Exec(serial, command);
    if (!fd) return MakeError("device '" + name + "': " + fd.message());
    agent::ConnectOptions connect;
    connect.timeout = options_.connect_timeout;
    int raw = fd->release();
    auto client = agent::AgentClient::ConnectFds(raw, raw, name, connect);
    if (!client) {
      return MakeError("device '" + name + "': " + client.message() + " (the agent's log is " +
                       dir + "/agent.log on the device)");
    }
    return std::unique_ptr<DeviceSession>(std::make_unique<AdbSession>(name, std::move(*client)));
  }

  AdbProviderOptions options_;
  AdbClient client_;
};

std::string DescribeDevice(const AdbDevice& d) {
  std::string s = d.model.empty() ? d.serial : d.model;
  std::string detail;
  auto add = [&](const std::string& part) { detail += (detail.empty() ? "" : ", ") + part; };
  if (!d.product.empty()) add("product " + d.product);
  add(d.usb.empty() ? "tcp" : "usb " + d.usb);
  if (d.state != "device") add("adb state '" + d.state + "': " + StateAdvice(d.state));
  return s + " (" + detail + ")";
}

}  // namespace

AdbProviderOptions DefaultAdbProviderOptions(const ProviderOptions& base) {
  AdbProviderOptions o;
  auto server = ServerAddressFromEnv();
  if (server) {
    o.server = *server;
  } else {
    o.config_error = server.message();
  }
  const char* agent = std::getenv("DFARM_ADB_AGENT");
  o.agent_path = agent && *agent ? agent : base.agent_path;
  const char* dir = std::getenv("DFARM_ADB_DIR");
  if (dir && *dir) o.device_dir = dir;
  o.connect_timeout = base.connect_timeout;
  return o;
}

std::unique_ptr<DeviceProvider> MakeAdbProvider(const ProviderOptions& options) {
  return MakeAdbProvider(DefaultAdbProviderOptions(options));
}

std::unique_ptr<DeviceProvider> MakeAdbProvider(const AdbProviderOptions& options) {
  return std::make_unique<AdbProvider>(options);
}

Result<std::vector<AdbDeviceListing>> ListAdbDevices(const ServerAddress& server,
                                                     bool start_server) {
  AdbClient client(server);
  if (start_server) {
    if (auto r = client.EnsureServer(); !r) return r.error();
  }
  auto devices = client.ListDevices();
  if (!devices) return devices.error();
  std::vector<AdbDeviceListing> out;
  for (const AdbDevice& d : *devices) {
    std::string state = d.state == "device"         ? "online"
                        : d.state == "unauthorized" ? "unauthorized"
                                                    : "offline";
    out.push_back({"adb:" + d.serial, state, DescribeDevice(d)});
  }
  auto usb = EnumerateUsb();
  if (usb) {
    for (const UsbPhone& p : MatchUsbPhones(*usb, *devices)) {
      if (!p.adb_serial.empty() || p.hint.empty()) continue;  // adb lists it: said above
      out.push_back({"usb:" + p.usb_path, "offline", p.hint});
    }
  }
  return out;
}

}  // namespace dfarm::harness::adb
