#include "harness/devices/device_row.h"

namespace dfarm::harness {

std::vector<store::OpenClDevice> OpenClDevicesOf(const agent::DeviceInfo& info) {
  std::vector<store::OpenClDevice> out;
  for (const agent::OpenClDeviceInfo& d : info.opencl_devices) {
    out.push_back({d.platform, d.name, d.vendor, d.driver_version, d.opencl_version, d.fp16, d.gpu,
                   static_cast<int64_t>(d.compute_units),
                   static_cast<int64_t>(d.global_memory_bytes)});
  }
  return out;
}

store::DeviceRow DeviceRowOf(const std::string& name, const agent::DeviceInfo& info) {
  store::DeviceRow row;
  row.name = name;
  row.abi = info.abi;
  row.os = info.os;
  row.cpu = info.cpu;
  row.cores = info.cores;
  row.memory_bytes = static_cast<int64_t>(info.memory_bytes);
  row.hostname = info.hostname;
  row.agent_version = info.agent_version;
  row.opencl = OpenClDevicesOf(info);
  return row;
}

}  // namespace dfarm::harness
