// Makes runner bundles (agent/protocol/bundle.h) on the host: an executable,
// the shared libraries it needs (DT_NEEDED, followed recursively) and the
// dynamic loader it names (PT_INTERP), packed so that the program runs on a
// device as `<loader> --library-path <dir>/lib <dir>/bin/<exe>`, needing
// nothing of the device's own libc. `dfarm bundle` and the sweep's default
// runner bundles call it.
//
// Layout: bin/<exe name> (0755), lib/<NEEDED name> (0644), lib/<loader name>
// (0755). Libraries are found by their DT_NEEDED name in the search folders,
// in order (symlinks followed; the real file is stored under the NEEDED
// name); a file of another machine is passed over for the next folder.
// DT_RUNPATH and DT_RPATH are not read: the folders alone decide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::harness {

// e_machine values with default search folders.
inline constexpr uint16_t kElfMachineX86_64 = 62;
inline constexpr uint16_t kElfMachineAarch64 = 183;

// What the bundle maker reads of an ELF64 little-endian file.
struct ElfInfo {
  uint16_t machine = 0;
  std::string interpreter;          // PT_INTERP; "" for a static program or a library
  std::vector<std::string> needed;  // DT_NEEDED, in file order
};

// Reads `path`'s ELF header, PT_INTERP and DT_NEEDED names (DT_STRTAB mapped
// through the PT_LOAD segments). A file that is not ELF, not 64-bit or not
// little-endian, or whose headers point outside it: a kInvalidInput error
// naming the file and what is wrong.
Result<ElfInfo> ReadElfInfo(const std::string& path);

// True when the program at `path` is dynamically linked (it names a loader
// or needs shared libraries): it travels as a bundle. Errors as ReadElfInfo's.
Result<bool> IsDynamicElf(const std::string& path);

// "aarch64", "x86-64", or "machine N".
std::string ElfMachineName(uint16_t machine);

// The system's library folders for programs of `machine` (Debian multiarch
// and cross layouts); empty for a machine without defaults.
//   aarch64: /usr/aarch64-linux-gnu/lib, /usr/lib/aarch64-linux-gnu, /lib/aarch64-linux-gnu
//   x86-64:  /lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, /lib64
std::vector<std::string> DefaultSearchDirs(uint16_t machine);

struct BundleRequest {
  std::string exe;                       // the program, stored as bin/<its file name>
  std::vector<std::string> extra_files;  // more files for lib/ (dlopen()ed libraries,
                                         // delegate plugins); their needs are followed too
  std::vector<std::string> search_dirs;  // empty: <exe's folder>/../lib when it
                                         // exists (a build's own libraries, e.g.
                                         // build/arm64/lib), then DefaultSearchDirs
  bool with_loader = true;               // pack the PT_INTERP's file (found by its base name)
  std::string out;                       // the bundle to write (MakeBundle only)
};

struct BundledFile {
  std::string name;  // in the bundle: "bin/dfarm-runner", "lib/libc.so.6"
  uint32_t mode = 0644;
  uint64_t size = 0;
  std::string host_path;  // where it was read (symlinks resolved)
};

struct BundleReport {
  std::string path;                // the bundle written
  std::string sha256;              // of the bundle's bytes
  std::string machine;             // ElfMachineName of the exe
  std::string loader;              // "lib/ld-linux-aarch64.so.1", or "" (static exe, or no loader)
  std::vector<BundledFile> files;  // in bundle (name) order
  uint64_t total_bytes = 0;        // of the files packed
};

// Packs req.exe and everything it needs into req.out (written to a temporary
// file and renamed). Same inputs, same bytes. A static exe (no PT_INTERP, no
// DT_NEEDED) makes a bundle with no loader. Errors name the file at fault:
// an exe or lib that is missing, not ELF64, or (a lib) of another machine is
// kInvalidInput; a library found in none of the folders ("libfoo.so.1,
// needed by libbar.so.2, is in none of: DIRS") or a write failure is kFailed.
Result<BundleReport> MakeBundle(const BundleRequest& req);

// The bundle of `req` in cache_dir (created when missing), made only when it
// is not there yet: cache_dir/<exe name>-<sha256 over the layout and every
// packed file's name, mode and contents, first 16 hex>.bundle, so the bytes
// and the sha256 stay the same for as long as the inputs do. req.out is
// ignored. Returns the bundle's path; errors as MakeBundle's.
Result<std::string> CachedBundle(const BundleRequest& req, const std::string& cache_dir);

}  // namespace dfarm::harness
