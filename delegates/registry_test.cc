#include "delegates/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace dfarm::delegates {
namespace {

using ::testing::ElementsAre;

// "cpu, external" then, as the build found them, "xnnpack" and "gpu".
std::vector<std::string> ExpectedNames() {
  std::vector<std::string> names = {"cpu", "external"};
#ifdef DFARM_HAVE_XNNPACK
  names.push_back("xnnpack");
#endif
#ifdef DFARM_HAVE_OPENCL
  names.push_back("gpu");
#endif
  return names;
}

TEST(DelegateRegistryTest, ListsCpuAndExternal) {
  EXPECT_EQ(AvailableDelegates(), ExpectedNames());
}

TEST(DelegateRegistryTest, FindsCpuAndItRegistersKernels) {
  const RegisteredDelegate* delegate = nullptr;
  ASSERT_TRUE(FindDelegate("cpu", &delegate).ok());
  ASSERT_NE(delegate, nullptr);
  EXPECT_STREQ(delegate->name, "cpu");
  runtime::OpResolver resolver;
  delegate->add_kernels(resolver);
  EXPECT_NE(resolver.FindBuiltin(tflite::BuiltinOperator::CONV_2D), nullptr);
}

TEST(DelegateRegistryTest, UnknownNameNamesTheAvailableOnes) {
  const RegisteredDelegate* delegate = nullptr;
  runtime::Status status = FindDelegate("tpu", &delegate);
  EXPECT_EQ(status.code(), runtime::StatusCode::kError);
  std::string names;
  for (const std::string& n : ExpectedNames()) names += (names.empty() ? "" : ", ") + n;
  EXPECT_EQ(status.message(), "unknown delegate 'tpu' (available: " + names + ")");
  EXPECT_EQ(delegate, nullptr);
}

TEST(DelegateRegistryTest, CpuTakesNoOptions) {
  const RegisteredDelegate* delegate = nullptr;
  ASSERT_TRUE(FindDelegate("cpu", &delegate).ok());
  EXPECT_TRUE(CheckDelegateOptions(*delegate, {}).ok());
  runtime::Status status = CheckDelegateOptions(*delegate, {{"precision", "fp16"}});
  EXPECT_EQ(status.message(), "delegate 'cpu' has no option 'precision' (it takes none)");
}

TEST(DelegateRegistryTest, ExternalPassesUnknownKeysToThePlugin) {
  const RegisteredDelegate* delegate = nullptr;
  ASSERT_TRUE(FindDelegate("external", &delegate).ok());
  EXPECT_NE(delegate->create, nullptr);
  EXPECT_TRUE(CheckDelegateOptions(*delegate, {{"path", "/x.so"}, {"k", "v"}}).ok());
}

TEST(DelegateRegistryTest, PartitionOptions) {
  runtime::DelegatePartitionOptions o;
  ASSERT_TRUE(ParsePartitionOptions({{"max_delegated_partitions", "2"},
                                     {"min_nodes_per_partition", "3"},
                                     {"require_full_delegation", "true"},
                                     {"other", "x"}},
                                    &o)
                  .ok());
  EXPECT_EQ(o.max_delegated_partitions, 2);
  EXPECT_EQ(o.min_nodes_per_partition, 3);
  EXPECT_TRUE(o.require_full_delegation);
  runtime::Status s = ParsePartitionOptions({{"min_nodes_per_partition", "0"}}, &o);
  EXPECT_EQ(s.message(),
            "delegate option 'min_nodes_per_partition' has value '0', expected an integer >= 1");
  EXPECT_FALSE(ParsePartitionOptions({{"require_full_delegation", "yes"}}, &o).ok());
  EXPECT_FALSE(ParsePartitionOptions({{"max_delegated_partitions", "2x"}}, &o).ok());
}

TEST(DelegateRegistryTest, NodeRangeOptions) {
  runtime::DelegatePartitionOptions o;
  EXPECT_EQ(o.first_delegate_node_index, 0);
  EXPECT_EQ(o.last_delegate_node_index, std::numeric_limits<int>::max());
  ASSERT_TRUE(ParsePartitionOptions(
                  {{"first_delegate_node_index", "4"}, {"last_delegate_node_index", "9"}}, &o)
                  .ok());
  EXPECT_EQ(o.first_delegate_node_index, 4);
  EXPECT_EQ(o.last_delegate_node_index, 9);
  runtime::Status s = ParsePartitionOptions({{"last_delegate_node_index", "-1"}}, &o);
  EXPECT_EQ(
      s.message(),
      "delegate option 'last_delegate_node_index' has value '-1', expected a node index >= 0");
  const RegisteredDelegate* external = nullptr;
  ASSERT_TRUE(FindDelegate("external", &external).ok());
  EXPECT_TRUE(CheckDelegateOptions(*external, {{"first_delegate_node_index", "1"}}).ok());
}

}  // namespace
}  // namespace dfarm::delegates
