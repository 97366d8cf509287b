// MAX_POOL_2D and AVERAGE_POOL_2D, NHWC, float32, int8 and uint8. Cells of
// the window that fall in the padding are left out (of the max, and of the
// average's count), as in TFLite: both paths clamp the window to the input
// before looping, so a crafted 2^30-row window costs its input rows only.
// Quantized: input and output share scale and zero point (as TFLite
// requires); the average is the integer sum divided by the count, rounded
// half away from zero; then the fused activation's clamp.
#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

struct PoolData : OpData {
  int stride_h = 1, stride_w = 1, filter_h = 1, filter_w = 1;
  int pad_top = 0, pad_left = 0;
  ActivationRange activation{};
  int32_t act_min = 0, act_max = 0;  // quantized
};

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 1, 1, 1));
  const auto* options = node.options<tflite::Pool2DOptions>();
  if (options == nullptr) return Status::Error("Pool2DOptions are missing");
  Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  const bool quantized = input->dtype == DType::kInt8 || input->dtype == DType::kUint8;
  if (quantized) {
    DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(*input, "input"));
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(*output, "output"));
    if (input->scale != output->scale || input->zero_point != output->zero_point) {
      return Status::Unsupported(
          "input and output with different scales or zero points are "
          "not supported");
    }
  } else {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
  if (input->rank() != 4) {
    return Status::Error("input must be 4-D, got " + ShapeToString(input->shape));
  }
  auto data = std::make_unique<PoolData>();
  data->stride_h = options->stride_h();
  data->stride_w = options->stride_w();
  data->filter_h = options->filter_height();
  data->filter_w = options->filter_width();
  DFARM_RETURN_IF_ERROR(
      CheckWindowParams(options->padding(), data->stride_h, data->stride_w, 1, 1));
  if (data->filter_h <= 0 || data->filter_w <= 0) {
    return Status::Error("filter size must be positive, got " + std::to_string(data->filter_h) +
                         "x" + std::to_string(data->filter_w));
  }
  if (quantized) {
    DFARM_RETURN_IF_ERROR(CalculateActivationRangeQuantized(
        options->fused_activation_function(), *output, &data->act_min, &data->act_max));
  } else {
    DFARM_RETURN_IF_ERROR(
        GetActivationRange(options->fused_activation_function(), &data->activation));
  }
  WindowDim h, w;
  DFARM_RETURN_IF_ERROR(ComputeWindowDim(options->padding(), WindowAxis::kHeight, "filter_height",
                                         input->shape[1], data->filter_h, data->stride_h, 1, &h));
  DFARM_RETURN_IF_ERROR(ComputeWindowDim(options->padding(), WindowAxis::kWidth, "filter_width",
                                         input->shape[2], data->filter_w, data->stride_w, 1, &w));
  const int32_t computed[] = {input->shape[0], h.out, w.out, input->shape[3]};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  data->pad_top = h.pad_before;
  data->pad_left = w.pad_before;
  node.data = std::move(data);
  return Status::Ok();
}

template <bool kMax, typename T>
void EvalQuantized(const PoolData& d, const Tensor& input, Tensor& output) {
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int channels = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2];
  const T* in = input.data_as<T>();
  T* out = output.data_as<T>();
  for (int n = 0; n < batches; ++n) {
    for (int oy = 0; oy < out_h; ++oy) {
      const int iy0 = oy * d.stride_h - d.pad_top;
      const int ky0 = std::max(0, -iy0), ky1 = std::min(d.filter_h, in_h - iy0);
      for (int ox = 0; ox < out_w; ++ox) {
        const int ix0 = ox * d.stride_w - d.pad_left;
        const int kx0 = std::max(0, -ix0), kx1 = std::min(d.filter_w, in_w - ix0);
        T* px_out = out + ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * channels;
        for (int c = 0; c < channels; ++c) {
          int32_t acc = kMax ? std::numeric_limits<T>::min() : 0;
          int32_t count = 0;
          for (int ky = ky0; ky < ky1; ++ky) {
            for (int kx = kx0; kx < kx1; ++kx) {
              const int32_t v =
                  in[((static_cast<size_t>(n) * in_h + iy0 + ky) * in_w + ix0 + kx) * channels + c];
              acc = kMax ? std::max(acc, v) : acc + v;
              ++count;
            }
          }
          if constexpr (!kMax) {
            if (count > 0) {
              acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
            }
          }
          px_out[c] = static_cast<T>(std::clamp(acc, d.act_min, d.act_max));
        }
      }
    }
  }
}

