#include "agent/protocol/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/base/unique_fd.h"

namespace dfarm::agent {
namespace {

constexpr size_t kCopyChunk = 1 << 16;

Error Bad(const std::string& what) { return MakeError(ErrorKind::kInvalidInput, what); }

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string OctalMode(uint32_t mode) {
  std::ostringstream out;
  out << '0' << std::oct << mode;
  return out.str();
}

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '+' || c == '-';
}

// "" when `name` is a valid bundle name, else why not.
std::string NameProblem(std::string_view name) {
  if (name.empty()) return "an empty name";
  if (name.size() > kMaxBundleNameBytes) {
    return "a name of " + std::to_string(name.size()) + " bytes (at most " +
           std::to_string(kMaxBundleNameBytes) + ")";
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty()) return "name " + Quoted(name) + " has an empty component";
    if (part == "." || part == "..") return "name " + Quoted(name) + " has a '.' or '..' component";
    if (part.size() > 255) return "name " + Quoted(name) + " has a component over 255 bytes";
    for (char c : part) {
      if (!IsNameChar(c))
        return "name " + Quoted(name) + " has a character outside [A-Za-z0-9._+-/]";
    }
    start = end + 1;
  }
  return "";
}

// Checks names, modes, uniqueness, no file that is also a folder of another,
// and that exec and loader are files of mode 0755.
Result<void> CheckIndex(const BundleLayout& layout, const std::vector<std::string>& names,
                        const std::vector<uint32_t>& modes) {
  if (names.empty() || names.size() > kMaxBundleFiles) {
    return Bad("file count " + std::to_string(names.size()) + " is not in 1.." +
               std::to_string(kMaxBundleFiles));
  }
  std::set<std::string_view> seen;
  std::set<std::string_view> folders;
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::string p = NameProblem(names[i]); !p.empty()) return Bad(p);
    if (modes[i] != 0755 && modes[i] != 0644) {
      return Bad("file " + Quoted(names[i]) + " has mode " + OctalMode(modes[i]) +
                 " (0755 or 0644 only)");
    }
    if (!seen.insert(names[i]).second) return Bad("duplicate file " + Quoted(names[i]));
    for (size_t slash = names[i].find('/'); slash != std::string::npos;
         slash = names[i].find('/', slash + 1)) {
      folders.insert(std::string_view(names[i]).substr(0, slash));
    }
  }
  for (std::string_view folder : folders) {
    if (seen.count(folder)) return Bad("" + Quoted(folder) + " is both a file and a folder");
  }
  if (!layout.library_dir.empty()) {
    if (std::string p = NameProblem(layout.library_dir); !p.empty()) {
      return Bad("library folder: " + p);
    }
  }
  for (auto [role, name] : {std::pair{"exec", &layout.exec}, std::pair{"loader", &layout.loader}}) {
    if (name->empty() && std::string_view(role) == "loader") continue;
    auto it = std::find(names.begin(), names.end(), *name);
    if (it == names.end())
      return Bad("" + std::string(role) + " " + Quoted(*name) + " is not a file of the bundle");
    if (modes[it - names.begin()] != 0755) {
      return Bad("" + std::string(role) + " " + Quoted(*name) + " does not have mode 0755");
    }
  }
  return Ok();
}

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutName(std::string& out, const std::string& name) {
  PutLe(out, name.size(), 2);
  out += name;
}

// Reads a bundle header field by field; a short read makes every later call fail.
class HeaderReader {
 public:
  explicit HeaderReader(std::istream& in) : in_(in) {}
  bool Bytes(char* out, size_t n) {
    in_.read(out, static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in_.gcount()) != n) return false;
    offset_ += n;
    return true;
  }
  bool Le(int bytes, uint64_t* v) {
    unsigned char b[8];
    if (!Bytes(reinterpret_cast<char*>(b), bytes)) return false;
    *v = 0;
    for (int i = 0; i < bytes; ++i) *v |= static_cast<uint64_t>(b[i]) << (8 * i);
    return true;
  }
  bool Name(std::string* s) {
    uint64_t n = 0;
    if (!Le(2, &n)) return false;
    s->resize(n);
    return Bytes(s->data(), n);
  }
  uint64_t offset() const { return offset_; }

 private:
  std::istream& in_;
  uint64_t offset_ = 0;
};

