#include "delegates/conformance/conformance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace dfarm::conformance {
namespace {

using ::testing::HasSubstr;

std::string ExamplePlugin() {
  return std::string(DFARM_BINARY_DIR) + "/lib/libdfarm_example_delegate.so";
}

DelegateUnderTest Example() { return {"external", {{"path", ExamplePlugin()}}}; }

TEST(ConformanceTest, ParsesDelegateSpecs) {
  DelegateUnderTest d;
  ASSERT_TRUE(ParseDelegateSpec("xnnpack", &d));
  EXPECT_EQ(d.name, "xnnpack");
  EXPECT_TRUE(d.options.empty());
  ASSERT_TRUE(ParseDelegateSpec("external:path=/a/b.so,mode=x", &d));
  EXPECT_EQ(d.name, "external");
  ASSERT_EQ(d.options.size(), 2u);
  EXPECT_EQ(d.options[1].first, "mode");
  EXPECT_EQ(d.options[1].second, "x");
  EXPECT_FALSE(ParseDelegateSpec("xnnpack:threads", &d));
  EXPECT_FALSE(ParseDelegateSpec(":a=b", &d));
}

TEST(ConformanceTest, DelegateSpecsTakeTheOneOptionSyntax) {
  DelegateUnderTest d;
  bool old = true;
  ASSERT_TRUE(ParseDelegateSpec("external:path:/a:b/c.so;mode:x", &d, &old));
  EXPECT_FALSE(old);
  EXPECT_EQ(d.name, "external");
  ASSERT_EQ(d.options.size(), 2u);
  EXPECT_EQ(d.options[0].second, "/a:b/c.so");
  EXPECT_EQ(d.options[1].first, "mode");
  ASSERT_TRUE(ParseDelegateSpec("xnnpack:threads=2,fp16=true", &d, &old));
  EXPECT_TRUE(old);  // the old spelling still works, flagged deprecated
  ASSERT_EQ(d.options.size(), 2u);
  EXPECT_EQ(d.options[0].first, "threads");
  EXPECT_EQ(d.options[0].second, "2");
  EXPECT_FALSE(ParseDelegateSpec("xnnpack:", &d));
  EXPECT_FALSE(ParseDelegateSpec("xnnpack:threads:2;fp16", &d));
}

TEST(ConformanceTest, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const ConformanceCase& c : Catalog()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
  EXPECT_GT(names.size(), 40u);
}

// The example plugin takes float32 ADD and SUB of equal shapes without a
// fused activation only: exactly those cases are claimed, and they match.
TEST(ConformanceTest, ExamplePluginClaimsPlainAddAndSubOnly) {
  int claimed = 0;
  for (const ConformanceCase& c : Catalog()) {
    const CaseResult r = RunCase(c, Example());
    EXPECT_TRUE(r.pass) << c.name << ": " << r.error;
    const bool plain = (c.op == "ADD" || c.op == "SUB") && c.quantum == 0 &&
                       c.name.find("[1,4,4,3] x [1,4,4,3]") != std::string::npos;
    EXPECT_EQ(r.claimed, plain) << c.name << " " << r.reason;
    claimed += r.claimed ? 1 : 0;
  }
  EXPECT_EQ(claimed, 2);
}

TEST(ConformanceTest, AlternatingGraphPartitionsAsWorkedOut) {
  for (const PartitionCase& c : PartitionCatalog()) {
    const PartitionResult r = RunPartitionCase(c, Example());
    EXPECT_TRUE(r.pass) << c.name << ": " << r.error;
    EXPECT_EQ(r.partitions, c.expected_partitions) << c.name;
  }
}

// A tolerance of zero with a wrong reference is caught: the comparison is
// real. Run a DIV case with a tolerance below float rounding.
TEST(ConformanceTest, MismatchBeyondToleranceFails) {
  for (const ConformanceCase& c : Catalog()) {
    if (c.op != "SUB" || c.quantum != 0 ||
        c.name.find("[1,4,4,3] x [1,4,4,3]") == std::string::npos) {
      continue;
    }
    const CaseResult r = RunCase(c, Example(), Tolerance{-1.0, 0.0});
    EXPECT_TRUE(r.claimed) << c.name;
    EXPECT_FALSE(r.pass) << c.name;
    EXPECT_THAT(r.error, HasSubstr("reference"));
  }
}

TEST(ConformanceTest, UnknownDelegateIsAFailure) {
  std::ostringstream os;
  EXPECT_GT(RunAll({{"tpu", {}}}, os), 0);
  EXPECT_THAT(os.str(), HasSubstr("unknown delegate 'tpu'"));
}

// What the tool refuses before running anything (exit 2).
TEST(ConformanceTest, CheckDelegateRefusesWhatCannotBeTested) {
  EXPECT_THAT(CheckDelegate({"tpu", {}}), HasSubstr("unknown delegate 'tpu' (known: cpu"));
  EXPECT_THAT(CheckDelegate({"cpu", {}}), HasSubstr("only adds kernels"));
  EXPECT_THAT(CheckDelegate({"external", {{"path", "/no/such/plugin.so"}}}),
              HasSubstr("/no/such/plugin.so"));
  EXPECT_EQ(CheckDelegate(Example()), "");
}

TEST(ConformanceTest, CountCasesFollowsTheFilter) {
  EXPECT_EQ(CountCases("NOSUCHCASE"), 0u);
  EXPECT_EQ(CountCases(""), Catalog().size() + PartitionCatalog().size());
  EXPECT_GT(CountCases("ADD"), 0u);
  EXPECT_LT(CountCases("ADD"), CountCases(""));
}

// The gpu delegate is judged at 1e-4 in float32 and at the float16
// tolerance with precision_loss_allowed (xnnpack's fp16 spelling too).
TEST(ConformanceTest, DefaultToleranceFollowsTheDelegateAndPrecision) {
  DelegateUnderTest d;
  ASSERT_TRUE(ParseDelegateSpec("gpu", &d));
  EXPECT_EQ(d.DefaultTolerance().abs, kGpuFloat32Tolerance.abs);
  ASSERT_TRUE(ParseDelegateSpec("gpu:precision_loss_allowed:true", &d));
  EXPECT_EQ(d.DefaultTolerance().abs, kFloat16Tolerance.abs);
  ASSERT_TRUE(ParseDelegateSpec("gpu:precision_loss_allowed:false", &d));
  EXPECT_EQ(d.DefaultTolerance().abs, kGpuFloat32Tolerance.abs);
  ASSERT_TRUE(ParseDelegateSpec("xnnpack:fp16:true", &d));
  EXPECT_EQ(d.DefaultTolerance().abs, kFloat16Tolerance.abs);
  ASSERT_TRUE(ParseDelegateSpec("xnnpack", &d));
  EXPECT_EQ(d.DefaultTolerance().abs, kFloat32Tolerance.abs);
}

#ifdef DFARM_HAVE_XNNPACK
TEST(ConformanceTest, XnnpackPassesTheCatalog) {
  std::ostringstream os;
  const int failures = RunAll({{"xnnpack", {}}, {"xnnpack", {{"threads", "2"}}}}, os);
  EXPECT_EQ(failures, 0) << os.str();
  EXPECT_THAT(os.str(), HasSubstr("quantization steps"));
}

// Quantized cases are judged in steps of their output's quantization:
// xnnpack's int8 ADD rounds differently from the reference (TFLite's fixed
// point) by one step; against a step 1000 times finer that is a failure.
TEST(ConformanceTest, QuantizedCasesAreJudgedInOutputSteps) {
  int seen = 0;
  for (ConformanceCase c : Catalog()) {
    if (c.name != "ADD int8 [1,4,4,3] x [1,4,4,3]") continue;
    ++seen;
    const DelegateUnderTest xnn{"xnnpack", {}};
    CaseResult r = RunCase(c, xnn);
    ASSERT_TRUE(r.claimed && r.pass) << r.reason << r.error;
    ASSERT_GT(r.max_abs_error, 0.0);
    EXPECT_LE(r.max_steps, kQuantizedSteps);
    c.quantum /= 1000;
    r = RunCase(c, xnn);
    EXPECT_FALSE(r.pass) << "max error " << r.max_abs_error;
    EXPECT_GT(r.max_steps, kQuantizedSteps);
  }
  EXPECT_EQ(seen, 1);
}
#endif

}  // namespace
}  // namespace dfarm::conformance