// One output pixel's channels from K taps (each the input at one cell of the
// window, in row-major order): the max of -infinity and the taps, or their
// sum times `scale`, then the clamp, per channel in registers. The same
// operations in the same order as the general loop below.
template <bool kMax, int K>
void PoolTaps(const float* const (&taps)[K], int channels, float scale, ActivationRange activation,
              float* __restrict out) {
  for (int c = 0; c < channels; ++c) {
    float v = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    for (int k = 0; k < K; ++k) {
      if constexpr (kMax) {
        v = taps[k][c] > v ? taps[k][c] : v;
      } else {
        v += taps[k][c];
      }
    }
    if constexpr (!kMax) v *= scale;
    out[c] = Clamp(v, activation);
  }
}

// A 2x2 or 3x3 window wholly inside the input (its top-left cell at
// `window`) by PoolTaps(); false for other windows.
template <bool kMax>
bool PoolFullWindow(const PoolData& d, const float* window, int in_w, int channels,
                    float* __restrict out) {
  const size_t row = static_cast<size_t>(in_w) * channels;
  if (d.filter_h == 2 && d.filter_w == 2) {
    const float* const taps[4] = {window, window + channels, window + row, window + row + channels};
    PoolTaps<kMax, 4>(taps, channels, 1.0f / 4.0f, d.activation, out);
    return true;
  }
  if (d.filter_h == 3 && d.filter_w == 3) {
    const float* const taps[9] = {
        window,           window + channels,           window + 2 * channels,
        window + row,     window + row + channels,     window + row + 2 * channels,
        window + 2 * row, window + 2 * row + channels, window + 2 * row + 2 * channels};
    PoolTaps<kMax, 9>(taps, channels, 1.0f / 9.0f, d.activation, out);
    return true;
  }
  return false;
}

// The part of a window inside the input: `rows` x `cols` cells.
struct WindowCells {
  int rows, cols;
};

#if defined(__GNUC__)
// Four floats: one SSE2 or NEON register (GCC and clang lower it).
typedef float PoolVec __attribute__((vector_size(16)));
constexpr int kPoolBlock = 16;  // channels a block keeps in four registers

// Channels [0, 16) from `window` on (the input at the first cell of the
// window inside it, and the block's first channel) of one output pixel: the
// same operations in the same order per channel as the loop in
// PoolWindow(), with the running max or sum in registers over all cells (a
// large window, e.g. a global average pool over 128x128 pixels, no longer
// stores and reloads it per cell).
template <bool kMax>
void PoolBlock(const float* window, size_t row, int channels, WindowCells w, float scale,
               ActivationRange activation, float* __restrict out) {
  constexpr int kVecs = kPoolBlock / 4;
  const float first = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  PoolVec acc[kVecs];
  for (int v = 0; v < kVecs; ++v) acc[v] = PoolVec{first, first, first, first};
  for (int ky = 0; ky < w.rows; ++ky) {
    const float* px = window + ky * row;
    for (int kx = 0; kx < w.cols; ++kx, px += channels) {
      for (int v = 0; v < kVecs; ++v) {
        PoolVec x;
        std::memcpy(&x, px + 4 * v, sizeof(x));
        if constexpr (kMax) {
          acc[v] = x > acc[v] ? x : acc[v];
        } else {
          acc[v] += x;
        }
      }
    }
  }
  float sums[kPoolBlock];
  std::memcpy(sums, acc, sizeof(sums));
  for (int c = 0; c < kPoolBlock; ++c) {
    out[c] = Clamp(kMax ? sums[c] : sums[c] * scale, activation);
  }
}
#else
constexpr int kPoolBlock = 0;
#endif

