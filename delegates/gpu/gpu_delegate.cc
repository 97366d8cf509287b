#include "delegates/gpu/gpu_delegate.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "delegates/gpu/gpu_nodes.h"
#include "delegates/gpu/gpu_quant.h"
#include "delegates/registry.h"
#include "runtime/fp16.h"

namespace dfarm::delegates {
namespace {

using gpu::GraphBuild;
using gpu::Launch;
using gpu::OpenClErrorName;
using runtime::Status;

Status ClError(cl_int err, const std::string& what) {
  return Status::Error("gpu delegate: " + what + " failed: " + OpenClErrorName(err));
}

// Runs one partition: its buffers, one cl_kernel per launch (arguments set
// once in Prepare()), and host staging for fp16 transfers.
class GpuKernel : public runtime::DelegateKernel {
 public:
  explicit GpuKernel(GpuDelegate* delegate) : delegate_(delegate), api_(*delegate->device().api) {}
  ~GpuKernel() override {
    for (cl_kernel k : kernels_) api_.clReleaseKernel(k);
    for (auto& [tensor, mem] : buffers_) api_.clReleaseMemObject(mem);
    for (auto& [tensor, mem] : moved_) api_.clReleaseMemObject(mem);
    if (params_ != nullptr) api_.clReleaseMemObject(params_);
    if (dummy_ != nullptr) api_.clReleaseMemObject(dummy_);
  }

  Status Init(const runtime::Partition& partition) override {
    for (const runtime::Node* node : partition.nodes) {
      Status s = gpu::VisitNode(*node, delegate_->quantized_models_allowed(), &build_);
      if (!s.ok()) return s.WithPrefix("node " + std::to_string(node->index));
      node_launches_end_.push_back(build_.launches.size());
    }
    return delegate_->Program(&program_);
  }

  Status Prepare(const runtime::Partition& partition) override {
    for (const Launch& l : build_.launches) {
      for (const runtime::Tensor* t : {l.a, l.b, l.c, l.out}) {
        if (t == nullptr) continue;
        DFARM_RETURN_IF_ERROR(t == l.b && l.b_layout == 1 ? MovedBuffer(*t) : Buffer(*t));
      }
    }
    for (const runtime::Tensor* t : partition.inputs) {
      if (!t->has_static_value() && buffers_.count(t) != 0) inputs_.push_back(t);
    }
    for (const runtime::Tensor* t : partition.outputs) {
      if (buffers_.count(t) == 0) {
        return Status::Error("gpu delegate: partition output tensor " + std::to_string(t->index) +
                             " has no buffer");
      }
    }
    size_t staging = 0;
    for (const runtime::Tensor* t : inputs_) staging = std::max<size_t>(staging, t->num_elements());
    for (const runtime::Tensor* t : partition.outputs) {
      staging = std::max<size_t>(staging, t->num_elements());
    }
    if (delegate_->fp16()) staging_.resize(staging);
    size_t real = 0;
    for (const runtime::Tensor* t : inputs_) {
      if (t->quantized) real = std::max<size_t>(real, t->num_elements());
    }
    for (const runtime::Tensor* t : partition.outputs) {
      if (t->quantized) real = std::max<size_t>(real, t->num_elements());
    }
    real_.resize(real);
    // InvokeProfiled() copies every node's outputs out.
    if (delegate_->profiling()) {
      for (const auto& [t, mem] : buffers_) {
        const size_t n = static_cast<size_t>(t->num_elements());
        if (delegate_->fp16()) staging_.resize(std::max(staging_.size(), n));
        if (t->quantized) real_.resize(std::max(real_.size(), n));
      }
    }
    return CreateKernels();
  }

  Status Invoke(const runtime::Partition& partition) override { return Run(partition, nullptr); }

