#include "agent/device_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <thread>

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

}  // namespace

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
  return info;
}

}  // namespace dfarm::agent
