// ArtifactStore: the agent's content-addressed store. Every artifact (runner
// build, model, ...) lives at <root>/artifacts/<sha256>; uploads go to
// <root>/tmp, are hashed while written, and only a complete file whose size
// and sha256 match is fsync'ed and renamed into place. Names are validated
// as 64 lowercase hex characters; no path ever comes from the wire.
//
// Thread-safe: concurrent uploads use distinct temp files and the final
// rename is atomic (two uploads of one sha256 both land the same bytes).
//
// Resumable uploads (ResumeUpload) write to <root>/partial/<sha256>, which
// outlives the connection and the agent, so a later upload of the same
// artifact continues where the last one stopped; the sha256 is still checked
// over the whole file before the rename. With a quota (SetQuota), room for an
// upload is made by evicting the least recently used artifacts and stale
// partial files; pinned artifacts (those a queued or running job needs) are
// never evicted.
//
// The store checks itself: before an artifact is reported present (Has) or
// handed out to be executed or loaded (PathOf), its bytes are hashed and
// compared with its name. Anything there that does not match (corrupt,
// truncated, planted; a folder, a FIFO or a link under the name) is deleted
// (a folder with what it holds), logged once and reported missing, so the host
// pushes it again. A check is remembered by the file's (inode, size, mtime, ctime), in
// memory and in <root>/verified/<sha256>, so an unchanged artifact is hashed
// once, not once per sweep. The store is private to the agent's user: folders
// 0700, artifacts 0600 (0700 for runners).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/base/result.h"
#include "agent/base/sha256.h"
#include "agent/base/unique_fd.h"

struct stat;

namespace dfarm::agent {

class ArtifactStore {
 public:
  static constexpr uint64_t kDefaultMaxArtifactBytes = uint64_t{2} << 30;  // 2 GiB

  // Opens (creating if needed, mode 0700) the store under root. Leftover temp
  // files from an interrupted upload are removed. Refuses a root or store
  // folder that is not owned by this user or that group or others can write,
  // with a message naming the folder and the fix ("chmod 700 DIR").
  static Result<std::unique_ptr<ArtifactStore>> Open(
      const std::string& root, uint64_t max_artifact_bytes = kDefaultMaxArtifactBytes);

  const std::string& root() const { return root_; }
  uint64_t max_artifact_bytes() const { return max_artifact_bytes_; }

  // True when the artifact is stored and its bytes hash to its name. False
  // for an invalid name, a missing artifact, and one found corrupt (which is
  // deleted and logged).
  bool Has(const std::string& sha256) const;

  // The path of a stored, verified artifact (as Has), or an error naming the
  // sha256 when the name is invalid or the artifact is missing or was corrupt.
  // For an artifact the quota evicted, the error says so: the quota, what the
  // room was made for, and to raise the agent's quota.
  Result<std::string> PathOf(const std::string& sha256) const;

  // Makes a stored artifact executable by this user only (0700), for runner builds.
  Result<void> MakeExecutable(const std::string& sha256) const;