  // Each node's time is on the device's clock, read from OpenCL profiling
  // events on every command of the run: from the end of the previous node's
  // last launch (the start of the run's first command for the first node)
  // to the end of its own last launch, and for the last node on to the end
  // of the last copy out. So the copies in fall on the first node, those out
  // on the last, and the device's wait for the host between launches on the
  // node launched after it. Left out: the host's work before the first
  // command and after the last (converting the first input and the last
  // output for fp16 or quantized tensors), and the copies of every node's
  // outputs the profile adds after the run.
  Status InvokeProfiled(const runtime::Partition& partition,
                        std::vector<double>* node_us_out) override {
    if (!delegate_->profiling()) {
      return Status::Unsupported("gpu times kernels only after EnableProfiling()");
    }
    events_.in.assign(inputs_.size(), nullptr);
    events_.launches.assign(kernels_.size(), nullptr);
    events_.out.assign(partition.outputs.size(), nullptr);
    Status s = Run(partition, &events_);
    if (s.ok()) s = NodeTimes(node_us_out);
    for (const std::vector<cl_event>* list : {&events_.in, &events_.launches, &events_.out}) {
      for (cl_event e : *list) {
        if (e != nullptr) api_.clReleaseEvent(e);
      }
    }
    // Every node's outputs to the host, as the contract asks.
    for (const runtime::Node* node : partition.nodes) {
      for (runtime::Tensor* t : node->outputs) {
        if (!s.ok()) break;
        if (auto it = buffers_.find(t); it != buffers_.end()) s = Download(it->second, t);
      }
    }
    return s;
  }

 private:
  // The events of a profiled run, one per command (null where none was queued).
  struct RunEvents {
    std::vector<cl_event> in;        // per inputs_ entry
    std::vector<cl_event> launches;  // per kernel
    std::vector<cl_event> out;       // per partition output
  };

  // The time of `what` (CL_PROFILING_COMMAND_START or _END) of `e`, in ns.
  Status EventTime(cl_event e, cl_profiling_info what, const char* command, cl_ulong* ns_out) {
    const cl_int err = api_.clGetEventProfilingInfo(e, what, sizeof(*ns_out), ns_out, nullptr);
    return err == CL_SUCCESS ? Status::Ok()
                             : ClError(err, std::string("reading the time of ") + command);
  }

  // node_us_out from events_, as InvokeProfiled() says: node by node, each
  // from the previous one's end mark to its own.
  Status NodeTimes(std::vector<double>* node_us_out) {
    node_us_out->assign(node_launches_end_.size(), 0.0);
    cl_ulong mark = 0;
    bool started = false;
    for (const std::vector<cl_event>* list : {&events_.in, &events_.launches, &events_.out}) {
      for (size_t i = 0; i < list->size() && !started; ++i) {
        if ((*list)[i] == nullptr) continue;
        DFARM_RETURN_IF_ERROR(
            EventTime((*list)[i], CL_PROFILING_COMMAND_START, "the first command", &mark));
        started = true;
      }
    }
    if (!started) return Status::Ok();  // nothing queued: every tensor empty
    size_t launch = 0;
    for (size_t node = 0; node < node_launches_end_.size(); ++node) {
      cl_ulong end = mark, t = 0;
      for (; launch < node_launches_end_[node]; ++launch) {
        if (events_.launches[launch] == nullptr) continue;  // an empty tensor
        DFARM_RETURN_IF_ERROR(EventTime(events_.launches[launch], CL_PROFILING_COMMAND_END,
                                        build_.launches[launch].kernel, &t));
        end = std::max(end, t);
      }
      for (size_t o = 0; node + 1 == node_launches_end_.size() && o < events_.out.size(); ++o) {
        if (events_.out[o] == nullptr) continue;
        DFARM_RETURN_IF_ERROR(
            EventTime(events_.out[o], CL_PROFILING_COMMAND_END, "a copy out", &t));
        end = std::max(end, t);
      }
      (*node_us_out)[node] = static_cast<double>(end - mark) / 1000.0;
      mark = end;
    }
    return Status::Ok();
  }

