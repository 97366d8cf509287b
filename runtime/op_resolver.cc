#include "runtime/op_resolver.h"

#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {

#define DFARM_OP(code, Name) \
  void OpResolver::Add##Name() { AddBuiltin(tflite::BuiltinOperator::code, Register##Name()); }
#include "runtime/ops.inc"
#undef DFARM_OP

void OpResolver::AddAllReferenceOps() {
#define DFARM_OP(code, Name) Add##Name();
#include "runtime/ops.inc"
#undef DFARM_OP
}

void OpResolver::AddBuiltin(tflite::BuiltinOperator code, const OpRegistration* registration) {
  for (auto& [c, r] : builtins_) {
    if (c == code) {
      r = registration;
      return;
    }
  }
  builtins_.emplace_back(code, registration);
}

const OpRegistration* OpResolver::FindBuiltin(tflite::BuiltinOperator code) const {
  for (const auto& [c, r] : builtins_) {
    if (c == code) return r;
  }
  return nullptr;
}

}  // namespace dfarm::runtime
