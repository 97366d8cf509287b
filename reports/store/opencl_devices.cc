// The text form of a device's OpenCL list (store.h): one codec for the store,
// `dfarm devices --json` and whoever shows it.
#include <nlohmann/json.hpp>

#include "agent/base/json_input.h"
#include "reports/store/store.h"

namespace dfarm::store {

using nlohmann::json;

std::string OpenClDevicesJson(const std::vector<OpenClDevice>& devices) {
  if (devices.empty()) return "";
  json list = json::array();
  for (const OpenClDevice& d : devices) {
    json entry = json::object();
    entry["platform"] = d.platform;
    entry["name"] = d.name;
    entry["vendor"] = d.vendor;
    entry["driver_version"] = d.driver_version;
    entry["opencl_version"] = d.opencl_version;
    entry["fp16"] = d.fp16;
    entry["gpu"] = d.gpu;
    entry["compute_units"] = d.compute_units;
    entry["global_memory_bytes"] = d.global_memory_bytes;
    list.push_back(std::move(entry));
  }
  return list.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<OpenClDevice> ParseOpenClDevices(const std::string& text) {
  std::vector<OpenClDevice> out;
  if (!CheckJsonNesting(text, "OpenCL devices")) return out;
  json list = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return out;
  for (const json& e : list) {
    if (!e.is_object()) continue;
    auto text_of = [&](const char* key) {
      return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
    };
    auto int_of = [&](const char* key) {
      return e.contains(key) && e[key].is_number_integer() ? e[key].get<int64_t>() : int64_t{0};
    };
    OpenClDevice d;
    d.platform = text_of("platform");
    d.name = text_of("name");
    d.vendor = text_of("vendor");
    d.driver_version = text_of("driver_version");
    d.opencl_version = text_of("opencl_version");
    d.fp16 = e.value("fp16", false);
    d.gpu = e.value("gpu", false);
    d.compute_units = int_of("compute_units");
    d.global_memory_bytes = int_of("global_memory_bytes");
    out.push_back(std::move(d));
  }
  return out;
}

std::string OpenClDeviceLabel(const std::vector<OpenClDevice>& devices) {
  const OpenClDevice* pick = nullptr;
  for (const OpenClDevice& d : devices) {
    if (pick == nullptr || (d.gpu && !pick->gpu)) pick = &d;
  }
  if (pick == nullptr) return "";
  return pick->name +
         (pick->driver_version.empty() ? "" : " (driver " + pick->driver_version + ")");
}

}  // namespace dfarm::store
