// Streaming sha256 (OpenSSL EVP) with lowercase-hex output, and the rule for
// artifact names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/base/result.h"

namespace dfarm::agent {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Lowercase hex of the digest; the hasher is spent afterwards.
  std::string FinishHex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// True for exactly 64 lowercase hex characters: the only artifact names the
// agent accepts, so no path ever comes from the wire.
bool IsValidSha256(std::string_view name);

// sha256 of a file as lowercase hex (OpenSSL), or an error naming the file.
Result<std::string> Sha256File(const std::string& path);

}  // namespace dfarm::agent
