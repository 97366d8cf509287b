#include "runtime/op_resolver.h"

#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {

#define DFARM_OP(code, Name) \
  void OpResolver::Add##Name() { AddBuiltin(tflite::BuiltinOperator::code, Register##Name()); }
#include "runtime/ops.inc"
#undef DFARM_OP
#define DFARM_CUSTOM_OP(custom_code, Name) \
  void OpResolver::Add##Name() { AddCustom(custom_code, Register##Name()); }
#include "runtime/custom_ops.inc"
#undef DFARM_CUSTOM_OP

void OpResolver::AddAllReferenceOps() {
#define DFARM_OP(code, Name) Add##Name();
#include "runtime/ops.inc"
#undef DFARM_OP
#define DFARM_CUSTOM_OP(custom_code, Name) Add##Name();
#include "runtime/custom_ops.inc"
#undef DFARM_CUSTOM_OP
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

void OpResolver::AddCustom(std::string_view custom_code, const OpRegistration* registration) {
  for (auto& [c, r] : customs_) {
    if (c == custom_code) {
      r = registration;
      return;
    }
  }
  customs_.emplace_back(std::string(custom_code), registration);
}

const OpRegistration* OpResolver::FindCustom(std::string_view custom_code) const {
  for (const auto& [c, r] : customs_) {
    if (c == custom_code) return r;
  }
  return nullptr;
}

}  // namespace dfarm::runtime
