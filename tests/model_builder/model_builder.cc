#include "tests/model_builder/model_builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <utility>

#include "runtime/fp16.h"

namespace dfarm::testing {
namespace {

template <typename T>
std::vector<uint8_t> ToBytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// One SparseIndexVector (type and table) of a sparse level.
std::pair<tfl::SparseIndexVector, flatbuffers::Offset<void>> WriteIndexVector(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<int32_t>& values, bool as_uint8) {
  if (as_uint8) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return {tfl::SparseIndexVector::Uint8Vector, tfl::CreateUint8VectorDirect(fbb, &bytes).Union()};
  }
  return {tfl::SparseIndexVector::Int32Vector, tfl::CreateInt32VectorDirect(fbb, &values).Union()};
}

flatbuffers::Offset<tfl::SparsityParameters> WriteSparsity(flatbuffers::FlatBufferBuilder& fbb,
                                                           const SparsitySpec& spec) {
  std::vector<flatbuffers::Offset<tfl::DimensionMetadata>> levels;
  for (const SparseLevel& l : spec.levels) {
    if (!l.sparse) {
      levels.push_back(tfl::CreateDimensionMetadata(fbb, tfl::DimensionType::DENSE, l.dense_size));
      continue;
    }
    auto [seg_type, segments] = WriteIndexVector(fbb, l.segments, l.as_uint8);
    auto [idx_type, indices] = WriteIndexVector(fbb, l.indices, l.as_uint8);
    levels.push_back(tfl::CreateDimensionMetadata(fbb, tfl::DimensionType::SPARSE_CSR, 0, seg_type,
                                                  segments, idx_type, indices));
  }
  return tfl::CreateSparsityParametersDirect(
      fbb, &spec.traversal_order, spec.block_map.empty() ? nullptr : &spec.block_map, &levels);
}

}  // namespace

uint32_t ModelBuilder::AddBuffer(std::vector<uint8_t> bytes) {
  buffers_.push_back(std::move(bytes));
  return static_cast<uint32_t>(buffers_.size() - 1);
}

int ModelBuilder::AddTensor(tfl::TensorType type, std::vector<int32_t> shape, std::string name) {
  if (name.empty()) name = std::string("t").append(std::to_string(tensors_.size()));
  tensors_.push_back({type, std::move(shape), std::move(name)});
  return static_cast<int>(tensors_.size() - 1);
}

int ModelBuilder::AddConstRaw(tfl::TensorType type, std::vector<int32_t> shape,
                              std::vector<uint8_t> bytes, std::string name) {
  int t = AddTensor(type, std::move(shape), std::move(name));
  tensors_[t].buffer = AddBuffer(std::move(bytes));
  return t;
}

int ModelBuilder::AddConstFloat32(std::vector<int32_t> shape, const std::vector<float>& values,
                                  std::string name) {
  return AddConstRaw(tfl::TensorType::FLOAT32, std::move(shape), ToBytes(values), std::move(name));
}

int ModelBuilder::AddConstFloat16(std::vector<int32_t> shape, const std::vector<float>& values,
                                  std::string name) {
  std::vector<uint16_t> halves(values.size());
  std::transform(values.begin(), values.end(), halves.begin(), runtime::FloatToHalf);
  return AddConstRaw(tfl::TensorType::FLOAT16, std::move(shape), ToBytes(halves), std::move(name));
}

int ModelBuilder::AddConstInt32(std::vector<int32_t> shape, const std::vector<int32_t>& values,
                                std::string name) {
  return AddConstRaw(tfl::TensorType::INT32, std::move(shape), ToBytes(values), std::move(name));
}

int ModelBuilder::AddConstInt8(std::vector<int32_t> shape, const std::vector<int8_t>& values,
                               std::string name) {
  return AddConstRaw(tfl::TensorType::INT8, std::move(shape), ToBytes(values), std::move(name));
}

int ModelBuilder::AddConstUint8(std::vector<int32_t> shape, const std::vector<uint8_t>& values,
                                std::string name) {
  return AddConstRaw(tfl::TensorType::UINT8, std::move(shape), ToBytes(values), std::move(name));
}

