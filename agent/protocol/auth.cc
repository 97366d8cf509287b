#include "agent/protocol/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/base/regular_file.h"
#include "agent/base/unique_fd.h"

namespace dfarm::agent {
namespace {

constexpr std::string_view kHostLabel = "dfarm-auth-v1 host";
constexpr std::string_view kAgentLabel = "dfarm-auth-v1 agent";

std::vector<uint8_t> Labelled(std::string_view label) {
  std::vector<uint8_t> out(label.begin(), label.end());
  out.push_back(0);
  return out;
}

// Refuses a token file that another user could read or replace, as ssh does
// for its keys: a leaked token lets anyone run code as the agent's user.
Result<void> CheckTokenFileIsPrivate(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return MakeError("token file '" + path + "' is not a regular file");
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return MakeError("token file '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                     ", not by this user (uid " + std::to_string(::geteuid()) +
                     "); use a token file of your own");
  }
  if ((st.st_mode & 077) == 0) return Ok();
  const char* how = (st.st_mode & 044) ? "readable" : (st.st_mode & 022) ? "writable" : "usable";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return MakeError("token file '" + path + "' is " + how + " by others (mode " + mode +
                   "); chmod 600 " + path);
}

}  // namespace

Result<std::string> ReadTokenFile(const std::string& path) {
  // A FIFO or device is refused by its type, without blocking in open().
  auto fd = OpenRegularFile(path, "token file");
  if (!fd) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) {
    return MakeError("cannot read token file '" + path + "': " + strerror(errno));
  }
  if (auto r = CheckTokenFileIsPrivate(path, st); !r) return r.error();
  std::string token;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError("cannot read token file '" + path + "': " + strerror(errno));
    if (n == 0) break;
    token.append(buf, static_cast<size_t>(n));
    if (token.size() > (1 << 20)) return MakeError("token file '" + path + "' is over 1 MiB");
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.size() < kMinTokenBytes) {
    return MakeError("token file '" + path + "' holds " + std::to_string(token.size()) +
                     " bytes; a token needs at least " + std::to_string(kMinTokenBytes));
  }
  return token;
}

std::vector<uint8_t> HmacSha256(std::string_view key, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  // Fails only on allocation failure, a programmer-level fault here.
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
           mac.data(), &len) == nullptr) {
    abort();
  }
  mac.resize(len);
  return mac;
}

Result<std::vector<uint8_t>> RandomBytes(size_t count) {
  std::vector<uint8_t> out(count);
  if (RAND_bytes(out.data(), static_cast<int>(count)) != 1) {
    return MakeError("cannot draw " + std::to_string(count) + " random bytes from OpenSSL");
  }
  return out;
}

std::vector<uint8_t> HostProof(std::string_view token,
                               const std::vector<uint8_t>& agent_challenge) {
  std::vector<uint8_t> data = Labelled(kHostLabel);
  data.insert(data.end(), agent_challenge.begin(), agent_challenge.end());
  return HmacSha256(token, data);
}

std::vector<uint8_t> AgentProof(std::string_view token, const std::vector<uint8_t>& host_challenge,
                                const std::vector<uint8_t>& agent_challenge) {
  std::vector<uint8_t> data = Labelled(kAgentLabel);
  data.insert(data.end(), host_challenge.begin(), host_challenge.end());
  data.insert(data.end(), agent_challenge.begin(), agent_challenge.end());
  return HmacSha256(token, data);
}

bool MacEquals(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::chrono::milliseconds AuthThrottle::DelayAfter(uint32_t failures) const {
  if (failures == 0) return std::chrono::milliseconds(0);
  auto delay = base_;
  for (uint32_t i = 1; i < failures && delay < max_delay_; ++i) delay *= 2;
  return std::min(delay, max_delay_);
}

std::chrono::milliseconds AuthThrottle::Admit(const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = peers_.find(address);
  if (it == peers_.end()) return std::chrono::milliseconds(0);
  Entry& e = it->second;
  auto now = Clock::now();
  auto slot = std::max(now, e.not_before);
  e.not_before = slot + DelayAfter(e.failures);
  return std::chrono::ceil<std::chrono::milliseconds>(slot - now);
}

std::pair<uint32_t, std::chrono::milliseconds> AuthThrottle::RecordFailure(
    const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (peers_.size() >= kMaxPeers && peers_.find(address) == peers_.end()) {
    auto stalest = std::min_element(peers_.begin(), peers_.end(), [](const auto& a, const auto& b) {
      return a.second.not_before < b.second.not_before;
    });
    peers_.erase(stalest);
  }
  Entry& e = peers_[address];
  ++e.failures;
  auto delay = DelayAfter(e.failures);
  e.not_before = std::max(e.not_before, Clock::now() + delay);
  return {e.failures, delay};
}

void AuthThrottle::RecordSuccess(const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  peers_.erase(address);
}

}  // namespace dfarm::agent
