#include "agent/daemon/artifact_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

namespace dfarm::agent {
namespace fs = std::filesystem;

namespace {

std::string Errno() { return strerror(errno); }

// Short form of an artifact name for messages.
std::string Short(const std::string& sha256) { return sha256.substr(0, 12); }

int64_t MtimeNs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

int64_t CtimeNs(const struct stat& st) {
  return int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
}

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Creates dir (0700) if missing; refuses one this user does not own or that
// group or others can write (anyone who can write it could plant or swap the
// runner the agent executes); takes group and others' access away from one of
// ours (stores made before the store was private).
Result<void> OpenPrivateDir(const std::string& dir, bool tighten) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create artifact store '" + dir + "': " + Errno());
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return MakeError("cannot open artifact store '" + dir + "': " + Errno());
  }
  if (!S_ISDIR(st.st_mode)) return MakeError("artifact store '" + dir + "' is not a folder");
  if (st.st_uid != ::geteuid()) {
    return MakeError("artifact store '" + dir + "' is owned by uid " + std::to_string(st.st_uid) +
                     ", not by this agent's user (uid " + std::to_string(::geteuid()) +
                     "); give the agent a folder of its own");
  }
  if ((st.st_mode & 022) != 0) {
    return MakeError("artifact store '" + dir + "' is writable by " +
                     ((st.st_mode & 002) ? "others" : "its group") + " (mode " + Octal(st.st_mode) +
                     "); chmod 700 " + dir);
  }
  if (tighten && (st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    return MakeError("cannot make artifact store '" + dir + "' private: " + Errno());
  }
  return Ok();
}

// Removes whatever is at path: a file, a link, or a folder with all it holds
// (something planted under an artifact's name). True when nothing is left.
bool RemoveEntry(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return true;
  std::error_code ec;
  fs::remove_all(path, ec);
  struct stat st;
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

}  // namespace

Result<std::unique_ptr<ArtifactStore>> ArtifactStore::Open(const std::string& root,
                                                           uint64_t max_artifact_bytes) {
  std::error_code ec;
  std::string trimmed = root;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  fs::path parent = fs::path(trimmed).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return MakeError("cannot create artifact store '" + root + "': " + ec.message());
  if (auto r = OpenPrivateDir(trimmed, /*tighten=*/false); !r) return r.error();
  for (const char* sub : {"artifacts", "tmp", "partial", "verified"}) {
    if (auto r = OpenPrivateDir((fs::path(trimmed) / sub).string(), /*tighten=*/true); !r) {
      return r.error();
    }
  }
  // Temp files of one-shot uploads are useless after a restart; partial files
  // are kept for resumption.
  for (const auto& entry : fs::directory_iterator(fs::path(root) / "tmp", ec)) {
    fs::remove(entry.path(), ec);
  }
  // Loads the hash implementation now (OpenSSL reads its configuration on
  // first use), not inside the first upload.
  Sha256().FinishHex();
  std::string abs = fs::absolute(root, ec).lexically_normal().string();
  if (ec) abs = root;
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return std::unique_ptr<ArtifactStore>(new ArtifactStore(abs, max_artifact_bytes));
}

std::string ArtifactStore::ArtifactPath(const std::string& sha256) const {
  return root_ + "/artifacts/" + sha256;
}

std::string ArtifactStore::PartialPath(const std::string& sha256) const {
  return root_ + "/partial/" + sha256;
}

std::string ArtifactStore::VerifiedPath(const std::string& sha256) const {
  return root_ + "/verified/" + sha256;
}

ArtifactStore::FileKey ArtifactStore::KeyOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size), MtimeNs(st),
          CtimeNs(st)};
}

bool ArtifactStore::KnownGood(const std::string& sha256, const FileKey& key) const {
  std::lock_guard<std::mutex> lock(verified_mutex_);
  auto it = verified_.find(sha256);
  if (it != verified_.end()) return it->second == key;
  // Checked by an earlier agent run?
  std::ifstream in(VerifiedPath(sha256));
  FileKey saved;
  if (!(in >> saved.ino >> saved.size >> saved.mtime_ns >> saved.ctime_ns) || !(saved == key)) {
    return false;
  }
  verified_[sha256] = key;
  return true;
}