int ModelBuilder::AddSparseConst(tfl::TensorType type, std::vector<int32_t> shape,
                                 std::vector<uint8_t> values, SparsitySpec sparsity,
                                 std::string name) {
  int t = AddConstRaw(type, std::move(shape), std::move(values), std::move(name));
  tensors_[t].sparse = true;
  tensors_[t].sparsity = std::move(sparsity);
  return t;
}

int ModelBuilder::AddQuantizedBias(const std::vector<int32_t>& values, float input_scale,
                                   const std::vector<float>& weight_scales, std::string name) {
  const int t = AddConstInt32({static_cast<int32_t>(values.size())}, values, std::move(name));
  std::vector<float> scales;
  for (float s : weight_scales) scales.push_back(input_scale * s);
  SetQuantization(t, scales, std::vector<int64_t>(scales.size(), 0), 0);
  return t;
}

void ModelBuilder::SetQuantization(int tensor, float scale, int64_t zero_point) {
  SetQuantization(tensor, std::vector<float>{scale}, std::vector<int64_t>{zero_point}, 0);
}

void ModelBuilder::SetQuantization(int tensor, std::vector<float> scales,
                                   std::vector<int64_t> zero_points, int quantized_dimension) {
  TensorSpec& t = tensors_[tensor];
  t.quantized = true;
  t.scales = std::move(scales);
  t.zero_points = std::move(zero_points);
  t.quantized_dimension = quantized_dimension;
}

void ModelBuilder::SetTensorBuffer(int tensor, uint32_t buffer) {
  tensors_[tensor].buffer = buffer;
}

void ModelBuilder::SetShapeSignature(int tensor, std::vector<int32_t> signature) {
  tensors_[tensor].shape_signature = std::move(signature);
}

uint32_t ModelBuilder::OpcodeIndex(tfl::BuiltinOperator code, const std::string& custom_code) {
  for (size_t i = 0; i < opcodes_.size(); ++i) {
    if (opcodes_[i].code == code && opcodes_[i].custom_code == custom_code) {
      return static_cast<uint32_t>(i);
    }
  }
  opcodes_.push_back({code, custom_code});
  return static_cast<uint32_t>(opcodes_.size() - 1);
}

int ModelBuilder::AddOperator(tfl::BuiltinOperator code, std::vector<int32_t> inputs,
                              std::vector<int32_t> outputs, tfl::BuiltinOptions options_type,
                              OptionsWriter options) {
  operators_.push_back({OpcodeIndex(code, ""), std::move(inputs), std::move(outputs), options_type,
                        std::move(options)});
  return static_cast<int>(operators_.size() - 1);
}

int ModelBuilder::AddCustomOperator(std::string custom_code, std::vector<int32_t> inputs,
                                    std::vector<int32_t> outputs,
                                    std::vector<uint8_t> custom_options) {
  operators_.push_back({OpcodeIndex(tfl::BuiltinOperator::CUSTOM, custom_code),
                        std::move(inputs),
                        std::move(outputs),
                        tfl::BuiltinOptions::NONE,
                        {},
                        std::move(custom_options)});
  return static_cast<int>(operators_.size() - 1);
}

void ModelBuilder::SetOpcodeIndex(int op, uint32_t opcode_index) {
  operators_[op].opcode_index = opcode_index;
}

int ModelBuilder::AddConv2D(int input, int filter, int bias, int output, const Conv2DParams& p) {
  return AddOperator(tfl::BuiltinOperator::CONV_2D, {input, filter, bias}, {output},
                     tfl::BuiltinOptions::Conv2DOptions, [p](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateConv2DOptions(fbb, p.padding, p.stride_w, p.stride_h,
                                                       p.activation, p.dilation_w, p.dilation_h)
                           .Union();
                     });
}