struct ParsedIndex {
  BundleIndex index;
  uint64_t data_offset = 0;  // where the first file's bytes start
};

// The header of the bundle at `path`, checked against the file's length.
// Errors carry no path; the public functions add it.
Result<ParsedIndex> ParseIndex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  struct stat st {};
  if (!in || ::stat(path.c_str(), &st) != 0) return MakeError("cannot read it");
  HeaderReader r(in);
  char magic[8];
  if (!r.Bytes(magic, sizeof magic) || std::string_view(magic, 8) != kBundleMagic) {
    return Bad("not a bundle (no \"DFBUNDL1\" header)");
  }
  ParsedIndex p;
  BundleIndex& x = p.index;
  uint64_t n = 0;
  if (!r.Name(&x.layout.exec) || !r.Name(&x.layout.loader) || !r.Name(&x.layout.library_dir) ||
      !r.Le(4, &n)) {
    return Bad("truncated header");
  }
  if (n == 0 || n > kMaxBundleFiles) {
    return Bad("file count " + std::to_string(n) + " is not in 1.." +
               std::to_string(kMaxBundleFiles));
  }
  for (uint64_t i = 0; i < n; ++i) {
    std::string name;
    uint64_t mode = 0, size = 0;
    if (!r.Name(&name) || !r.Le(4, &mode) || !r.Le(8, &size)) return Bad("truncated header");
    x.names.push_back(std::move(name));
    x.modes.push_back(static_cast<uint32_t>(mode));
    x.sizes.push_back(size);
  }
  if (auto ok = CheckIndex(x.layout, x.names, x.modes); !ok) return ok.error();
  p.data_offset = r.offset();
  uint64_t left = static_cast<uint64_t>(st.st_size) - p.data_offset;
  for (size_t i = 0; i < x.sizes.size(); ++i) {
    if (x.sizes[i] > left) return Bad("file " + Quoted(x.names[i]) + " runs past the end");
    left -= x.sizes[i];
  }
  if (left != 0) return Bad(std::to_string(left) + " bytes after the last file");
  return p;
}

Result<void> WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return MakeError(std::string("write failed: ") + std::strerror(errno));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Ok();
}

// Copies exactly `size` bytes from `from` to `to`; fewer is an error.
Result<void> CopyExactly(int from, int to, uint64_t size) {
  std::vector<char> buf(kCopyChunk);
  while (size > 0) {
    ssize_t got = ::read(from, buf.data(), std::min<uint64_t>(size, buf.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return MakeError(std::string("read failed: ") + std::strerror(errno));
    if (got == 0) return MakeError("it ended " + std::to_string(size) + " bytes early");
    if (auto w = WriteAll(to, buf.data(), static_cast<size_t>(got)); !w) return w;
    size -= static_cast<uint64_t>(got);
  }
  return Ok();
}

std::string Errno() { return std::strerror(errno); }

// The header of a pack of `files` (sorted by name), file sizes from stat.
Result<std::string> PackHeader(const BundleLayout& layout, const std::vector<BundleFile>& files,
                               std::vector<uint64_t>* sizes_out) {
  std::vector<std::string> names;
  std::vector<uint32_t> modes;
  for (const BundleFile& f : files) {
    names.push_back(f.name);
    modes.push_back(f.mode);
  }
  if (auto ok = CheckIndex(layout, names, modes); !ok) return ok.error();
  std::string header(kBundleMagic);
  PutName(header, layout.exec);
  PutName(header, layout.loader);
  PutName(header, layout.library_dir);
  PutLe(header, files.size(), 4);
  for (const BundleFile& f : files) {
    struct stat st {};
    if (::stat(f.host_path.c_str(), &st) != 0) {
      return Bad("cannot read " + Quoted(f.host_path) + " (for " + Quoted(f.name) +
                 "): " + Errno());
    }
    if (!S_ISREG(st.st_mode)) {
      return Bad(Quoted(f.host_path) + " (for " + Quoted(f.name) + ") is not a regular file");
    }
    PutName(header, f.name);
    PutLe(header, f.mode, 4);
    PutLe(header, static_cast<uint64_t>(st.st_size), 8);
    sizes_out->push_back(static_cast<uint64_t>(st.st_size));
  }
  return header;
}

// Writes the header and the files' bytes to `fd`, sizes[i] bytes of file i
// (as the header says). A file that shrank since PackHeader is an error.
Result<void> WriteBundle(int fd, const std::string& header, const std::vector<BundleFile>& files,
                         const std::vector<uint64_t>& sizes) {
  if (auto w = WriteAll(fd, header.data(), header.size()); !w) return w;
  for (size_t i = 0; i < files.size(); ++i) {
    const BundleFile& f = files[i];
    UniqueFd in(::open(f.host_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in) return MakeError("cannot read " + Quoted(f.host_path) + ": " + Errno());
    if (auto c = CopyExactly(in.get(), fd, sizes[i]); !c) {
      return MakeError("cannot pack " + Quoted(f.host_path) + ": " + c.message());
    }
  }
  return Ok();
}

// Creates the folders above `name` inside `dir`.
Result<void> MakeParents(const std::string& dir, const std::string& name) {
  for (size_t slash = name.find('/'); slash != std::string::npos;
       slash = name.find('/', slash + 1)) {
    const std::string sub = dir + "/" + name.substr(0, slash);
    if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
      return MakeError("cannot create " + Quoted(sub) + ": " + Errno());
    }
  }
  return Ok();
}

Result<void> WriteFiles(const std::string& path, const ParsedIndex& p, const std::string& dir) {
  UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in || ::lseek(in.get(), static_cast<off_t>(p.data_offset), SEEK_SET) < 0) {
    return MakeError("cannot read it: " + Errno());
  }
  const BundleIndex& x = p.index;
  for (size_t i = 0; i < x.names.size(); ++i) {
    if (auto m = MakeParents(dir, x.names[i]); !m) return m;
    const std::string out_path = dir + "/" + x.names[i];
    UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, x.modes[i]));
    if (!out || ::fchmod(out.get(), x.modes[i]) != 0) {
      return MakeError("cannot create " + Quoted(out_path) + ": " + Errno());
    }
    if (auto c = CopyExactly(in.get(), out.get(), x.sizes[i]); !c) {
      return MakeError("cannot unpack " + Quoted(x.names[i]) + ": " + c.message());
    }
  }
  return Ok();
}

}  // namespace