void ArtifactStore::RememberGood(const std::string& sha256, const FileKey& key) const {
  std::lock_guard<std::mutex> lock(verified_mutex_);
  verified_[sha256] = key;
  std::string path = VerifiedPath(sha256);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  std::string text = std::to_string(key.ino) + " " + std::to_string(key.size) + " " +
                     std::to_string(key.mtime_ns) + " " + std::to_string(key.ctime_ns) + "\n";
  // Best effort: without the record the next agent run hashes the file again.
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    ::unlink(path.c_str());
  }
}

void ArtifactStore::ForgetLocked(const std::string& sha256) const {
  verified_.erase(sha256);
  ::unlink(VerifiedPath(sha256).c_str());
}

void ArtifactStore::Restamp(const std::string& sha256, const FileKey& before) const {
  struct stat st;
  if (!KnownGood(sha256, before) || ::lstat(ArtifactPath(sha256).c_str(), &st) != 0) return;
  RememberGood(sha256, KeyOf(st));
}

void ArtifactStore::DeleteCorrupt(const std::string& sha256, const FileKey& key,
                                  const std::string& why) const {
  {
    // Under mutex_, so an upload cannot rename good bytes into place between
    // the check of the inode and the unlink.
    std::lock_guard<std::mutex> lock(mutex_);
    std::string path = ArtifactPath(sha256);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !(KeyOf(st) == key)) return;  // replaced meanwhile
    if (!RemoveEntry(path)) return;
    std::lock_guard<std::mutex> vlock(verified_mutex_);
    ForgetLocked(sha256);
  }
  std::string line = "artifact " + Short(sha256) + " in store '" + root_ + "' is corrupt: " + why +
                     "; deleted it, so the host pushes it again";
  if (log_) {
    log_(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

std::string ArtifactStore::MissingMessage(const std::string& sha256) const {
  std::string missing = "artifact " + sha256 + " is not in the store";
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = evicted_.find(sha256);
  if (it == evicted_.end()) return missing;
  return missing + ": " + it->second + "; raise the agent's store quota (dfarm-agent --quota-mib)";
}

Result<void> ArtifactStore::Verify(const std::string& sha256) const {
  const std::string path = ArtifactPath(sha256);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!fd) {
    if (errno == ENOENT) return MakeError(MissingMessage(sha256));
    if (errno == ELOOP && ::lstat(path.c_str(), &st) == 0) {
      DeleteCorrupt(sha256, KeyOf(st), "it is a symbolic link");
      return MakeError(MissingMessage(sha256));
    }
    return MakeError("cannot read artifact " + sha256 + ": " + Errno());
  }
  if (::fstat(fd.get(), &st) != 0)
    return MakeError("cannot read artifact " + sha256 + ": " + Errno());
  const FileKey key = KeyOf(st);
  if (!S_ISREG(st.st_mode)) {
    DeleteCorrupt(sha256, key, "it is not a regular file");
    return MakeError(MissingMessage(sha256));
  }
  if (KnownGood(sha256, key)) return Ok();
  verify_hashes_.fetch_add(1);
  Sha256 hasher;
  std::vector<uint8_t> buf(1 << 16);
  uint64_t read_bytes = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError("cannot read artifact " + sha256 + ": " + Errno());
    if (n == 0) break;
    hasher.Update(buf.data(), static_cast<size_t>(n));
    read_bytes += static_cast<uint64_t>(n);
  }
  std::string actual = hasher.FinishHex();
  if (actual != sha256 || read_bytes != key.size) {
    DeleteCorrupt(sha256, key,
                  "its " + std::to_string(read_bytes) + " bytes hash to " + Short(actual));
    return MakeError(MissingMessage(sha256));
  }
  RememberGood(sha256, key);
  return Ok();
}

bool ArtifactStore::Has(const std::string& sha256) const {
  return IsValidSha256(sha256) && Verify(sha256).ok();
}

Result<std::string> ArtifactStore::PathOf(const std::string& sha256) const {
  if (!IsValidSha256(sha256)) {
    return MakeError("invalid artifact name '" + sha256.substr(0, 80) +
                     "': expected 64 lowercase hex characters");
  }
  if (auto r = Verify(sha256); !r) return r.error();
  return ArtifactPath(sha256);
}

