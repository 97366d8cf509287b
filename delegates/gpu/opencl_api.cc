#include "delegates/gpu/opencl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace dfarm::delegates::gpu {
namespace {

// Loads every entry point from `handle`; false with the first one missing.
bool LoadSymbols(void* handle, OpenClApi* api, std::string* missing) {
#define DFARM_OPENCL_LOAD(name)                                          \
  api->name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name)); \
  if (api->name == nullptr) {                                            \
    *missing = #name;                                                    \
    return false;                                                        \
  }
  DFARM_OPENCL_FUNCTIONS(DFARM_OPENCL_LOAD)
#undef DFARM_OPENCL_LOAD
  return true;
}

struct Loaded {
  OpenClApi api;
  std::string error;
  bool ok = false;
};

Loaded LoadOnce() {
  Loaded loaded;
  std::string tried;
  for (const std::string& name : OpenClLibraryCandidates()) {
    tried += (tried.empty() ? "" : ", ") + name;
    // RTLD_LOCAL: the driver's symbols stay out of the process's namespace.
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) continue;
    std::string missing;
    if (!LoadSymbols(handle, &loaded.api, &missing)) {
      loaded.error = "OpenCL library " + name + " lacks " + missing;
      dlclose(handle);
      return loaded;
    }
    loaded.api.library = name;
    loaded.ok = true;
    return loaded;  // never dlclose'd: drivers do not survive unloading
  }
  loaded.error = "no OpenCL library found (tried " + tried + ")";
  return loaded;
}

