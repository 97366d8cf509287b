// adb device names ("adb", "adb:SERIAL"): the adb side of the device URIs,
// which harness/devices/device_uri.h parses.
#pragma once

#include <string>

#include "harness/devices/device_uri.h"

namespace dfarm::harness::adb {

// True for names this provider owns: "adb" and anything starting "adb:".
inline bool IsAdbDeviceName(const std::string& name) {
  return name == "adb" || name.rfind("adb:", 0) == 0;
}

// The URI of `name` when it is "adb" or "adb:SERIAL" with a serial of
// printable characters and no spaces; otherwise an error naming the device.
inline Result<DeviceUri> ParseAdbDeviceName(const std::string& name) {
  if (!IsAdbDeviceName(name)) {
    return MakeError("'" + name + "' is not an adb device (adb or adb:SERIAL)");
  }
  return ParseDeviceUri(name);
}

// Whether `name` is "adb" or "adb:SERIAL" (ParseAdbDeviceName); the error
// says why not, naming the device.
inline Result<void> CheckAdbDeviceName(const std::string& name) {
  auto uri = ParseAdbDeviceName(name);
  if (!uri) return uri.error();
  return Ok();
}

}  // namespace dfarm::harness::adb
