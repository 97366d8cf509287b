// Device state parsing over a fake sys/ and proc/ tree written by the test,
// the hot/throttled flags, the wire round trip and the supervisor's snapshots.
#include "agent/daemon/device_state.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/daemon/supervisor.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using testing::TempDir;

// Writes root/rel (creating folders) with text and a newline, as sysfs does.
void Put(const std::string& root, const std::string& rel, const std::string& text) {
  std::filesystem::path p = std::filesystem::path(root) / rel;
  std::filesystem::create_directories(p.parent_path());
  testing::WriteFile(p.string(), text + "\n");
}

// A phone-like tree: cpu0 (no online file), cpu1 capped at 1.2 of 2.4 GHz,
// cpu2 offline without cpufreq; zones 0 (45 C), 1 (78.5 C), 2 (no temp), 10 (degrees).
void WriteFakeTree(const std::string& root) {
  const std::string cpu = "sys/devices/system/cpu/";
  Put(root, cpu + "cpu0/cpufreq/scaling_cur_freq", "1800000");
  Put(root, cpu + "cpu0/cpufreq/scaling_max_freq", "1800000");
  Put(root, cpu + "cpu0/cpufreq/cpuinfo_max_freq", "1800000");
  Put(root, cpu + "cpu0/cpufreq/scaling_governor", "schedutil");
  Put(root, cpu + "cpu1/online", "1");
  Put(root, cpu + "cpu1/cpufreq/scaling_cur_freq", "1200000");
  Put(root, cpu + "cpu1/cpufreq/scaling_max_freq", "1200000");
  Put(root, cpu + "cpu1/cpufreq/cpuinfo_max_freq", "2400000");
  Put(root, cpu + "cpu1/cpufreq/scaling_governor", "performance");
  Put(root, cpu + "cpu2/online", "0");
  Put(root, cpu + "cpufreq/policy0/scaling_cur_freq", "1");  // not a CPU
  Put(root, cpu + "online", "0-2");
  const std::string thermal = "sys/class/thermal/";
  Put(root, thermal + "thermal_zone0/type", "x86_pkg_temp");
  Put(root, thermal + "thermal_zone0/temp", "45000");
  Put(root, thermal + "thermal_zone1/type", "cpu-thermal");
  Put(root, thermal + "thermal_zone1/temp", "78500");
  Put(root, thermal + "thermal_zone2/type", "battery");
  Put(root, thermal + "thermal_zone10/type", "old-driver");
  Put(root, thermal + "thermal_zone10/temp", "41");
  Put(root, thermal + "cooling_device0/type", "fan");
  Put(root, "proc/loadavg", "0.52 1.25 2.00 1/467 12345");
  const std::string battery = "sys/class/power_supply/battery/";
  Put(root, battery + "capacity", "87");
  Put(root, battery + "temp", "312");
  Put(root, battery + "current_now", "-350000");
  Put(root, battery + "voltage_now", "3850000");
}

