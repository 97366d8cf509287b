#include "agent/daemon/store_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace dfarm::agent {
namespace fs = std::filesystem;

namespace {

std::string Trimmed(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// The pid the holder wrote ("" when unreadable or not yet written).
std::string HolderPid(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  size_t end = text.find_first_not_of("0123456789");
  return text.substr(0, end);
}

}  // namespace

std::string StoreLock::PathFor(const std::string& store_dir) {
  return Trimmed(store_dir) + "/agent.lock";
}

Result<StoreLock> StoreLock::Acquire(const std::string& store_dir) {
  const std::string dir = Trimmed(store_dir);
  std::error_code ec;
  fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create artifact store '" + dir + "': " + strerror(errno));
  }
  const std::string path = PathFor(dir);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (!fd) return MakeError("cannot open the store lock '" + path + "': " + strerror(errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return MakeError("store lock '" + path + "' is not a regular file; remove it");
  }
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      return MakeError("cannot lock the store lock '" + path + "': " + strerror(errno));
    }
    const std::string holder = HolderPid(fd.get());
    return MakeError(ErrorKind::kConflict,
                     "artifact store '" + dir + "' is in use by another dfarm-agent" +
                         (holder.empty() ? std::string() : " (pid " + holder + ")") +
                         ": one agent per store; stop that agent, wait for it to end, or give "
                         "this one another --store");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return MakeError("cannot write the store lock '" + path + "': " + strerror(errno));
  }
  return StoreLock(std::move(fd));
}

}  // namespace dfarm::agent
