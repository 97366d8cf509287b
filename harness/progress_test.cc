#include "harness/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

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

}  // namespace
}  // namespace dfarm::harness
