// RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR, float32, NHWC; the size input
// ([2] int32: new height, new width) must hold its values before Invoke().
// align_corners and half_pixel_centers are honoured whatever the op version,
// with TFLite's reference formulas:
//   scale = align_corners && out > 1 ? (in - 1) / (out - 1) : in / out
//   bilinear: x = half_pixel_centers ? (o + 0.5) * scale - 0.5 : o * scale,
//             x0 = max(floor(x), 0), x1 = min(ceil(x), in - 1), weights from x - x0
//   nearest:  x = (o + (half_pixel_centers ? 0.5 : 0)) * scale,
//             i = min(align_corners ? round(x) : floor(x), in - 1), and
//             max(i, 0) with half_pixel_centers
// The per-row and per-column indices and weights are computed in Prepare().
// int8 and uint8 (input and output sharing scale and zero point): nearest
// copies the values; bilinear follows TFLite's ResizeBilinearInteger, with
// positions in 10-bit fixed point and the result rounded half away from zero.
// A float ADD and activation the interpreter folds into the resize
// (Node::folded_addend, folded_activation) are applied to each output row
// as it is written (the FPN merges of BlazeFace, ADD(conv, RESIZE_BILINEAR)).
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/kernels/kernel_clones.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/quant_util.h"

namespace dfarm::runtime {
namespace {

struct Taps {
  std::vector<int> lower, upper;  // input indices per output index
  std::vector<float> frac;        // weight of `upper` (x - x0; may leave [0, 1] at borders)
};

// Quantized bilinear: 10-bit fixed-point source positions and their taps.
struct IntTaps {
  std::vector<int32_t> lower, upper, scaled;
};

struct ResizeData : OpData {
  Taps rows, cols;
  IntTaps int_rows, int_cols;
  // Float: the activation folded into the node (Node::folded_activation; a
  // folded ADD's), applied after the folded ADD's addend when `clamp`.
  ActivationRange activation{};
  bool clamp = false;
};

// TFLite's ResizeBilinearInteger scale and ComputeInterpolationValuesInteger.
IntTaps BilinearIntTaps(int in, int out, bool align_corners, bool half_pixel_centers) {
  IntTaps t;
  int32_t scale_10 = ((1 << 10) * in + out / 2) / out;
  if (align_corners && out > 1) scale_10 = ((1 << 10) * (in - 1) + (out - 1) / 2) / (out - 1);
  for (int o = 0; o < out; ++o) {
    const int32_t scaled =
        half_pixel_centers ? o * scale_10 + scale_10 / 2 - (1 << 9) : o * scale_10;
    t.scaled.push_back(scaled);
    t.lower.push_back(std::max(scaled / (1 << 10), 0));
    t.upper.push_back(std::min((scaled + (1 << 10) - 1) / (1 << 10), in - 1));
  }
  return t;
}

float Scale(int in, int out, bool align_corners) {
  return align_corners && out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                  : static_cast<float>(in) / static_cast<float>(out);
}

Taps BilinearTaps(int in, int out, bool align_corners, bool half_pixel_centers) {
  Taps t;
  const float scale = Scale(in, out, align_corners);
  for (int o = 0; o < out; ++o) {
    const float x = half_pixel_centers ? (static_cast<float>(o) + 0.5f) * scale - 0.5f
                                       : static_cast<float>(o) * scale;
    const int x0 = std::max(static_cast<int>(std::floor(x)), 0);
    const int x1 = std::min(static_cast<int>(std::ceil(x)), in - 1);
    t.lower.push_back(x0);
    t.upper.push_back(x1);
    t.frac.push_back(x - static_cast<float>(x0));
  }
  return t;
}

Taps NearestTaps(int in, int out, bool align_corners, bool half_pixel_centers) {
  Taps t;
  const float scale = Scale(in, out, align_corners);
  const float offset = half_pixel_centers ? 0.5f : 0.0f;
  for (int o = 0; o < out; ++o) {
    const float x = (static_cast<float>(o) + offset) * scale;
    int i = std::min(static_cast<int>(align_corners ? std::round(x) : std::floor(x)), in - 1);
    if (half_pixel_centers) i = std::max(i, 0);
    t.lower.push_back(i);
    t.upper.push_back(i);
    t.frac.push_back(0.0f);
  }
  return t;
}

template <bool kBilinear>
Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 2, 2, 1));
  const Tensor* input = node.inputs[0];
  Tensor* output = node.outputs[0];
  const bool quantized = input->dtype == DType::kInt8 || input->dtype == DType::kUint8;
  if (quantized) {
    DFARM_RETURN_IF_ERROR(CheckSameDType(input, "input", output, "output"));
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(*input, "input"));
    DFARM_RETURN_IF_ERROR(CheckQuantizedPerTensor(*output, "output"));
    if (input->scale != output->scale || input->zero_point != output->zero_point) {
      return Status::Unsupported(
          "input and output with different scales or zero points are not supported");
    }
  } else {
    DFARM_RETURN_IF_ERROR(CheckFloat32(input, "input"));
    DFARM_RETURN_IF_ERROR(CheckFloat32(output, "output"));
  }
  bool align_corners = false, half_pixel_centers = false;
  if (kBilinear) {
    const auto* options = node.options<tflite::ResizeBilinearOptions>();
    if (options != nullptr) {
      align_corners = options->align_corners();
      half_pixel_centers = options->half_pixel_centers();
    }
  } else {
    const auto* options = node.options<tflite::ResizeNearestNeighborOptions>();
    if (options != nullptr) {
      align_corners = options->align_corners();
      half_pixel_centers = options->half_pixel_centers();
    }
  }
  if (kBilinear && align_corners && half_pixel_centers) {
    return Status::Error("align_corners and half_pixel_centers cannot both be set");
  }
  if (input->rank() != 4) {
    return Status::Error("input must be 4-D, got " + ShapeToString(input->shape));
  }
  std::vector<int64_t> size;
  DFARM_RETURN_IF_ERROR(ReadStaticInts(node.inputs[1], "size", &size));
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0 || size[0] > (1 << 24) ||
      size[1] > (1 << 24)) {
    return Status::Error("size must hold 2 positive values, got " +
                         ShapeToString(node.inputs[1]->shape) + " tensor");
  }
  const int32_t computed[] = {input->shape[0], static_cast<int32_t>(size[0]),
                              static_cast<int32_t>(size[1]), input->shape[3]};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*output, computed));
  if (input->shape[1] <= 0 || input->shape[2] <= 0) {
    return Status::Error("input " + ShapeToString(input->shape) + " is empty");
  }
  DFARM_RETURN_IF_ERROR(CheckFoldedAddend(node, *output, quantized));
  auto data = std::make_unique<ResizeData>();
  DFARM_RETURN_IF_ERROR(GetActivationRange(NodeActivation(node), &data->activation));
  data->clamp = NodeActivation(node) != tflite::ActivationFunctionType::NONE;
  auto taps = kBilinear ? &BilinearTaps : &NearestTaps;
  data->rows = taps(input->shape[1], computed[1], align_corners, half_pixel_centers);
  data->cols = taps(input->shape[2], computed[2], align_corners, half_pixel_centers);
  if (quantized && kBilinear) {
    if (input->shape[1] >= (1 << 20) || input->shape[2] >= (1 << 20) ||
        int64_t{computed[1]} * input->shape[1] >= (int64_t{1} << 20) ||
        int64_t{computed[2]} * input->shape[2] >= (int64_t{1} << 20)) {
      return Status::Unsupported("quantized bilinear resize of " + ShapeToString(input->shape) +
                                 " is too large for 10-bit fixed point positions");
    }
    data->int_rows =
        BilinearIntTaps(input->shape[1], computed[1], align_corners, half_pixel_centers);
    data->int_cols =
        BilinearIntTaps(input->shape[2], computed[2], align_corners, half_pixel_centers);
  }
  node.data = std::move(data);
  return Status::Ok();
}

