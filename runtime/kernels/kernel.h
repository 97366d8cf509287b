// The kernel interface: a Node is one operator instance, an OpRegistration the
// pair of functions that prepares and runs it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/schema/tflite_generated.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace dfarm::runtime {

// State a kernel computes in Prepare() and reads in Eval().
class OpData {
 public:
  virtual ~OpData() = default;
};

struct OpRegistration;

struct Node {
  int index = -1;
  std::string op_name;  // "CONV_2D", or a custom op's code
  tflite::BuiltinOperator code = tflite::BuiltinOperator::ADD;
  const tflite::Operator* op = nullptr;  // in the Model; for builtin options
  std::vector<Tensor*> inputs;           // nullptr for an omitted optional input
  std::vector<Tensor*> outputs;          // never null
  const OpRegistration* registration = nullptr;
  std::unique_ptr<OpData> data;  // owned; set by Prepare()
  bool folded = false;           // evaluated once in AllocateTensors()

  // The builtin options as T, or null when the node carries other (or none).
  template <typename T>
  const T* options() const {
    return op->builtin_options_as<T>();
  }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data.get());
  }
};

struct OpRegistration {
  // Called once from AllocateTensors(), in execution order. Checks arity,
  // dtypes and shapes, sets each output's shape with CheckOutputShape() (a
  // fully known declared shape must match), and may store OpData. Inputs
  // with has_static_value() hold their values already; other tensors have no
  // storage yet (it is planned after every Prepare). Messages name the fault
  // only; the interpreter adds the op and node.
  Status (*prepare)(Node& node);
  // Computes the outputs. Must not allocate.
  Status (*eval)(Node& node);
};

}  // namespace dfarm::runtime