int ModelBuilder::AddDepthwiseConv2D(int input, int filter, int bias, int output,
                                     const DepthwiseConv2DParams& p) {
  return AddOperator(tfl::BuiltinOperator::DEPTHWISE_CONV_2D, {input, filter, bias}, {output},
                     tfl::BuiltinOptions::DepthwiseConv2DOptions,
                     [p](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateDepthwiseConv2DOptions(
                                  fbb, p.padding, p.stride_w, p.stride_h, p.depth_multiplier,
                                  p.activation, p.dilation_w, p.dilation_h)
                           .Union();
                     });
}

int ModelBuilder::AddPool2D(tfl::BuiltinOperator code, int input, int output,
                            const Pool2DParams& p) {
  return AddOperator(code, {input}, {output}, tfl::BuiltinOptions::Pool2DOptions,
                     [p](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreatePool2DOptions(fbb, p.padding, p.stride_w, p.stride_h,
                                                       p.filter_w, p.filter_h, p.activation)
                           .Union();
                     });
}

int ModelBuilder::AddAdd(int lhs, int rhs, int output, tfl::ActivationFunctionType activation) {
  return AddOperator(tfl::BuiltinOperator::ADD, {lhs, rhs}, {output},
                     tfl::BuiltinOptions::AddOptions,
                     [activation](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateAddOptions(fbb, activation).Union();
                     });
}

int ModelBuilder::AddConcatenation(std::vector<int32_t> inputs, int output, int axis,
                                   tfl::ActivationFunctionType activation) {
  return AddOperator(tfl::BuiltinOperator::CONCATENATION, std::move(inputs), {output},
                     tfl::BuiltinOptions::ConcatenationOptions,
                     [axis, activation](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateConcatenationOptions(fbb, axis, activation).Union();
                     });
}

int ModelBuilder::AddReshape(int input, int output, std::vector<int32_t> new_shape) {
  return AddOperator(tfl::BuiltinOperator::RESHAPE, {input}, {output},
                     tfl::BuiltinOptions::ReshapeOptions,
                     [new_shape](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateReshapeOptionsDirect(fbb, &new_shape).Union();
                     });
}

int ModelBuilder::AddPad(int input, int paddings, int output) {
  return AddOperator(
      tfl::BuiltinOperator::PAD, {input, paddings}, {output}, tfl::BuiltinOptions::PadOptions,
      [](flatbuffers::FlatBufferBuilder& fbb) { return tfl::CreatePadOptions(fbb).Union(); });
}

int ModelBuilder::AddDequantize(int input, int output) {
  return AddOperator(tfl::BuiltinOperator::DEQUANTIZE, {input}, {output});
}

int ModelBuilder::AddUnary(tfl::BuiltinOperator code, int input, int output) {
  return AddOperator(code, {input}, {output});
}

int ModelBuilder::AddBinary(tfl::BuiltinOperator code, int lhs, int rhs, int output,
                            tfl::ActivationFunctionType activation) {
  using Op = tfl::BuiltinOperator;
  switch (code) {
    case Op::ADD:
      return AddAdd(lhs, rhs, output, activation);
    case Op::SUB:
      return AddOperator(code, {lhs, rhs}, {output}, tfl::BuiltinOptions::SubOptions,
                         [activation](flatbuffers::FlatBufferBuilder& fbb) {
                           return tfl::CreateSubOptions(fbb, activation).Union();
                         });
    case Op::MUL:
      return AddOperator(code, {lhs, rhs}, {output}, tfl::BuiltinOptions::MulOptions,
                         [activation](flatbuffers::FlatBufferBuilder& fbb) {
                           return tfl::CreateMulOptions(fbb, activation).Union();
                         });
    case Op::DIV:
      return AddOperator(code, {lhs, rhs}, {output}, tfl::BuiltinOptions::DivOptions,
                         [activation](flatbuffers::FlatBufferBuilder& fbb) {
                           return tfl::CreateDivOptions(fbb, activation).Union();
                         });
    default:
      return AddOperator(code, {lhs, rhs}, {output});
  }
}

