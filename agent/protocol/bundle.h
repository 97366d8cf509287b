// A runner bundle as one artifact (docs/CONTRACTS.md, "Runner kinds and bundles"): an
// executable plus the shared libraries it needs and, optionally, the dynamic
// loader to start it with, packed into one file that travels to a device by
// one sha256 like any runner build. The agent unpacks a bundle once into its
// store (<store>/bundles/<sha256>/) and runs
//   <dir>/<loader> --library-path <dir>/<library_dir> <dir>/<exec> ARGS...
// so the program needs nothing from the device's own libc; without a loader
// it runs <dir>/<exec> with LD_LIBRARY_PATH=<dir>/<library_dir>.
// Both sides use this one codec: the host packs (harness/run/bundle_maker.h,
// `dfarm bundle`), the agent unpacks.
//
// Layout (all integers little-endian):
//   8 bytes   magic "DFBUNDL1"
//   2 bytes   length, then the exec's name          (e.g. "bin/dfarm-runner")
//   2 bytes   length, then the loader's name or ""  (e.g. "lib/ld-linux-aarch64.so.1")
//   2 bytes   length, then the library folder       (e.g. "lib")
//   4 bytes   N, the number of files (1..kMaxBundleFiles)
//   N x       2 bytes name length, the name, 4 bytes mode (0755 or 0644), 8 bytes size
//   then      the files' bytes, in order, nothing after them
// Names are relative paths of components [A-Za-z0-9._+-]{1,255} joined by
// '/', no "." or ".." component, at most kMaxBundleNameBytes, unique; exec
// and loader (when set) name files of the bundle with mode 0755.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::agent {

inline constexpr std::string_view kBundleMagic = "DFBUNDL1";
inline constexpr size_t kMaxBundleFiles = 4096;
inline constexpr size_t kMaxBundleNameBytes = 1024;

// What to run in a bundle.
struct BundleLayout {
  std::string exec;                 // the program
  std::string loader;               // the dynamic loader; "" runs exec directly
  std::string library_dir = "lib";  // the loader's --library-path (or LD_LIBRARY_PATH)
};

// One file to pack: its name in the bundle, its mode, where it is on the host.
struct BundleFile {
  std::string name;
  uint32_t mode = 0644;  // 0755 or 0644
  std::string host_path;
};

// True when `head` (the first bytes of a file, at least 8) is a bundle's.
bool IsBundleHead(std::string_view head);
// True when the file at `path` starts with the bundle magic.
bool IsBundleFile(const std::string& path);

// Packs `files` into `out_path` (written to a temporary file and renamed).
// Files are packed in name order, so the same inputs give the same bytes.
// An invalid name, a duplicate, an exec/loader that is not one of the files,
// an unreadable file: an error naming it.
Result<void> PackBundleFile(const BundleLayout& layout, std::vector<BundleFile> files,
                            const std::string& out_path);

// Reads only the header of the bundle at `path`: its layout and file names.
struct BundleIndex {
  BundleLayout layout;
  std::vector<std::string> names;
  std::vector<uint32_t> modes;
  std::vector<uint64_t> sizes;
};
Result<BundleIndex> ReadBundleIndex(const std::string& path);

// Unpacks the bundle at `path` into folder `dir` (created, 0700; it must not
// exist yet). A malformed bundle (bad magic, bad name, sizes that do not add
// up to the file's length) is an error saying what is wrong; the partial
// folder is removed.
Result<BundleLayout> UnpackBundleFile(const std::string& path, const std::string& dir);

}  // namespace dfarm::agent
