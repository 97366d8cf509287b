#include "reports/store/cell.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "reports/store/store.h"

namespace dfarm::store {
namespace {

Cell Face() {
  Cell c;
  c.model_sha256 = "3bc182eb" + std::string(56, '0');
  c.delegate = "xnnpack";
  c.delegate_options = "fp16:true";
  c.num_threads = 2;
  c.runner = "main";
  c.device = "local";
  c.model = "face.tflite";
  return c;
}

TEST(CellTest, LabelNamesEveryPartOfTheIdentity) {
  EXPECT_EQ(Face().Label(), "face.tflite (3bc182eb) xnnpack[fp16:true] x2 @local (runner main)");
  EXPECT_EQ(ConfigLabel(Face()), "xnnpack[fp16:true] x2 (runner main)");
}

TEST(CellTest, LabelLeavesOutWhatIsUnset) {
  Cell c = Face();
  c.delegate_options = "";
  c.num_threads = 0;
  c.runner = "";
  EXPECT_EQ(c.Label(), "face.tflite (3bc182eb) xnnpack @local");
  EXPECT_EQ(ConfigLabel(c), "xnnpack");
  c.model_sha256 = "";
  EXPECT_EQ(c.Label(), "face.tflite xnnpack @local");
  c.model = "";
  EXPECT_EQ(c.Label(), "xnnpack @local");
  c.model_sha256 = "abcd";  // shorter than 8 digits: all of it
  EXPECT_EQ(c.Label(), "(abcd) xnnpack @local");
}

TEST(CellTest, TheModelFileNameIsShownNotCompared) {
  Cell a = Face(), b = Face();
  b.model = "renamed.tflite";
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a < b);
  EXPECT_FALSE(b < a);
  EXPECT_NE(a.Label(), b.Label());
}

TEST(CellTest, EveryIdentityFieldTellsCellsApart) {
  const Cell base = Face();
  std::vector<Cell> others(7, base);
  others[0].model_sha256[0] = '4';
  others[1].delegate = "cpu";
  others[2].delegate_options = "fp16:false";
  others[3].num_threads = 4;
  others[4].runner = "";
  others[5].device = "phone";
  others[6].inputs = InputsId({std::string(64, 'a')});
  for (const Cell& o : others) {
    SCOPED_TRACE(o.Label());
    EXPECT_NE(o, base);
    EXPECT_TRUE(o < base || base < o);
  }
}

TEST(CellTest, OrderIsShaDelegateOptionsThreadsRunnerDevice) {
  Cell a = Face();
  a.num_threads = 1;
  a.runner = "z";
  a.device = "z";
  Cell b = Face();
  b.num_threads = 2;
  b.runner = "a";
  b.device = "a";
  EXPECT_LT(a, b);  // threads before runner and device
  b = a;
  b.runner = "zz";
  b.device = "a";
  EXPECT_LT(a, b);  // runner before device
  b = a;
  b.delegate_options = "a:1";
  b.model_sha256 = "0";
  EXPECT_LT(b, a);  // the sha256 first
  std::vector<Cell> cells{b, a};
  std::sort(cells.begin(), cells.end());
  EXPECT_EQ(cells.front(), b);
}

TEST(CellTest, CellOfTakesTheJobsIdentityAndFileName) {
  JobRow j;
  j.model = "face.tflite";
  j.model_sha256 = Face().model_sha256;
  j.delegate = "xnnpack";
  j.delegate_options = "fp16:true";
  j.num_threads = 2;
  j.runner = "main";
  j.device = "local";
  j.trial = 3;
  j.runner_kind = "tflite";
  const Cell c = CellOf(j);
  EXPECT_EQ(c, Face());
  EXPECT_EQ(c.model, "face.tflite");
  EXPECT_EQ(c.Label(), Face().Label());
}

// Inputs: the seeded default reads as before; real sets by content.
TEST(CellTest, InputsAreNamedByContentAndShownShort) {
  const std::string a(64, 'a'), b(64, 'b');
  EXPECT_EQ(InputsId({}), kSeededInputs);
  const std::string ab = InputsId({a, b});
  EXPECT_EQ(ab.rfind("sets:", 0), 0u);
  EXPECT_EQ(ab.size(), 5u + 16u);
  EXPECT_EQ(InputsId({a, b}), ab);  // stable
  EXPECT_NE(InputsId({b, a}), ab);  // the order of the sets counts
  EXPECT_NE(InputsId({a}), ab);
  Cell c = Face();
  EXPECT_EQ(c.inputs, kSeededInputs);
  c.inputs = ab;
  EXPECT_EQ(c.Label(),
            "face.tflite (3bc182eb) xnnpack[fp16:true] x2 @local (runner main) on inputs " +
                ab.substr(5, 8));
  EXPECT_EQ(InputsLabel(kSeededInputs), "");
  EXPECT_EQ(InputsLabel("seeded:7/dfarm"), "seeded:7/dfarm");
}

TEST(CellTest, CellOfTakesTheJobsInputs) {
  JobRow j;
  EXPECT_EQ(CellOf(j).inputs, kSeededInputs);  // a job row before schema 18
  j.inputs = InputsId({std::string(64, 'c')});
  EXPECT_EQ(CellOf(j).inputs, j.inputs);
}

// A job aimed at `any` or a selector: its cell's device is its device's
// class, so trials on two devices of one class are one cell.
TEST(CellTest, AJobsDeviceClassIsItsCellsDevice) {
  JobRow on_a;
  on_a.model = "face.tflite";
  on_a.model_sha256 = Face().model_sha256;
  on_a.delegate = "xnnpack";
  on_a.device = "tcp://10.0.0.7:7000";
  on_a.device_class = "pixel7";
  JobRow on_b = on_a;
  on_b.device = "adb:DEF456";
  EXPECT_EQ(CellOf(on_a).device, "class:pixel7");
  EXPECT_EQ(CellOf(on_a), CellOf(on_b));
  EXPECT_EQ(CellOf(on_a).Label(), "face.tflite (3bc182eb) xnnpack @class:pixel7");
  EXPECT_EQ(ConfigLabel(CellOf(on_a)), "xnnpack");
  JobRow named = on_a;  // a job aimed at its own device keeps the device
  named.device_class = "";
  EXPECT_EQ(CellOf(named).device, "tcp://10.0.0.7:7000");
  EXPECT_NE(CellOf(named), CellOf(on_a));
  EXPECT_EQ(ClassCellDevice("Pixel 7/arm64-v8a"), "class:Pixel 7/arm64-v8a");
}

TEST(CellTest, DeviceClassOfTakesTheFirstMatchingClassElseWhatTheDeviceIs) {
  const DeviceClasses classes = {{"pixel7", {"adb:ABC*", "tcp://lab-p7-?:*"}},
                                 {"lab", {"tcp://*"}}};
  DeviceTraits d;
  d.name = "tcp://lab-p7-1:7000";
  d.abi = "arm64-v8a";
  d.cpu = "ARMv8 Processor Tensor G2";
  EXPECT_EQ(DeviceClassOf(classes, d), "lab");  // "lab" < "pixel7": first by name
  d.name = "adb:ABC123";
  EXPECT_EQ(DeviceClassOf(classes, d), "pixel7");
  d.name = "adb:XYZ";  // no class: the model, else the CPU/SoC, and the ABI
  EXPECT_EQ(DeviceClassOf(classes, d), "ARMv8 Processor Tensor G2/arm64-v8a");
  d.model = "Pixel 7";
  EXPECT_EQ(DeviceClassOf(classes, d), "Pixel 7/arm64-v8a");
  EXPECT_EQ(DeviceClassOf({}, d), "Pixel 7/arm64-v8a");
  EXPECT_EQ(DeviceClassOf({}, DeviceTraits{}), "unknown/unknown");
  EXPECT_EQ(MatchingDeviceClass(classes, "adb:XYZ"), "");
  EXPECT_EQ(MatchingDeviceClass(classes, "adb:ABC"), "pixel7");
}

TEST(CellTest, GlobMatchesTheWholeName) {
  EXPECT_TRUE(GlobMatch("adb:*", "adb:ABC"));
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_FALSE(GlobMatch("adb:*", "tcp://adb:ABC"));
  EXPECT_FALSE(GlobMatch("a?c", "abcd"));
  EXPECT_TRUE(GlobMatch("*7*", "pixel7-b"));
}

}  // namespace
}  // namespace dfarm::store
