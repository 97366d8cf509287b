#include "agent/base/regular_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace dfarm {
namespace {

TEST(ReadProcFileTest, ReadsALiveProcessesStat) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(::getpid()) + "/stat");
  EXPECT_EQ(text.rfind(std::to_string(::getpid()) + " (", 0), 0u) << text;
}

// A process gone between a /proc scan and the read is "", never an exception
// (the agent's descendant and record scans hit this while jobs end).
TEST(ReadProcFileTest, AGoneProcessReadsEmpty) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::string path = "/proc/" + std::to_string(child) + "/stat";
  EXPECT_FALSE(ReadProcFile(path).empty());
  ::kill(child, SIGKILL);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_EQ(ReadProcFile(path), "");
  EXPECT_EQ(ReadProcFile("/proc/no-such-process/stat"), "");
}

}  // namespace
}  // namespace dfarm
