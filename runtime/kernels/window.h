// The geometry of one spatial dimension of a windowed op (conv, depthwise
// conv, pool, transposed conv), shared by the CPU kernels and the delegates
// that build the same windows (xnnpack), so both refuse the same crafted
// geometry. Defined in kernel_util.cc.
#pragma once

#include "runtime/schema/tflite_generated.h"
#include "runtime/status.h"

namespace dfarm::runtime {

// The spatial axis a window runs along; it names the option fields in
// messages ("stride_h", "dilation_h_factor", "height").
enum class WindowAxis { kHeight, kWidth };

// One spatial dimension of a windowed op (conv, depthwise conv, pool), as
// TFLite computes it:
//   effective = (filter - 1) * dilation + 1
//   SAME:  out = ceil(in / stride)
//   VALID: out = ceil((in - effective + 1) / stride)
//   pad_total = max((out - 1) * stride + effective - in, 0), pad_before = pad_total / 2
// computed in int64. Error, naming `filter_name` ("filter_height", a pool's
// option, or "filter height", a conv filter's dimension) or the stride or
// dilation field, when the effective filter or the padded input the windows
// span, (out - 1) * stride + effective, exceeds int32: within that bound
// every index a kernel computes in int (oy * stride - pad_before +
// ky * dilation) fits. Expects positive stride and dilation
// (CheckWindowParams) and in, filter >= 0.
struct WindowDim {
  int out;
  int pad_before;
  int pad_after;  // pad_total - pad_before
};
Status ComputeWindowDim(tflite::Padding padding, WindowAxis axis, const char* filter_name, int in,
                        int filter, int stride, int dilation, WindowDim* dim_out);

}  // namespace dfarm::runtime