// One output pixel's channels over the cells `w` of its window inside the
// input (`window`: the first of them; unused when there are none): the max
// of -infinity and the cells, or their sum times 1 / count, then the clamp;
// blocks of kPoolBlock channels by PoolBlock(), the rest one channel at a
// time in `out`.
template <bool kMax>
void PoolWindow(const PoolData& d, const float* window, int in_w, int channels, WindowCells w,
                float* __restrict out) {
  const size_t row = static_cast<size_t>(in_w) * channels;
  const int count = w.rows * w.cols;
  const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  int c0 = 0;
#if defined(__GNUC__)
  for (; c0 + kPoolBlock <= channels; c0 += kPoolBlock) {
    PoolBlock<kMax>(window + c0, row, channels, w, scale, d.activation, out + c0);
  }
#endif
  const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  for (int c = c0; c < channels; ++c) out[c] = init;
  for (int ky = 0; ky < w.rows; ++ky) {
    for (int kx = 0; kx < w.cols; ++kx) {
      const float* __restrict px = window + ky * row + static_cast<size_t>(kx) * channels;
      if constexpr (kMax) {
        for (int c = c0; c < channels; ++c) out[c] = px[c] > out[c] ? px[c] : out[c];
      } else {
        for (int c = c0; c < channels; ++c) out[c] += px[c];
      }
    }
  }
  for (int c = c0; c < channels; ++c) {
    out[c] = Clamp(kMax ? out[c] : out[c] * scale, d.activation);
  }
}

template <bool kMax>
Status Eval(Node& node) {
  const PoolData& d = *node.data_as<PoolData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  // No element to write (a zero dimension): the loops below would still walk
  // every batch and row of the others, up to 2^31 of each.
  if (output.bytes == 0) return Status::Ok();
  if (input.dtype == DType::kInt8) {
    EvalQuantized<kMax, int8_t>(d, input, output);
    return Status::Ok();
  }
  if (input.dtype == DType::kUint8) {
    EvalQuantized<kMax, uint8_t>(d, input, output);
    return Status::Ok();
  }
  const int in_h = input.shape[1], in_w = input.shape[2];
  const int channels = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2];
  const float* in = input.data_as<float>();
  float* out = output.data_as<float>();
  const int64_t rows = static_cast<int64_t>(input.shape[0]) * out_h;
  // Whole output rows (batch, oy) per range: each output as on one thread.
  auto pool_rows = [&](int64_t row_begin, int64_t row_end) {
    for (int64_t row = row_begin; row < row_end; ++row) {
      const int n = static_cast<int>(row / out_h), oy = static_cast<int>(row % out_h);
      const int iy0 = oy * d.stride_h - d.pad_top;
      const int ky0 = std::max(0, -iy0), ky1 = std::min(d.filter_h, in_h - iy0);
      for (int ox = 0; ox < out_w; ++ox) {
        const int ix0 = ox * d.stride_w - d.pad_left;
        const int kx0 = std::max(0, -ix0), kx1 = std::min(d.filter_w, in_w - ix0);
        float* __restrict acc =
            out + ((static_cast<size_t>(n) * out_h + oy) * out_w + ox) * channels;
        if (ky1 - ky0 == d.filter_h && kx1 - kx0 == d.filter_w &&
            PoolFullWindow<kMax>(
                d, in + ((static_cast<size_t>(n) * in_h + iy0) * in_w + ix0) * channels, in_w,
                channels, acc)) {
          continue;
        }
        const WindowCells cells{std::max(0, ky1 - ky0), std::max(0, kx1 - kx0)};
        const float* window =
            cells.rows * cells.cols == 0
                ? in
                : in + ((static_cast<size_t>(n) * in_h + iy0 + ky0) * in_w + ix0 + kx0) * channels;
        PoolWindow<kMax>(d, window, in_w, channels, cells, acc);
      }
    }
  };
  const int64_t row_elements = std::max<int64_t>(1, static_cast<int64_t>(out_w) * channels);
  if (NumThreads(node) <= 1 || rows * row_elements < kMinParallelElements) {
    pool_rows(0, rows);
    return Status::Ok();
  }
  const int tasks = static_cast<int>(TaskCount(rows, NumThreads(node)));
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
    const Range r = SplitRange(rows, tasks, static_cast<int>(t));
    pool_rows(r.begin, r.end);
  });
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterMaxPool2D() {
  static const OpRegistration registration = {&Prepare, &Eval<true>};
  return &registration;
}

const OpRegistration* RegisterAveragePool2D() {
  static const OpRegistration registration = {&Prepare, &Eval<false>};
  return &registration;
}

}  // namespace dfarm::runtime
