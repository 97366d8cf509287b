#include "agent/daemon/runner_bundles.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "agent/base/sha256.h"

namespace dfarm::agent {
namespace {

constexpr std::string_view kUnpackingSuffix = ".unpacking";

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace

RunnerBundles::RunnerBundles(const std::string& store_root) : folder_(store_root + "/bundles") {}

Result<UnpackedBundle> RunnerBundles::Unpack(const std::string& sha256, const std::string& path) {
  if (!IsValidSha256(sha256)) return MakeError("'" + sha256 + "' is not a sha256");
  // The header says what to run; reading it also checks the artifact is a bundle.
  auto index = ReadBundleIndex(path);
  if (!index) return index.error();
  UnpackedBundle bundle{folder_ + "/" + sha256, index->layout};
  if (IsDir(bundle.dir)) return bundle;
  if (::mkdir(folder_.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create '" + folder_ + "': " + std::strerror(errno));
  }
  const std::string temp = bundle.dir + std::string(kUnpackingSuffix);
  RemoveTree(temp);  // left by an agent that died while unpacking
  auto layout = UnpackBundleFile(path, temp);
  if (!layout) return layout.error();
  if (::rename(temp.c_str(), bundle.dir.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    RemoveTree(temp);
    if (!IsDir(bundle.dir)) return MakeError("cannot rename '" + temp + "': " + why);
  }
  return bundle;
}

std::vector<std::string> RunnerBundles::Prune(
    const std::function<bool(const std::string&)>& stored) {
  std::vector<std::string> log;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder_.c_str()), ::closedir);
  if (!dir) return log;
  std::vector<std::string> doomed;
  while (const dirent* e = ::readdir(dir.get())) {
    std::string name = e->d_name;
    const bool unpacking = name.size() == 64 + kUnpackingSuffix.size() &&
                           name.compare(64, std::string::npos, kUnpackingSuffix) == 0;
    const std::string sha = name.substr(0, 64);
    if (!IsValidSha256(sha) || (name.size() != 64 && !unpacking)) continue;
    if (unpacking || !stored(sha)) doomed.push_back(std::move(name));
  }
  for (const std::string& name : doomed) {
    RemoveTree(folder_ + "/" + name);
    log.push_back("removed unpacked bundle " + name.substr(0, 12) +
                  (name.size() == 64 ? " (its artifact is gone)" : " (an unfinished unpack)"));
  }
  return log;
}

}  // namespace dfarm::agent
