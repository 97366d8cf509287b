#include "agent/artifact_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace dfarm::agent {
namespace fs = std::filesystem;

namespace {

std::string Errno() { return strerror(errno); }

// Short form of an artifact name for messages.
std::string Short(const std::string& sha256) { return sha256.substr(0, 12); }

Result<void> FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0) {
    return MakeError("cannot fsync store folder '" + dir + "': " + Errno());
  }
  return Ok();
}

}  // namespace

Result<std::unique_ptr<ArtifactStore>> ArtifactStore::Open(const std::string& root,
                                                           uint64_t max_artifact_bytes) {
  std::error_code ec;
  for (const char* sub : {"artifacts", "tmp"}) {
    fs::create_directories(fs::path(root) / sub, ec);
    if (ec) {
      return MakeError("cannot create artifact store '" + root + "': " + ec.message());
    }
  }
  for (const auto& entry : fs::directory_iterator(fs::path(root) / "tmp", ec)) {
    fs::remove(entry.path(), ec);
  }
  std::string abs = fs::absolute(root, ec).lexically_normal().string();
  if (ec) abs = root;
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return std::unique_ptr<ArtifactStore>(new ArtifactStore(abs, max_artifact_bytes));
}

std::string ArtifactStore::ArtifactPath(const std::string& sha256) const {
  return root_ + "/artifacts/" + sha256;
}

bool ArtifactStore::Has(const std::string& sha256) const {
  if (!IsValidSha256(sha256)) return false;
  struct stat st;
  return ::stat(ArtifactPath(sha256).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<std::string> ArtifactStore::PathOf(const std::string& sha256) const {
  if (!IsValidSha256(sha256)) {
    return MakeError("invalid artifact name '" + sha256.substr(0, 80) +
                     "': expected 64 lowercase hex characters");
  }
  if (!Has(sha256)) return MakeError("artifact " + sha256 + " is not in the store");
  return ArtifactPath(sha256);
}

Result<void> ArtifactStore::MakeExecutable(const std::string& sha256) const {
  auto path = PathOf(sha256);
  if (!path) return path.error();
  if (::chmod(path->c_str(), 0755) != 0) {
    return MakeError("cannot make artifact " + sha256 + " executable: " + Errno());
  }
  return Ok();
}

Result<std::unique_ptr<ArtifactStore::Upload>> ArtifactStore::BeginUpload(
    const std::string& sha256, uint64_t size) {
  if (!IsValidSha256(sha256)) {
    return MakeError("invalid artifact name '" + sha256.substr(0, 80) +
                     "': expected 64 lowercase hex characters");
  }
  if (size > max_artifact_bytes_) {
    return MakeError("artifact " + Short(sha256) + " of " + std::to_string(size) +
                     " bytes exceeds the store limit of " + std::to_string(max_artifact_bytes_) +
                     " bytes");
  }
  std::string temp = root_ + "/tmp/" + sha256 + ".XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return MakeError("cannot create a temp file in '" + root_ + "/tmp': " + Errno());
  return std::unique_ptr<Upload>(new Upload(this, sha256, size, temp, UniqueFd(fd)));
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

ArtifactStore::Upload::Upload(const ArtifactStore* store, std::string sha256, uint64_t size,
                              std::string temp_path, UniqueFd fd)
    : store_(store),
      sha256_(std::move(sha256)),
      size_(size),
      temp_path_(std::move(temp_path)),
      fd_(std::move(fd)) {}

ArtifactStore::Upload::~Upload() { Discard(); }

void ArtifactStore::Upload::Discard() {
  if (done_) return;
  done_ = true;
  fd_.reset();
  ::unlink(temp_path_.c_str());
}

Result<void> ArtifactStore::Upload::Write(uint64_t offset, const uint8_t* data, size_t size) {
  if (done_) return MakeError("upload of artifact " + Short(sha256_) + " is already finished");
  if (offset != received_) {
    return MakeError("upload of artifact " + Short(sha256_) + ": chunk at offset " +
                     std::to_string(offset) + ", expected offset " + std::to_string(received_));
  }
  if (size > size_ - received_) {
    Discard();
    return MakeError("upload of artifact " + Short(sha256_) + ": size mismatch: more than the " +
                     std::to_string(size_) + " bytes announced");
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd_.get(), data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string why = Errno();
      Discard();
      return MakeError("cannot write artifact " + Short(sha256_) + " to '" + temp_path_ +
                       "': " + why);
    }
    done += static_cast<size_t>(n);
  }
  hasher_.Update(data, size);
  received_ += size;
  return Ok();
}

Result<void> ArtifactStore::Upload::Commit() {
  if (done_) return MakeError("upload of artifact " + Short(sha256_) + " is already finished");
  if (received_ != size_) {
    Discard();
    return MakeError("upload of artifact " + Short(sha256_) + ": size mismatch: announced " +
                     std::to_string(size_) + " bytes, received " + std::to_string(received_));
  }
  std::string actual = hasher_.FinishHex();
  if (actual != sha256_) {
    Discard();
    return MakeError("upload of artifact " + Short(sha256_) + ": sha256 mismatch: the " +
                     std::to_string(received_) + " bytes received hash to " + actual);
  }
  if (::fchmod(fd_.get(), 0644) != 0 || ::fsync(fd_.get()) != 0) {
    std::string why = Errno();
    Discard();
    return MakeError("cannot fsync artifact " + Short(sha256_) + ": " + why);
  }
  fd_.reset();
  std::string final_path = store_->ArtifactPath(sha256_);
  if (::rename(temp_path_.c_str(), final_path.c_str()) != 0) {
    std::string why = Errno();
    Discard();
    return MakeError("cannot move artifact " + Short(sha256_) + " into place: " + why);
  }
  done_ = true;
  return FsyncDir(store_->root_ + "/artifacts");
}

}  // namespace dfarm::agent
