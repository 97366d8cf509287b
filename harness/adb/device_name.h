// adb device names ("adb", "adb:SERIAL"), header-only so the spec parser can
// check them without linking the adb client.
#pragma once

#include <string>

namespace dfarm::harness::adb {

// True for names this provider owns: "adb" and anything starting "adb:".
inline bool IsAdbDeviceName(const std::string& name) {
  return name == "adb" || name.rfind("adb:", 0) == 0;
}

// Empty when `name` is "adb" or "adb:SERIAL" with a serial of printable
// characters and no spaces; otherwise why not, naming the device.
inline std::string CheckAdbDeviceName(const std::string& name) {
  if (name == "adb") return {};
  if (name.rfind("adb:", 0) != 0) return "'" + name + "' is not an adb device (adb or adb:SERIAL)";
  std::string serial = name.substr(4);
  if (serial.empty()) return "device 'adb:' names no serial (adb:SERIAL, see `adb devices`)";
  if (serial.size() > 255) return "device '" + name.substr(0, 40) + "...': serial too long";
  for (unsigned char c : serial) {
    if (c <= ' ' || c >= 0x7f) {
      return "device '" + name + "': an adb serial has no spaces or control characters";
    }
  }
  return {};
}

}  // namespace dfarm::harness::adb