TEST(AgentDeviceStateTest, ParsesAFakeTree) {
  TempDir dir;
  WriteFakeTree(dir.path());
  DeviceState s = CollectDeviceState(dir.path());
  EXPECT_GT(s.unix_ms, 1'600'000'000'000);

  ASSERT_EQ(s.cpus.size(), 3u);
  EXPECT_EQ(s.cpus[0].cpu, 0u);
  EXPECT_EQ(s.cpus[0].online, std::nullopt);
  EXPECT_THAT(s.cpus[0].cur_freq_khz, Optional(1800000u));
  EXPECT_EQ(s.cpus[0].governor, "schedutil");
  EXPECT_THAT(s.cpus[1].online, Optional(true));
  EXPECT_THAT(s.cpus[1].cur_freq_khz, Optional(1200000u));
  EXPECT_THAT(s.cpus[1].max_freq_khz, Optional(1200000u));
  EXPECT_THAT(s.cpus[1].hw_max_freq_khz, Optional(2400000u));
  EXPECT_EQ(s.cpus[1].governor, "performance");
  EXPECT_EQ(s.cpus[2].cpu, 2u);
  EXPECT_THAT(s.cpus[2].online, Optional(false));
  EXPECT_EQ(s.cpus[2].cur_freq_khz, std::nullopt);
  EXPECT_EQ(s.cpus[2].max_freq_khz, std::nullopt);
  EXPECT_EQ(s.cpus[2].hw_max_freq_khz, std::nullopt);
  EXPECT_EQ(s.cpus[2].governor, "");

  ASSERT_EQ(s.thermal_zones.size(), 4u);
  EXPECT_EQ(s.thermal_zones[0].type, "x86_pkg_temp");
  EXPECT_THAT(s.thermal_zones[0].temp_c, Optional(45.0));
  EXPECT_THAT(s.thermal_zones[1].temp_c, Optional(78.5));
  EXPECT_EQ(s.thermal_zones[2].type, "battery");
  EXPECT_EQ(s.thermal_zones[2].temp_c, std::nullopt);
  EXPECT_EQ(s.thermal_zones[3].zone, 10u);  // numeric order, not "10" < "2"
  EXPECT_THAT(s.thermal_zones[3].temp_c, Optional(41.0));

  EXPECT_THAT(s.load_avg_1m, Optional(0.52));
  EXPECT_THAT(s.load_avg_5m, Optional(1.25));
  EXPECT_THAT(s.load_avg_15m, Optional(2.0));
  EXPECT_THAT(s.battery_level_pct, Optional(87));
  EXPECT_THAT(s.battery_voltage_uv, Optional(3850000));
  EXPECT_THAT(s.battery_temp_c, Optional(31.2));
  EXPECT_THAT(s.battery_current_ua, Optional(-350000));
}

TEST(AgentDeviceStateTest, MissingFilesAreAbsentFields) {
  TempDir dir;
  DeviceState s = CollectDeviceState(dir.path() + "/nothing-here");
  EXPECT_THAT(s.cpus, IsEmpty());
  EXPECT_THAT(s.thermal_zones, IsEmpty());
  EXPECT_EQ(s.load_avg_1m, std::nullopt);
  EXPECT_EQ(s.load_avg_15m, std::nullopt);
  EXPECT_EQ(s.battery_level_pct, std::nullopt);
  EXPECT_EQ(s.battery_temp_c, std::nullopt);
  EXPECT_EQ(s.battery_current_ua, std::nullopt);
  EXPECT_FALSE(IsHot(s, 0.0));
  EXPECT_FALSE(IsThrottled(s));
}

// cpu_busy_pct over a real /proc/stat while a thread of this test spins: at
// least half of one CPU's share shows (other load only adds to it).
TEST(AgentDeviceStateTest, BusyShareSeesACpuHog) {
  std::atomic<bool> stop{false};
  std::thread hog([&stop] {
    volatile uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) n = n + 1;
  });
  DeviceState s = CollectDeviceState("/", std::chrono::milliseconds(300));
  stop = true;
  hog.join();
  ASSERT_TRUE(s.cpu_busy_pct.has_value());
  const double cpus = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_GE(*s.cpu_busy_pct, 50.0 / cpus);
  EXPECT_LE(*s.cpu_busy_pct, 100.0);
}

TEST(AgentDeviceStateTest, BusyShareNeedsTwoReadingsThatMove) {
  TempDir dir;
  Put(dir.path(), "proc/stat", "cpu  100 0 50 800 10 0 0 0 0 0\ncpu0 100 0 50 800 10 0 0 0 0 0");
  // A file that does not change between the readings says nothing.
  EXPECT_EQ(CollectDeviceState(dir.path(), std::chrono::milliseconds(5)).cpu_busy_pct,
            std::nullopt);
  // Without a window there is no reading at all.
  EXPECT_EQ(CollectDeviceState("/").cpu_busy_pct, std::nullopt);
}

