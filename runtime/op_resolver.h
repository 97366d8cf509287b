// OpResolver: the kernels an Interpreter may use, registered explicitly
// (resolver.AddConv2D()), never by static self-registration.
#pragma once

#include <utility>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/schema/tflite_generated.h"

namespace dfarm::runtime {

class OpResolver {
 public:
#define DFARM_OP(code, Name) void Add##Name();
#include "runtime/ops.inc"
#undef DFARM_OP

  // Every reference kernel in runtime/ops.inc.
  void AddAllReferenceOps();

  // Registers (or replaces) the kernel for `code`. `registration` must
  // outlive the resolver and every Interpreter built from it.
  void AddBuiltin(tflite::BuiltinOperator code, const OpRegistration* registration);

  // The kernel for `code`, or null when none is registered.
  const OpRegistration* FindBuiltin(tflite::BuiltinOperator code) const;

  size_t size() const { return builtins_.size(); }

 private:
  std::vector<std::pair<tflite::BuiltinOperator, const OpRegistration*>> builtins_;
};

}  // namespace dfarm::runtime
