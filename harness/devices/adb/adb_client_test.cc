#include "harness/devices/adb/adb_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness/devices/adb/adb_provider.h"

namespace dfarm::harness::adb {
namespace {

TEST(AdbServerSocketTest, ParsesPortAndHostPort) {
  auto a = ParseServerSocket("tcp:5099");
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 5099);
  auto b = ParseServerSocket("tcp:localhost:6000");
  ASSERT_TRUE(b) << b.message();
  EXPECT_EQ(b->host, "localhost");
  EXPECT_EQ(b->port, 6000);
}

TEST(AdbServerSocketTest, RefusesBadSpecsNamingThem) {
  for (const char* bad : {"5037", "tcp:", "tcp:0", "tcp:70000", "tcp:host:x", "local:/tmp/s"}) {
    auto a = ParseServerSocket(bad);
    ASSERT_FALSE(a) << bad;
    EXPECT_NE(a.message().find(std::string("'") + bad + "'"), std::string::npos) << a.message();
  }
}

TEST(AdbDevicesLTest, ParsesUsbTcpAndOddStates) {
  const std::string text =
      "0123456789ABCDEF       device usb:1-2.3 product:panther model:Pixel_7 device:panther "
      "transport_id:3\n"
      "127.0.0.1:40001        device product:dfarm_peer model:DFarm_Test_Peer device:dfarm_peer "
      "transport_id:7\n"
      "R58M123               unauthorized usb:2-1 transport_id:4\n"
      "ZY22                   no permissions (user alice is not in the plugdev group); see "
      "[http://developer.android.com/tools/device.html] usb:1-4 transport_id:5\n"
      "\n";
  auto d = ParseDevicesL(text);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].serial, "0123456789ABCDEF");
  EXPECT_EQ(d[0].state, "device");
  EXPECT_EQ(d[0].usb, "1-2.3");
  EXPECT_EQ(d[0].product, "panther");
  EXPECT_EQ(d[0].model, "Pixel_7");
  EXPECT_EQ(d[0].device, "panther");
  EXPECT_EQ(d[0].transport_id, "3");
  EXPECT_EQ(d[1].serial, "127.0.0.1:40001");
  EXPECT_EQ(d[1].usb, "");
  EXPECT_EQ(d[1].model, "DFarm_Test_Peer");
  EXPECT_EQ(d[1].transport_id, "7");
  EXPECT_EQ(d[2].state, "unauthorized");
  EXPECT_EQ(d[2].usb, "2-1");
  EXPECT_EQ(d[3].state, "no permissions");
  EXPECT_EQ(d[3].usb, "1-4");
  EXPECT_EQ(d[3].transport_id, "5");
  EXPECT_NE(d[3].state_detail.find("plugdev"), std::string::npos) << d[3].state_detail;
}

TEST(AdbShellQuoteTest, QuotesSingleQuotes) {
  EXPECT_EQ(ShellQuote("/data/local/tmp/dfarm"), "'/data/local/tmp/dfarm'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(AdbDeviceNameTest, AcceptsAdbAndSerials) {
  EXPECT_TRUE(IsAdbDeviceName("adb"));
  EXPECT_TRUE(IsAdbDeviceName("adb:0123456789ABCDEF"));
  EXPECT_TRUE(IsAdbDeviceName("adb:127.0.0.1:5555"));
  EXPECT_FALSE(IsAdbDeviceName("local"));
  EXPECT_TRUE(CheckAdbDeviceName("adb:127.0.0.1:5555").ok());
  EXPECT_NE(CheckAdbDeviceName("adb:has space").message().find("'adb:has space'"),
            std::string::npos);
  EXPECT_NE(CheckAdbDeviceName("adb:").message().find("no serial"), std::string::npos);
}

// A port nobody listens on: bind, read the port, close.
uint16_t DeadPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(AdbClientTest, UnreachableServerIsAnErrorNamingIt) {
  ServerAddress s;
  s.port = DeadPort();
  AdbClient client(s);
  auto devices = client.ListDevices();
  ASSERT_FALSE(devices);
  EXPECT_NE(devices.message().find("127.0.0.1:" + std::to_string(s.port)), std::string::npos)
      << devices.message();
  auto listing = ListAdbDevices(s, /*start_server=*/false);
  EXPECT_FALSE(listing);
}

TEST(AdbProviderTest, OpenRefusesNonAdbNames) {
  AdbProviderOptions o;
  o.server.port = DeadPort();
  auto provider = MakeAdbProvider(o);
  auto session = provider->Open("tcp://127.0.0.1:1");
  ASSERT_FALSE(session);
  EXPECT_NE(session.message().find("not an adb device"), std::string::npos) << session.message();
  // No server there: KnownDevices lists nothing and does not fail.
  EXPECT_TRUE(provider->KnownDevices().empty());
}

TEST(AdbProviderTest, BadServerSocketInTheEnvironmentIsReportedAtOpen) {
  ::setenv("ADB_SERVER_SOCKET", "udp:5037", 1);
  auto o = DefaultAdbProviderOptions(ProviderOptions{});
  ::unsetenv("ADB_SERVER_SOCKET");
  auto session = MakeAdbProvider(o)->Open("adb:SERIAL1");
  ASSERT_FALSE(session);
  EXPECT_NE(session.message().find("'udp:5037'"), std::string::npos) << session.message();
  EXPECT_NE(session.message().find("adb:SERIAL1"), std::string::npos) << session.message();
}

}  // namespace
}  // namespace dfarm::harness::adb