int ModelBuilder::AddLeakyRelu(int input, int output, float alpha) {
  return AddOperator(tfl::BuiltinOperator::LEAKY_RELU, {input}, {output},
                     tfl::BuiltinOptions::LeakyReluOptions,
                     [alpha](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateLeakyReluOptions(fbb, alpha).Union();
                     });
}

int ModelBuilder::AddResize(tfl::BuiltinOperator code, int input, int size, int output,
                            bool align_corners, bool half_pixel_centers) {
  if (code == tfl::BuiltinOperator::RESIZE_BILINEAR) {
    return AddOperator(code, {input, size}, {output}, tfl::BuiltinOptions::ResizeBilinearOptions,
                       [=](flatbuffers::FlatBufferBuilder& fbb) {
                         tfl::ResizeBilinearOptionsBuilder o(fbb);
                         o.add_align_corners(align_corners);
                         o.add_half_pixel_centers(half_pixel_centers);
                         return o.Finish().Union();
                       });
  }
  return AddOperator(
      code, {input, size}, {output}, tfl::BuiltinOptions::ResizeNearestNeighborOptions,
      [=](flatbuffers::FlatBufferBuilder& fbb) {
        return tfl::CreateResizeNearestNeighborOptions(fbb, align_corners, half_pixel_centers)
            .Union();
      });
}

int ModelBuilder::AddReducer(tfl::BuiltinOperator code, int input, int axes, int output,
                             bool keep_dims) {
  return AddOperator(code, {input, axes}, {output}, tfl::BuiltinOptions::ReducerOptions,
                     [keep_dims](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateReducerOptions(fbb, keep_dims).Union();
                     });
}

int ModelBuilder::AddFullyConnected(int input, int weights, int bias, int output,
                                    tfl::ActivationFunctionType activation, bool keep_num_dims) {
  return AddOperator(
      tfl::BuiltinOperator::FULLY_CONNECTED, {input, weights, bias}, {output},
      tfl::BuiltinOptions::FullyConnectedOptions, [=](flatbuffers::FlatBufferBuilder& fbb) {
        return tfl::CreateFullyConnectedOptions(fbb, activation, 0, keep_num_dims).Union();
      });
}

int ModelBuilder::AddTransposeConv(int output_shape, int filter, int input, int bias, int output,
                                   const TransposeConvParams& p) {
  std::vector<int32_t> inputs = {output_shape, filter, input};
  if (bias >= 0) inputs.push_back(bias);
  return AddOperator(
      tfl::BuiltinOperator::TRANSPOSE_CONV, std::move(inputs), {output},
      tfl::BuiltinOptions::TransposeConvOptions, [p](flatbuffers::FlatBufferBuilder& fbb) {
        return tfl::CreateTransposeConvOptions(fbb, p.padding, p.stride_w, p.stride_h, p.activation)
            .Union();
      });
}

int ModelBuilder::AddBlockOp(tfl::BuiltinOperator code, int input, int output, int block_size) {
  if (code == tfl::BuiltinOperator::DEPTH_TO_SPACE) {
    return AddOperator(code, {input}, {output}, tfl::BuiltinOptions::DepthToSpaceOptions,
                       [block_size](flatbuffers::FlatBufferBuilder& fbb) {
                         return tfl::CreateDepthToSpaceOptions(fbb, block_size).Union();
                       });
  }
  return AddOperator(code, {input}, {output}, tfl::BuiltinOptions::SpaceToDepthOptions,
                     [block_size](flatbuffers::FlatBufferBuilder& fbb) {
                       return tfl::CreateSpaceToDepthOptions(fbb, block_size).Union();
                     });
}

