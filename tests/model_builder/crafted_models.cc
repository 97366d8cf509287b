#include "tests/model_builder/crafted_models.h"

#include <utility>

namespace dfarm::testing {
namespace {

using T = tfl::TensorType;

// x [2,0,3] -> ADD(x, x) -> out [2,0,3]: TFLite gives an empty result.
CraftedModel ZeroSizedAdd() {
  ModelBuilder b;
  int x = b.AddTensor(T::FLOAT32, {2, 0, 3}, "x");
  int out = b.AddTensor(T::FLOAT32, {2, 0, 3}, "out");
  b.AddAdd(x, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return {"zero_sized_add", std::move(b), ""};
}

// x [2,3] -> ADD(x, x) -> out declared [4,4].
CraftedModel AddLargerOutput() {
  ModelBuilder b;
  int x = b.AddTensor(T::FLOAT32, {2, 3}, "x");
  int out = b.AddTensor(T::FLOAT32, {4, 4}, "out");
  b.AddAdd(x, x, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return {"add_larger_output", std::move(b),
          "node 0 (ADD): output tensor 1 'out' is declared [4,4], but the op computes [2,3]"};
}

// x [2,3] -> RESHAPE -> out declared [4,4] (new_shape [4,4]).
CraftedModel ReshapeLargerOutput() {
  ModelBuilder b;
  int x = b.AddTensor(T::FLOAT32, {2, 3}, "x");
  int out = b.AddTensor(T::FLOAT32, {4, 4}, "out");
  b.AddReshape(x, out, {4, 4});
  b.SetInputs({x});
  b.SetOutputs({out});
  return {"reshape_larger_output", std::move(b),
          "node 0 (RESHAPE): cannot reshape [2,3] (6 elements) to [4,4]"};
}

// x [2,3] -> RESHAPE with new_shape [2^31-1, 2^31-1] -> out declared [6].
CraftedModel ReshapeOverflowingNewShape() {
  ModelBuilder b;
  int x = b.AddTensor(T::FLOAT32, {2, 3}, "x");
  int out = b.AddTensor(T::FLOAT32, {6}, "out");
  b.AddReshape(x, out, {2147483647, 2147483647});
  b.SetInputs({x});
  b.SetOutputs({out});
  return {"reshape_overflowing_new_shape", std::move(b),
          "node 0 (RESHAPE): cannot reshape [2,3] (6 elements) to the requested shape "
          "[2147483647,2147483647]"};
}

// x [2,3] -> PAD by [[0,0],[0,2^31-1]] (a dimension over int32) -> out
// declared [2,3].
CraftedModel PadOverflowingDimension() {
  ModelBuilder b;
  int x = b.AddTensor(T::FLOAT32, {2, 3}, "x");
  int paddings = b.AddConstInt32({2, 2}, {0, 0, 0, 2147483647}, "paddings");
  int out = b.AddTensor(T::FLOAT32, {2, 3}, "out");
  b.AddPad(x, paddings, out);
  b.SetInputs({x});
  b.SetOutputs({out});
  return {"pad_overflowing_dimension", std::move(b),
          "node 0 (PAD): padding of dimension 1 is 0,2147483647"};
}

}  // namespace

std::vector<CraftedModel> CraftedShapeModels() {
  std::vector<CraftedModel> models;
  models.push_back(ZeroSizedAdd());
  models.push_back(AddLargerOutput());
  models.push_back(ReshapeLargerOutput());
  models.push_back(ReshapeOverflowingNewShape());
  models.push_back(PadOverflowingDimension());
  return models;
}

}  // namespace dfarm::testing
