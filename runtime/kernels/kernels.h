// The reference kernels, one RegisterName() per entry of runtime/ops.inc and
// runtime/custom_ops.inc.
#pragma once

#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

#define DFARM_OP(code, Name) const OpRegistration* Register##Name();
#include "runtime/ops.inc"
#undef DFARM_OP
#define DFARM_CUSTOM_OP(custom_code, Name) const OpRegistration* Register##Name();
#include "runtime/custom_ops.inc"
#undef DFARM_CUSTOM_OP

}  // namespace dfarm::runtime