std::vector<uint8_t> ModelBuilder::Build() const {
  flatbuffers::FlatBufferBuilder fbb;

  std::vector<flatbuffers::Offset<tfl::Buffer>> buffers;
  for (const std::vector<uint8_t>& bytes : buffers_) {
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    if (!bytes.empty()) {
      fbb.ForceVectorAlignment(bytes.size(), sizeof(uint8_t), 16);
      data = fbb.CreateVector(bytes);
    }
    buffers.push_back(tfl::CreateBuffer(fbb, data));
  }

  std::vector<flatbuffers::Offset<tfl::Tensor>> tensors;
  for (const TensorSpec& t : tensors_) {
    flatbuffers::Offset<tfl::QuantizationParameters> quantization;
    if (t.quantized) {
      quantization = tfl::CreateQuantizationParametersDirect(
          fbb, nullptr, nullptr, &t.scales, &t.zero_points, tfl::QuantizationDetails::NONE, 0,
          t.quantized_dimension);
    }
    flatbuffers::Offset<tfl::SparsityParameters> sparsity;
    if (t.sparse) sparsity = WriteSparsity(fbb, t.sparsity);
    tensors.push_back(tfl::CreateTensorDirect(
        fbb, &t.shape, t.type, t.buffer, t.name.c_str(), quantization, false, sparsity,
        t.shape_signature.empty() ? nullptr : &t.shape_signature));
  }

  std::vector<flatbuffers::Offset<tfl::OperatorCode>> opcodes;
  for (const OpcodeSpec& c : opcodes_) {
    // Like the converter: the byte field holds min(code, 127), the int field the code.
    int8_t deprecated = static_cast<int8_t>(std::min<int32_t>(
        static_cast<int32_t>(c.code),
        static_cast<int32_t>(tfl::BuiltinOperator::PLACEHOLDER_FOR_GREATER_OP_CODES)));
    opcodes.push_back(tfl::CreateOperatorCodeDirect(
        fbb, deprecated, c.custom_code.empty() ? nullptr : c.custom_code.c_str(), 1, c.code));
  }

  std::vector<flatbuffers::Offset<tfl::Operator>> operators;
  for (const OperatorSpec& op : operators_) {
    flatbuffers::Offset<void> options;
    if (op.options) options = op.options(fbb);
    operators.push_back(tfl::CreateOperatorDirect(
        fbb, op.opcode_index, &op.inputs, &op.outputs, op.options_type, options,
        op.custom_options.empty() ? nullptr : &op.custom_options));
  }

  auto subgraph = tfl::CreateSubGraphDirect(fbb, &tensors, &inputs_, &outputs_, &operators, "main");
  std::vector<flatbuffers::Offset<tfl::SubGraph>> subgraphs = {subgraph};
  auto model =
      tfl::CreateModelDirect(fbb, version_, &opcodes, &subgraphs, "dfarm model builder", &buffers);
  tfl::FinishModelBuffer(fbb, model);
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

bool ModelBuilder::WriteFile(const std::string& path) const {
  std::vector<uint8_t> bytes = Build();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

std::vector<float> Iota(int n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

int ConvOutDim(tfl::Padding padding, int in, int k, int stride, int dilation) {
  const int effective = (k - 1) * dilation + 1;
  return padding == tfl::Padding::SAME ? (in + stride - 1) / stride
                                       : (in - effective + stride) / stride;
}

ModelBuilder PadConvReluAdd() {
  ModelBuilder b;
  const int x = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "x");
  const int pads = b.AddConstInt32({4, 2}, {0, 0, 1, 1, 1, 1, 0, 0}, "pads");
  std::vector<float> w(2 * 3 * 3 * 2);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  const int filter = b.AddConstFloat32({2, 3, 3, 2}, w, "filter");
  const int bias = b.AddConstFloat32({2}, {0.25f, -0.25f}, "bias");
  const int padded = b.AddTensor(tfl::TensorType::FLOAT32, {1, 6, 6, 2}, "padded");
  const int conv = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "conv");
  const int relu = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "relu");
  const int sum = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "sum");
  const int out = b.AddTensor(tfl::TensorType::FLOAT32, {1, 4, 4, 2}, "out");
  b.AddPad(x, pads, padded);
  b.AddConv2D(padded, filter, bias, conv, Conv2DParams{});
  b.AddUnary(tfl::BuiltinOperator::RELU, conv, relu);
  b.AddAdd(relu, x, sum);
  b.AddUnary(tfl::BuiltinOperator::RELU6, sum, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return b;
}

}  // namespace dfarm::testing
