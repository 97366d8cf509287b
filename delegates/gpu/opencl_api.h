// OpenCL loaded at run time: dlopen of the platform's libOpenCL (the ICD
// loader on desktops, the vendor driver itself on Android phones, which have
// no loader) and a table of the cl* entry points DelegateFarm uses. Nothing
// links libOpenCL, so every build runs (and cross-builds) without it; a
// machine without OpenCL gets a clear "no OpenCL library found" instead.
//
// Depends on the standard library and the Khronos headers (opencl-c-headers)
// only: the agent includes it to describe a device's OpenCL platforms
// (ListOpenClDevices) without the delegates.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
// OpenCL 1.2: what phones' drivers (1.2 / 2.0) and pocl all offer.
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dfarm::delegates::gpu {

// The entry points, loaded together: a library missing one is refused.
#define DFARM_OPENCL_FUNCTIONS(X) \
  X(clGetPlatformIDs)             \
  X(clGetPlatformInfo)            \
  X(clGetDeviceIDs)               \
  X(clGetDeviceInfo)              \
  X(clCreateContext)              \
  X(clReleaseContext)             \
  X(clCreateCommandQueue)         \
  X(clReleaseCommandQueue)        \
  X(clCreateBuffer)               \
  X(clReleaseMemObject)           \
  X(clEnqueueWriteBuffer)         \
  X(clEnqueueReadBuffer)          \
  X(clCreateProgramWithSource)    \
  X(clCreateProgramWithBinary)    \
  X(clBuildProgram)               \
  X(clGetProgramInfo)             \
  X(clGetProgramBuildInfo)        \
  X(clReleaseProgram)             \
  X(clCreateKernel)               \
  X(clReleaseKernel)              \
  X(clSetKernelArg)               \
  X(clGetKernelWorkGroupInfo)     \
  X(clEnqueueNDRangeKernel)       \
  X(clFinish)                     \
  X(clFlush)                      \
  X(clGetEventProfilingInfo)      \
  X(clReleaseEvent)

struct OpenClApi {
#define DFARM_OPENCL_MEMBER(name) decltype(&::name) name = nullptr;
  DFARM_OPENCL_FUNCTIONS(DFARM_OPENCL_MEMBER)
#undef DFARM_OPENCL_MEMBER
  std::string library;  // the path or name it was loaded from
};

// The library names tried, in order: libOpenCL.so.1, libOpenCL.so, then
// Android's /vendor/lib64/libOpenCL.so and /system/vendor/lib64/libOpenCL.so
// (their lib/ twins on 32-bit builds). DFARM_OPENCL_LIBRARY, when set, is
// tried first.
std::vector<std::string> OpenClLibraryCandidates();

// The process's OpenCL table, loaded once (thread-safe; never unloaded).
// Null with *error set ("no OpenCL library found (tried libOpenCL.so.1, ...)"
// or "OpenCL library X lacks clBuildProgram") when none loads.
const OpenClApi* LoadOpenCl(std::string* error);

// One OpenCL device as the agent and the gpu delegate describe it.
struct OpenClDeviceInfo {
  std::string platform;              // CL_PLATFORM_NAME: "Portable Computing Language"
  std::string name;                  // CL_DEVICE_NAME
  std::string vendor;                // CL_DEVICE_VENDOR
  std::string driver_version;        // CL_DRIVER_VERSION
  std::string opencl_version;        // CL_DEVICE_VERSION: "OpenCL 3.0 PoCL ..."
  bool fp16 = false;                 // the device lists cl_khr_fp16
  bool gpu = false;                  // CL_DEVICE_TYPE_GPU (pocl's CPU device is not)
  uint32_t compute_units = 0;        // CL_DEVICE_MAX_COMPUTE_UNITS
  uint64_t global_memory_bytes = 0;  // CL_DEVICE_GLOBAL_MEM_SIZE
};

// Every device of every platform, in platform order. False with *error set
// when no library loads ("no OpenCL library found (tried ...)") or the
// platforms cannot be listed; true with an empty list when there is a
// library but no device.
bool ListOpenClDevices(std::vector<OpenClDeviceInfo>* devices_out, std::string* error);

// The first device of the first platform that has one, preferring GPUs, and
// its description. False with *error ("no OpenCL device (platforms: ...)").
bool PickOpenClDevice(const OpenClApi& api, cl_platform_id* platform_out, cl_device_id* device_out,
                      OpenClDeviceInfo* info_out, std::string* error);

// "CL_BUILD_PROGRAM_FAILURE (-11)".
std::string OpenClErrorName(cl_int code);

}  // namespace dfarm::delegates::gpu
