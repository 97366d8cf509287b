#include "delegates/node_params.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace dfarm::delegates {
namespace {

using runtime::Allocation;
using runtime::DType;
using runtime::Node;
using runtime::Status;
using runtime::Tensor;
using runtime::WindowAxis;
namespace tfl = ::dfarm::tflite;

Node NamedNode(const char* op_name) {
  Node node;
  node.op_name = op_name;
  return node;
}

TEST(NodeParamsTest, CheckArityNamesTheCounts) {
  Node node = NamedNode("ADD");
  Tensor t;
  node.inputs = {&t, &t, &t};
  node.outputs = {&t};
  EXPECT_TRUE(delegates::CheckArity(node, 2, 3, 1).ok());
  const Status s = delegates::CheckArity(node, 2, 2, 1);
  EXPECT_EQ(s.code(), runtime::StatusCode::kUnsupported);
  EXPECT_EQ(s.message(), "ADD with 3 inputs and 1 outputs");
}

TEST(NodeParamsTest, ReadIntsTakesConstantsAndFoldedOnesAlike) {
  const Node node = NamedNode("MEAN");
  std::vector<int64_t> axes_data = {1, 2};
  Tensor axes;
  axes.dtype = DType::kInt64;
  axes.shape = {2};
  axes.data = reinterpret_cast<std::byte*>(axes_data.data());
  axes.allocation = Allocation::kConstant;
  std::vector<int64_t> out;
  ASSERT_TRUE(ReadInts(node, &axes, "axes", &out).ok());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2}));

  // Folded at load (e.g. a DEQUANTIZE or an op of constants): a constant too.
  axes.allocation = Allocation::kFolded;
  out.clear();
  ASSERT_TRUE(ReadInts(node, &axes, "axes", &out).ok());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2}));

  axes.allocation = Allocation::kArena;
  EXPECT_EQ(ReadInts(node, &axes, "axes", &out).message(), "MEAN with a non-constant axes");

  axes.allocation = Allocation::kConstant;
  axes.dtype = DType::kFloat32;
  EXPECT_EQ(ReadInts(node, &axes, "axes", &out).message(), "MEAN with a float32 axes");
  EXPECT_EQ(ReadInts(node, nullptr, "axes", &out).message(), "MEAN with a non-constant axes");
}

TEST(NodeParamsTest, SpatialPaddingAsTfliteComputesIt) {
  const Node node = NamedNode("CONV_2D");
  Pads pads;
  // SAME, in 6, kernel 3, stride 2: out 3, (3-1)*2 + 3 - 6 = 1 in total, at the end.
  ASSERT_TRUE(SpatialPadding(node,
                             {tfl::Padding::SAME, WindowAxis::kHeight, "filter", 6, 3, 3, 2, 1},
                             /*empty_ok=*/false, &pads)
                  .ok());
  EXPECT_EQ(pads.before, 0);
  EXPECT_EQ(pads.after, 1);
  // VALID pads nothing; in 7, kernel 3 dilated by 2 (effective 5): out 3.
  ASSERT_TRUE(SpatialPadding(node,
                             {tfl::Padding::VALID, WindowAxis::kWidth, "filter", 7, 3, 3, 1, 2},
                             /*empty_ok=*/false, &pads)
                  .ok());
  EXPECT_EQ(pads.before, 0);
  EXPECT_EQ(pads.after, 0);
  EXPECT_EQ(SpatialPadding(node, {tfl::Padding::VALID, WindowAxis::kWidth, "filter", 7, 4, 3, 1, 2},
                           /*empty_ok=*/false, &pads)
                .message(),
            "CONV_2D whose output size 4 is not the VALID size 3");
  // An input the window covers with nothing left: VALID size 0.
  const Window empty{tfl::Padding::VALID, WindowAxis::kHeight, "filter", 2, 0, 3, 1, 1};
  EXPECT_TRUE(SpatialPadding(node, empty, /*empty_ok=*/true, &pads).ok());
  EXPECT_EQ(SpatialPadding(node, empty, /*empty_ok=*/false, &pads).message(),
            "CONV_2D whose output size 0 is not the VALID size 0");
}

}  // namespace
}  // namespace dfarm::delegates