Result<void> ArtifactStore::MakeExecutable(const std::string& sha256) const {
  auto path = PathOf(sha256);
  if (!path) return path.error();
  struct stat st;
  if (::lstat(path->c_str(), &st) == 0 && (st.st_mode & 07777) == 0700) return Ok();
  if (::chmod(path->c_str(), 0700) != 0) {
    return MakeError("cannot make artifact " + sha256 + " executable: " + Errno());
  }
  Restamp(sha256, KeyOf(st));
  return Ok();
}

void ArtifactStore::SetQuota(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  quota_bytes_ = bytes;
}

uint64_t ArtifactStore::quota_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return quota_bytes_;
}

uint64_t ArtifactStore::UsedBytes() const {
  uint64_t used = 0;
  std::error_code ec;
  for (const char* sub : {"artifacts", "partial", "tmp"}) {
    for (const auto& e : fs::directory_iterator(fs::path(root_) / sub, ec)) {
      struct stat st;
      if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        used += static_cast<uint64_t>(st.st_size);
      }
    }
  }
  return used;
}

// Touch times come from the realtime clock but are kept strictly increasing,
// so the LRU order is exact even when the file system's own clock is coarse.
void ArtifactStore::TouchPath(const std::string& path) {
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  int64_t ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  int64_t last = last_touch_ns_.load();
  while (!last_touch_ns_.compare_exchange_weak(last, std::max(ns, last + 1))) {
  }
  ns = std::max(ns, last + 1);
  timespec times[2] = {{ns / 1'000'000'000, ns % 1'000'000'000},
                       {ns / 1'000'000'000, ns % 1'000'000'000}};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

void ArtifactStore::Touch(const std::string& sha256) {
  if (!IsValidSha256(sha256)) return;
  struct stat st;
  if (::lstat(ArtifactPath(sha256).c_str(), &st) != 0) return;
  TouchPath(ArtifactPath(sha256));
  Restamp(sha256, KeyOf(st));
}

void ArtifactStore::Pin(const std::string& sha256) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pins_[sha256];
  }
  Touch(sha256);
}

void ArtifactStore::Unpin(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pins_.find(sha256);
  if (it != pins_.end() && --it->second <= 0) pins_.erase(it);
}

