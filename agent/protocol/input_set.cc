#include "agent/protocol/input_set.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace dfarm::agent {
namespace {

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return v;
}

}  // namespace

Result<std::string> PackInputSet(const std::vector<std::string>& files) {
  if (files.empty()) return MakeError(ErrorKind::kInvalidInput, "an input set needs a file");
  if (files.size() > kMaxInputSetFiles) {
    return MakeError(ErrorKind::kInvalidInput,
                     "an input set holds at most " + std::to_string(kMaxInputSetFiles) + " files");
  }
  std::string out(kInputSetMagic);
  PutLe(out, files.size(), 4);
  for (const std::string& f : files) PutLe(out, f.size(), 8);
  for (const std::string& f : files) out += f;
  return out;
}

Result<std::vector<std::string>> UnpackInputSet(std::string_view blob) {
  constexpr size_t kHeader = 12;
  if (blob.size() < kHeader || blob.substr(0, kInputSetMagic.size()) != kInputSetMagic) {
    return MakeError(ErrorKind::kInvalidInput, "not an input set (no \"DFINSET1\" header)");
  }
  const uint64_t n = GetLe(blob, 8, 4);
  if (n == 0 || n > kMaxInputSetFiles) {
    return MakeError(ErrorKind::kInvalidInput,
                     "input set: file count " + std::to_string(n) + " is not in 1..1024");
  }
  if (blob.size() < kHeader + 8 * n) {
    return MakeError(ErrorKind::kInvalidInput, "input set: truncated size table");
  }
  uint64_t at = kHeader + 8 * n;
  std::vector<uint64_t> sizes;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t size = GetLe(blob, kHeader + 8 * i, 8);
    if (size > blob.size() - at) {
      return MakeError(ErrorKind::kInvalidInput,
                       "input set: input_" + std::to_string(i) + ".bin runs past the end");
    }
    sizes.push_back(size);
    at += size;
  }
  if (at != blob.size()) {
    return MakeError(ErrorKind::kInvalidInput, "input set: " + std::to_string(blob.size() - at) +
                                                   " bytes after the last file");
  }
  std::vector<std::string> files;
  at = kHeader + 8 * n;
  for (uint64_t size : sizes) {
    files.emplace_back(blob.substr(at, size));
    at += size;
  }
  return files;
}

Result<void> UnpackInputSetFile(const std::string& packed_path, const std::string& dir) {
  std::ifstream in(packed_path, std::ios::binary);
  if (!in) return MakeError("cannot read input set '" + packed_path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  auto files = UnpackInputSet(text.str());
  if (!files) return MakeError(files.message() + " ('" + packed_path + "')");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return MakeError("cannot create '" + dir + "': " + std::strerror(errno));
  }
  for (size_t i = 0; i < files->size(); ++i) {
    const std::string path = dir + "/input_" + std::to_string(i) + ".bin";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write((*files)[i].data(), static_cast<std::streamsize>((*files)[i].size()));
    if (!out.flush()) return MakeError("cannot write '" + path + "'");
  }
  return Ok();
}

}  // namespace dfarm::agent
