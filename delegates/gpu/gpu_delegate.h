// GpuDelegate: a runtime::Delegate on OpenCL (gpu/opencl_api.h loads it at
// run time), registered as "gpu" in delegates/registry.h. Its options mirror
// TensorFlow Lite's GPU delegate.
//
// Float32 models, and int8/uint8 quantized ones computed in float
// (gpu_quant.h: TFLite's quantized_models_allowed); NHWC tensors in cl_mem buffers, one kernel
// launch (or a few) per node, one work-item per output element (gpu_kernels.cc). Every gpu delegate
// of a process shares one OpenCL context on the device picked (a GPU when there is one) and the
// compiled program (gpu_program.h); each has its own command queue. A partition's inputs are copied
// to the device at the start of Invoke() and its outputs back at the end; the tensors between its
// nodes stay on the device. Weights are uploaded in Prepare().
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "delegates/gpu/gpu_program.h"
#include "runtime/delegate.h"

namespace dfarm::delegates {

struct GpuOptions {
  // fp16 storage of activations and weights (vload_half / vstore_half); on
  // a device with cl_khr_fp16 the convolutions also accumulate in half.
  bool precision_loss_allowed = false;
  // fast_single_answer: work-groups of 64 work-items (quick to schedule for
  // one inference); sustained_speed: of 256 (fewer, fuller groups for
  // back-to-back inferences). Both capped by what the kernel allows.
  enum class Preference { kFastSingleAnswer, kSustainedSpeed };
  Preference inference_preference = Preference::kFastSingleAnswer;
  // Non-empty: a folder for compiled program binaries (gpu_program.h), so
  // the next start loads instead of compiling. model_token names the file.
  std::string serialization_dir;
  std::string model_token;
  // Quantized (int8/uint8) nodes are taken and computed in float: weights
  // dequantized in Prepare(), quantized inputs and outputs converted at the
  // partition's edges (gpu_quant.h). false: they stay on the CPU.
  bool quantized_models_allowed = true;
};

class GpuDelegate : public runtime::Delegate {
 public:
  // Finds the OpenCL device and creates the queue. kUnsupported when there
  // is no OpenCL library or device ("no OpenCL library found (tried ...)").
  static runtime::Status Create(const GpuOptions& options,
                                const runtime::DelegatePartitionOptions& partition_options,
                                std::unique_ptr<GpuDelegate>* out);
  // Every kernel from CreateKernel() must be gone by then (they use the queue).
  ~GpuDelegate() override;

  runtime::Status CheckNode(const runtime::Node& node) const override;
  std::unique_ptr<runtime::DelegateKernel> CreateKernel() override;
  // Per-node times from OpenCL profiling events: the queue is made again with
  // CL_QUEUE_PROFILING_ENABLE (only then: it may slow the launches). Call
  // before AllocateTensors(), as runtime/delegate.h says.
  runtime::Status EnableProfiling() override;
  bool profiling() const { return profiling_; }
  // programs_compiled, programs_loaded (serialization_dir), programs_reused
  // (in-process cache), compile_us (in clBuildProgram), fp16 (1/0),
  // half_math (1/0), work_group_size.
  std::vector<std::pair<std::string, double>> Stats() const override;

  // The program, compiled, loaded or reused on first call.
  runtime::Status Program(cl_program* program_out);
  const gpu::GpuDevice& device() const { return *device_; }
  cl_command_queue queue() const { return queue_; }
  bool fp16() const { return options_.precision_loss_allowed; }
  bool quantized_models_allowed() const { return options_.quantized_models_allowed; }
  size_t work_group_size() const { return work_group_size_; }

 private:
  GpuDelegate(const GpuOptions& options, const runtime::DelegatePartitionOptions& partition_options)
      : runtime::Delegate("gpu", partition_options), options_(options) {}

  // (Re)creates queue_ with `properties`; the old one is finished first.
  runtime::Status CreateQueue(cl_command_queue_properties properties);

  GpuOptions options_;
  bool profiling_ = false;
  const gpu::GpuDevice* device_ = nullptr;
  cl_command_queue queue_ = nullptr;  // owned
  cl_program program_ = nullptr;      // owned by the program cache
  gpu::ProgramStats stats_;
  bool half_math_ = false;
  size_t work_group_size_ = 64;
};

// The registry's factory for "gpu": options precision_loss_allowed
// (true/false, 1/0), inference_preference (fast_single_answer |
// sustained_speed), serialization_dir, model_token, quantized_models_allowed
// (true/false, 1/0; default true) and the partition options of
// delegates/registry.h. An unknown value is an Error naming it.
runtime::Status CreateGpuDelegate(const std::vector<std::pair<std::string, std::string>>& options,
                                  std::unique_ptr<runtime::Delegate>* delegate_out);

}  // namespace dfarm::delegates