  // Copies the inputs in, runs every launch and copies the outputs out,
  // which waits for the launches; with an event per command in `events`
  // when non-null (sized by the caller).
  Status Run(const runtime::Partition& partition, RunEvents* events) {
    if (kernels_.size() != build_.launches.size()) {
      return Status::InvalidArgument("gpu partition " + std::to_string(partition.index) +
                                     " was not prepared");
    }
    cl_command_queue q = delegate_->queue();
    for (size_t i = 0; i < inputs_.size(); ++i) {
      DFARM_RETURN_IF_ERROR(
          Upload(*inputs_[i], buffers_[inputs_[i]], events != nullptr ? &events->in[i] : nullptr));
    }
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const size_t local = local_sizes_[i];
      const size_t n = static_cast<size_t>(build_.launches[i].params[0]);
      if (n == 0) continue;  // an empty tensor: OpenCL refuses a global size of 0
      const size_t global = (n + local - 1) / local * local;
      const cl_int err =
          api_.clEnqueueNDRangeKernel(q, kernels_[i], 1, nullptr, &global, &local, 0, nullptr,
                                      events != nullptr ? &events->launches[i] : nullptr);
      if (err != CL_SUCCESS) {
        return ClError(err, std::string("running kernel ") + build_.launches[i].kernel);
      }
    }
    for (size_t i = 0; i < partition.outputs.size(); ++i) {
      runtime::Tensor* t = partition.outputs[i];
      DFARM_RETURN_IF_ERROR(
          Download(buffers_[t], t, events != nullptr ? &events->out[i] : nullptr));
    }
    return Status::Ok();
  }

  size_t ElementBytes() const { return delegate_->fp16() ? 2 : 4; }

  // The device buffer of `t`, created (and filled when it has a static value) on first use.
  Status Buffer(const runtime::Tensor& t) {
    if (buffers_.count(&t) != 0) return Status::Ok();
    const size_t count = std::max<size_t>(static_cast<size_t>(t.num_elements()), 1);
    cl_int err = CL_SUCCESS;
    cl_mem mem = api_.clCreateBuffer(delegate_->device().context, CL_MEM_READ_WRITE,
                                     count * ElementBytes(), nullptr, &err);
    if (mem == nullptr || err != CL_SUCCESS) {
      return ClError(
          err, "allocating tensor " + std::to_string(t.index) + " " + runtime::DescribeTensor(t));
    }
    buffers_.emplace(&t, mem);
    if (!t.has_static_value() || t.num_elements() == 0) return Status::Ok();
    if (delegate_->fp16()) staging_.resize(std::max<size_t>(staging_.size(), count));
    return Upload(t, mem);
  }

  // Host -> device, blocking (the host data may change right after); a
  // quantized tensor as its real values (a constant's made once, in Prepare()).
  // `event`, when non-null, gets the copy's (none when there is nothing to copy).
  Status Upload(const runtime::Tensor& t, cl_mem mem, cl_event* event = nullptr) {
    const size_t n = static_cast<size_t>(t.num_elements());
    if (!t.quantized) return UploadFloats(t.data_as<float>(), n, t.index, mem, event);
    if (t.has_static_value()) {
      return UploadFloats(gpu::RealValues(t).data(), n, t.index, mem, event);
    }
    gpu::Dequantize(t, real_.data());
    return UploadFloats(real_.data(), n, t.index, mem, event);
  }

  Status UploadFloats(const float* f, size_t n, int index, cl_mem mem, cl_event* event = nullptr) {
    if (n == 0) return Status::Ok();
    const void* src = f;
    if (delegate_->fp16()) {
      for (size_t i = 0; i < n; ++i) staging_[i] = runtime::FloatToHalf(f[i]);
      src = staging_.data();
    }
    const cl_int err = api_.clEnqueueWriteBuffer(delegate_->queue(), mem, CL_TRUE, 0,
                                                 n * ElementBytes(), src, 0, nullptr, event);
    return err == CL_SUCCESS ? Status::Ok()
                             : ClError(err, "copying tensor " + std::to_string(index) + " in");
  }

