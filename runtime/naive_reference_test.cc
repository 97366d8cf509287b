// Cross-checks the interpreter on the real models against a naive evaluator
// written separately here: double precision, the textbook loop nest per
// output element, no repacking, no arena. It shares the op definitions with
// the kernels (per-op tests with hand-computed values pin those down), so it
// catches indexing, layout, broadcasting and memory-planning faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "runtime/fp16.h"
#include "runtime/interpreter.h"

namespace dfarm::runtime {
namespace {

using Values = std::vector<double>;

std::vector<int64_t> Strides(const std::vector<int32_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::vector<int64_t> Unravel(int64_t flat, const std::vector<int32_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

double Activate(double v, tflite::ActivationFunctionType a) {
  switch (a) {
    case tflite::ActivationFunctionType::RELU:
      return std::max(v, 0.0);
    case tflite::ActivationFunctionType::RELU6:
      return std::clamp(v, 0.0, 6.0);
    case tflite::ActivationFunctionType::RELU_N1_TO_1:
      return std::clamp(v, -1.0, 1.0);
    default:
      return v;
  }
}

int PadBefore(tflite::Padding padding, int in, int out, int k, int stride, int dilation) {
  if (padding == tflite::Padding::VALID) return 0;
  int needed = (out - 1) * stride + (k - 1) * dilation + 1;
  return std::max(needed - in, 0) / 2;
}

class NaiveEvaluator {
 public:
  explicit NaiveEvaluator(const Interpreter& interpreter) : it_(interpreter) {}

  // Evaluates every node; false (with a gtest failure) on an op it lacks.
  bool Run(const std::map<int, Values>& inputs) {
    values_ = inputs;
    for (size_t i = 0; i < it_.nodes_size(); ++i) {
      // An activation the interpreter folded into the node before it is
      // applied there (Node::folded_activation): that node's output is
      // already the activation's. A PAD folded into the conv or ADD after
      // it is applied there (Node::folded_pad, folded_channel_pad), an ADD
      // folded into the conv before it there (Node::folded_addend).
      if (it_.node(i).folded_into >= 0) continue;
      if (!Eval(it_.node(i))) return false;
    }
    return true;
  }
  const Values& value(int tensor) { return values_.at(tensor); }

 private:
  const Values& In(const Node& node, int i) { return Of(*node.inputs[i]); }
  const Values& Of(const Tensor& t) {
    auto it = values_.find(t.index);
    if (it != values_.end()) return it->second;
    Values v(t.num_elements());  // a constant
    for (size_t k = 0; k < v.size(); ++k) {
      switch (t.dtype) {
        case DType::kFloat32:
          v[k] = t.data_as<float>()[k];
          break;
        case DType::kFloat16:
          v[k] = HalfToFloat(t.data_as<uint16_t>()[k]);
          break;
        case DType::kInt32:
          v[k] = t.data_as<int32_t>()[k];
          break;
        default:
          ADD_FAILURE() << "constant dtype " << DTypeName(t.dtype);
      }
    }
    return values_[t.index] = std::move(v);
  }

  bool Eval(const Node& node) {
    const Tensor& out_t = *node.outputs[0];
    const std::vector<int32_t>& os = out_t.shape;
    Values out(out_t.num_elements(), 0.0);
    using Op = tflite::BuiltinOperator;
    switch (node.code) {
      case Op::DEQUANTIZE:
      case Op::RESHAPE:
        out = In(node, 0);
        break;
      case Op::RELU:
        for (size_t k = 0; k < out.size(); ++k) out[k] = std::max(In(node, 0)[k], 0.0);
        break;
      case Op::RELU6:
        for (size_t k = 0; k < out.size(); ++k) out[k] = std::clamp(In(node, 0)[k], 0.0, 6.0);
        break;
      case Op::HARD_SWISH:
        for (size_t k = 0; k < out.size(); ++k) {
          double x = In(node, 0)[k];
          out[k] = x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0;
        }
        break;
      case Op::LOGISTIC:
        for (size_t k = 0; k < out.size(); ++k) out[k] = 1.0 / (1.0 + std::exp(-In(node, 0)[k]));
        break;
      case Op::DENSIFY:
        if (!Densify(node, &out)) return false;
        break;
      case Op::DEPTH_TO_SPACE: {
        const int b = node.options<tflite::DepthToSpaceOptions>()->block_size();
        const Tensor& in_t = *node.inputs[0];
        const Values& in = In(node, 0);
        const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          int64_t c = (i[1] % b * b + i[2] % b) * os[3] + i[3];
          out[k] = in[((i[0] * H + i[1] / b) * W + i[2] / b) * C + c];
        }
        break;
      }
      case Op::MEAN: {
        // Every input element adds to the output element of its kept coordinates.
        const Tensor& in_t = *node.inputs[0];
        const Values& in = In(node, 0);
        std::vector<bool> reduced(in_t.rank(), false);
        for (double a : In(node, 1))
          reduced[(static_cast<int>(a) + in_t.rank()) % in_t.rank()] = true;
        std::vector<double> count(out.size(), 0.0);
        for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, in_t.shape);
          int64_t flat = 0;
          for (int d = 0; d < in_t.rank(); ++d) {
            if (!reduced[d]) flat = flat * in_t.shape[d] + i[d];
          }
          out[flat] += in[k];
          count[flat] += 1;
        }
        for (size_t k = 0; k < out.size(); ++k) out[k] /= count[k];
        break;
      }
      case Op::FULLY_CONNECTED: {
        auto* o = node.options<tflite::FullyConnectedOptions>();
        const Values& in = In(node, 0);
        const Values& w = In(node, 1);
        const Values* bias = node.inputs.size() > 2 && node.inputs[2] ? &In(node, 2) : nullptr;
        const int64_t units = node.inputs[1]->shape[0], depth = node.inputs[1]->shape[1];
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          int64_t row = k / units, u = k % units;
          double acc = bias ? (*bias)[u] : 0.0;
          for (int64_t j = 0; j < depth; ++j) acc += in[row * depth + j] * w[u * depth + j];
          out[k] = Activate(acc, o->fused_activation_function());
        }
        break;
      }
      case Op::RESIZE_BILINEAR: {
        // Textbook half-pixel / align-corners sampling, clamped at the borders.
        auto* o = node.options<tflite::ResizeBilinearOptions>();
        const Tensor& in_t = *node.inputs[0];
        const Values& in = In(node, 0);
        const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
        auto source = [&](int64_t out_i, int in_size, int out_size) {
          double scale = o->align_corners() && out_size > 1
                             ? (in_size - 1.0) / (out_size - 1.0)
                             : static_cast<double>(in_size) / out_size;
          return o->half_pixel_centers() ? (out_i + 0.5) * scale - 0.5 : out_i * scale;
        };
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          double y = source(i[1], H, os[1]), x = source(i[2], W, os[2]);
          int64_t y0 = std::max<int64_t>(std::floor(y), 0),
                  x0 = std::max<int64_t>(std::floor(x), 0);
          int64_t y1 = std::min<int64_t>(std::ceil(y), H - 1),
                  x1 = std::min<int64_t>(std::ceil(x), W - 1);
          auto px = [&](int64_t yy, int64_t xx) {
            return in[((i[0] * H + yy) * W + xx) * C + i[3]];
          };
          double dy = y - y0, dx = x - x0;
          out[k] = px(y0, x0) * (1 - dy) * (1 - dx) + px(y1, x0) * dy * (1 - dx) +
                   px(y0, x1) * (1 - dy) * dx + px(y1, x1) * dy * dx;
        }
        break;
      }
      case Op::CUSTOM: {
        if (node.op_name != "Convolution2DTransposeBias") {
          ADD_FAILURE() << "the naive evaluator lacks custom op " << node.op_name;
          return false;
        }
        // Gather form: out(oy,ox,oc) = bias + sum in(iy,ix,ic) w(oc,ky,kx,ic) over
        // oy = iy * stride - pad + ky (and the same along x).
        int32_t params[3];
        std::memcpy(params, node.op->custom_options()->data(), sizeof(params));
        const int sw = params[1], sh = params[2];
        const Tensor& in_t = *node.inputs[0];
        const Tensor& f_t = *node.inputs[1];
        const Values& in = In(node, 0);
        const Values& f = In(node, 1);
        const Values& bias = In(node, 2);
        const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
        const int KH = f_t.shape[1], KW = f_t.shape[2];
        const int pt = params[0] == 1 ? std::max(0, KH - (H - 1) % sh - 1) / 2 : 0;
        const int pl = params[0] == 1 ? std::max(0, KW - (W - 1) % sw - 1) / 2 : 0;
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          double acc = bias[i[3]];
          for (int ky = 0; ky < KH; ++ky)
            for (int kx = 0; kx < KW; ++kx) {
              int64_t ty = i[1] + pt - ky, tx = i[2] + pl - kx;
              if (ty < 0 || tx < 0 || ty % sh != 0 || tx % sw != 0) continue;
              int64_t iy = ty / sh, ix = tx / sw;
              if (iy >= H || ix >= W) continue;
              for (int ic = 0; ic < C; ++ic) {
                acc += in[((i[0] * H + iy) * W + ix) * C + ic] *
                       f[((i[3] * KH + ky) * KW + kx) * C + ic];
              }
            }
          out[k] = acc;
        }
        break;
      }
      case Op::CONV_2D:
      case Op::DEPTHWISE_CONV_2D: {
        const bool depthwise = node.code == Op::DEPTHWISE_CONV_2D;
        const Tensor& in_t = *node.inputs[0];
        const Tensor& f_t = *node.inputs[1];
        const Values& in = In(node, 0);
        const Values& f = In(node, 1);
        const Values* bias = node.inputs.size() > 2 && node.inputs[2] ? &In(node, 2) : nullptr;
        tflite::Padding padding;
        int sh, sw, dh, dw;
        tflite::ActivationFunctionType act;
        if (depthwise) {
          auto* o = node.options<tflite::DepthwiseConv2DOptions>();
          padding = o->padding(), sh = o->stride_h(), sw = o->stride_w();
          dh = o->dilation_h_factor(), dw = o->dilation_w_factor();
          act = o->fused_activation_function();
        } else {
          auto* o = node.options<tflite::Conv2DOptions>();
          padding = o->padding(), sh = o->stride_h(), sw = o->stride_w();
          dh = o->dilation_h_factor(), dw = o->dilation_w_factor();
          act = o->fused_activation_function();
        }
        const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
        const int KH = f_t.shape[1], KW = f_t.shape[2];
        const int OH = os[1], OW = os[2], OC = os[3];
        // A PAD folded into the node (Node::folded_pad) widens the input
        // its window sees by zeros; the PAD node itself is skipped.
        const int* fp = node.folded_pad;
        const int pt = PadBefore(padding, H + fp[0] + fp[1], OH, KH, sh, dh) + fp[0];
        const int pl = PadBefore(padding, W + fp[2] + fp[3], OW, KW, sw, dw) + fp[2];
        for (int n = 0; n < os[0]; ++n)
          for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox)
              for (int oc = 0; oc < OC; ++oc) {
                double acc = bias ? (*bias)[oc] : 0.0;
                for (int ky = 0; ky < KH; ++ky)
                  for (int kx = 0; kx < KW; ++kx) {
                    int iy = oy * sh - pt + ky * dh, ix = ox * sw - pl + kx * dw;
                    if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    if (depthwise) {
                      int ic = oc / (OC / C);
                      acc += in[((n * H + iy) * W + ix) * C + ic] * f[(ky * KW + kx) * OC + oc];
                    } else {
                      for (int ic = 0; ic < C; ++ic) {
                        acc += in[((n * H + iy) * W + ix) * C + ic] *
                               f[((oc * KH + ky) * KW + kx) * C + ic];
                      }
                    }
                  }
                out[((n * OH + oy) * OW + ox) * OC + oc] = Activate(acc, act);
              }
        break;
      }
      case Op::MAX_POOL_2D:
      case Op::AVERAGE_POOL_2D: {
        const bool average = node.code == Op::AVERAGE_POOL_2D;
        auto* o = node.options<tflite::Pool2DOptions>();
        const Tensor& in_t = *node.inputs[0];
        const Values& in = In(node, 0);
        const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
        const int pt = PadBefore(o->padding(), H, os[1], o->filter_height(), o->stride_h(), 1);
        const int pl = PadBefore(o->padding(), W, os[2], o->filter_width(), o->stride_w(), 1);
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          double m = -INFINITY, sum = 0.0;
          int count = 0;
          for (int ky = 0; ky < o->filter_height(); ++ky)
            for (int kx = 0; kx < o->filter_width(); ++kx) {
              int64_t iy = i[1] * o->stride_h() - pt + ky, ix = i[2] * o->stride_w() - pl + kx;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              m = std::max(m, in[((i[0] * H + iy) * W + ix) * C + i[3]]);
              sum += in[((i[0] * H + iy) * W + ix) * C + i[3]];
              ++count;
            }
          out[k] = Activate(average ? sum / count : m, o->fused_activation_function());
        }
        break;
      }
      case Op::ADD:
      case Op::MUL: {
        std::vector<int32_t> shapes[2] = {node.inputs[0]->shape, node.inputs[1]->shape};
        Values values[2] = {In(node, 0), In(node, 1)};
        // A PAD of the last dimension folded into the ADD
        // (Node::folded_channel_pad): pad that input here.
        if (const int k = node.folded_channel_pad[0]; k >= 0) {
          const int before = node.folded_channel_pad[1], after = node.folded_channel_pad[2];
          const int64_t c = shapes[k].back(), padded_c = c + before + after;
          Values padded(values[k].size() / c * padded_c, 0.0);
          for (size_t e = 0; e < values[k].size(); ++e) {
            padded[e / c * padded_c + before + e % c] = values[k][e];
          }
          values[k] = std::move(padded);
          shapes[k].back() = static_cast<int32_t>(padded_c);
        }
        auto at = [&](int input, const std::vector<int64_t>& i) {
          const std::vector<int32_t>& shape = shapes[input];
          std::vector<int64_t> s = Strides(shape);
          const int rank = static_cast<int>(shape.size());
          int64_t flat = 0;
          for (int d = 0; d < rank; ++d) {
            int64_t id = i[i.size() - rank + d];
            flat += (shape[d] == 1 ? 0 : id) * s[d];
          }
          return values[input][flat];
        };
        tflite::ActivationFunctionType act =
            node.code == Op::ADD ? node.options<tflite::AddOptions>()->fused_activation_function()
                                 : node.options<tflite::MulOptions>()->fused_activation_function();
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          double x = at(0, i), y = at(1, i);
          out[k] = Activate(node.code == Op::ADD ? x + y : x * y, act);
        }
        break;
      }
      case Op::PAD: {
        const Tensor& in_t = *node.inputs[0];
        const Values& in = In(node, 0);
        const Values& pads = In(node, 1);
        std::vector<int64_t> s = Strides(in_t.shape);
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          int64_t flat = 0;
          bool inside = true;
          for (int d = 0; d < in_t.rank(); ++d) {
            int64_t id = i[d] - static_cast<int64_t>(pads[2 * d]);
            inside = inside && id >= 0 && id < in_t.shape[d];
            flat += id * s[d];
          }
          out[k] = inside ? in[flat] : 0.0;
        }
        break;
      }
      case Op::CONCATENATION: {
        auto* o = node.options<tflite::ConcatenationOptions>();
        int axis = o->axis() < 0 ? o->axis() + out_t.rank() : o->axis();
        for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
          std::vector<int64_t> i = Unravel(k, os);
          for (size_t j = 0; j < node.inputs.size(); ++j) {
            const Tensor& t = *node.inputs[j];
            if (i[axis] < t.shape[axis]) {
              std::vector<int64_t> s = Strides(t.shape);
              int64_t flat = 0;
              for (int d = 0; d < t.rank(); ++d) flat += i[d] * s[d];
              out[k] =
                  Activate(In(node, static_cast<int>(j))[flat], o->fused_activation_function());
              break;
            }
            i[axis] -= t.shape[axis];
          }
        }
        break;
      }
      default:
        ADD_FAILURE() << "the naive evaluator lacks " << node.op_name;
        return false;
    }
    // An ADD folded into the node (Node::folded_addend) adds its other
    // input, over the channels it covers, before the node's activation.
    if (const Tensor* addend = node.folded_addend; addend != nullptr) {
      const Values& add = Of(*addend);
      const int oc = os.back(), begin = node.folded_addend_channels[0];
      const int end = node.folded_addend_channels[1];
      for (size_t k = 0; k < out.size(); ++k) {
        const int c = static_cast<int>(k % oc);
        if (c >= begin && c < end) out[k] += add[k / oc * (end - begin) + (c - begin)];
      }
    }
    for (double& v : out) v = Activate(v, node.folded_activation);
    values_[out_t.index] = std::move(out);
    return true;
  }

  // DENSIFY of a sparse constant without blocks: walk the levels in traversal
  // order, DENSE levels over their size, SPARSE_CSR levels over the indices of
  // the parent position's segment, and place the stored values in order.
  bool Densify(const Node& node, Values* out) {
    const Tensor& t = *node.inputs[0];
    const tflite::SparsityParameters* sp = t.sparsity;
    if (sp == nullptr || sp->block_map() != nullptr) {
      ADD_FAILURE() << "the naive evaluator densifies only unblocked sparse tensors";
      return false;
    }
    auto index_at = [](tflite::SparseIndexVector type, const void* v, int64_t i) -> int64_t {
      switch (type) {
        case tflite::SparseIndexVector::Int32Vector:
          return static_cast<const tflite::Int32Vector*>(v)->values()->Get(i);
        case tflite::SparseIndexVector::Uint16Vector:
          return static_cast<const tflite::Uint16Vector*>(v)->values()->Get(i);
        default:
          return static_cast<const tflite::Uint8Vector*>(v)->values()->Get(i);
      }
    };
    const std::vector<int64_t> strides = Strides(t.shape);
    std::vector<int64_t> coords(t.rank(), 0);
    int64_t next = 0;
    std::function<void(int, int64_t)> visit = [&](int level, int64_t parent) {
      if (level == t.rank()) {
        int64_t flat = 0;
        for (int d = 0; d < t.rank(); ++d) flat += coords[d] * strides[d];
        (*out)[flat] = t.dtype == DType::kFloat16 ? HalfToFloat(t.data_as<uint16_t>()[next])
                                                  : t.data_as<float>()[next];
        ++next;
        return;
      }
      const tflite::DimensionMetadata* m = sp->dim_metadata()->Get(level);
      const int dim = sp->traversal_order()->Get(level);
      if (m->format() == tflite::DimensionType::DENSE) {
        for (int64_t i = 0; i < m->dense_size(); ++i) {
          coords[dim] = i;
          visit(level + 1, parent * m->dense_size() + i);
        }
        return;
      }
      int64_t begin = index_at(m->array_segments_type(), m->array_segments(), parent);
      int64_t end = index_at(m->array_segments_type(), m->array_segments(), parent + 1);
      for (int64_t j = begin; j < end; ++j) {
        coords[dim] = index_at(m->array_indices_type(), m->array_indices(), j);
        visit(level + 1, j);
      }
    };
    visit(0, 0);
    return true;
  }

  const Interpreter& it_;
  std::map<int, Values> values_;
};

class NaiveReferenceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(NaiveReferenceTest, InterpreterMatchesNaiveEvaluation) {
  std::string path = std::string(DFARM_MODELS_DIR) + "/" + GetParam();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(path, &model).ok());
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  Interpreter interpreter(*model, resolver);
  Status status = interpreter.AllocateTensors();
  ASSERT_TRUE(status.ok()) << status.message();

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::map<int, Values> inputs;
  for (Tensor* t : interpreter.inputs()) {
    ASSERT_EQ(t->dtype, DType::kFloat32);
    Values& v = inputs[t->index];
    for (int64_t k = 0; k < t->num_elements(); ++k) {
      t->data_as<float>()[k] = dist(rng);
      v.push_back(t->data_as<float>()[k]);
    }
  }
  ASSERT_TRUE(interpreter.Invoke().ok());
  NaiveEvaluator naive(interpreter);
  ASSERT_TRUE(naive.Run(inputs));

  for (const Tensor* t : interpreter.outputs()) {
    const Values& expected = naive.value(t->index);
    ASSERT_EQ(static_cast<int64_t>(expected.size()), t->num_elements());
    double max_abs = 0, max_err = 0;
    for (size_t k = 0; k < expected.size(); ++k)
      max_abs = std::max(max_abs, std::fabs(expected[k]));
    for (size_t k = 0; k < expected.size(); ++k) {
      double err = std::fabs(t->data_as<float>()[k] - expected[k]);
      max_err = std::max(max_err, err);
      // float32 accumulation against double: relative to the output's scale.
      ASSERT_LE(err, 1e-4 * std::max(1.0, max_abs)) << t->name << "[" << k << "]";
    }
    RecordProperty(t->name + "_max_abs_error", std::to_string(max_err));
  }
}

