// ModelBuilder: writes small .tflite models (our schema, runtime/schema/
// tflite.fbs) in memory or to a file, for tests. It checks nothing, so tests
// can also write broken models on purpose.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "runtime/schema/tflite_generated.h"

namespace dfarm::testing {

namespace tfl = ::dfarm::tflite;

struct Conv2DParams {
  tfl::Padding padding = tfl::Padding::VALID;
  int stride_h = 1;
  int stride_w = 1;
  int dilation_h = 1;
  int dilation_w = 1;
  tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE;
};

struct DepthwiseConv2DParams {
  tfl::Padding padding = tfl::Padding::VALID;
  int stride_h = 1;
  int stride_w = 1;
  int depth_multiplier = 1;
  int dilation_h = 1;
  int dilation_w = 1;
  tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE;
};

struct Pool2DParams {
  tfl::Padding padding = tfl::Padding::VALID;
  int stride_h = 1;
  int stride_w = 1;
  int filter_h = 1;
  int filter_w = 1;
  tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE;
};

struct TransposeConvParams {
  tfl::Padding padding = tfl::Padding::VALID;
  int stride_h = 1;
  int stride_w = 1;
  tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE;
};

// One traversal level of a sparse tensor (TFLite's format): DENSE with
// dense_size entries, or SPARSE_CSR with segments and indices.
struct SparseLevel {
  bool sparse = false;
  int dense_size = 0;
  std::vector<int32_t> segments;
  std::vector<int32_t> indices;
  // Written as Uint8Vector instead of Int32Vector (values must fit).
  bool as_uint8 = false;
};

struct SparsitySpec {
  std::vector<int32_t> traversal_order;
  std::vector<int32_t> block_map;
  std::vector<SparseLevel> levels;
};

class ModelBuilder {
 public:
  // Writes an operator's builtin options table into the builder.
  using OptionsWriter = std::function<flatbuffers::Offset<void>(flatbuffers::FlatBufferBuilder&)>;

  // Tensors; each returns the new tensor's index.
  int AddTensor(tfl::TensorType type, std::vector<int32_t> shape, std::string name = {});
  int AddConstFloat32(std::vector<int32_t> shape, const std::vector<float>& values,
                      std::string name = {});
  // Stores `values` rounded to float16.
  int AddConstFloat16(std::vector<int32_t> shape, const std::vector<float>& values,
                      std::string name = {});
  int AddConstInt32(std::vector<int32_t> shape, const std::vector<int32_t>& values,
                    std::string name = {});
  int AddConstInt8(std::vector<int32_t> shape, const std::vector<int8_t>& values,
                   std::string name = {});
  int AddConstUint8(std::vector<int32_t> shape, const std::vector<uint8_t>& values,
                    std::string name = {});
  // Any bytes, of any size (a wrong size makes a broken model).
  int AddConstRaw(tfl::TensorType type, std::vector<int32_t> shape, std::vector<uint8_t> bytes,
                  std::string name = {});
  // A constant of `type` whose buffer holds `values` (their raw bytes) in the
  // sparse format that `sparsity` describes.
  int AddSparseConst(tfl::TensorType type, std::vector<int32_t> shape, std::vector<uint8_t> values,
                     SparsitySpec sparsity, std::string name = {});
  // Per-tensor affine quantization: real = scale * (q - zero_point).
  void SetQuantization(int tensor, float scale, int64_t zero_point);
  // Per-channel (per-axis) quantization along `quantized_dimension`: one scale
  // and zero point per slice, written as given (sizes are not checked).
  void SetQuantization(int tensor, std::vector<float> scales, std::vector<int64_t> zero_points,
                       int quantized_dimension);
  // An int32 bias of quantized weights, as TFLite's converter writes it: zero
  // point 0, scale input_scale * weight_scales[c], per channel (along
  // dimension 0) when there are several weight scales, else per tensor.
  int AddQuantizedBias(const std::vector<int32_t>& values, float input_scale,
                       const std::vector<float>& weight_scales, std::string name = {});
  // Points `tensor` at buffer index `buffer` as written (for broken models).
  void SetTensorBuffer(int tensor, uint32_t buffer);
  // Writes Tensor.shape_signature (-1: a dimension known only at Prepare).
  void SetShapeSignature(int tensor, std::vector<int32_t> signature);

  // Operators, in execution order; each returns the operator's index.
  int AddOperator(tfl::BuiltinOperator code, std::vector<int32_t> inputs,
                  std::vector<int32_t> outputs,
                  tfl::BuiltinOptions options_type = tfl::BuiltinOptions::NONE,
                  OptionsWriter options = {});
  int AddCustomOperator(std::string custom_code, std::vector<int32_t> inputs,
                        std::vector<int32_t> outputs, std::vector<uint8_t> custom_options = {});
  // Overrides the operator's opcode index as written (for broken models).
  void SetOpcodeIndex(int op, uint32_t opcode_index);

