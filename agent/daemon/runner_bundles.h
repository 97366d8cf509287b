// RunnerBundles: the agent's unpacked runner bundles (agent/protocol/bundle.h),
// one folder per bundle artifact at <store>/bundles/<sha256>/. A bundle is
// unpacked once, the first time a job runs it, into <sha256>.unpacking beside
// its folder and renamed into place, so a folder named by a sha256 is always
// complete. Folders whose artifact left the store (evicted, found corrupt)
// are removed by Prune.
//
// Not thread-safe: the supervisor calls it with its job lock held (one job at
// a time), so no bundle is in use by another job while it prunes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/bundle.h"

namespace dfarm::agent {

// An unpacked bundle: its folder and what to run in it.
struct UnpackedBundle {
  std::string dir;  // <store>/bundles/<sha256>
  BundleLayout layout;
};

class RunnerBundles {
 public:
  // Keeps its folders under store_root + "/bundles" (created when first needed, 0700).
  explicit RunnerBundles(const std::string& store_root);

  const std::string& folder() const { return folder_; }

  // The unpacked folder of the bundle artifact `sha256` stored at `path`,
  // unpacking it first when there is none. A malformed bundle is an error
  // naming the problem (no folder is left).
  Result<UnpackedBundle> Unpack(const std::string& sha256, const std::string& path);

  // Removes the folders of bundles whose artifact `stored` no longer reports
  // present, and unfinished unpacks (<sha256>.unpacking). Only entries named
  // by a valid sha256 (with that suffix) are touched. Returns a line per
  // removed folder, for the log.
  std::vector<std::string> Prune(const std::function<bool(const std::string&)>& stored);

 private:
  std::string folder_;
};

}  // namespace dfarm::agent
