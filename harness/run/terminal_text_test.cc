#include "harness/run/terminal_text.h"

#include <gtest/gtest.h>

#include <string>

namespace dfarm::harness {
namespace {

TEST(TerminalSafeTest, PlainTextIsUnchanged) {
  EXPECT_EQ(TerminalSafe("Linux 6.1.0 x86_64, caf\xc3\xa9 \xe2\x82\xac"),
            "Linux 6.1.0 x86_64, caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(TerminalSafe(""), "");
}

TEST(TerminalSafeTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(TerminalSafe("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(TerminalSafe("one\ntwo\r\tthree\x7f"), "one\\x0atwo\\x0d\\x09three\\x7f");
  EXPECT_EQ(TerminalSafe(std::string("nul\0x", 5)), "nul\\x00x");
}

TEST(TerminalSafeTest, C1ControlsBidiOverridesAndBadUtf8AreEscaped) {
  EXPECT_EQ(TerminalSafe("a\xc2\x9b"
                         "31mb"),
            "a\\u009b31mb");                                   // C1 CSI
  EXPECT_EQ(TerminalSafe("x\xe2\x80\xaey"), "x\\u202ey");      // RLO
  EXPECT_EQ(TerminalSafe("\x9b\xff\xc3"), "\\x9b\\xff\\xc3");  // not UTF-8
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

TEST(TerminalSafeTest, LongTextIsCutAtAWholeUnitAndSaysItsLength) {
  std::string big(100 * 1024, 'c');
  std::string safe = TerminalSafe(big, 64);
  EXPECT_LE(safe.size(), 64u);
  EXPECT_EQ(safe, std::string(64 - 17, 'c') + "...(102400 bytes)");
  // An escape is never cut in two.
  std::string esc(40, '\x1b');
  safe = TerminalSafe(esc, 32);
  EXPECT_LE(safe.size(), 32u);
  EXPECT_EQ(safe, "\\x1b\\x1b\\x1b\\x1b...(40 bytes)");
  // Exactly at the limit nothing is cut.
  EXPECT_EQ(TerminalSafe(std::string(32, 'x'), 32), std::string(32, 'x'));
  // The default bound.
  EXPECT_LE(TerminalSafe(big).size(), kTerminalFieldBytes);
}

}  // namespace
}  // namespace dfarm::harness
