#include "agent/protocol/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "agent/protocol/protocol.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

std::string Hex(const std::vector<uint8_t>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

std::vector<uint8_t> Vec(std::string_view s) { return {s.begin(), s.end()}; }

// RFC 4231, test case 2.
TEST(AuthTest, HmacSha256KnownAnswer) {
  EXPECT_EQ(Hex(HmacSha256("Jefe", Vec("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(AuthTest, ProofsDependOnTokenChallengeAndRole) {
  std::vector<uint8_t> a(kAuthChallengeBytes, 1), b(kAuthChallengeBytes, 2);
  auto proof = HostProof("0123456789abcdef", a);
  EXPECT_EQ(proof.size(), 32u);
  EXPECT_TRUE(MacEquals(proof, HostProof("0123456789abcdef", a)));
  EXPECT_FALSE(MacEquals(proof, HostProof("0123456789abcdeX", a)));
  EXPECT_FALSE(MacEquals(proof, HostProof("0123456789abcdef", b)));
  // The agent's proof over the same challenge is not the host's.
  EXPECT_FALSE(MacEquals(AgentProof("0123456789abcdef", {}, a), proof));
  EXPECT_FALSE(MacEquals(proof, {}));
  EXPECT_FALSE(MacEquals({}, {}));
}

TEST(AuthTest, RandomBytesDiffer) {
  auto a = RandomBytes(32), b = RandomBytes(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
}

TEST(AuthTest, TokenFile) {
  testing::TempDir dir;
  std::string path = dir.path() + "/token";
  testing::WriteFile(path, "s3cret-token-0123456789abcdef0123456789\n");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.message();
  EXPECT_EQ(*token, "s3cret-token-0123456789abcdef0123456789");

  testing::WriteFile(path, "short\n");
  token = ReadTokenFile(path);
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.message(), HasSubstr("holds 5 bytes; a token needs at least 32"));
  EXPECT_THAT(token.message(), HasSubstr(path));

  token = ReadTokenFile(dir.path() + "/missing");
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.message(), HasSubstr("cannot read token file"));
}

// A token others can read or write, or a 16-byte one, is refused.
TEST(AuthTest, TokenFileMustBePrivateAndLongEnough) {
  testing::TempDir dir;
  std::string path = dir.path() + "/token";
  testing::WriteFile(path, std::string(40, 't') + "\n");
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto token = ReadTokenFile(path);
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.message(),
            "token file '" + path + "' is readable by others (mode 0644); chmod 600 " + path);

  ASSERT_EQ(::chmod(path.c_str(), 0620), 0);
  token = ReadTokenFile(path);
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.message(), HasSubstr("is writable by others (mode 0620); chmod 600"));

  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_TRUE(ReadTokenFile(path).ok());

  testing::WriteFile(path, std::string(16, 'a'));
  token = ReadTokenFile(path);
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.message(), HasSubstr("holds 16 bytes; a token needs at least 32"));

  token = ReadTokenFile(dir.path());
  ASSERT_FALSE(token.ok());
  EXPECT_THAT(token.message(), HasSubstr("is not a regular file"));
}

// A FIFO named as the token file (by mistake or by someone else) is refused
// at once; opening it must not wait for a writer.
TEST(AuthTest, FifoTokenFileIsRefusedWithoutBlocking) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/token";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto read = std::async(std::launch::async, [&] { return ReadTokenFile(path); });
  if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // Hung in open(): unblock it with a writer so the test can end.
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    FAIL() << "ReadTokenFile blocked on a FIFO";
  }
  auto token = read.get();
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.message(), "token file '" + path + "' is not a regular file (it is a FIFO)");
}

TEST(AuthThrottleTest, DelayGrowsPerAddressAndSuccessClearsIt) {
  AuthThrottle throttle(milliseconds(100), milliseconds(350));
  EXPECT_EQ(throttle.Admit("10.0.0.1").count(), 0);
  auto [n1, d1] = throttle.RecordFailure("10.0.0.1");
  auto [n2, d2] = throttle.RecordFailure("10.0.0.1");
  auto [n3, d3] = throttle.RecordFailure("10.0.0.1");
  EXPECT_EQ(n1, 1u);
  EXPECT_EQ(n3, 3u);
  EXPECT_EQ(d1, milliseconds(100));
  EXPECT_EQ(d2, milliseconds(200));
  EXPECT_EQ(d3, milliseconds(350));  // capped
  EXPECT_GT(throttle.Admit("10.0.0.1").count(), 250);
  // A second attempt right away queues behind the first.
  EXPECT_GT(throttle.Admit("10.0.0.1").count(), 600);
  EXPECT_EQ(throttle.Admit("10.0.0.2").count(), 0);  // other addresses are not affected
  throttle.RecordSuccess("10.0.0.1");
  EXPECT_EQ(throttle.Admit("10.0.0.1").count(), 0);
}

}  // namespace
}  // namespace dfarm::agent