  // Where a deleted corrupt artifact is reported, one line each (default: stderr).
  void SetLog(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  // Test hook: how many times a stored artifact was hashed to verify it.
  uint64_t verify_hashes() const { return verify_hashes_.load(); }

  // Disk quota over artifacts, partial and temp files, in bytes; 0 (the
  // default) means none. Enforced when an upload begins.
  void SetQuota(uint64_t bytes);
  uint64_t quota_bytes() const;
  // Bytes the store holds now (artifacts, partial and temp files).
  uint64_t UsedBytes() const;

  // Marks an artifact as recently used (for LRU eviction). No-op if absent.
  void Touch(const std::string& sha256);
  // Pinned artifacts are never evicted. Pins nest (a count per name). Pin
  // also touches the artifact.
  void Pin(const std::string& sha256);
  void Unpin(const std::string& sha256);

  // An upload in progress. Destroying it without a successful Commit()
  // discards the temp file.
  class Upload {
   public:
    ~Upload();
    // Appends data at offset, which must equal bytes_received().
    Result<void> Write(uint64_t offset, const uint8_t* data, size_t size);
    // Checks size and sha256, fsyncs and renames into place. On failure the
    // temp file is removed and the error names the artifact and the mismatch.
    // The store's lock is not held during the fsync: other uploads (and a
    // newer upload of this artifact, which then makes this Commit fail) go on.
    Result<void> Commit();
    uint64_t bytes_received() const;

   private:
    friend class ArtifactStore;
    Upload(ArtifactStore* store, std::string sha256, uint64_t size, std::string temp_path,
           UniqueFd fd, bool resumable);
    // With store_->mutex_ held. keep_data: leave a resumable partial file for later.
    void DiscardLocked(bool keep_data);
    Result<void> WriteLocked(uint64_t offset, const uint8_t* data, size_t size);
    // Commit's steps, with store_->mutex_ held. Seal: checks size and sha256,
    // refuses further writes and sets *sync_fd to a descriptor to fsync (left
    // empty when the artifact was already stored). Install: renames into place.
    Result<void> SealLocked(UniqueFd* sync_fd);
    Result<void> InstallLocked();
    bool OwnsPartialLocked() const;

    ArtifactStore* store_;  // not owned; outlives the upload
    std::string sha256_;
    uint64_t size_;
    std::string temp_path_;
    UniqueFd fd_;
    Sha256 hasher_;
    uint64_t received_ = 0;
    bool done_ = false;
    bool sealed_ = false;  // checked and being synced: no more writes
    bool resumable_ = false;
    bool already_stored_ = false;  // resumable upload of an artifact already in the store
  };

  // Starts an upload of `size` bytes claimed to hash to sha256. Fails for an
  // invalid name or a size above max_artifact_bytes().
  Result<std::unique_ptr<Upload>> BeginUpload(const std::string& sha256, uint64_t size);

  // Like BeginUpload, but resumable: bytes_received() of the new upload is
  // what an earlier, interrupted upload of this sha256 left in
  // <root>/partial (rehashed from disk; 0 when none, and size when the
  // artifact is already stored, in which case Commit() just succeeds). The
  // partial file survives the Upload unless the upload failed (size or hash
  // mismatch, disk error). A newer ResumeUpload of the same sha256 takes the
  // partial file over and closes the older Upload's file descriptor at once
  // (the older one may sit on a half-open connection for a long time); the
  // older Upload's later calls then fail. So once an artifact is in place, no
  // upload holds it open for writing, and executing it cannot fail with
  // ETXTBSY.
  Result<std::unique_ptr<Upload>> ResumeUpload(const std::string& sha256, uint64_t size);

  // Convenience for tests and local use: one-shot upload of bytes.
  Result<void> Put(const std::string& sha256, const std::string& bytes);

 private:
  ArtifactStore(std::string root, uint64_t max_artifact_bytes)
      : root_(std::move(root)), max_artifact_bytes_(max_artifact_bytes) {}
  std::string ArtifactPath(const std::string& sha256) const;
  std::string PartialPath(const std::string& sha256) const;
  std::string VerifiedPath(const std::string& sha256) const;

  // What a verification is remembered by: a file changed in place changes its
  // mtime or ctime (a rewrite also its inode), so an equal key means the same bytes.
  struct FileKey {
    uint64_t ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const FileKey&) const = default;
  };
  static FileKey KeyOf(const struct stat& st);
  // Ok when the artifact is stored and hashes to its name; else why not. A
  // mismatch deletes the file (DeleteCorrupt).
  Result<void> Verify(const std::string& sha256) const;
  bool KnownGood(const std::string& sha256, const FileKey& key) const;
  void RememberGood(const std::string& sha256, const FileKey& key) const;
  void ForgetLocked(const std::string& sha256) const;  // verified_mutex_ held
  // After the store itself changed a verified artifact's times or mode
  // (touch, chmod): the check still holds if the file was `before`.
  void Restamp(const std::string& sha256, const FileKey& before) const;
  void DeleteCorrupt(const std::string& sha256, const FileKey& key, const std::string& why) const;
  Result<void> CheckUpload(const std::string& sha256, uint64_t size) const;
  static Result<UniqueFd> OpenPartial(const std::string& path);
  // "artifact SHA is not in the store", and why when the quota evicted it.
  std::string MissingMessage(const std::string& sha256) const;
  // Makes room for `need` more bytes under the quota (mutex_ held), evicting
  // unpinned artifacts and unowned partial files, least recently used first.
  Result<void> ReserveLocked(const std::string& sha256, uint64_t need);
  void TouchPath(const std::string& path);

  std::string root_;
  uint64_t max_artifact_bytes_;
  mutable std::mutex mutex_;  // guards everything below and all upload I/O
  uint64_t quota_bytes_ = 0;
  std::map<std::string, int> pins_;
  std::set<const Upload*> active_;                // unfinished uploads
  std::map<std::string, Upload*> partial_owner_;  // sha256 -> resumable upload
  // Artifacts the quota evicted (and not stored again since) -> why, for the
  // "not in the store" message; the oldest names are forgotten past the cap.
  static constexpr size_t kMaxEvictedRemembered = 1024;
  std::map<std::string, std::string> evicted_;
  std::atomic<int64_t> last_touch_ns_{0};  // keeps touch times strictly increasing

  // Lock order: mutex_, then verified_mutex_. Hashing happens under neither.
  mutable std::mutex verified_mutex_;
  mutable std::map<std::string, FileKey> verified_;  // sha256 -> file as it was verified
  mutable std::atomic<uint64_t> verify_hashes_{0};
  std::function<void(const std::string&)> log_;
};

// Pins an artifact for the lifetime of the guard.
class ArtifactPin {
 public:
  ArtifactPin(ArtifactStore* store, std::string sha256)
      : store_(store), sha256_(std::move(sha256)) {
    store_->Pin(sha256_);
  }
  ~ArtifactPin() { store_->Unpin(sha256_); }
  ArtifactPin(const ArtifactPin&) = delete;
  ArtifactPin& operator=(const ArtifactPin&) = delete;

 private:
  ArtifactStore* store_;
  std::string sha256_;
};

}  // namespace dfarm::agent
