// XnnpackDelegate: a runtime::Delegate over XNNPACK's subgraph API (Debian's
// libxnnpack, 2022-02 snapshot). Registered as "xnnpack" in delegates/registry.h.
//
// Each partition becomes one XNNPACK subgraph and runtime, created in
// Prepare() (weights packed once); Invoke() runs xnn_invoke_runtime on the
// interpreter's tensors, set up once in Prepare() (their addresses are stable
// after AllocateTensors()), so it allocates nothing. float32 (float16 inside
// with fp16) and int8/uint8 quantized graphs; the nodes and parameters this
// XNNPACK version lacks are refused with a reason by CheckNode() and stay on
// the CPU.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/delegate.h"

// pthreadpool's handle, without its header.
struct pthreadpool;

namespace dfarm::delegates {

struct XnnpackOptions {
  int threads = 1;    // >= 1; more than one runs on a pthreadpool of that size
  bool fp16 = false;  // XNN_FLAG_FORCE_FP16_INFERENCE: compute in float16
};

class XnnpackDelegate : public runtime::Delegate {
 public:
  // Initializes XNNPACK and the thread pool. kUnsupported when XNNPACK does
  // not run on this CPU, or fp16 is asked for and the CPU cannot do it
  // ("fp16 inference unsupported on this CPU"); kError for bad options.
  static runtime::Status Create(const XnnpackOptions& options,
                                const runtime::DelegatePartitionOptions& partition_options,
                                std::unique_ptr<XnnpackDelegate>* out);
  // Every kernel from CreateKernel() must be gone by then (they use the pool).
  ~XnnpackDelegate() override;

  runtime::Status CheckNode(const runtime::Node& node) const override;
  std::unique_ptr<runtime::DelegateKernel> CreateKernel() override;
  // Per-node times: each node of a partition also runs as an XNNPACK runtime
  // of its own, timed alone (this XNNPACK has no runtime profiling); see
  // InvokeProfiled in xnnpack_delegate.cc. Costs nothing until a profiled run.
  runtime::Status EnableProfiling() override;
  bool profiling() const { return profiling_; }

  const XnnpackOptions& xnnpack_options() const { return options_; }
  pthreadpool* threadpool() const { return threadpool_; }

 private:
  XnnpackDelegate(const XnnpackOptions& options,
                  const runtime::DelegatePartitionOptions& partition_options)
      : runtime::Delegate("xnnpack", partition_options), options_(options) {}

  XnnpackOptions options_;
  pthreadpool* threadpool_ = nullptr;  // owned; null for one thread
  bool profiling_ = false;
};

// The registry's factory for "xnnpack": options `threads` (>= 1, default 1),
// `fp16` (true/false, 1/0) and the partition options of delegates/registry.h.
runtime::Status CreateXnnpackDelegate(
    const std::vector<std::pair<std::string, std::string>>& options,
    std::unique_ptr<runtime::Delegate>* delegate_out);

}  // namespace dfarm::delegates
