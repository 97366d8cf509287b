#include "runtime/dtype.h"

namespace dfarm::runtime {

const char* DTypeName(DType dtype) {
  switch (dtype) {
#define DFARM_DTYPE_NAME(e, tfl, name, size) \
  case DType::e:                             \
    return name;
    DFARM_DTYPES(DFARM_DTYPE_NAME)
#undef DFARM_DTYPE_NAME
  }
  return "unknown";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
#define DFARM_DTYPE_SIZE(e, tfl, name, size) \
  case DType::e:                             \
    return size;
    DFARM_DTYPES(DFARM_DTYPE_SIZE)
#undef DFARM_DTYPE_SIZE
  }
  return 0;
}

bool DTypeFromTflite(tflite::TensorType type, DType* dtype_out) {
  switch (type) {
#define DFARM_DTYPE_FROM(e, tfl, name, size) \
  case tflite::TensorType::tfl:              \
    *dtype_out = DType::e;                   \
    return true;
    DFARM_DTYPES(DFARM_DTYPE_FROM)
#undef DFARM_DTYPE_FROM
    default:
      return false;
  }
}

size_t TfliteTypeSize(tflite::TensorType type) {
  using tflite::TensorType;
  switch (type) {
    case TensorType::BOOL:
    case TensorType::INT8:
    case TensorType::UINT8:
      return 1;
    case TensorType::FLOAT16:
    case TensorType::INT16:
    case TensorType::UINT16:
      return 2;
    case TensorType::FLOAT32:
    case TensorType::INT32:
    case TensorType::UINT32:
      return 4;
    case TensorType::INT64:
    case TensorType::UINT64:
    case TensorType::FLOAT64:
    case TensorType::COMPLEX64:
      return 8;
    case TensorType::COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

}  // namespace dfarm::runtime
