// ArtifactStore: the agent's content-addressed store. Every artifact (runner
// build, model, ...) lives at <root>/artifacts/<sha256>; uploads go to
// <root>/tmp, are hashed while written, and only a complete file whose size
// and sha256 match is fsync'ed and renamed into place. Names are validated
// as 64 lowercase hex characters; no path ever comes from the wire.
//
// Thread-safe: concurrent uploads use distinct temp files and the final
// rename is atomic (two uploads of one sha256 both land the same bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "agent/result.h"
#include "agent/sha256.h"
#include "agent/unique_fd.h"

namespace dfarm::agent {

class ArtifactStore {
 public:
  static constexpr uint64_t kDefaultMaxArtifactBytes = uint64_t{2} << 30;  // 2 GiB

  // Opens (creating if needed) the store under root. Leftover temp files from
  // an interrupted upload are removed.
  static Result<std::unique_ptr<ArtifactStore>> Open(
      const std::string& root, uint64_t max_artifact_bytes = kDefaultMaxArtifactBytes);

  const std::string& root() const { return root_; }
  uint64_t max_artifact_bytes() const { return max_artifact_bytes_; }

  // False for an invalid name as well as for a missing artifact.
  bool Has(const std::string& sha256) const;

  // The path of a stored artifact, or an error naming the sha256 when the
  // name is invalid or the artifact is missing.
  Result<std::string> PathOf(const std::string& sha256) const;

  // Makes a stored artifact executable (0755), for runner builds.
  Result<void> MakeExecutable(const std::string& sha256) const;

  // An upload in progress. Destroying it without a successful Commit()
  // discards the temp file.
  class Upload {
   public:
    ~Upload();
    // Appends data at offset, which must equal bytes_received().
    Result<void> Write(uint64_t offset, const uint8_t* data, size_t size);
    // Checks size and sha256, fsyncs and renames into place. On failure the
    // temp file is removed and the error names the artifact and the mismatch.
    Result<void> Commit();
    uint64_t bytes_received() const { return received_; }

   private:
    friend class ArtifactStore;
    Upload(const ArtifactStore* store, std::string sha256, uint64_t size, std::string temp_path,
           UniqueFd fd);
    void Discard();

    const ArtifactStore* store_;  // not owned; outlives the upload
    std::string sha256_;
    uint64_t size_;
    std::string temp_path_;
    UniqueFd fd_;
    Sha256 hasher_;
    uint64_t received_ = 0;
    bool done_ = false;
  };

  // Starts an upload of `size` bytes claimed to hash to sha256. Fails for an
  // invalid name or a size above max_artifact_bytes().
  Result<std::unique_ptr<Upload>> BeginUpload(const std::string& sha256, uint64_t size);

  // Convenience for tests and local use: one-shot upload of bytes.
  Result<void> Put(const std::string& sha256, const std::string& bytes);

 private:
  ArtifactStore(std::string root, uint64_t max_artifact_bytes)
      : root_(std::move(root)), max_artifact_bytes_(max_artifact_bytes) {}
  std::string ArtifactPath(const std::string& sha256) const;

  std::string root_;
  uint64_t max_artifact_bytes_;
};

}  // namespace dfarm::agent
