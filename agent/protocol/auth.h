// Token authentication of the agent protocol (agent/protocol/PROTOCOL.md, feature
// "auth_hmac"): a shared secret read from a token file, HMAC-SHA256 proofs
// over random challenges (OpenSSL libcrypto), a constant-time comparison, and
// the per-address throttle the agent applies to failed attempts.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::agent {

// Shortest token accepted, in bytes (`openssl rand -hex 32` writes 64).
inline constexpr size_t kMinTokenBytes = 32;

// Reads a token file: its contents without trailing whitespace (a final
// newline). Fails, naming the file and the fix, when it cannot be read, is not
// a regular file, is owned by another user (root excepted), is readable or
// writable by group or others ("token file 'x' is readable by others (mode
// 0644); chmod 600 x"), or holds fewer than kMinTokenBytes bytes.
Result<std::string> ReadTokenFile(const std::string& path);

// HMAC-SHA256(key, data), 32 bytes.
std::vector<uint8_t> HmacSha256(std::string_view key, const std::vector<uint8_t>& data);

// `count` bytes from OpenSSL's CSPRNG, or an error.
Result<std::vector<uint8_t>> RandomBytes(size_t count);

// The proofs of PROTOCOL.md. The role labels differ so that one side's proof
// can never be replayed as the other's.
std::vector<uint8_t> HostProof(std::string_view token, const std::vector<uint8_t>& agent_challenge);
std::vector<uint8_t> AgentProof(std::string_view token, const std::vector<uint8_t>& host_challenge,
                                const std::vector<uint8_t>& agent_challenge);

// Constant-time equality (CRYPTO_memcmp); false when the sizes differ.
bool MacEquals(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

// Failed authentications per peer address (without port). After n failures
// the next attempt from that address waits base * 2^(n-1), at most max_delay;
// a success clears the address. Thread-safe. Remembers at most kMaxPeers
// addresses (the stalest is forgotten first).
class AuthThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPeers = 4096;

  explicit AuthThrottle(std::chrono::milliseconds base = std::chrono::milliseconds(200),
                        std::chrono::milliseconds max_delay = std::chrono::milliseconds(10'000))
      : base_(base), max_delay_(max_delay) {}

  // Admits one attempt from address: returns how long it must wait first (0
  // when the address has no failures). Concurrent attempts from one address
  // are spaced out by the current delay, so parallel guesses gain nothing.
  std::chrono::milliseconds Admit(const std::string& address);
  // Records a failure; returns the failure count and the delay imposed on the next attempt.
  std::pair<uint32_t, std::chrono::milliseconds> RecordFailure(const std::string& address);
  void RecordSuccess(const std::string& address);

 private:
  struct Entry {
    uint32_t failures = 0;
    Clock::time_point not_before;
  };
  std::chrono::milliseconds DelayAfter(uint32_t failures) const;

  std::chrono::milliseconds base_, max_delay_;
  std::mutex mutex_;
  std::map<std::string, Entry> peers_;
};

}  // namespace dfarm::agent
