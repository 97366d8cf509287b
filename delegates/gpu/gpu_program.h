// The gpu delegate's OpenCL device and programs: one context per process on
// the device picked (shared by every gpu delegate, so that one compiled
// program serves them all), and the kernels' program per build options,
// taken in this order from
//   1. the in-process cache (keyed by context and build options): "reused";
//   2. the serialization directory, when given: a binary written by an
//      earlier start (clCreateProgramWithBinary): "loaded";
//   3. the source (clCreateProgramWithSource + clBuildProgram): "compiled",
// then written to the serialization directory when given.
#pragma once

#include <string>

#include "delegates/gpu/opencl_api.h"
#include "runtime/status.h"

namespace dfarm::delegates::gpu {

struct GpuDevice {
  const OpenClApi* api = nullptr;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  OpenClDeviceInfo info;
  size_t max_work_group_size = 1;
};

// The process's device and context, set up on first use (never released:
// drivers do not like being torn down at exit). kUnsupported with the reason
// when there is no OpenCL library or device.
runtime::Status SharedGpuDevice(const GpuDevice** device_out);

// Where the program came from, counted per delegate (Delegate::Stats()).
struct ProgramStats {
  int compiled = 0;
  int loaded = 0;           // from the serialization directory
  int reused = 0;           // from the in-process cache
  double compile_us = 0.0;  // in clBuildProgram, binaries included
};

struct ProgramRequest {
  std::string build_options;      // "-DDFARM_FP16", ...
  std::string serialization_dir;  // empty: no disk cache
  std::string model_token;        // part of the cache file's name
};

// The kernels' program for `request` (see the file comment). A build failure
// is an Error with the build log's first lines. The program stays owned by
// the in-process cache; kernels created from it keep it alive.
runtime::Status GetProgram(const GpuDevice& device, const ProgramRequest& request,
                           ProgramStats* stats, cl_program* program_out);

// The serialization file of `request` on `device`:
// DIR/TOKEN-HASH.clbin, HASH over the device name, driver version, build
// options and kernel source.
std::string ProgramCachePath(const GpuDevice& device, const ProgramRequest& request);

// Empties the in-process cache, so that the next GetProgram compiles or
// loads again (tests: a "fresh process" without starting one).
void ClearProgramCacheForTesting();

}  // namespace dfarm::delegates::gpu