  // A constant with its first dimension moved last (Launch::b_layout 1).
  Status MovedBuffer(const runtime::Tensor& t) {
    if (moved_.count(&t) != 0) return Status::Ok();
    if (!t.has_static_value() || t.rank() < 1) {
      return Status::Error("gpu delegate: tensor " + std::to_string(t.index) +
                           " was taken as constant weights but has no value");
    }
    const size_t n = static_cast<size_t>(t.num_elements());
    const size_t rows = static_cast<size_t>(t.shape[0]), rest = rows == 0 ? 0 : n / rows;
    std::vector<float> moved(n);
    const std::vector<float> real = gpu::RealValues(t);
    const float* f = real.data();
    for (size_t r = 0; r < rows; ++r) {
      for (size_t k = 0; k < rest; ++k) moved[k * rows + r] = f[r * rest + k];
    }
    cl_int err = CL_SUCCESS;
    cl_mem mem = api_.clCreateBuffer(delegate_->device().context, CL_MEM_READ_WRITE,
                                     std::max<size_t>(n, 1) * ElementBytes(), nullptr, &err);
    if (mem == nullptr || err != CL_SUCCESS) {
      return ClError(err, "allocating weights " + std::to_string(t.index));
    }
    moved_.emplace(&t, mem);
    if (delegate_->fp16()) staging_.resize(std::max(staging_.size(), n));
    return UploadFloats(moved.data(), n, t.index, mem);
  }

  // Device -> host, blocking: the queue has run every launch before it. A
  // quantized tensor comes back as real values on its grid, then as codes.
  // `event`, when non-null, gets the copy's (none when there is nothing to copy).
  Status Download(cl_mem mem, runtime::Tensor* t, cl_event* event = nullptr) {
    const size_t n = static_cast<size_t>(t->num_elements());
    if (n == 0) return Status::Ok();
    float* real = t->quantized ? real_.data() : t->data_as<float>();
    void* dst = delegate_->fp16() ? static_cast<void*>(staging_.data()) : real;
    const cl_int err = api_.clEnqueueReadBuffer(delegate_->queue(), mem, CL_TRUE, 0,
                                                n * ElementBytes(), dst, 0, nullptr, event);
    if (err != CL_SUCCESS)
      return ClError(err, "copying tensor " + std::to_string(t->index) + " out");
    if (delegate_->fp16()) {
      for (size_t i = 0; i < n; ++i) real[i] = runtime::HalfToFloat(staging_[i]);
    }
    if (t->quantized) gpu::Quantize(real, t);
    return Status::Ok();
  }

