#include "harness/devices/device_uri.h"

namespace dfarm::harness {
namespace {

constexpr std::string_view kLocalPrefix = "local:";
constexpr std::string_view kTcpPrefix = "tcp://";
constexpr std::string_view kAdbPrefix = "adb:";
constexpr size_t kMaxLocalNameChars = 32;
constexpr size_t kMaxAdbSerialChars = 255;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Result<DeviceUri> ParseLocalNamed(DeviceUri uri) {
  uri.name = uri.text.substr(kLocalPrefix.size());
  if (uri.name.empty() || uri.name.size() > kMaxLocalNameChars ||
      uri.name.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
          std::string::npos) {
    return MakeError("device '" + uri.text +
                     "': a local device's name must be [A-Za-z0-9_-]{1,32}");
  }
  uri.kind = DeviceUri::Kind::kLocalNamed;
  return uri;
}

Result<DeviceUri> ParseTcp(DeviceUri uri) {
  const std::string rest = uri.text.substr(kTcpPrefix.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
    return MakeError("device '" + uri.text + "' must look like tcp://HOST:PORT");
  }
  const std::string port = rest.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoul(port) == 0 || std::stoul(port) > 65535) {
    return MakeError("device '" + uri.text + "' has a bad port '" + port + "'");
  }
  uri.kind = DeviceUri::Kind::kTcp;
  uri.port = static_cast<uint16_t>(std::stoul(port));
  uri.host = rest.substr(0, colon);
  if (uri.host.size() > 2 && uri.host.front() == '[' && uri.host.back() == ']') {
    uri.host = uri.host.substr(1, uri.host.size() - 2);
  }
  return uri;
}

Result<DeviceUri> ParseAdb(DeviceUri uri) {
  uri.serial = uri.text.substr(kAdbPrefix.size());
  if (uri.serial.empty()) {
    return MakeError("device 'adb:' names no serial (adb:SERIAL, see `adb devices`)");
  }
  if (uri.serial.size() > kMaxAdbSerialChars) {
    return MakeError("device '" + uri.text.substr(0, 40) + "...': serial too long");
  }
  for (unsigned char c : uri.serial) {
    if (c <= ' ' || c >= 0x7f) {
      return MakeError("device '" + uri.text +
                       "': an adb serial has no spaces or control characters");
    }
  }
  uri.kind = DeviceUri::Kind::kAdb;
  return uri;
}

}  // namespace

Result<DeviceUri> ParseDeviceUri(std::string_view text) {
  DeviceUri uri;
  uri.text = std::string(text);
  if (text == "local") {
    uri.kind = DeviceUri::Kind::kLocal;
    return uri;
  }
  if (text == "qemu-arm64") {
    uri.kind = DeviceUri::Kind::kQemuArm64;
    return uri;
  }
  if (text == "adb") {
    uri.kind = DeviceUri::Kind::kAdbAny;
    return uri;
  }
  if (StartsWith(text, kAdbPrefix)) return ParseAdb(std::move(uri));
  if (StartsWith(text, kLocalPrefix)) return ParseLocalNamed(std::move(uri));
  if (StartsWith(text, kTcpPrefix)) return ParseTcp(std::move(uri));
  return MakeError("unknown device '" + uri.text +
                   "' (known: local, local:NAME, tcp://HOST:PORT, qemu-arm64, adb, adb:SERIAL)");
}

}  // namespace dfarm::harness
