#include "agent/daemon/device_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#ifdef DFARM_HAVE_OPENCL
#include "delegates/gpu/opencl_api.h"
#endif

namespace dfarm::agent {

#ifndef DFARM_VERSION
#define DFARM_VERSION "0.0.0"
#endif

std::string AbiForMachine(const std::string& machine) {
  if (machine == "x86_64" || machine == "amd64") return "x86_64";
  if (machine == "aarch64" || machine == "arm64") return "arm64-v8a";
  if (machine.rfind("armv7", 0) == 0 || machine.rfind("armv8l", 0) == 0) return "armeabi-v7a";
  if (machine == "i386" || machine == "i686") return "x86";
  return machine;
}

namespace {

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Value of the first "key : value" line in a /proc file whose key is one of keys.
std::string ProcField(const char* file, std::initializer_list<const char*> keys) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = Trim(line.substr(0, colon));
    for (const char* k : keys) {
      if (key == k) return Trim(line.substr(colon + 1));
    }
  }
  return "";
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::string text, line;
  while (std::getline(in, line) && text.size() < 65536) text += line + "\n";
  return text;
}

// Runs `getprop NAME` (Android); "" when it fails or prints nothing.
std::string GetProp(const char* getprop, const std::string& name) {
  std::string cmd = std::string(getprop) + " " + name + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  char buf[512];
  std::string out;
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0 && out.size() < 4096) out.append(buf, n);
  ::pclose(p);
  return Trim(out);
}

}  // namespace

std::string ParseOsRelease(const std::string& text) {
  std::map<std::string, std::string> fields;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos || line[0] == '#') continue;
    std::string value = Trim(line.substr(eq + 1));
    if (value.size() >= 2 && (value[0] == '"' || value[0] == '\'') && value.back() == value[0]) {
      value = value.substr(1, value.size() - 2);
    }
    fields[Trim(line.substr(0, eq))] = value;
  }
  if (!fields["PRETTY_NAME"].empty()) return fields["PRETTY_NAME"];
  return Trim(fields["NAME"] + " " + fields["VERSION_ID"]);
}

DeviceInfo CollectDeviceInfo() {
  DeviceInfo info;
  info.agent_version = DFARM_VERSION;
  struct utsname u;
  if (::uname(&u) == 0) {
    info.os = std::string(u.sysname) + " " + u.release;
    info.abi = AbiForMachine(u.machine);
  }
  // x86 says "model name"; arm64 kernels often only give "Hardware" or nothing.
  info.cpu = ProcField("/proc/cpuinfo", {"model name", "Hardware", "Processor", "cpu model"});
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  info.cores = cores > 0 ? static_cast<uint32_t>(cores) : std::thread::hardware_concurrency();
  std::string mem = ProcField("/proc/meminfo", {"MemTotal"});  // "16318412 kB"
  if (!mem.empty()) {
    try {
      info.memory_bytes = std::stoull(mem) * 1024;
    } catch (...) {
    }
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) info.hostname = host;
  if (::uname(&u) == 0) info.kernel_version = u.version;

  long configured = ::sysconf(_SC_NPROCESSORS_CONF);
  for (long cpu = 0; cpu < std::max<long>(configured, info.cores) && cpu < 4096; ++cpu) {
    std::string khz = Trim(ReadSmallFile("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                                         "/cpufreq/cpuinfo_max_freq"));
    uint64_t value = 0;
    try {
      if (!khz.empty()) value = std::stoull(khz);
    } catch (...) {
    }
    info.core_max_freq_khz.push_back(value);
  }

  const char* getprop = "/system/bin/getprop";
  if (::access(getprop, X_OK) == 0) {
    for (const char* name : kAndroidProperties) {
      std::string value = GetProp(getprop, name);
      if (!value.empty()) info.properties[name] = value;
    }
    auto release = info.properties.find("ro.build.version.release");
    info.os_release = "Android" + (release != info.properties.end() ? " " + release->second : "");
  } else {
    info.os_release = ParseOsRelease(ReadSmallFile("/etc/os-release"));
    if (info.os_release.empty()) {
      info.os_release = ParseOsRelease(ReadSmallFile("/usr/lib/os-release"));
    }
  }
  info.opencl_devices = CollectOpenClDevices();
  return info;
}

std::vector<OpenClDeviceInfo> CollectOpenClDevices() {
  std::vector<OpenClDeviceInfo> out;
#ifdef DFARM_HAVE_OPENCL
  std::vector<delegates::gpu::OpenClDeviceInfo> devices;
  std::string error;
  if (!delegates::gpu::ListOpenClDevices(&devices, &error)) return out;  // no OpenCL: none
  for (const delegates::gpu::OpenClDeviceInfo& d : devices) {
    out.push_back({d.platform, d.name, d.vendor, d.driver_version, d.opencl_version, d.fp16, d.gpu,
                   d.compute_units, d.global_memory_bytes});
  }
#endif
  return out;
}

}  // namespace dfarm::agent