// The fake tree: cpu0 at most 1.8 GHz, cpu1 2.4 GHz, cpu2 offline.
TEST(AgentDeviceStateTest, CpuAffinityBigLittleAndLists) {
  TempDir dir;
  WriteFakeTree(dir.path());
  const DeviceState s = CollectDeviceState(dir.path());
  EXPECT_THAT(*ResolveCpuAffinity("big", s), ::testing::ElementsAre(1));
  EXPECT_THAT(*ResolveCpuAffinity("little", s), ::testing::ElementsAre(0));
  EXPECT_THAT(*ResolveCpuAffinity("3,0-1,1", s), ::testing::ElementsAre(0, 1, 3));
  EXPECT_EQ(ResolveCpuAffinity("fast", s).message(),
            "cpu_affinity 'fast': expected big, little or CPU numbers and ranges such as 0-3,6");
  EXPECT_FALSE(ResolveCpuAffinity("3-1", s).ok());
  EXPECT_FALSE(ResolveCpuAffinity("5000", s).ok());
  EXPECT_EQ(ResolveCpuAffinity("big", DeviceState{}).message(),
            "cpu_affinity 'big': the device lists no CPU");
  // No frequencies known: every online CPU.
  DeviceState plain;
  plain.cpus.resize(2);
  plain.cpus[1].cpu = 1;
  EXPECT_THAT(*ResolveCpuAffinity("little", plain), ::testing::ElementsAre(0, 1));
}

