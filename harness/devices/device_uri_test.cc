#include "harness/devices/device_uri.h"

#include <gtest/gtest.h>

#include <string>

namespace dfarm::harness {
namespace {

using Kind = DeviceUri::Kind;

DeviceUri Parsed(const std::string& text) {
  auto uri = ParseDeviceUri(text);
  EXPECT_TRUE(uri.ok()) << text << ": " << (uri.ok() ? "" : uri.message());
  return uri.ok() ? *uri : DeviceUri{};
}

std::string ErrorOf(const std::string& text) {
  auto uri = ParseDeviceUri(text);
  EXPECT_FALSE(uri.ok()) << text;
  return uri.ok() ? "" : uri.message();
}

TEST(DeviceUriTest, PlainNames) {
  DeviceUri local = Parsed("local");
  EXPECT_EQ(local.kind, Kind::kLocal);
  EXPECT_EQ(local.text, "local");
  EXPECT_TRUE(local.is_local());
  EXPECT_FALSE(local.is_adb());

  DeviceUri qemu = Parsed("qemu-arm64");
  EXPECT_EQ(qemu.kind, Kind::kQemuArm64);
  EXPECT_FALSE(qemu.is_local());

  DeviceUri adb = Parsed("adb");
  EXPECT_EQ(adb.kind, Kind::kAdbAny);
  EXPECT_TRUE(adb.is_adb());
  EXPECT_EQ(adb.serial, "");
}

TEST(DeviceUriTest, LocalNamed) {
  DeviceUri uri = Parsed("local:b-2_X");
  EXPECT_EQ(uri.kind, Kind::kLocalNamed);
  EXPECT_EQ(uri.name, "b-2_X");
  EXPECT_TRUE(uri.is_local());
  EXPECT_EQ(Parsed("local:" + std::string(32, 'a')).name, std::string(32, 'a'));

  const std::string why = "': a local device's name must be [A-Za-z0-9_-]{1,32}";
  EXPECT_EQ(ErrorOf("local:"), "device 'local:" + why);
  EXPECT_EQ(ErrorOf("local:a b"), "device 'local:a b" + why);
  EXPECT_EQ(ErrorOf("local:a.b"), "device 'local:a.b" + why);
  const std::string long_name = "local:" + std::string(33, 'a');
  EXPECT_EQ(ErrorOf(long_name), "device '" + long_name + why);
}

TEST(DeviceUriTest, Tcp) {
  DeviceUri uri = Parsed("tcp://127.0.0.1:7000");
  EXPECT_EQ(uri.kind, Kind::kTcp);
  EXPECT_EQ(uri.host, "127.0.0.1");
  EXPECT_EQ(uri.port, 7000);
  EXPECT_EQ(uri.text, "tcp://127.0.0.1:7000");

  DeviceUri v6 = Parsed("tcp://[::1]:65535");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 65535);
  EXPECT_EQ(Parsed("tcp://phone.lan:1").host, "phone.lan");
  EXPECT_EQ(Parsed("tcp://h:00080").port, 80);

  for (const char* bad : {"tcp://", "tcp://host", "tcp://:7000", "tcp://host:"}) {
    EXPECT_EQ(ErrorOf(bad), "device '" + std::string(bad) + "' must look like tcp://HOST:PORT");
  }
  EXPECT_EQ(ErrorOf("tcp://h:99999"), "device 'tcp://h:99999' has a bad port '99999'");
  EXPECT_EQ(ErrorOf("tcp://h:0"), "device 'tcp://h:0' has a bad port '0'");
  EXPECT_EQ(ErrorOf("tcp://h:65536"), "device 'tcp://h:65536' has a bad port '65536'");
  EXPECT_EQ(ErrorOf("tcp://h:123456"), "device 'tcp://h:123456' has a bad port '123456'");
  EXPECT_EQ(ErrorOf("tcp://h:-1"), "device 'tcp://h:-1' has a bad port '-1'");
  EXPECT_EQ(ErrorOf("tcp://h:7x"), "device 'tcp://h:7x' has a bad port '7x'");
}

TEST(DeviceUriTest, Adb) {
  DeviceUri uri = Parsed("adb:0123456789ABCDEF");
  EXPECT_EQ(uri.kind, Kind::kAdb);
  EXPECT_EQ(uri.serial, "0123456789ABCDEF");
  EXPECT_TRUE(uri.is_adb());
  EXPECT_EQ(Parsed("adb:127.0.0.1:5555").serial, "127.0.0.1:5555");
  EXPECT_EQ(Parsed("adb:" + std::string(255, 's')).serial.size(), 255u);

  EXPECT_EQ(ErrorOf("adb:"), "device 'adb:' names no serial (adb:SERIAL, see `adb devices`)");
  const std::string long_name = "adb:" + std::string(256, 's');
  EXPECT_EQ(ErrorOf(long_name), "device '" + long_name.substr(0, 40) + "...': serial too long");
  EXPECT_EQ(ErrorOf("adb:has space"),
            "device 'adb:has space': an adb serial has no spaces or control characters");
  EXPECT_EQ(ErrorOf("adb:tab\t"),
            "device 'adb:tab\t': an adb serial has no spaces or control characters");
  EXPECT_EQ(ErrorOf("adb:\x7f"),
            "device 'adb:\x7f': an adb serial has no spaces or control characters");
}

TEST(DeviceUriTest, UnknownNames) {
  for (const char* bad : {"", "phone", "qemu-arm", "Local", "adbx", "tcp:/h:1", "local "}) {
    EXPECT_EQ(ErrorOf(bad), "unknown device '" + std::string(bad) +
                                "' (known: local, local:NAME, tcp://HOST:PORT, qemu-arm64, adb, "
                                "adb:SERIAL)");
  }
}

}  // namespace
}  // namespace dfarm::harness
