#include "delegates/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dfarm::delegates {
namespace {

using ::testing::ElementsAre;

TEST(DelegateRegistryTest, ListsCpu) { EXPECT_THAT(AvailableDelegates(), ElementsAre("cpu")); }

TEST(DelegateRegistryTest, FindsCpuAndItRegistersKernels) {
  const Delegate* delegate = nullptr;
  ASSERT_TRUE(FindDelegate("cpu", &delegate).ok());
  ASSERT_NE(delegate, nullptr);
  EXPECT_STREQ(delegate->name, "cpu");
  runtime::OpResolver resolver;
  delegate->add_kernels(resolver);
  EXPECT_NE(resolver.FindBuiltin(tflite::BuiltinOperator::CONV_2D), nullptr);
}

TEST(DelegateRegistryTest, UnknownNameNamesTheAvailableOnes) {
  const Delegate* delegate = nullptr;
  runtime::Status status = FindDelegate("gpu", &delegate);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  EXPECT_EQ(status.message(), "unknown delegate 'gpu' (available: cpu)");
  EXPECT_EQ(delegate, nullptr);
}

TEST(DelegateRegistryTest, CpuTakesNoOptions) {
  const Delegate* delegate = nullptr;
  ASSERT_TRUE(FindDelegate("cpu", &delegate).ok());
  EXPECT_TRUE(CheckDelegateOptions(*delegate, {}).ok());
  runtime::Status status = CheckDelegateOptions(*delegate, {{"precision", "fp16"}});
  EXPECT_EQ(status.message(), "delegate 'cpu' has no option 'precision' (it takes none)");
}

}  // namespace
}  // namespace dfarm::delegates