template <bool kBilinear, typename T>
void EvalQuantized(const ResizeData& d, const Tensor& input, Tensor& output) {
  const int batches = input.shape[0], in_h = input.shape[1], in_w = input.shape[2];
  const int channels = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2];
  const T* in = input.data_as<T>();
  T* __restrict out = output.data_as<T>();
  for (int n = 0; n < batches; ++n) {
    const T* image = in + static_cast<size_t>(n) * in_h * in_w * channels;
    for (int oy = 0; oy < out_h; ++oy) {
      const Taps& r = d.rows;
      for (int ox = 0; ox < out_w; ++ox) {
        if constexpr (kBilinear) {
          const int32_t y0 = d.int_rows.lower[oy], y1 = d.int_rows.upper[oy];
          const int32_t x0 = d.int_cols.lower[ox], x1 = d.int_cols.upper[ox];
          const int64_t dy = d.int_rows.scaled[oy] - (1 << 10) * y0;
          const int64_t dx = d.int_cols.scaled[ox] - (1 << 10) * x0;
          const T* p00 = image + (static_cast<size_t>(y0) * in_w + x0) * channels;
          const T* p01 = image + (static_cast<size_t>(y0) * in_w + x1) * channels;
          const T* p10 = image + (static_cast<size_t>(y1) * in_w + x0) * channels;
          const T* p11 = image + (static_cast<size_t>(y1) * in_w + x1) * channels;
          for (int c = 0; c < channels; ++c) {
            const int64_t output_20 = p00[c] * ((1 << 10) - dy) * ((1 << 10) - dx) +
                                      p10[c] * dy * ((1 << 10) - dx) +
                                      p01[c] * ((1 << 10) - dy) * dx + p11[c] * dy * dx;
            const int64_t round = output_20 > 0 ? (1 << 19) : -(1 << 19);
            out[c] = static_cast<T>((output_20 + round) / (1 << 20));
          }
        } else {
          const T* p =
              image + (static_cast<size_t>(r.lower[oy]) * in_w + d.cols.lower[ox]) * channels;
          for (int c = 0; c < channels; ++c) out[c] = p[c];
        }
        out += channels;
      }
    }
  }
}