TEST(AgentDeviceStateTest, GarbageValuesAreAbsentFields) {
  TempDir dir;
  Put(dir.path(), "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "fast");
  Put(dir.path(), "sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq", "");
  Put(dir.path(), "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "2400000 kHz");
  Put(dir.path(), "sys/class/thermal/thermal_zone0/temp", "-");
  Put(dir.path(), "proc/loadavg", "0.75");
  Put(dir.path(), "sys/class/power_supply/battery/capacity", "99999999999999999999");
  DeviceState s = CollectDeviceState(dir.path());
  ASSERT_EQ(s.cpus.size(), 1u);
  EXPECT_EQ(s.cpus[0].cur_freq_khz, std::nullopt);
  EXPECT_EQ(s.cpus[0].max_freq_khz, std::nullopt);
  EXPECT_EQ(s.cpus[0].hw_max_freq_khz, std::nullopt);
  ASSERT_EQ(s.thermal_zones.size(), 1u);
  EXPECT_EQ(s.thermal_zones[0].type, "");
  EXPECT_EQ(s.thermal_zones[0].temp_c, std::nullopt);
  EXPECT_THAT(s.load_avg_1m, Optional(0.75));
  EXPECT_EQ(s.load_avg_5m, std::nullopt);
  EXPECT_EQ(s.battery_level_pct, std::nullopt);
}

TEST(AgentDeviceStateTest, HotMeansAZoneAboveTheThreshold) {
  TempDir dir;
  WriteFakeTree(dir.path());
  DeviceState s = CollectDeviceState(dir.path());
  std::string why;
  EXPECT_TRUE(IsHot(s, 70.0, &why));
  EXPECT_EQ(why, "thermal zone 1 (cpu-thermal) at 78.5 C");
  EXPECT_TRUE(IsHot(s, 44.0, &why));
  EXPECT_THAT(why, HasSubstr("thermal zone 1"));  // the hottest, not the first
  EXPECT_FALSE(IsHot(s, 78.5));                   // strictly above
  EXPECT_FALSE(IsHot(s, 90.0));
}

TEST(AgentDeviceStateTest, ThrottledMeansACpuCappedBelowItsHardwareMax) {
  TempDir dir;
  WriteFakeTree(dir.path());
  std::string why;
  EXPECT_TRUE(IsThrottled(CollectDeviceState(dir.path()), &why));
  EXPECT_EQ(why, "cpu1 capped at 1200000 of 2400000 kHz");

  Put(dir.path(), "sys/devices/system/cpu/cpu1/cpufreq/scaling_max_freq", "2400000");
  EXPECT_FALSE(IsThrottled(CollectDeviceState(dir.path())));

  // Without cpuinfo_max_freq a cap cannot be judged.
  Put(dir.path(), "sys/devices/system/cpu/cpu1/cpufreq/scaling_max_freq", "600000");
  std::filesystem::remove(dir.path() + "/sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq");
  EXPECT_FALSE(IsThrottled(CollectDeviceState(dir.path())));
}

TEST(AgentDeviceStateTest, FlagsComeFromTheSnapshots) {
  DeviceState cool;
  cool.thermal_zones.push_back({0, "soc", 40.0});
  cool.cpus.push_back({0, true, 1000, 2000, 2000, "schedutil"});
  DeviceState hot = cool;
  hot.thermal_zones[0].temp_c = 75.0;
  DeviceState capped = cool;
  capped.cpus[0].max_freq_khz = 1500;

  JobResult r;
  r.state_before = cool;
  r.state_after = hot;  // heating up during the job is not "started hot"
  FlagDeviceState(70.0, &r);
  EXPECT_FALSE(r.started_hot);
  EXPECT_FALSE(r.throttled);
  EXPECT_EQ(r.state_note, "");
  EXPECT_EQ(r.hot_threshold_c, 70.0);

  r.state_before = hot;
  r.state_after = capped;
  FlagDeviceState(70.0, &r);
  EXPECT_TRUE(r.started_hot);
  EXPECT_TRUE(r.throttled);
  EXPECT_EQ(r.state_note,
            "started hot: thermal zone 0 (soc) at 75.0 C > 70.0 C; "
            "throttled after the job: cpu0 capped at 1500 of 2000 kHz");

  FlagDeviceState(80.0, &r);
  EXPECT_FALSE(r.started_hot);
  EXPECT_EQ(r.hot_threshold_c, 80.0);

  JobResult none;  // no runner started: no snapshots, no flags
  FlagDeviceState(70.0, &none);
  EXPECT_FALSE(none.started_hot);
  EXPECT_FALSE(none.throttled);
}

JobResult RoundTrip(const JobResult& in) {
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 7, BuildJobResult(fbb, in));
  auto frame = VerifyFrame(fbb.GetBufferPointer(), fbb.GetSize());
  EXPECT_TRUE(frame.ok()) << frame.message();
  if (!frame.ok()) return {};
  EXPECT_EQ((*frame)->body_type(), wire::Body::JobResult);
  return ReadJobResult(*(*frame)->body_as_JobResult());
}

TEST(AgentDeviceStateWireTest, JobResultRoundTripKeepsPresentAndAbsentFields) {
  TempDir dir;
  WriteFakeTree(dir.path());
  JobResult in;
  in.status = "ok";
  in.state_before = CollectDeviceState(dir.path());
  DeviceState after;
  after.unix_ms = 42;
  after.thermal_zones.push_back({3, "", 0.0});  // a present 0 C is not an absent temperature
  after.battery_current_ua = 0;
  after.cpu_busy_pct = 87.5;
  in.state_after = after;
  FlagDeviceState(70.0, &in);
  ASSERT_TRUE(in.started_hot);

  JobResult out = RoundTrip(in);
  EXPECT_EQ(out.status, "ok");
  EXPECT_TRUE(out.started_hot);
  EXPECT_TRUE(out.throttled);
  EXPECT_EQ(out.hot_threshold_c, 70.0);
  EXPECT_EQ(out.state_note, in.state_note);
  ASSERT_TRUE(out.state_before.has_value());
  const DeviceState& b = *out.state_before;
  EXPECT_EQ(b.unix_ms, in.state_before->unix_ms);
  ASSERT_EQ(b.cpus.size(), 3u);
  EXPECT_EQ(b.cpus[0].online, std::nullopt);
  EXPECT_THAT(b.cpus[1].online, Optional(true));
  EXPECT_THAT(b.cpus[2].online, Optional(false));
  EXPECT_THAT(b.cpus[1].hw_max_freq_khz, Optional(2400000u));
  EXPECT_EQ(b.cpus[2].cur_freq_khz, std::nullopt);
  EXPECT_EQ(b.cpus[1].governor, "performance");
  ASSERT_EQ(b.thermal_zones.size(), 4u);
  EXPECT_EQ(b.thermal_zones[2].temp_c, std::nullopt);
  EXPECT_EQ(b.thermal_zones[3].zone, 10u);
  EXPECT_THAT(b.load_avg_5m, Optional(1.25));
  EXPECT_THAT(b.battery_temp_c, Optional(31.2));
  ASSERT_TRUE(out.state_after.has_value());
  const DeviceState& a = *out.state_after;
  EXPECT_EQ(a.unix_ms, 42);
  ASSERT_EQ(a.thermal_zones.size(), 1u);
  EXPECT_THAT(a.thermal_zones[0].temp_c, Optional(0.0));
  EXPECT_THAT(a.battery_current_ua, Optional(0));
  EXPECT_EQ(a.battery_level_pct, std::nullopt);
  EXPECT_EQ(a.load_avg_1m, std::nullopt);
  EXPECT_THAT(a.cpu_busy_pct, Optional(87.5));
  EXPECT_EQ(b.cpu_busy_pct, std::nullopt);
}

TEST(AgentDeviceStateWireTest, ResultWithoutStateReadsAsUnset) {
  JobResult in;
  in.status = "infra";
  in.error = "model: no artifact";
  JobResult out = RoundTrip(in);
  EXPECT_EQ(out.status, "infra");
  EXPECT_FALSE(out.state_before.has_value());
  EXPECT_FALSE(out.state_after.has_value());
  EXPECT_FALSE(out.started_hot);
  EXPECT_EQ(out.state_note, "");
}

class AgentDeviceStateSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ArtifactStore::Open(dir_.path() + "/store");
    ASSERT_TRUE(store.ok()) << store.message();
    store_ = std::move(*store);
    root_ = dir_.path() + "/root";
    WriteFakeTree(root_);
  }

  JobSpec Job(const std::string& runner_script) {
    JobSpec job;
    job.runner_sha256 = testing::HashOf(runner_script);
    job.model_sha256 = testing::HashOf("model");
    EXPECT_TRUE(store_->Put(job.runner_sha256, runner_script).ok());
    EXPECT_TRUE(store_->Put(job.model_sha256, "model").ok());
    job.timeout_ms = 10000;
    return job;
  }

  TempDir dir_;
  std::unique_ptr<ArtifactStore> store_;
  std::string root_;
};

