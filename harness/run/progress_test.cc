#include "harness/run/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dfarm::harness {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// On a terminal the redrawn line names the job running longest and the phase
// its agent reported; a job that stopped is no longer named.
TEST(ProgressTest, TerminalLineNamesTheLongestRunningJobAndItsPhase) {
  std::ostringstream out;
  Progress p(&out, /*tty=*/true, 4, 0);
  p.JobStarted("face cpu local");
  p.JobStarted("hand xnnpack tcp://b:1");
  p.JobPhase("face cpu local", "running", 12'400);
  p.JobPhase("hand xnnpack tcp://b:1", "starting", 800);
  std::string line = out.str().substr(out.str().rfind('\r'));
  EXPECT_THAT(line, HasSubstr("2 running"));
  EXPECT_THAT(line, HasSubstr(", face cpu local running 12s"));
  p.JobStopped("face cpu local");
  p.JobDone("face cpu local", "ok", " mean 1.0 ms");
  line = out.str().substr(out.str().rfind('\r'));
  EXPECT_THAT(line, HasSubstr("1/4 jobs"));
  EXPECT_THAT(line, HasSubstr(", hand xnnpack tcp://b:1 starting 0s"));
  EXPECT_THAT(line, Not(HasSubstr("face")));
}

// What an agent says (job errors, notes, phases) reaches the terminal with
// its control characters escaped, on one line, bounded.
TEST(ProgressTest, AgentTextIsPrintedSafely) {
  const std::string hostile = "\x1b[2Jline\nnext" + std::string(100 * 1024, 'e');
  std::ostringstream plain;
  Progress p(&plain, /*tty=*/false, 2, 0);
  p.JobDone("m cpu local", "crashed", ": " + hostile);
  p.Note("retrying m cpu local: " + hostile);
  EXPECT_EQ(plain.str().find('\x1b'), std::string::npos);
  EXPECT_THAT(plain.str(), HasSubstr("crashed: \\x1b[2Jline\\x0anext"));
  EXPECT_THAT(plain.str(), HasSubstr("retrying m cpu local: \\x1b[2Jline\\x0anext"));
  EXPECT_LT(plain.str().size(), 4096u);
  const std::string printed = plain.str();
  EXPECT_EQ(std::count(printed.begin(), printed.end(), '\n'), 2);

  std::ostringstream tty;
  Progress t(&tty, /*tty=*/true, 2, 0, 200, [] { return std::chrono::steady_clock::now(); });
  t.JobStarted("m cpu local");
  t.JobPhase("m cpu local", "run\x1b[2J", 1000);
  t.JobDone("m cpu local", "crashed", ": " + hostile);
  t.Note(hostile);
  EXPECT_THAT(tty.str(), Not(HasSubstr("\x1b[2J")));  // only the line's own \r\x1b[2K, \x1b[K
  EXPECT_THAT(tty.str(), HasSubstr("run\\x1b[2J"));
  EXPECT_LT(tty.str().size(), 4096u);
}

// Without a terminal phases print nothing (one line per finished job only).
TEST(ProgressTest, PlainOutputHasNoPhaseLines) {
  std::ostringstream out;
  Progress p(&out, /*tty=*/false, 1, 0);
  p.JobStarted("face cpu local");
  p.JobPhase("face cpu local", "running", 5'000);
  EXPECT_EQ(out.str(), "");
  p.JobStopped("face cpu local");
  p.JobDone("face cpu local", "ok", " mean 1.0 ms");
  EXPECT_EQ(out.str(), "[1/1] face cpu local: ok mean 1.0 ms\n");
}

// A fixed clock for the ETA tests.
struct FakeClock {
  std::chrono::steady_clock::time_point now =
      std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  Progress::Clock clock() {
    return [this] { return now; };
  }
};

// The last line drawn in place: what follows the last '\r'.
std::string LastLine(const std::ostringstream& out) {
  return out.str().substr(out.str().rfind('\r'));
}

// The line fits the terminal (one column to spare, so it never wraps into
// stale copies) and clears what a longer line left: the bar shrinks, then
// goes, then the running job's label is shortened, then parts go.
TEST(ProgressTest, TerminalLineFitsTheWidth) {
  FakeClock t;
  const std::string label = "hand_landmark_full xnnpack(threads:2) tcp://farm-07:7000";
  for (auto [columns, want] : std::vector<std::pair<int, std::string>>{
           {200, "[######..................] 11/40 jobs, 0 failed, 1 running, ETA --, " + label +
                     " running 14s"},
           {130, "[####.............] 11/40 jobs, 0 failed, 1 running, ETA --, " + label +
                     " running 14s"},
           {120, "11/40 jobs, 0 failed, 1 running, ETA --, " + label + " running 14s"},
           {70, "11/40 jobs, 0 failed, 1 running, ETA --, hand_landmark... running 14s"},
           {50, "11/40 jobs, 0 failed, 1 running, ETA --"},
           {30, "11/40 jobs, 0 failed, ETA --"},
           {12, "11/40 jobs,"},
       }) {
    std::ostringstream out;
    Progress p(&out, /*tty=*/true, 40, 11, columns, t.clock());
    p.JobStarted(label);
    p.JobPhase(label, "running", 14'000);
    EXPECT_EQ(LastLine(out), "\r" + want + "\x1b[K") << columns << " columns";
    EXPECT_LT(want.size(), static_cast<size_t>(columns));
  }
}

// The ETA counts down while a job runs, from the mean time of the finished
// jobs and the running job's elapsed time as its agent reports it; a job
// that overruns the mean holds it, it does not climb.
TEST(ProgressTest, EtaCountsDownWhileALongJobRuns) {
  using std::chrono::seconds;
  FakeClock t;
  std::ostringstream out;
  Progress p(&out, /*tty=*/true, 4, 0, 200, t.clock());
  p.JobStarted("a cpu local");
  EXPECT_THAT(LastLine(out), HasSubstr("ETA --"));
  t.now += seconds(10);
  p.JobStopped("a cpu local");
  p.JobDone("a cpu local", "ok", "");
  EXPECT_THAT(LastLine(out), HasSubstr("1/4 jobs, 0 failed, 0 running, ETA 30s"));
  p.JobStarted("b cpu local");
  EXPECT_THAT(LastLine(out), HasSubstr("ETA 30s"));
  t.now += seconds(5);
  p.JobPhase("b cpu local", "running", 4'000);  // the runner started a second late
  EXPECT_THAT(LastLine(out), HasSubstr("ETA 26s, b cpu local running 4s"));
  t.now += seconds(3);
  p.JobPhase("b cpu local", "running", 7'000);
  EXPECT_THAT(LastLine(out), HasSubstr("ETA 23s, b cpu local running 7s"));
  t.now += seconds(10);
  p.JobPhase("b cpu local", "running", 17'000);
  EXPECT_THAT(LastLine(out), HasSubstr("ETA 20s, b cpu local running 17s"));
}

// Two devices at once share what is left.
TEST(ProgressTest, EtaSharesTheRestAmongTheDevicesWorking) {
  using std::chrono::seconds;
  FakeClock t;
  std::ostringstream out;
  Progress p(&out, /*tty=*/true, 6, 0, 200, t.clock());
  p.JobStarted("a cpu x");
  p.JobStarted("a cpu y");
  t.now += seconds(10);
  p.JobStopped("a cpu x");
  p.JobDone("a cpu x", "ok", "");
  // 4 not started (one still runs on y, 10 s in): 4 x 10 s over 2 devices.
  EXPECT_THAT(LastLine(out), HasSubstr("1/6 jobs, 0 failed, 1 running, ETA 20s"));
}

TEST(ProgressTest, TerminalColumnsFallsBackToColumnsThen80) {
  const char* saved = std::getenv("COLUMNS");
  std::string keep = saved ? saved : "";
  ::setenv("COLUMNS", "55", 1);
  EXPECT_EQ(Progress::TerminalColumns(-1), 55);
  ::setenv("COLUMNS", "wide", 1);
  EXPECT_EQ(Progress::TerminalColumns(-1), 80);
  ::unsetenv("COLUMNS");
  EXPECT_EQ(Progress::TerminalColumns(-1), 80);
  if (saved) ::setenv("COLUMNS", keep.c_str(), 1);
}

}  // namespace
}  // namespace dfarm::harness