// Output row `row` (over batches; `pixels` pixels at `out`) plus the folded
// ADD's addend when `add` (Node::folded_addend: its channels' values, 0.0f
// added to the others as by a separate ADD of a channel-padded input), then
// clamped to the folded activation: the bits of the separate ADD and
// activation.
void AddAndClamp(const Node& node, const ResizeData& d, int64_t row, float* __restrict out,
                 int pixels, bool add) {
  const int channels = node.outputs[0]->shape[3];
  if (add) {
    const int begin = node.folded_addend_channels[0], end = node.folded_addend_channels[1];
    const int width = end - begin;
    const float* src = node.folded_addend->data_as<float>() + row * pixels * width;
    for (int x = 0; x < pixels; ++x, src += width) {
      float* px = out + static_cast<size_t>(x) * channels;
      for (int c = 0; c < channels; ++c) px[c] += c >= begin && c < end ? src[c - begin] : 0.0f;
    }
  }
  if (!d.clamp) return;
  for (int64_t i = 0; i < int64_t{pixels} * channels; ++i) out[i] = Clamp(out[i], d.activation);
}

// Float output rows [row_begin, row_end) (over batches). kAdd: plus `add`,
// a folded ADD's addend over all channels (laid out as the output), as each
// element is written.
template <bool kBilinear, bool kAdd>
DFARM_KERNEL_CLONES_NO_FMA void ResizeRows(const ResizeData& d, const Tensor& input, Tensor& output,
                                           const float* add, int64_t row_begin, int64_t row_end) {
  const int in_h = input.shape[1], in_w = input.shape[2];
  const int channels = input.shape[3];
  const int out_h = output.shape[1], out_w = output.shape[2];
  const float* in = input.data_as<float>();
  const size_t row_floats = static_cast<size_t>(out_w) * channels;
  float* __restrict out = output.data_as<float>() + row_begin * row_floats;
  if constexpr (kAdd) add += row_begin * row_floats;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int n = static_cast<int>(row / out_h), oy = static_cast<int>(row % out_h);
    const float* image = in + static_cast<size_t>(n) * in_h * in_w * channels;
    const float* row0 = image + static_cast<size_t>(d.rows.lower[oy]) * in_w * channels;
    const float* row1 = image + static_cast<size_t>(d.rows.upper[oy]) * in_w * channels;
    const float fy = d.rows.frac[oy];
    for (int ox = 0; ox < out_w; ++ox) {
      const float* p00 = row0 + static_cast<size_t>(d.cols.lower[ox]) * channels;
      if constexpr (kBilinear) {
        const float* p01 = row0 + static_cast<size_t>(d.cols.upper[ox]) * channels;
        const float* p10 = row1 + static_cast<size_t>(d.cols.lower[ox]) * channels;
        const float* p11 = row1 + static_cast<size_t>(d.cols.upper[ox]) * channels;
        const float fx = d.cols.frac[ox];
        const float w00 = (1.0f - fy) * (1.0f - fx), w01 = (1.0f - fy) * fx;
        const float w10 = fy * (1.0f - fx), w11 = fy * fx;
        for (int c = 0; c < channels; ++c) {
          const float v = p00[c] * w00 + p10[c] * w10 + p01[c] * w01 + p11[c] * w11;
          out[c] = kAdd ? v + add[c] : v;
        }
      } else {
        for (int c = 0; c < channels; ++c) out[c] = kAdd ? p00[c] + add[c] : p00[c];
      }
      out += channels;
      if constexpr (kAdd) add += channels;
    }
  }
}