Result<void> ArtifactStore::ReserveLocked(const std::string& sha256, uint64_t need) {
  if (quota_bytes_ == 0) return Ok();
  if (need > quota_bytes_) {
    return MakeError("artifact " + Short(sha256) + " needs " + std::to_string(need) +
                     " bytes, more than the store quota of " + std::to_string(quota_bytes_) +
                     " bytes");
  }
  uint64_t outstanding = 0;
  for (const Upload* u : active_) {
    if (u->sha256_ != sha256) outstanding += u->size_ - std::min(u->size_, u->received_);
  }
  struct Candidate {
    int64_t mtime_ns;
    uint64_t bytes;
    std::string path;
  };
  std::vector<Candidate> candidates;
  uint64_t used = 0;
  std::error_code ec;
  for (const char* sub : {"artifacts", "partial", "tmp"}) {
    for (const auto& e : fs::directory_iterator(fs::path(root_) / sub, ec)) {
      struct stat st;
      if (::lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      used += static_cast<uint64_t>(st.st_size);
      std::string name = e.path().filename().string();
      bool evictable = false;
      if (std::string(sub) == "artifacts") {
        evictable = pins_.count(name) == 0;
      } else if (std::string(sub) == "partial") {
        evictable = name != sha256 && partial_owner_.count(name) == 0;
      }
      if (evictable) {
        candidates.push_back({MtimeNs(st), static_cast<uint64_t>(st.st_size), e.path().string()});
      }
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.mtime_ns < b.mtime_ns; });
  uint64_t evictable = 0;
  for (const Candidate& c : candidates) evictable += c.bytes;
  if (used - std::min(used, evictable) + outstanding + need > quota_bytes_) {
    return MakeError("no room for artifact " + Short(sha256) + " (" + std::to_string(need) +
                     " bytes) under the store quota of " + std::to_string(quota_bytes_) +
                     " bytes: " + std::to_string(used - std::min(used, evictable) + outstanding) +
                     " bytes are pinned by jobs or held by uploads in progress");
  }
  size_t next = 0;
  while (used + outstanding + need > quota_bytes_ && next < candidates.size()) {
    const Candidate& c = candidates[next++];
    if (::unlink(c.path.c_str()) != 0) continue;
    used -= std::min(used, c.bytes);
    if (fs::path(c.path).parent_path().filename() == "artifacts") {
      const std::string name = fs::path(c.path).filename().string();
      if (evicted_.size() >= kMaxEvictedRemembered) evicted_.erase(evicted_.begin());
      evicted_[name] = "the store quota of " + std::to_string(quota_bytes_) +
                       " bytes evicted it (" + std::to_string(c.bytes) +
                       " bytes, least recently used) to make room for " + "artifact " +
                       Short(sha256) + " (" + std::to_string(need) + " bytes)";
      std::lock_guard<std::mutex> vlock(verified_mutex_);
      ForgetLocked(name);
    }
  }
  if (used + outstanding + need > quota_bytes_) {
    return MakeError("no room for artifact " + Short(sha256) + ": cannot free space in '" + root_ +
                     "'");
  }
  return Ok();
}

Result<void> ArtifactStore::CheckUpload(const std::string& sha256, uint64_t size) const {
  if (!IsValidSha256(sha256)) {
    return MakeError("invalid artifact name '" + sha256.substr(0, 80) +
                     "': expected 64 lowercase hex characters");
  }
  if (size > max_artifact_bytes_) {
    return MakeError("artifact " + Short(sha256) + " of " + std::to_string(size) +
                     " bytes exceeds the store limit of " + std::to_string(max_artifact_bytes_) +
                     " bytes");
  }
  return Ok();
}

Result<std::unique_ptr<ArtifactStore::Upload>> ArtifactStore::BeginUpload(const std::string& sha256,
                                                                          uint64_t size) {
  if (auto r = CheckUpload(sha256, size); !r) return r.error();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto r = ReserveLocked(sha256, size); !r) return r.error();
  std::string temp = root_ + "/tmp/" + sha256 + ".XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return MakeError("cannot create a temp file in '" + root_ + "/tmp': " + Errno());
  std::unique_ptr<Upload> up(new Upload(this, sha256, size, temp, UniqueFd(fd), false));
  active_.insert(up.get());
  return up;
}

// The partial file at path, opened read-write (created when missing). Anything
// else under its name (a folder, a FIFO, a link) is removed and a file made.
Result<UniqueFd> ArtifactStore::OpenPartial(const std::string& path) {
  const int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  UniqueFd fd(::open(path.c_str(), flags, 0600));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    fd.reset();
    RemoveEntry(path);
    fd.reset(::open(path.c_str(), flags | O_EXCL, 0600));
    if (!fd) return MakeError("cannot open partial upload '" + path + "': " + Errno());
  }
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0) {
    return MakeError("cannot open partial upload '" + path + "': " + Errno());
  }
  return fd;
}

Result<std::unique_ptr<ArtifactStore::Upload>> ArtifactStore::ResumeUpload(
    const std::string& sha256, uint64_t size) {
  if (auto r = CheckUpload(sha256, size); !r) return r.error();
  if (Has(sha256)) {
    std::unique_ptr<Upload> up(new Upload(this, sha256, size, "", UniqueFd(), true));
    up->already_stored_ = true;
    up->received_ = size;
    return up;
  }
  std::unique_ptr<Upload> up;  // declared first: destroyed (and locking) after the lock is gone
  std::lock_guard<std::mutex> lock(mutex_);
  std::string path = PartialPath(sha256);
  auto opened = OpenPartial(path);
  if (!opened) return opened.error();
  UniqueFd fd = std::move(*opened);
  struct stat st;
  if (::fstat(fd.get(), &st) == 0 && static_cast<uint64_t>(st.st_size) > size &&
      ::ftruncate(fd.get(), 0) != 0) {  // longer than announced: stale
    return MakeError("cannot reset partial upload '" + path + "': " + Errno());
  }
  up.reset(new Upload(this, sha256, size, path, std::move(fd), true));
  // Rehash what is there, leaving the file offset at its end.
  std::vector<uint8_t> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(up->fd_.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError("cannot read partial upload '" + path + "': " + Errno());
    if (n == 0) break;
    up->hasher_.Update(buf.data(), static_cast<size_t>(n));
    up->received_ += static_cast<uint64_t>(n);
  }
  // On failure the partial file stays: the upload may be retried later.
  if (auto r = ReserveLocked(sha256, size - up->received_); !r) return r.error();
  // A newer upload takes over from an older one, whose descriptor is closed
  // now: it must not outlive the rename of this file into place.
  if (auto it = partial_owner_.find(sha256); it != partial_owner_.end()) it->second->fd_.reset();
  partial_owner_[sha256] = up.get();
  active_.insert(up.get());
  TouchPath(path);
  return up;
}