  // The parameter buffer, the kernels and their arguments.
  Status CreateKernels() {
    std::vector<int32_t> params;
    std::vector<cl_int> offsets;
    for (const Launch& l : build_.launches) {
      offsets.push_back(static_cast<cl_int>(params.size()));
      params.insert(params.end(), l.params.begin(), l.params.end());
    }
    params.push_back(0);
    cl_int err = CL_SUCCESS;
    const cl_context ctx = delegate_->device().context;
    params_ = api_.clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                  params.size() * sizeof(int32_t), params.data(), &err);
    if (err != CL_SUCCESS) return ClError(err, "creating the parameter buffer");
    dummy_ = api_.clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, nullptr, &err);
    if (err != CL_SUCCESS) return ClError(err, "creating a buffer");
    for (size_t i = 0; i < build_.launches.size(); ++i) {
      DFARM_RETURN_IF_ERROR(CreateKernel(build_.launches[i], offsets[i]));
    }
    return Status::Ok();
  }

  Status CreateKernel(const Launch& l, cl_int offset) {
    cl_int err = CL_SUCCESS;
    cl_kernel k = api_.clCreateKernel(program_, l.kernel, &err);
    if (k == nullptr || err != CL_SUCCESS) return ClError(err, std::string("creating ") + l.kernel);
    kernels_.push_back(k);
    const runtime::Tensor* tensors[4] = {l.a, l.b, l.c, l.out};
    for (cl_uint a = 0; a < 4; ++a) {
      cl_mem mem = tensors[a] == nullptr       ? dummy_
                   : a == 1 && l.b_layout == 1 ? moved_[tensors[a]]
                                               : buffers_[tensors[a]];
      err = api_.clSetKernelArg(k, a, sizeof(cl_mem), &mem);
      if (err != CL_SUCCESS) return ClError(err, std::string("setting ") + l.kernel + "'s buffers");
    }
    err = api_.clSetKernelArg(k, 4, sizeof(cl_mem), &params_);
    if (err == CL_SUCCESS) err = api_.clSetKernelArg(k, 5, sizeof(cl_int), &offset);
    if (err != CL_SUCCESS)
      return ClError(err, std::string("setting ") + l.kernel + "'s parameters");
    size_t kernel_max = 0;
    if (api_.clGetKernelWorkGroupInfo(k, delegate_->device().device, CL_KERNEL_WORK_GROUP_SIZE,
                                      sizeof(kernel_max), &kernel_max, nullptr) != CL_SUCCESS ||
        kernel_max == 0) {
      kernel_max = 1;
    }
    local_sizes_.push_back(std::min(delegate_->work_group_size(), kernel_max));
    return Status::Ok();
  }

  GpuDelegate* delegate_;
  const gpu::OpenClApi& api_;
  GraphBuild build_;
  cl_program program_ = nullptr;
  std::unordered_map<const runtime::Tensor*, cl_mem> buffers_;
  std::unordered_map<const runtime::Tensor*, cl_mem> moved_;  // Launch::b_layout 1 weights
  std::vector<const runtime::Tensor*> inputs_;  // run-time inputs, copied in by Invoke()
  std::vector<cl_kernel> kernels_;              // one per launch
  std::vector<size_t> local_sizes_;             // one per launch
  cl_mem params_ = nullptr;
  cl_mem dummy_ = nullptr;                 // for a launch's unused inputs
  std::vector<uint16_t> staging_;          // fp16 transfers
  std::vector<float> real_;                // quantized inputs' and outputs' real values
  std::vector<size_t> node_launches_end_;  // per partition node: the end of its launches
  RunEvents events_;                       // InvokeProfiled()'s
};

Status ParseBool(const std::string& key, const std::string& value, bool* out) {
  if (value == "true" || value == "1") {
    *out = true;
  } else if (value == "false" || value == "0") {
    *out = false;
  } else {
    return Status::Error("delegate option '" + key + "' has value '" + value +
                         "', expected true or false");
  }
  return Status::Ok();
}

Status ParseGpuOptions(const std::vector<std::pair<std::string, std::string>>& options,
                       GpuOptions* out) {
  for (const auto& [key, value] : options) {
    if (key == "precision_loss_allowed") {
      DFARM_RETURN_IF_ERROR(ParseBool(key, value, &out->precision_loss_allowed));
    } else if (key == "inference_preference") {
      if (value == "fast_single_answer") {
        out->inference_preference = GpuOptions::Preference::kFastSingleAnswer;
      } else if (value == "sustained_speed") {
        out->inference_preference = GpuOptions::Preference::kSustainedSpeed;
      } else {
        return Status::Error("delegate option 'inference_preference' has value '" + value +
                             "', expected fast_single_answer or sustained_speed");
      }
    } else if (key == "serialization_dir") {
      if (value.empty()) return Status::Error("delegate option 'serialization_dir' is empty");
      out->serialization_dir = value;
    } else if (key == "model_token") {
      out->model_token = value;
    } else if (key == "quantized_models_allowed") {
      DFARM_RETURN_IF_ERROR(ParseBool(key, value, &out->quantized_models_allowed));
    }
  }
  return Status::Ok();
}

}  // namespace