template <bool kBilinear>
Status Eval(Node& node) {
  const ResizeData& d = *node.data_as<ResizeData>();
  const Tensor& input = *node.inputs[0];
  Tensor& output = *node.outputs[0];
  if (input.dtype == DType::kInt8) {
    EvalQuantized<kBilinear, int8_t>(d, input, output);
    return Status::Ok();
  }
  if (input.dtype == DType::kUint8) {
    EvalQuantized<kBilinear, uint8_t>(d, input, output);
    return Status::Ok();
  }
  const int out_w = output.shape[2];
  const size_t row_floats = static_cast<size_t>(out_w) * output.shape[3];
  // A folded ADD's addend over all channels is added as each element is
  // written; over some (a channel pad), after each row, with the activation.
  const Tensor* addend = node.folded_addend;
  const bool inline_add = addend != nullptr && node.folded_addend_channels[0] == 0 &&
                          node.folded_addend_channels[1] == output.shape[3];
  const bool row_add = addend != nullptr && !inline_add;
  const bool row_pass = row_add || d.clamp;
  // Output rows (over batches) as tasks across the threads; each element is
  // computed alone, so the split changes no bit.
  auto rows = [&](int64_t row_begin, int64_t row_end) {
    if (inline_add) {
      ResizeRows<kBilinear, true>(d, input, output, addend->data_as<float>(), row_begin, row_end);
    } else {
      ResizeRows<kBilinear, false>(d, input, output, nullptr, row_begin, row_end);
    }
    if (!row_pass) return;
    for (int64_t row = row_begin; row < row_end; ++row) {
      AddAndClamp(node, d, row, output.data_as<float>() + row * row_floats, out_w, row_add);
    }
  };
  const int64_t out_rows = static_cast<int64_t>(input.shape[0]) * output.shape[1];
  const bool split = output.num_elements() >= kMinParallelElements;
  const int tasks = static_cast<int>(TaskCount(split ? out_rows : 1, NumThreads(node)));
  ParallelFor(node.context, static_cast<size_t>(tasks), [&](size_t t, int) {
    const Range r = SplitRange(out_rows, tasks, static_cast<int>(t));
    if (r.size() > 0) rows(r.begin, r.end);
  });
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterResizeBilinear() {
  static const OpRegistration registration = {&Prepare<true>,
                                              &Eval<true>,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/false,
                                              /*applies_folded_channel_pad=*/false,
                                              /*applies_folded_add=*/true};
  return &registration;
}

const OpRegistration* RegisterResizeNearestNeighbor() {
  static const OpRegistration registration = {&Prepare<false>,
                                              &Eval<false>,
                                              /*applies_folded_activation=*/true,
                                              /*applies_folded_pad=*/false,
                                              /*applies_folded_channel_pad=*/false,
                                              /*applies_folded_add=*/true};
  return &registration;
}

}  // namespace dfarm::runtime