Result<void> ArtifactStore::Put(const std::string& sha256, const std::string& bytes) {
  auto upload = BeginUpload(sha256, bytes.size());
  if (!upload) return upload.error();
  if (auto r = (*upload)->Write(0, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      !r) {
    return r;
  }
  return (*upload)->Commit();
}

ArtifactStore::Upload::Upload(ArtifactStore* store, std::string sha256, uint64_t size,
                              std::string temp_path, UniqueFd fd, bool resumable)
    : store_(store),
      sha256_(std::move(sha256)),
      size_(size),
      temp_path_(std::move(temp_path)),
      fd_(std::move(fd)),
      resumable_(resumable) {}

ArtifactStore::Upload::~Upload() {
  std::lock_guard<std::mutex> lock(store_->mutex_);
  DiscardLocked(/*keep_data=*/resumable_);
}

uint64_t ArtifactStore::Upload::bytes_received() const {
  std::lock_guard<std::mutex> lock(store_->mutex_);
  return received_;
}

bool ArtifactStore::Upload::OwnsPartialLocked() const {
  auto it = store_->partial_owner_.find(sha256_);
  return it != store_->partial_owner_.end() && it->second == this;
}

void ArtifactStore::Upload::DiscardLocked(bool keep_data) {
  store_->active_.erase(this);
  if (done_) return;
  done_ = true;
  fd_.reset();
  if (already_stored_) return;
  if (resumable_) {
    if (!OwnsPartialLocked()) return;  // taken over by a newer upload: not ours to touch
    store_->partial_owner_.erase(sha256_);
    if (keep_data) return;
  }
  ::unlink(temp_path_.c_str());
}

Result<void> ArtifactStore::Upload::Write(uint64_t offset, const uint8_t* data, size_t size) {
  std::lock_guard<std::mutex> lock(store_->mutex_);
  return WriteLocked(offset, data, size);
}

Result<void> ArtifactStore::Upload::WriteLocked(uint64_t offset, const uint8_t* data, size_t size) {
  if (done_ || sealed_)
    return MakeError("upload of artifact " + Short(sha256_) + " is already finished");
  if (resumable_ && !already_stored_ && !OwnsPartialLocked()) {
    done_ = true;
    store_->active_.erase(this);
    return MakeError("upload of artifact " + Short(sha256_) +
                     " was taken over by a newer upload of the same artifact");
  }
  if (offset != received_) {
    return MakeError("upload of artifact " + Short(sha256_) + ": chunk at offset " +
                     std::to_string(offset) + ", expected offset " + std::to_string(received_));
  }
  if (size > size_ - received_) {
    DiscardLocked(/*keep_data=*/false);
    return MakeError("upload of artifact " + Short(sha256_) + ": size mismatch: more than the " +
                     std::to_string(size_) + " bytes announced");
  }
  if (already_stored_) return Ok();
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd_.get(), data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string why = Errno();
      DiscardLocked(/*keep_data=*/false);
      return MakeError("cannot write artifact " + Short(sha256_) + " to '" + temp_path_ +
                       "': " + why);
    }
    done += static_cast<size_t>(n);
  }