std::string PlatformString(const OpenClApi& api, cl_platform_id p, cl_platform_info what) {
  size_t size = 0;
  if (api.clGetPlatformInfo(p, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  if (api.clGetPlatformInfo(p, what, size, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceString(const OpenClApi& api, cl_device_id d, cl_device_info what) {
  size_t size = 0;
  if (api.clGetDeviceInfo(d, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  if (api.clGetDeviceInfo(d, what, size, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

OpenClDeviceInfo Describe(const OpenClApi& api, cl_platform_id p, cl_device_id d) {
  OpenClDeviceInfo info;
  info.platform = PlatformString(api, p, CL_PLATFORM_NAME);
  info.name = DeviceString(api, d, CL_DEVICE_NAME);
  info.vendor = DeviceString(api, d, CL_DEVICE_VENDOR);
  info.driver_version = DeviceString(api, d, CL_DRIVER_VERSION);
  info.opencl_version = DeviceString(api, d, CL_DEVICE_VERSION);
  std::string extensions(" ");
  extensions.append(DeviceString(api, d, CL_DEVICE_EXTENSIONS)).push_back(' ');
  info.fp16 = extensions.find(" cl_khr_fp16 ") != std::string::npos;
  cl_device_type type = 0;
  if (api.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof(type), &type, nullptr) == CL_SUCCESS) {
    info.gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  }
  cl_uint units = 0;
  if (api.clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units, nullptr) ==
      CL_SUCCESS) {
    info.compute_units = units;
  }
  cl_ulong memory = 0;
  if (api.clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(memory), &memory, nullptr) ==
      CL_SUCCESS) {
    info.global_memory_bytes = memory;
  }
  return info;
}

std::vector<cl_platform_id> Platforms(const OpenClApi& api, std::string* error) {
  cl_uint count = 0;
  const cl_int s = api.clGetPlatformIDs(0, nullptr, &count);
  // The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR (-1001) with no driver installed.
  if (s != CL_SUCCESS && s != -1001) {
    *error = "clGetPlatformIDs failed: " + OpenClErrorName(s);
    return {};
  }
  std::vector<cl_platform_id> platforms(count);
  if (count > 0 && api.clGetPlatformIDs(count, platforms.data(), nullptr) != CL_SUCCESS) {
    platforms.clear();
  }
  return platforms;
}

std::vector<cl_device_id> Devices(const OpenClApi& api, cl_platform_id p) {
  cl_uint count = 0;
  if (api.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS) return {};
  std::vector<cl_device_id> devices(count);
  if (count > 0 &&
      api.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, count, devices.data(), nullptr) != CL_SUCCESS) {
    devices.clear();
  }
  return devices;
}

}  // namespace

std::vector<std::string> OpenClLibraryCandidates() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("DFARM_OPENCL_LIBRARY"); env != nullptr && *env != '\0') {
    names.emplace_back(env);
  }
  names.emplace_back("libOpenCL.so.1");
  names.emplace_back("libOpenCL.so");
  const char* lib = sizeof(void*) == 8 ? "lib64" : "lib";
  names.push_back(std::string("/vendor/") + lib + "/libOpenCL.so");
  names.push_back(std::string("/system/vendor/") + lib + "/libOpenCL.so");
  return names;
}

const OpenClApi* LoadOpenCl(std::string* error) {
  static const Loaded* loaded = new Loaded(LoadOnce());  // never freed: see LoadOnce
  if (!loaded->ok) {
    if (error != nullptr) *error = loaded->error;
    return nullptr;
  }
  return &loaded->api;
}

bool ListOpenClDevices(std::vector<OpenClDeviceInfo>* devices_out, std::string* error) {
  devices_out->clear();
  const OpenClApi* api = LoadOpenCl(error);
  if (api == nullptr) return false;
  std::string platform_error;
  const std::vector<cl_platform_id> platforms = Platforms(*api, &platform_error);
  if (!platform_error.empty()) {
    *error = platform_error;
    return false;
  }
  for (cl_platform_id p : platforms) {
    for (cl_device_id d : Devices(*api, p)) devices_out->push_back(Describe(*api, p, d));
  }
  return true;
}

bool PickOpenClDevice(const OpenClApi& api, cl_platform_id* platform_out, cl_device_id* device_out,
                      OpenClDeviceInfo* info_out, std::string* error) {
  std::string platform_error, names;
  bool found = false;
  for (cl_platform_id p : Platforms(api, &platform_error)) {
    const std::string name = PlatformString(api, p, CL_PLATFORM_NAME);
    names += (names.empty() ? "" : ", ") + name;
    for (cl_device_id d : Devices(api, p)) {
      OpenClDeviceInfo info = Describe(api, p, d);
      // The first device, unless a later one is a GPU and this one is not.
      if (!found || (info.gpu && !info_out->gpu)) {
        *platform_out = p, *device_out = d, *info_out = std::move(info);
        found = true;
      }
    }
  }
  if (!found) {
    *error = "no OpenCL device (" + api.library +
             "; platforms: " + (names.empty() ? std::string("none") : names) + ")" +
             (platform_error.empty() ? "" : ": " + platform_error);
  }
  return found;
}

std::string OpenClErrorName(cl_int code) {
  const char* name = "OpenCL error";
  switch (code) {
    case CL_DEVICE_NOT_FOUND:
      name = "CL_DEVICE_NOT_FOUND";
      break;
    case CL_DEVICE_NOT_AVAILABLE:
      name = "CL_DEVICE_NOT_AVAILABLE";
      break;
    case CL_COMPILER_NOT_AVAILABLE:
      name = "CL_COMPILER_NOT_AVAILABLE";
      break;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
      name = "CL_MEM_OBJECT_ALLOCATION_FAILURE";
      break;
    case CL_OUT_OF_RESOURCES:
      name = "CL_OUT_OF_RESOURCES";
      break;
    case CL_OUT_OF_HOST_MEMORY:
      name = "CL_OUT_OF_HOST_MEMORY";
      break;
    case CL_BUILD_PROGRAM_FAILURE:
      name = "CL_BUILD_PROGRAM_FAILURE";
      break;
    case CL_INVALID_VALUE:
      name = "CL_INVALID_VALUE";
      break;
    case CL_INVALID_DEVICE:
      name = "CL_INVALID_DEVICE";
      break;
    case CL_INVALID_BINARY:
      name = "CL_INVALID_BINARY";
      break;
    case CL_INVALID_BUILD_OPTIONS:
      name = "CL_INVALID_BUILD_OPTIONS";
      break;
    case CL_INVALID_PROGRAM_EXECUTABLE:
      name = "CL_INVALID_PROGRAM_EXECUTABLE";
      break;
    case CL_INVALID_KERNEL_NAME:
      name = "CL_INVALID_KERNEL_NAME";
      break;
    case CL_INVALID_KERNEL_ARGS:
      name = "CL_INVALID_KERNEL_ARGS";
      break;
    case CL_INVALID_ARG_INDEX:
      name = "CL_INVALID_ARG_INDEX";
      break;
    case CL_INVALID_ARG_VALUE:
      name = "CL_INVALID_ARG_VALUE";
      break;
    case CL_INVALID_ARG_SIZE:
      name = "CL_INVALID_ARG_SIZE";
      break;
    case CL_INVALID_WORK_GROUP_SIZE:
      name = "CL_INVALID_WORK_GROUP_SIZE";
      break;
    case CL_INVALID_WORK_ITEM_SIZE:
      name = "CL_INVALID_WORK_ITEM_SIZE";
      break;
    case CL_INVALID_GLOBAL_WORK_SIZE:
      name = "CL_INVALID_GLOBAL_WORK_SIZE";
      break;
    case CL_INVALID_BUFFER_SIZE:
      name = "CL_INVALID_BUFFER_SIZE";
      break;
    case CL_INVALID_MEM_OBJECT:
      name = "CL_INVALID_MEM_OBJECT";
      break;
    case CL_INVALID_COMMAND_QUEUE:
      name = "CL_INVALID_COMMAND_QUEUE";
      break;
    case CL_INVALID_CONTEXT:
      name = "CL_INVALID_CONTEXT";
      break;
    case -1001:
      name = "CL_PLATFORM_NOT_FOUND_KHR";
      break;
    default:
      break;
  }
  return std::string(name) + " (" + std::to_string(code) + ")";
}

}  // namespace dfarm::delegates::gpu
