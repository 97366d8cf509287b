#include "agent/daemon/store_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

namespace dfarm::agent {
namespace fs = std::filesystem;

namespace {

std::string Trimmed(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// What the holder wrote: "PID" or "PID stopping" ("" when unreadable or not yet written).
std::string HolderLine(int fd) {
  char buf[64] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  return text.substr(0, text.find('\n'));
}

// LOCK_EX | LOCK_NB; 0, or the errno.
int TryLock(int fd) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace

std::string StoreLock::PathFor(const std::string& store_dir) {
  return Trimmed(store_dir) + "/agent.lock";
}

Result<StoreLock> StoreLock::Acquire(const std::string& store_dir,
                                     const std::function<void(const std::string&)>& log,
                                     std::chrono::milliseconds stopping_wait) {
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
  const auto give_up = std::chrono::steady_clock::now() + stopping_wait;
  bool waited = false;
  for (int err; (err = TryLock(fd.get())) != 0;) {
    if (err != EWOULDBLOCK) {
      return MakeError("cannot lock the store lock '" + path + "': " + strerror(err));
    }
    const std::string holder = HolderLine(fd.get());
    const bool stopping = holder.find(" stopping") != std::string::npos;
    const std::string pid = holder.substr(0, holder.find(' '));
    if (stopping && std::chrono::steady_clock::now() < give_up) {
      if (!waited && log) {
        log("artifact store '" + dir + "' is held by dfarm-agent pid " + pid +
            ", which is stopping; waiting for it to end");
      }
      waited = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // it is on its way out
      continue;
    }
    return MakeError(ErrorKind::kConflict,
                     "artifact store '" + dir + "' is in use by another dfarm-agent" +
                         (pid.empty() ? std::string() : " (pid " + pid + ")") +
                         (stopping ? ", which has been stopping for " +
                                         std::to_string(stopping_wait.count()) + " ms"
                                   : std::string()) +
                         ": one agent per store; stop that agent, wait for it to end, or give "
                         "this one another --store");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return MakeError("cannot write the store lock '" + path + "': " + strerror(errno));
  }
  return StoreLock(std::move(fd), std::to_string(::getpid()) + " stopping\n");
}

void StoreLock::MarkStopping() const {
  ssize_t ignored = ::pwrite(fd_.get(), stopping_line_.data(), stopping_line_.size(), 0);
  (void)ignored;
}

}  // namespace dfarm::agent
