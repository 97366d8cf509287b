#include "harness/devices/adb/usb_discovery.h"

#include <gtest/gtest.h>

namespace dfarm::harness::adb {
namespace {

TEST(UsbClassifyTest, AdbAndFastbootTriples) {
  EXPECT_EQ(ClassifyInterface(0xff, 0x42, 0x01), UsbInterfaceKind::kAdb);
  EXPECT_EQ(ClassifyInterface(0xff, 0x42, 0x03), UsbInterfaceKind::kFastboot);
  EXPECT_EQ(ClassifyInterface(0xff, 0x42, 0x02), UsbInterfaceKind::kOther);
  EXPECT_EQ(ClassifyInterface(0xff, 0x43, 0x01), UsbInterfaceKind::kOther);
  EXPECT_EQ(ClassifyInterface(0x06, 0x01, 0x01), UsbInterfaceKind::kOther);  // MTP/PTP
  EXPECT_EQ(ClassifyInterface(0x08, 0x42, 0x01), UsbInterfaceKind::kOther);
}

TEST(UsbPathTest, BusAndPortChain) {
  UsbDeviceInfo d;
  d.bus = 1;
  d.ports = {2, 3};
  EXPECT_EQ(UsbPath(d), "1-2.3");
  d.bus = 3;
  d.ports = {7};
  EXPECT_EQ(UsbPath(d), "3-7");
}

UsbDeviceInfo Device(uint8_t bus, std::vector<uint8_t> ports, uint16_t vid, uint16_t pid,
                     std::vector<UsbInterfaceInfo> interfaces, std::string serial = {}) {
  UsbDeviceInfo d;
  d.bus = bus;
  d.ports = std::move(ports);
  d.vendor_id = vid;
  d.product_id = pid;
  d.interfaces = std::move(interfaces);
  d.serial = std::move(serial);
  return d;
}

AdbDevice Adb(std::string serial, std::string state, std::string usb) {
  AdbDevice a;
  a.serial = std::move(serial);
  a.state = std::move(state);
  a.usb = std::move(usb);
  return a;
}

const UsbInterfaceInfo kMtp{0x06, 0x01, 0x01};
const UsbInterfaceInfo kAdbItf{0xff, 0x42, 0x01};
const UsbInterfaceInfo kFastbootItf{0xff, 0x42, 0x03};

TEST(UsbMatchTest, HintsForPhonesAdbDoesNotShowOrCannotUse) {
  std::vector<UsbDeviceInfo> usb = {
      // Online in adb (matched by usb path): no hint.
      Device(1, {2}, 0x18d1, 0x4ee7, {kMtp, kAdbItf}),
      // ADB interface, adb matched it by serial but it is unauthorized.
      Device(1, {3}, 0x04e8, 0x6860, {kMtp, kAdbItf}, "R58M123"),
      // ADB interface, adb does not list it at all.
      Device(2, {1, 4}, 0x2717, 0xff48, {kAdbItf}),
      // A phone maker's device without an ADB interface: debugging off.
      Device(2, {2}, 0x18d1, 0x4ee1, {kMtp}),
      // Fastboot.
      Device(3, {1}, 0x18d1, 0x4ee0, {kFastbootItf}),
      // A keyboard: not a phone, not listed.
      Device(1, {5}, 0x046d, 0xc31c, {{0x03, 0x01, 0x01}}),
  };
  std::vector<AdbDevice> adb = {Adb("0123456789ABCDEF", "device", "1-2"),
                                Adb("R58M123", "unauthorized", ""),
                                Adb("127.0.0.1:40001", "device", "")};
  auto phones = MatchUsbPhones(usb, adb);
  ASSERT_EQ(phones.size(), 5u);

  EXPECT_EQ(phones[0].usb_path, "1-2");
  EXPECT_EQ(phones[0].kind, UsbInterfaceKind::kAdb);
  EXPECT_EQ(phones[0].adb_serial, "0123456789ABCDEF");
  EXPECT_EQ(phones[0].hint, "");

  EXPECT_EQ(phones[1].adb_serial, "R58M123");
  EXPECT_EQ(phones[1].adb_state, "unauthorized");
  EXPECT_NE(phones[1].hint.find("unauthorized"), std::string::npos) << phones[1].hint;
  EXPECT_NE(phones[1].hint.find("1-3"), std::string::npos) << phones[1].hint;

  EXPECT_EQ(phones[2].usb_path, "2-1.4");
  EXPECT_EQ(phones[2].adb_serial, "");
  EXPECT_NE(phones[2].hint.find("does not list it"), std::string::npos) << phones[2].hint;
  EXPECT_NE(phones[2].hint.find("2717:ff48"), std::string::npos) << phones[2].hint;

  EXPECT_EQ(phones[3].kind, UsbInterfaceKind::kOther);
  EXPECT_NE(phones[3].hint.find("USB debugging"), std::string::npos) << phones[3].hint;

  EXPECT_EQ(phones[4].kind, UsbInterfaceKind::kFastboot);
  EXPECT_NE(phones[4].hint.find("fastboot"), std::string::npos) << phones[4].hint;
}

TEST(UsbEnumerateTest, WorksWithoutUsbDevices) {
  // This machine may have no USB at all: the call must still succeed, and
  // every entry it returns must have a bus-port path.
  auto devices = EnumerateUsb();
  ASSERT_TRUE(devices) << devices.message();
  for (const UsbDeviceInfo& d : *devices) {
    EXPECT_NE(UsbPath(d).find('-'), std::string::npos);
  }
}

}  // namespace
}  // namespace dfarm::harness::adb