Status GpuDelegate::Create(const GpuOptions& options,
                           const runtime::DelegatePartitionOptions& partition_options,
                           std::unique_ptr<GpuDelegate>* out) {
  const gpu::GpuDevice* device = nullptr;
  DFARM_RETURN_IF_ERROR(gpu::SharedGpuDevice(&device));
  std::unique_ptr<GpuDelegate> d(new GpuDelegate(options, partition_options));
  d->device_ = device;
  DFARM_RETURN_IF_ERROR(d->CreateQueue(0));
  d->half_math_ = options.precision_loss_allowed && device->info.fp16;
  const size_t wanted =
      options.inference_preference == GpuOptions::Preference::kSustainedSpeed ? 256 : 64;
  d->work_group_size_ = std::max<size_t>(1, std::min(wanted, device->max_work_group_size));
  *out = std::move(d);
  return Status::Ok();
}

Status GpuDelegate::CreateQueue(cl_command_queue_properties properties) {
  if (queue_ != nullptr) {
    device_->api->clFinish(queue_);
    device_->api->clReleaseCommandQueue(queue_);
    queue_ = nullptr;
  }
  cl_int err = CL_SUCCESS;
  queue_ = device_->api->clCreateCommandQueue(device_->context, device_->device, properties, &err);
  if (queue_ == nullptr || err != CL_SUCCESS) {
    queue_ = nullptr;
    return ClError(err, "creating a command queue on " + device_->info.name);
  }
  return Status::Ok();
}

Status GpuDelegate::EnableProfiling() {
  if (profiling_) return Status::Ok();
  DFARM_RETURN_IF_ERROR(CreateQueue(CL_QUEUE_PROFILING_ENABLE));
  profiling_ = true;
  return Status::Ok();
}

GpuDelegate::~GpuDelegate() {
  if (queue_ != nullptr) {
    device_->api->clFinish(queue_);
    device_->api->clReleaseCommandQueue(queue_);
  }
}

Status GpuDelegate::CheckNode(const runtime::Node& node) const {
  return gpu::VisitNode(node, options_.quantized_models_allowed, nullptr);
}

std::unique_ptr<runtime::DelegateKernel> GpuDelegate::CreateKernel() {
  return std::make_unique<GpuKernel>(this);
}

Status GpuDelegate::Program(cl_program* program_out) {
  if (program_ == nullptr) {
    gpu::ProgramRequest request;
    request.build_options = "-cl-std=CL1.2";
    if (options_.precision_loss_allowed) request.build_options += " -DDFARM_FP16";
    if (half_math_) request.build_options += " -DDFARM_HALF_MATH";
    request.serialization_dir = options_.serialization_dir;
    request.model_token = options_.model_token;
    DFARM_RETURN_IF_ERROR(gpu::GetProgram(*device_, request, &stats_, &program_));
  }
  *program_out = program_;
  return Status::Ok();
}

std::vector<std::pair<std::string, double>> GpuDelegate::Stats() const {
  return {{"programs_compiled", stats_.compiled},
          {"programs_loaded", stats_.loaded},
          {"programs_reused", stats_.reused},
          {"compile_us", stats_.compile_us},
          {"fp16", options_.precision_loss_allowed ? 1.0 : 0.0},
          {"half_math", half_math_ ? 1.0 : 0.0},
          {"work_group_size", static_cast<double>(work_group_size_)}};
}

Status CreateGpuDelegate(const std::vector<std::pair<std::string, std::string>>& options,
                         std::unique_ptr<runtime::Delegate>* delegate_out) {
  runtime::DelegatePartitionOptions partition;
  DFARM_RETURN_IF_ERROR(ParsePartitionOptions(options, &partition));
  GpuOptions go;
  DFARM_RETURN_IF_ERROR(ParseGpuOptions(options, &go));
  std::unique_ptr<GpuDelegate> d;
  DFARM_RETURN_IF_ERROR(GpuDelegate::Create(go, partition, &d));
  *delegate_out = std::move(d);
  return Status::Ok();
}

}  // namespace dfarm::delegates
