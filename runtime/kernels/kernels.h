// The reference kernels, one RegisterName() per entry of runtime/ops.inc.
#pragma once

#include "runtime/kernels/kernel.h"

namespace dfarm::runtime {

#define DFARM_OP(code, Name) const OpRegistration* Register##Name();
#include "runtime/ops.inc"
#undef DFARM_OP

}  // namespace dfarm::runtime