TEST_F(AgentDeviceStateSupervisorTest, SnapshotsAreTakenBeforeAndAfterTheRunner) {
  // The runner cools the device and lifts the cap: the flags follow the
  // before snapshot (hot) and both snapshots (throttled), the after snapshot
  // shows what the runner left.
  const std::string cpu1 = root_ + "/sys/devices/system/cpu/cpu1/cpufreq/";
  std::string script = std::string(testing::kOkRunner) + "echo 30000 > " + root_ +
                       "/sys/class/thermal/thermal_zone1/temp\n" + "echo 2400000 > " + cpu1 +
                       "scaling_max_freq\n" + "echo 0.99 0.5 0.25 2/100 7 > " + root_ +
                       "/proc/loadavg\n";
  SupervisorOptions options;
  options.device_state_root = root_;
  options.hot_threshold_c = 75.0;
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(Job(script));
  ASSERT_EQ(r.status, "ok") << r.error << r.stderr_tail;
  ASSERT_TRUE(r.state_before.has_value());
  ASSERT_TRUE(r.state_after.has_value());
  EXPECT_THAT(r.state_before->thermal_zones[1].temp_c, Optional(78.5));
  EXPECT_THAT(r.state_after->thermal_zones[1].temp_c, Optional(30.0));
  EXPECT_THAT(r.state_before->load_avg_1m, Optional(0.52));
  EXPECT_THAT(r.state_after->load_avg_1m, Optional(0.99));
  EXPECT_LE(r.state_before->unix_ms, r.state_after->unix_ms);
  EXPECT_TRUE(r.started_hot);
  EXPECT_TRUE(r.throttled);  // capped before the job
  EXPECT_EQ(r.hot_threshold_c, 75.0);
  EXPECT_THAT(r.state_note, HasSubstr("started hot: thermal zone 1 (cpu-thermal) at 78.5 C"));
  EXPECT_THAT(r.state_note, HasSubstr("throttled before the job: cpu1"));

  // Second job: the device is now cool and uncapped.
  JobResult again = sup.Run(Job(std::string(testing::kOkRunner) + "# second\n"));
  ASSERT_EQ(again.status, "ok") << again.error;
  EXPECT_FALSE(again.started_hot);
  EXPECT_FALSE(again.throttled);
  EXPECT_EQ(again.state_note, "");
}

