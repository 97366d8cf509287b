// DType: the tensor element types the runtime handles, their names (as in
// docs/CONTRACTS.md) and sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/schema/tflite_generated.h"

namespace dfarm::runtime {

// X(enumerator, TensorType, name, size in bytes). One list: names cannot drift.
#define DFARM_DTYPES(X)              \
  X(kFloat32, FLOAT32, "float32", 4) \
  X(kFloat16, FLOAT16, "float16", 2) \
  X(kInt32, INT32, "int32", 4)       \
  X(kUint8, UINT8, "uint8", 1)       \
  X(kInt64, INT64, "int64", 8)       \
  X(kBool, BOOL, "bool", 1)          \
  X(kInt16, INT16, "int16", 2)       \
  X(kInt8, INT8, "int8", 1)

enum class DType {
#define DFARM_DTYPE_ENUM(e, tfl, name, size) e,
  DFARM_DTYPES(DFARM_DTYPE_ENUM)
#undef DFARM_DTYPE_ENUM
};

const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);

// The DType for a model's TensorType; false for types we do not handle
// (string, complex, 4-bit, resource, ...).
bool DTypeFromTflite(tflite::TensorType type, DType* dtype_out);

// Byte size of one element of `type`, 0 when it has no fixed size (string)
// or is packed below a byte (int4).
size_t TfliteTypeSize(tflite::TensorType type);

}  // namespace dfarm::runtime
