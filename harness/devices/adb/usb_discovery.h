// USB discovery: which USB devices look like phones, which of them adb lists,
// and a hint for each one it does not (debugging off, unauthorized, no
// permission, fastboot). Enumeration only reads descriptors (libusb); it never
// claims an interface, so it cannot disturb an adb server that owns one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/devices/adb/adb_client.h"

namespace dfarm::harness::adb {

// ADB's interface triple is class 0xff, subclass 0x42, protocol 0x01;
// fastboot's is 0xff/0x42/0x03.
enum class UsbInterfaceKind { kOther, kAdb, kFastboot };
UsbInterfaceKind ClassifyInterface(uint8_t cls, uint8_t subclass, uint8_t protocol);

struct UsbInterfaceInfo {
  uint8_t cls = 0;
  uint8_t subclass = 0;
  uint8_t protocol = 0;
};

// One USB device as its descriptors describe it.
struct UsbDeviceInfo {
  uint8_t bus = 0;
  std::vector<uint8_t> ports;  // port numbers from the root hub down
  uint16_t vendor_id = 0;
  uint16_t product_id = 0;
  std::string serial;        // iSerialNumber, empty when unreadable without permission
  std::string product_name;  // iProduct, likewise
  std::vector<UsbInterfaceInfo> interfaces;  // all interfaces of the active configuration
};

// adb's "usb:" path for a device: "BUS-P1.P2..." (e.g. "1-2.3").
std::string UsbPath(const UsbDeviceInfo& device);

// What USB shows about one phone-like device, and what to tell the user.
struct UsbPhone {
  std::string usb_path;  // "1-2.3"
  uint16_t vendor_id = 0;
  uint16_t product_id = 0;
  std::string serial;
  std::string product_name;
  UsbInterfaceKind kind = UsbInterfaceKind::kOther;  // kOther: no adb/fastboot interface
  std::string adb_serial;  // the adb device it matched, empty if adb does not list it
  std::string adb_state;   // that device's adb state
  std::string hint;        // one sentence; empty when adb lists it online
};

// Matches phone-like USB devices (an adb or fastboot interface, or a known
// phone maker's vendor id) against adb's list, by usb path or serial.
std::vector<UsbPhone> MatchUsbPhones(const std::vector<UsbDeviceInfo>& usb,
                                     const std::vector<AdbDevice>& adb);

// Every USB device's descriptors (libusb). Strings are read only where the
// device can be opened without privileges; nothing is claimed. No USB devices
// (or no USB at all, as in a container) is an empty list, not an error.
Result<std::vector<UsbDeviceInfo>> EnumerateUsb();

}  // namespace dfarm::harness::adb
