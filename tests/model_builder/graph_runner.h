// GraphRunner: loads a ModelBuilder's model with every reference kernel and
// runs it, for kernel and interpreter tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/interpreter.h"
#include "runtime/kernels/parallel.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"
#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {

// An execution context with a pool of 3 threads and no scratch, for calling
// a kernel's function directly on several threads.
struct ThreadedContext {
  ThreadedContext() : pool(3) {
    context.threadpool = &pool;
    context.num_threads = pool.threads();
  }
  runtime::ThreadPool pool;
  runtime::ExecutionContext context;
};

// Builtin kernels to take instead of the resolver's defaults (tests compare
// a fast kernel with its plain-loop Register*Reference()).
using KernelOverrides =
    std::vector<std::pair<tfl::BuiltinOperator, const runtime::OpRegistration*>>;

class GraphRunner {
 public:
  // Builds the model, loads it (as "test.tflite") with every kernel (and
  // `overrides`) under `options`, and calls AllocateTensors().
  runtime::Status Init(const ModelBuilder& builder, const runtime::InterpreterOptions& options = {},
                       const KernelOverrides& overrides = {});

  // Copies `values` into input `index`; their size must match the tensor's.
  template <typename T>
  bool SetInput(size_t index, const std::vector<T>& values) {
    runtime::Tensor* t = interpreter_->inputs()[index];
    if (values.size() * sizeof(T) != t->bytes) return false;
    if (t->bytes != 0) std::memcpy(t->data, values.data(), t->bytes);  // no memcpy from null
    return true;
  }

  runtime::Status Invoke() { return interpreter_->Invoke(); }

  template <typename T = float>
  std::vector<T> Output(size_t index) const {
    const runtime::Tensor* t = interpreter_->outputs()[index];
    std::vector<T> values(t->bytes / sizeof(T));
    if (t->bytes > 0) std::memcpy(values.data(), t->data, t->bytes);
    return values;
  }
  const std::vector<int32_t>& OutputShape(size_t index) const {
    return interpreter_->outputs()[index]->shape;
  }

  runtime::Interpreter& interpreter() { return *interpreter_; }

 private:
  std::unique_ptr<runtime::Model> model_;
  runtime::OpResolver resolver_;
  std::unique_ptr<runtime::Interpreter> interpreter_;
};

}  // namespace dfarm::testing
