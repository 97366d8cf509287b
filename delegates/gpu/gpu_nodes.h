// The TFLite-op -> OpenCL-launch mapping of the gpu delegate: one function
// both checks a node (CheckNode) and, given a build, appends the kernel
// launches that compute it (Prepare), so that what is claimed and what is
// built cannot drift apart (as xnnpack_nodes.h does for XNNPACK).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/status.h"

namespace dfarm::delegates::gpu {

// One kernel launch: the kernel `kernel` of kGpuKernelSource on up to three input tensors
// (null: unused) writing `out`, with its int parameters (params[0]: the
// number of work-items; floats as their bits).
struct Launch {
  const char* kernel = nullptr;
  const runtime::Tensor* a = nullptr;
  const runtime::Tensor* b = nullptr;
  const runtime::Tensor* c = nullptr;
  const runtime::Tensor* out = nullptr;
  std::vector<int32_t> params;
  // 1: b is a constant stored with its first dimension moved last (OHWI
  // filters as HWIO, [units, depth] weights as [depth, units]), so that
  // neighbouring work-items read neighbouring weights.
  int b_layout = 0;
};

struct GraphBuild {
  std::vector<Launch> launches;  // in execution order
};

// Ok when the gpu delegate runs `node` (and, when `build` is non-null, its
// launches are appended, then a fake_quant launch when its output is
// quantized: gpu_quant.h); kUnsupported with the reason otherwise. Without
// `quantized_models_allowed` a node touching a quantized tensor is refused.
runtime::Status VisitNode(const runtime::Node& node, bool quantized_models_allowed,
                          GraphBuild* build);

}  // namespace dfarm::delegates::gpu
