#include "harness/devices/adb/usb_discovery.h"

#ifdef DFARM_HAVE_LIBUSB
#include <libusb.h>
#endif

#include <algorithm>
#include <cstdio>
#include <memory>

namespace dfarm::harness::adb {
namespace {

// Vendor ids of phone and SoC makers (from adb's own usb_vendors list), so a
// phone with debugging off (MTP or charging only) is still recognized.
constexpr uint16_t kPhoneVendors[] = {
    0x18d1,  // Google
    0x04e8,  // Samsung
    0x22b8,  // Motorola
    0x0bb4,  // HTC
    0x12d1,  // Huawei
    0x2717,  // Xiaomi
    0x2a70,  // OnePlus
    0x22d9,  // OPPO
    0x2d95,  // vivo
    0x0fce,  // Sony
    0x1004,  // LG
    0x05c6,  // Qualcomm
    0x0e8d,  // MediaTek
    0x17ef,  // Lenovo
    0x2a45,  // Meizu
    0x19d2,  // ZTE
    0x0b05,  // ASUS
};

bool IsPhoneVendor(uint16_t vid) {
  return std::find(std::begin(kPhoneVendors), std::end(kPhoneVendors), vid) !=
         std::end(kPhoneVendors);
}

std::string Hex4(uint16_t v) {
  char b[8];
  std::snprintf(b, sizeof b, "%04x", v);
  return b;
}

#ifdef DFARM_HAVE_LIBUSB
struct ContextDeleter {
  void operator()(libusb_context* c) const { libusb_exit(c); }
};
struct ListDeleter {
  void operator()(libusb_device** l) const { libusb_free_device_list(l, 1); }
};
struct HandleDeleter {
  void operator()(libusb_device_handle* h) const { libusb_close(h); }
};
struct ConfigDeleter {
  void operator()(libusb_config_descriptor* c) const { libusb_free_config_descriptor(c); }
};

std::string ReadString(libusb_device_handle* h, uint8_t index) {
  if (!h || index == 0) return {};
  unsigned char buf[256];
  int n = libusb_get_string_descriptor_ascii(h, index, buf, sizeof buf);
  if (n <= 0) return {};
  return std::string(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
}
#endif  // DFARM_HAVE_LIBUSB

}  // namespace

UsbInterfaceKind ClassifyInterface(uint8_t cls, uint8_t subclass, uint8_t protocol) {
  if (cls != 0xff || subclass != 0x42) return UsbInterfaceKind::kOther;
  if (protocol == 0x01) return UsbInterfaceKind::kAdb;
  if (protocol == 0x03) return UsbInterfaceKind::kFastboot;
  return UsbInterfaceKind::kOther;
}

std::string UsbPath(const UsbDeviceInfo& device) {
  std::string p = std::to_string(device.bus) + "-";
  for (size_t i = 0; i < device.ports.size(); ++i) {
    if (i > 0) p += '.';
    p += std::to_string(device.ports[i]);
  }
  return p;
}

std::vector<UsbPhone> MatchUsbPhones(const std::vector<UsbDeviceInfo>& usb,
                                     const std::vector<AdbDevice>& adb) {
  std::vector<UsbPhone> out;
  for (const UsbDeviceInfo& d : usb) {
    UsbInterfaceKind kind = UsbInterfaceKind::kOther;
    for (const UsbInterfaceInfo& i : d.interfaces) {
      UsbInterfaceKind k = ClassifyInterface(i.cls, i.subclass, i.protocol);
      if (k != UsbInterfaceKind::kOther) kind = k;
      if (k == UsbInterfaceKind::kAdb) break;
    }
    if (kind == UsbInterfaceKind::kOther && !IsPhoneVendor(d.vendor_id)) continue;
    UsbPhone p;
    p.usb_path = UsbPath(d);
    p.vendor_id = d.vendor_id;
    p.product_id = d.product_id;
    p.serial = d.serial;
    p.product_name = d.product_name;
    p.kind = kind;
    for (const AdbDevice& a : adb) {
      if ((!a.usb.empty() && a.usb == p.usb_path) || (!d.serial.empty() && a.serial == d.serial)) {
        p.adb_serial = a.serial;
        p.adb_state = a.state;
        break;
      }
    }
    std::string who = "USB device " + p.usb_path + " (" + Hex4(d.vendor_id) + ":" +
                      Hex4(d.product_id) + (d.product_name.empty() ? "" : " " + d.product_name) +
                      ")";
    if (kind == UsbInterfaceKind::kFastboot) {
      p.hint = who + " is in fastboot (bootloader) mode: adb cannot reach it; reboot it to Android";
    } else if (kind == UsbInterfaceKind::kOther) {
      p.hint = who +
               " looks like a phone but offers no ADB interface: turn on USB debugging in "
               "Developer options (and pick a data mode, not charging only)";
    } else if (p.adb_serial.empty()) {
      p.hint = who +
               " offers an ADB interface but the adb server does not list it: check that your "
               "user may open it (udev rules, plugdev group), then `adb kill-server`";
    } else if (p.adb_state == "unauthorized") {
      p.hint = who + " is unauthorized: unlock the phone and accept the USB debugging prompt";
    } else if (p.adb_state == "no permissions") {
      p.hint = who + " cannot be opened by this user: add a udev rule for vendor " +
               Hex4(d.vendor_id) + " (plugdev group) and replug it";
    } else if (p.adb_state != "device") {
      p.hint = who + " is '" + p.adb_state + "' in adb: replug it or restart the adb server";
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<UsbDeviceInfo>> EnumerateUsb() {
  std::vector<UsbDeviceInfo> out;
#ifndef DFARM_HAVE_LIBUSB
  // Built without libusb (libusb-1.0-0-dev): no USB to read, as in a container.
  return out;
#else
  libusb_context* raw_ctx = nullptr;
  int rc = libusb_init(&raw_ctx);
  // No usbfs (a container, a machine without USB): nothing to list.
  if (rc != 0) return out;
  std::unique_ptr<libusb_context, ContextDeleter> ctx(raw_ctx);
  libusb_device** raw_list = nullptr;
  ssize_t n = libusb_get_device_list(ctx.get(), &raw_list);
  if (n < 0) return out;
  std::unique_ptr<libusb_device*, ListDeleter> list(raw_list);
  for (ssize_t i = 0; i < n; ++i) {
    libusb_device* dev = raw_list[i];
    libusb_device_descriptor desc{};
    if (libusb_get_device_descriptor(dev, &desc) != 0) continue;
    UsbDeviceInfo d;
    d.bus = libusb_get_bus_number(dev);
    uint8_t ports[8];
    int np = libusb_get_port_numbers(dev, ports, sizeof ports);
    if (np > 0) d.ports.assign(ports, ports + np);
    d.vendor_id = desc.idVendor;
    d.product_id = desc.idProduct;
    libusb_config_descriptor* raw_config = nullptr;
    if (libusb_get_active_config_descriptor(dev, &raw_config) == 0 ||
        libusb_get_config_descriptor(dev, 0, &raw_config) == 0) {
      std::unique_ptr<libusb_config_descriptor, ConfigDeleter> config(raw_config);
      for (uint8_t k = 0; k < config->bNumInterfaces; ++k) {
        const libusb_interface& itf = config->interface[k];
        for (int a = 0; a < itf.num_altsetting; ++a) {
          const libusb_interface_descriptor& alt = itf.altsetting[a];
          d.interfaces.push_back(
              {alt.bInterfaceClass, alt.bInterfaceSubClass, alt.bInterfaceProtocol});
        }
      }
    }
    // Opening reads string descriptors over the default control pipe only; it
    // claims nothing, so an adb server holding the ADB interface is unaffected.
    bool phone_like = IsPhoneVendor(d.vendor_id);
    for (const auto& itf : d.interfaces) {
      phone_like = phone_like || ClassifyInterface(itf.cls, itf.subclass, itf.protocol) !=
                                     UsbInterfaceKind::kOther;
    }
    if (phone_like) {
      libusb_device_handle* raw_handle = nullptr;
      if (libusb_open(dev, &raw_handle) == 0) {
        std::unique_ptr<libusb_device_handle, HandleDeleter> h(raw_handle);
        d.serial = ReadString(h.get(), desc.iSerialNumber);
        d.product_name = ReadString(h.get(), desc.iProduct);
      }
    }
    out.push_back(std::move(d));
  }
  return out;
#endif  // DFARM_HAVE_LIBUSB
}

}  // namespace dfarm::harness::adb