// The interpreter's kernels on 3 threads give every output of the 1-thread
// run bit for bit (each element is computed by one thread, in one order).
TEST_P(NaiveReferenceTest, ThreeThreadsMatchOneBitForBit) {
  std::string path = std::string(DFARM_MODELS_DIR) + "/" + GetParam();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(path, &model).ok());
  OpResolver resolver;
  resolver.AddAllReferenceOps();
  Interpreter one(*model, resolver);
  InterpreterOptions options;
  options.num_threads = 3;
  Interpreter three(*model, resolver, options);
  for (Interpreter* it : {&one, &three}) {
    Status status = it->AllocateTensors();
    ASSERT_TRUE(status.ok()) << status.message();
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (Tensor* t : it->inputs()) {
      for (int64_t k = 0; k < t->num_elements(); ++k) t->data_as<float>()[k] = dist(rng);
    }
    ASSERT_TRUE(it->Invoke().ok());
  }
  ASSERT_EQ(one.outputs().size(), three.outputs().size());
  for (size_t i = 0; i < one.outputs().size(); ++i) {
    const Tensor& a = *one.outputs()[i];
    const Tensor& b = *three.outputs()[i];
    ASSERT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes), 0) << "output " << i << " '" << a.name << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, NaiveReferenceTest,
                         ::testing::Values("face_detection_short_range.tflite",
                                           "face_detection_full_range.tflite",
                                           "face_detection_full_range_sparse.tflite",
                                           "hand_landmark_lite.tflite", "hand_landmark_full.tflite",
                                           "selfie_segmentation.tflite",
                                           "selfie_segmentation_landscape.tflite"));

}  // namespace
}  // namespace dfarm::runtime