  int AddConv2D(int input, int filter, int bias, int output, const Conv2DParams& params);
  int AddDepthwiseConv2D(int input, int filter, int bias, int output,
                         const DepthwiseConv2DParams& params);
  // code: MAX_POOL_2D or AVERAGE_POOL_2D.
  int AddPool2D(tfl::BuiltinOperator code, int input, int output, const Pool2DParams& params);
  int AddAdd(int lhs, int rhs, int output,
             tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE);
  int AddConcatenation(std::vector<int32_t> inputs, int output, int axis,
                       tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE);
  int AddReshape(int input, int output, std::vector<int32_t> new_shape);
  int AddPad(int input, int paddings, int output);
  int AddDequantize(int input, int output);
  // An op with one input, one output and no options (RELU, RELU6, ...).
  int AddUnary(tfl::BuiltinOperator code, int input, int output);
  // ADD, SUB, MUL, DIV (with their options and `activation`), or any other
  // two-input op without options (MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, PRELU).
  int AddBinary(tfl::BuiltinOperator code, int lhs, int rhs, int output,
                tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE);
  int AddLeakyRelu(int input, int output, float alpha);
  // code: RESIZE_BILINEAR or RESIZE_NEAREST_NEIGHBOR; size: a [2] int32 tensor.
  int AddResize(tfl::BuiltinOperator code, int input, int size, int output, bool align_corners,
                bool half_pixel_centers);
  // code: MEAN, SUM, REDUCE_MAX, ...; axes: an int32 tensor.
  int AddReducer(tfl::BuiltinOperator code, int input, int axes, int output, bool keep_dims);
  // bias may be -1 (omitted).
  int AddFullyConnected(int input, int weights, int bias, int output,
                        tfl::ActivationFunctionType activation = tfl::ActivationFunctionType::NONE,
                        bool keep_num_dims = false);
  // bias may be -1 (omitted).
  int AddTransposeConv(int output_shape, int filter, int input, int bias, int output,
                       const TransposeConvParams& params);
  // code: DEPTH_TO_SPACE or SPACE_TO_DEPTH.
  int AddBlockOp(tfl::BuiltinOperator code, int input, int output, int block_size);

  void SetInputs(std::vector<int32_t> inputs) { inputs_ = std::move(inputs); }
  void SetOutputs(std::vector<int32_t> outputs) { outputs_ = std::move(outputs); }
  // Written as Model.version; the runtime accepts only 3.
  void SetVersion(uint32_t version) { version_ = version; }

  // The finished .tflite file.
  std::vector<uint8_t> Build() const;
  // Writes Build() to `path`; false when the file cannot be written.
  bool WriteFile(const std::string& path) const;

 private:
  struct TensorSpec {
    tfl::TensorType type;
    std::vector<int32_t> shape;
    std::string name;
    uint32_t buffer = 0;
    bool quantized = false;
    std::vector<float> scales{};
    std::vector<int64_t> zero_points{};
    int quantized_dimension = 0;
    bool sparse = false;
    SparsitySpec sparsity{};
    std::vector<int32_t> shape_signature{};  // not written when empty
  };
  struct OperatorSpec {
    uint32_t opcode_index;
    std::vector<int32_t> inputs;
    std::vector<int32_t> outputs;
    tfl::BuiltinOptions options_type;
    OptionsWriter options;
    std::vector<uint8_t> custom_options{};
  };
  struct OpcodeSpec {
    tfl::BuiltinOperator code;
    std::string custom_code;
  };

  uint32_t AddBuffer(std::vector<uint8_t> bytes);
  uint32_t OpcodeIndex(tfl::BuiltinOperator code, const std::string& custom_code);

  std::vector<std::vector<uint8_t>> buffers_ = {{}};  // buffer 0: the empty sentinel
  std::vector<TensorSpec> tensors_;
  std::vector<OperatorSpec> operators_;
  std::vector<OpcodeSpec> opcodes_;
  std::vector<int32_t> inputs_;
  std::vector<int32_t> outputs_;
  uint32_t version_ = 3;
};

// start, start + 1, ..., start + n - 1.
std::vector<float> Iota(int n, float start = 0.0f);

// A convolution's or pool's output size along one axis, as TFLite computes it.
int ConvOutDim(tfl::Padding padding, int in, int k, int stride, int dilation);

// x -> PAD (height, width) -> CONV_2D -> RELU -> ADD x -> RELU6 -> out, float32
// [1, 4, 4, 2], every tensor named: XNNPACK fuses the PAD into the conv and
// each clamp into the node before, so the padded, conv and sum tensors exist
// only when the nodes run one by one.
ModelBuilder PadConvReluAdd();

}  // namespace dfarm::testing