bool IsBundleHead(std::string_view head) {
  return head.size() >= kBundleMagic.size() && head.substr(0, kBundleMagic.size()) == kBundleMagic;
}

bool IsBundleFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8];
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && IsBundleHead(std::string_view(head, sizeof head));
}

Result<void> PackBundleFile(const BundleLayout& layout, std::vector<BundleFile> files,
                            const std::string& out_path) {
  std::sort(files.begin(), files.end(),
            [](const BundleFile& a, const BundleFile& b) { return a.name < b.name; });
  std::vector<uint64_t> sizes;
  auto header = PackHeader(layout, files, &sizes);
  if (!header) {
    return MakeError(header.error().kind,
                     "cannot pack bundle " + Quoted(out_path) + ": " + header.message());
  }
  const std::string tmp = out_path + ".tmp." + std::to_string(::getpid());
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return MakeError("cannot create " + Quoted(tmp) + ": " + Errno());
  Result<void> written = WriteBundle(out.get(), *header, files, sizes);
  if (written && ::fsync(out.get()) != 0) written = MakeError("fsync failed: " + Errno());
  out.reset();
  if (written && ::rename(tmp.c_str(), out_path.c_str()) != 0) {
    written = MakeError("cannot rename " + Quoted(tmp) + ": " + Errno());
  }
  if (!written) {
    ::unlink(tmp.c_str());
    return MakeError("cannot pack bundle " + Quoted(out_path) + ": " + written.message());
  }
  return Ok();
}

Result<BundleIndex> ReadBundleIndex(const std::string& path) {
  auto p = ParseIndex(path);
  if (!p) return MakeError(p.error().kind, "bundle " + Quoted(path) + ": " + p.message());
  return std::move(p->index);
}

Result<BundleLayout> UnpackBundleFile(const std::string& path, const std::string& dir) {
  auto p = ParseIndex(path);
  if (!p) return MakeError(p.error().kind, "bundle " + Quoted(path) + ": " + p.message());
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return MakeError("cannot unpack bundle " + Quoted(path) + ": cannot create " + Quoted(dir) +
                     ": " + Errno());
  }
  if (auto w = WriteFiles(path, *p, dir); !w) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return MakeError("cannot unpack bundle " + Quoted(path) + ": " + w.message());
  }
  return p->index.layout;
}

}  // namespace dfarm::agent
