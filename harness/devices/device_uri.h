// Device URIs: the names the spec, `dfarm --device` and the device providers
// use for devices. This is the one parser of them; the spec check
// (CheckDeviceName), the provider dispatch (harness/devices/devices.cc) and the adb
// provider (harness/devices/adb/) all go through ParseDeviceUri.
//
//   local             an agent started as our child (store agent_store)
//   local:NAME        another child agent, store agent_store-NAME; NAME is [A-Za-z0-9_-]{1,32}
//   tcp://HOST:PORT   an agent started elsewhere; HOST may be a bracketed IPv6 literal
//   qemu-arm64        the aarch64 agent under qemu-user
//   adb               the one device the adb server lists
//   adb:SERIAL        the adb device SERIAL (printable, no spaces, at most 255 characters)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/base/result.h"

namespace dfarm::harness {

struct DeviceUri {
  enum class Kind {
    kLocal,       // "local"
    kLocalNamed,  // "local:NAME"
    kTcp,         // "tcp://HOST:PORT"
    kQemuArm64,   // "qemu-arm64"
    kAdbAny,      // "adb"
    kAdb,         // "adb:SERIAL"
  };

  Kind kind = Kind::kLocal;
  std::string text;    // the URI as written, "tcp://[::1]:7000"
  std::string name;    // kLocalNamed: NAME
  std::string host;    // kTcp: HOST without the brackets of an IPv6 literal, "::1"
  uint16_t port = 0;   // kTcp: 1..65535
  std::string serial;  // kAdb: SERIAL

  bool is_local() const { return kind == Kind::kLocal || kind == Kind::kLocalNamed; }
  bool is_adb() const { return kind == Kind::kAdb || kind == Kind::kAdbAny; }
};

// Parses `uri`; the error names the device and why it is not one, e.g.
// "device 'tcp://h:99999' has a bad port '99999'" or "unknown device 'phone'
// (known: local, local:NAME, tcp://HOST:PORT, qemu-arm64, adb, adb:SERIAL)".
Result<DeviceUri> ParseDeviceUri(std::string_view uri);

}  // namespace dfarm::harness