// The runner heats the fake zone 1 step by step while the agent samples
// every 100 ms: state_during shows the climb, in time order.
TEST_F(AgentDeviceStateSupervisorTest, StateIsSampledWhileTheRunnerRuns) {
  const std::string zone = root_ + "/sys/class/thermal/thermal_zone1/temp";
  // Each temperature is written beside the file and renamed over it, as a
  // kernel's sysfs file changes at once: a sample taken while `echo`
  // truncates and writes would read an empty file (no temperature).
  std::string script = "#!/bin/sh\n";
  for (int t = 40; t <= 60; t += 5) {
    script += "echo " + std::to_string(t * 1000) + " > " + zone + ".new && mv " + zone + ".new " +
              zone + "\nsleep 0.15\n";
  }
  script += std::string(testing::kOkRunner).substr(std::string("#!/bin/sh\n").size());
  SupervisorOptions options;
  options.device_state_root = root_;
  options.sample_interval_ms = 100;
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(Job(script));
  ASSERT_EQ(r.status, "ok") << r.error << r.stderr_tail;
  ASSERT_GE(r.state_during.size(), 3u);
  for (const auto& sample : r.state_during) {
    ASSERT_GT(sample.thermal_zones.size(), 1u);
    ASSERT_TRUE(sample.thermal_zones[1].temp_c.has_value()) << "a sample without zone 1's temp";
  }
  for (size_t i = 1; i < r.state_during.size(); ++i) {
    EXPECT_LE(r.state_during[i - 1].unix_ms, r.state_during[i].unix_ms);
    EXPECT_LE(*r.state_during[i - 1].thermal_zones[1].temp_c,
              *r.state_during[i].thermal_zones[1].temp_c);
  }
  EXPECT_GT(*r.state_during.back().thermal_zones[1].temp_c,
            *r.state_during.front().thermal_zones[1].temp_c);
  // The samples travel.
  JobResult out = RoundTrip(r);
  ASSERT_EQ(out.state_during.size(), r.state_during.size());
  EXPECT_EQ(out.state_during.back().thermal_zones[1].temp_c,
            r.state_during.back().thermal_zones[1].temp_c);
  // Interval 0: no samples.
  options.sample_interval_ms = 0;
  Supervisor quiet(store_.get(), options);
  EXPECT_TRUE(quiet.Run(Job(script + "# again\n")).state_during.empty());
}

// RunJob.cpu_affinity "0": the runner finds itself allowed on CPU 0 only.
TEST_F(AgentDeviceStateSupervisorTest, TheRunnerIsPinnedToTheCpusAsked) {
  SupervisorOptions options;
  options.device_state_root = root_;
  Supervisor sup(store_.get(), options);
  JobSpec job =
      Job(std::string(testing::kOkRunner) + "grep Cpus_allowed_list /proc/self/status >&2\n");
  job.cpu_affinity = "0";
  JobResult r = sup.Run(job);
  ASSERT_EQ(r.status, "ok") << r.error << r.stderr_tail;
  EXPECT_THAT(r.stderr_tail, HasSubstr("Cpus_allowed_list:\t0\n"));
  job.cpu_affinity = "fast";
  r = sup.Run(job);
  EXPECT_EQ(r.status, "infra");
  EXPECT_THAT(r.error, HasSubstr("invalid job: cpu_affinity 'fast'"));
}

TEST_F(AgentDeviceStateSupervisorTest, CrashedRunnerStillGetsSnapshots) {
  SupervisorOptions options;
  options.device_state_root = root_;
  Supervisor sup(store_.get(), options);
  JobResult r = sup.Run(Job("#!/bin/sh\nkill -SEGV $$\n"));
  EXPECT_EQ(r.status, "crashed");
  EXPECT_TRUE(r.state_before.has_value());
  EXPECT_TRUE(r.state_after.has_value());
  EXPECT_TRUE(r.started_hot);  // 78.5 C > the default 70 C
}

TEST_F(AgentDeviceStateSupervisorTest, NoSnapshotsWithoutARunnerOrWhenOff) {
  SupervisorOptions options;
  options.device_state_root = root_;
  Supervisor sup(store_.get(), options);
  JobSpec missing = Job(testing::kOkRunner);
  missing.model_sha256 = std::string(64, 'e');
  JobResult r = sup.Run(missing);
  EXPECT_EQ(r.status, "infra");
  EXPECT_FALSE(r.state_before.has_value());
  EXPECT_FALSE(r.started_hot);

  options.record_device_state = false;
  Supervisor off(store_.get(), options);
  r = off.Run(Job(testing::kOkRunner));
  EXPECT_EQ(r.status, "ok") << r.error;
  EXPECT_FALSE(r.state_before.has_value());
  EXPECT_FALSE(r.state_after.has_value());
  EXPECT_FALSE(r.started_hot);
}

}  // namespace
}  // namespace dfarm::agent