#ifdef __linux__
  // Starts writing these bytes to disk now, while the next ones arrive, so
  // the fsync at Commit waits for little more than the journal: a push is
  // bound by the slower of disk and link, not by their sum. Advisory.
  ::sync_file_range(fd_.get(), static_cast<off_t>(received_), static_cast<off_t>(size),
                    SYNC_FILE_RANGE_WRITE);
#endif
  hasher_.Update(data, size);
  received_ += size;
  return Ok();
}

Result<void> ArtifactStore::Upload::Commit() {
  UniqueFd sync_fd;
  {
    std::lock_guard<std::mutex> lock(store_->mutex_);
    if (auto r = SealLocked(&sync_fd); !r || !sync_fd) return r;
  }
  // The fsync runs without the store lock, so other uploads and lookups go
  // on meanwhile; sealed_ keeps further writes to this upload out.
  if (::fsync(sync_fd.get()) != 0) {
    std::string why = Errno();
    std::lock_guard<std::mutex> lock(store_->mutex_);
    DiscardLocked(/*keep_data=*/false);
    return MakeError("cannot fsync artifact " + Short(sha256_) + ": " + why);
  }
  // Closed before the rename: no descriptor open for writing may outlive it.
  sync_fd.reset();
  std::lock_guard<std::mutex> lock(store_->mutex_);
  return InstallLocked();
}

Result<void> ArtifactStore::Upload::SealLocked(UniqueFd* sync_fd) {
  if (done_ || sealed_) {
    return MakeError("upload of artifact " + Short(sha256_) + " is already finished");
  }
  if (already_stored_) {
    done_ = true;
    return Ok();
  }
  if (resumable_ && !OwnsPartialLocked()) {
    done_ = true;
    store_->active_.erase(this);
    return MakeError("upload of artifact " + Short(sha256_) +
                     " was taken over by a newer upload of the same artifact");
  }
  if (received_ != size_) {
    DiscardLocked(/*keep_data=*/false);
    return MakeError("upload of artifact " + Short(sha256_) + ": size mismatch: announced " +
                     std::to_string(size_) + " bytes, received " + std::to_string(received_));
  }
  std::string actual = hasher_.FinishHex();
  if (actual != sha256_) {
    DiscardLocked(/*keep_data=*/false);
    return MakeError("upload of artifact " + Short(sha256_) + ": sha256 mismatch: the " +
                     std::to_string(received_) + " bytes received hash to " + actual);
  }
  sync_fd->reset(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (::fchmod(fd_.get(), 0600) != 0 || !*sync_fd) {
    std::string why = Errno();
    sync_fd->reset();
    DiscardLocked(/*keep_data=*/false);
    return MakeError("cannot fsync artifact " + Short(sha256_) + ": " + why);
  }
  sealed_ = true;
  return Ok();
}

Result<void> ArtifactStore::Upload::InstallLocked() {
  if (resumable_ && !OwnsPartialLocked()) {
    done_ = true;
    store_->active_.erase(this);
    return MakeError("upload of artifact " + Short(sha256_) +
                     " was taken over by a newer upload of the same artifact while it was synced");
  }
  std::string final_path = store_->ArtifactPath(sha256_);
  struct stat in_place;
  if (::lstat(final_path.c_str(), &in_place) == 0 && S_ISDIR(in_place.st_mode)) {
    RemoveEntry(final_path);  // a folder planted under the name: rename cannot replace it
  }
  if (::rename(temp_path_.c_str(), final_path.c_str()) != 0) {
    std::string why = Errno();
    DiscardLocked(/*keep_data=*/false);
    return MakeError("cannot move artifact " + Short(sha256_) + " into place: " + why);
  }
  fd_.reset();
  done_ = true;
  store_->active_.erase(this);
  store_->evicted_.erase(sha256_);
  if (resumable_) store_->partial_owner_.erase(sha256_);
  store_->TouchPath(final_path);
  struct stat st;
  if (::lstat(final_path.c_str(), &st) == 0) store_->RememberGood(sha256_, KeyOf(st));
  // The rename is not synced to disk (the bytes were): a crash that loses it
  // leaves the artifact missing (its partial file, complete, is resumed at its
  // end), never wrong, and the host pushes what Have reports missing. One
  // journal commit per artifact instead of two.
  return Ok();
}

}  // namespace dfarm::agent
