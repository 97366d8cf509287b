// OpResolver: the kernels an Interpreter may use, registered explicitly
// (resolver.AddConv2D()), never by static self-registration.
#pragma once

#include <string>
#include <string_view>
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
#define DFARM_CUSTOM_OP(custom_code, Name) void Add##Name();
#include "runtime/custom_ops.inc"
#undef DFARM_CUSTOM_OP

  // Every reference kernel in runtime/ops.inc and runtime/custom_ops.inc.
  void AddAllReferenceOps();

  // Registers (or replaces) the kernel for `code`. `registration` must
  // outlive the resolver and every Interpreter built from it.
  void AddBuiltin(tflite::BuiltinOperator code, const OpRegistration* registration);

  // The kernel for `code`, or null when none is registered.
  const OpRegistration* FindBuiltin(tflite::BuiltinOperator code) const;

  // Registers (or replaces) the kernel of the custom op whose
  // OperatorCode.custom_code is `custom_code`. `registration` must outlive
  // the resolver and every Interpreter built from it.
  void AddCustom(std::string_view custom_code, const OpRegistration* registration);

  // The kernel for custom op `custom_code`, or null when none is registered.
  const OpRegistration* FindCustom(std::string_view custom_code) const;

  // Number of registered kernels, builtin and custom.
  size_t size() const { return builtins_.size() + customs_.size(); }

 private:
  std::vector<std::pair<tflite::BuiltinOperator, const OpRegistration*>> builtins_;
  std::vector<std::pair<std::string, const OpRegistration*>> customs_;
};

}  // namespace dfarm::runtime
