// The gpu delegate's OpenCL C kernels: one program, built per precision mode
// (gpu_program.h), every kernel with one signature (see gpu_kernels.cc).
#pragma once

namespace dfarm::delegates::gpu {

extern const char* const kGpuKernelSource;

}  // namespace dfarm::delegates::gpu
