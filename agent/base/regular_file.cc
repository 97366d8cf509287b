#include "agent/base/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace dfarm {

Result<UniqueFd> OpenRegularFile(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting
  // for a writer; the type check below then refuses it.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return MakeError("cannot read " + what + " '" + path + "': " + strerror(errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return MakeError("cannot read " + what + " '" + path + "': " + strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return MakeError(what + " '" + path + "' is not a regular file (it is " + kind + ")");
  }
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return MakeError("cannot read " + what + " '" + path + "': " + strerror(errno));
  }
  return fd;
}

Result<std::string> ReadRegularFile(const std::string& path, const std::string& what,
                                    uint64_t max_bytes) {
  auto fd = OpenRegularFile(path, what);
  if (!fd) return fd.error();
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError("cannot read " + what + " '" + path + "': " + strerror(errno));
    if (n == 0) break;
    if (bytes.size() + static_cast<uint64_t>(n) > max_bytes) {
      return MakeError(what + " '" + path + "' is over " + std::to_string(max_bytes) + " bytes");
    }
    bytes.append(buf, static_cast<size_t>(n));
  }
  return bytes;
}

std::string ReadProcFile(const std::string& path) {
  auto text = ReadRegularFile(path, "file", 1 << 20);
  return text ? std::move(*text) : std::string();
}

std::optional<ProcStat> ReadProcStat(int64_t pid) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) state ppid pgrp session ..."; comm may hold spaces and ')'.
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 1));
  ProcStat stat;
  std::string skip;
  fields >> stat.state >> stat.ppid >> skip >> stat.session;  // fields 3-6
  for (int i = 7; i < 22; ++i) fields >> skip;
  fields >> stat.start_ticks;  // field 22
  if (!fields) return std::nullopt;
  return stat;
}

}  // namespace dfarm
