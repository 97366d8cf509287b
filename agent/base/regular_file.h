// Opening a file a user named (a model, a plugin, input tensors, a token
// file) for reading without ever blocking: a FIFO, a device or a socket given
// where a file belongs is refused with "... is not a regular file" at once,
// instead of hanging in open() or read() for a writer that never comes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm {

// Opens path read-only (O_CLOEXEC) and checks that it is a regular file; the
// returned descriptor is blocking again. what names the file in messages
// ("model", "token file"): "WHAT 'PATH' is not a regular file (it is a
// FIFO)", or
// "cannot read WHAT 'PATH': REASON".
Result<UniqueFd> OpenRegularFile(const std::string& path, const std::string& what);

// Reads a whole regular file (OpenRegularFile), refusing one over max_bytes:
// "WHAT 'PATH' is over N bytes".
Result<std::string> ReadRegularFile(const std::string& path, const std::string& what,
                                    uint64_t max_bytes);

// The text of a kernel file such as /proc/PID/stat or /proc/PID/environ, up
// to 1 MiB; "" when it cannot be read (the process is gone: ESRCH mid-read,
// no such file). Never throws, unlike reading an ifstream through
// istreambuf_iterator, whose read error escapes as std::ios_base::failure.
std::string ReadProcFile(const std::string& path);

// The fields of /proc/PID/stat that tell who a process is and where it hangs.
struct ProcStat {
  char state = '?';  // 'R', 'S', 'Z' (a zombie), ...
  int ppid = 0;
  int session = 0;
  uint64_t start_ticks = 0;  // field 22: clock ticks after boot
};

// /proc/PID/stat parsed; unset when the process is gone or the file is not one.
std::optional<ProcStat> ReadProcStat(int64_t pid);

}  // namespace dfarm
