#include "harness/run/bundle_maker.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "agent/base/sha256.h"
#include "agent/protocol/bundle.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kPtLoad = 1, kPtDynamic = 2, kPtInterp = 3;
constexpr int64_t kDtNull = 0, kDtNeeded = 1, kDtStrtab = 5, kDtStrsz = 10;
constexpr size_t kEhdrSize = 64, kPhdrSize = 56, kDynSize = 16;
constexpr uint16_t kMaxPhdrs = 4096;
constexpr size_t kMaxDynBytes = 1 << 20, kMaxNameBytes = 4096;

uint64_t Le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

Error Bad(const std::string& path, const std::string& why) {
  return MakeError(ErrorKind::kInvalidInput, "'" + path + "' " + why);
}

// Reads `size` bytes at `offset` of an open file of `file_size` bytes.
Result<std::string> ReadAt(std::ifstream& in, uint64_t file_size, uint64_t offset, uint64_t size,
                           const std::string& path, const char* what) {
  if (offset > file_size || size > file_size - offset) {
    return Bad(path, std::string("is a damaged ELF file: its ") + what + " lies past its end");
  }
  std::string buf(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(buf.data(), static_cast<std::streamsize>(size))) {
    return MakeError("cannot read '" + path + "'");
  }
  return buf;
}

struct Segment {
  uint32_t type;
  uint64_t offset, vaddr, filesz;
};

// The file offset of virtual address `vaddr`, through the PT_LOAD segments.
bool VaddrToOffset(const std::vector<Segment>& segs, uint64_t vaddr, uint64_t* offset) {
  for (const Segment& s : segs) {
    if (s.type == kPtLoad && vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) {
      *offset = s.offset + (vaddr - s.vaddr);
      return true;
    }
  }
  return false;
}

// DT_NEEDED names of the PT_DYNAMIC segment `dyn`.
Result<std::vector<std::string>> NeededNames(std::ifstream& in, uint64_t file_size,
                                             const std::vector<Segment>& segs, const Segment& dyn,
                                             const std::string& path) {
  auto table = ReadAt(in, file_size, dyn.offset, std::min<uint64_t>(dyn.filesz, kMaxDynBytes), path,
                      "dynamic section");
  if (!table) return table.error();
  std::vector<uint64_t> needed;
  uint64_t strtab = 0, strsz = 0;
  bool has_strtab = false;
  for (size_t at = 0; at + kDynSize <= table->size(); at += kDynSize) {
    const auto tag = static_cast<int64_t>(Le(table->data() + at, 8));
    const uint64_t val = Le(table->data() + at + 8, 8);
    if (tag == kDtNull) break;
    if (tag == kDtNeeded) needed.push_back(val);
    if (tag == kDtStrtab) strtab = val, has_strtab = true;
    if (tag == kDtStrsz) strsz = val;
  }
  if (needed.empty()) return std::vector<std::string>{};
  uint64_t str_offset = 0;
  if (!has_strtab || !VaddrToOffset(segs, strtab, &str_offset)) {
    return Bad(path, "is a damaged ELF file: its DT_STRTAB is in no loaded segment");
  }
  auto strings = ReadAt(in, file_size, str_offset,
                        std::min<uint64_t>(strsz, file_size - std::min(file_size, str_offset)),
                        path, "string table");
  if (!strings) return strings.error();
  std::vector<std::string> names;
  for (uint64_t at : needed) {
    const size_t end = at < strings->size() ? strings->find('\0', at) : std::string::npos;
    if (end == std::string::npos || end == at || end - at > kMaxNameBytes) {
      return Bad(path, "is a damaged ELF file: a DT_NEEDED name lies outside its string table");
    }
    names.push_back(strings->substr(at, end - at));
  }
  return names;
}

// The ELF header's checks; the program headers' place.
Result<std::pair<uint64_t, uint16_t>> CheckHeader(const std::string& head, const std::string& path,
                                                  uint16_t* machine) {
  if (head.size() < kEhdrSize || head.compare(0, 4,
                                              "\x7f"
                                              "ELF") != 0) {
    return Bad(path, "is not an ELF file (a program or a shared library)");
  }
  if (head[4] != 2) return Bad(path, "is a 32-bit ELF file; only ELF64 programs are bundled");
  if (head[5] != 1) return Bad(path, "is a big-endian ELF file; only little-endian is bundled");
  *machine = static_cast<uint16_t>(Le(head.data() + 18, 2));
  const uint64_t phoff = Le(head.data() + 32, 8);
  const auto phentsize = static_cast<uint16_t>(Le(head.data() + 54, 2));
  const auto phnum = static_cast<uint16_t>(Le(head.data() + 56, 2));
  if (phnum > 0 && phentsize != kPhdrSize) {
    return Bad(path, "is a damaged ELF file: program headers of " + std::to_string(phentsize) +
                         " bytes, not 56");
  }
  if (phnum > kMaxPhdrs) return Bad(path, "is a damaged ELF file: too many program headers");
  return std::pair{phoff, phnum};
}

}  // namespace

Result<ElfInfo> ReadElfInfo(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return MakeError(ErrorKind::kInvalidInput, "'" + path + "' is not a file");
  }
  std::ifstream in(path, std::ios::binary);
  const uint64_t file_size = fs::file_size(path, ec);
  if (!in || ec) return MakeError(ErrorKind::kInvalidInput, "cannot read '" + path + "'");
  std::string head(kEhdrSize, '\0');
  in.read(head.data(), kEhdrSize);
  head.resize(static_cast<size_t>(in.gcount()));
  in.clear();
  ElfInfo info;
  auto ph = CheckHeader(head, path, &info.machine);
  if (!ph) return ph.error();
  auto table = ReadAt(in, file_size, ph->first, uint64_t{ph->second} * kPhdrSize, path,
                      "program header table");
  if (!table) return table.error();
  std::vector<Segment> segs;
  for (uint16_t i = 0; i < ph->second; ++i) {
    const char* p = table->data() + size_t{i} * kPhdrSize;
    segs.push_back({static_cast<uint32_t>(Le(p, 4)), Le(p + 8, 8), Le(p + 16, 8), Le(p + 32, 8)});
  }
  for (const Segment& s : segs) {
    if (s.type == kPtInterp) {
      auto interp = ReadAt(in, file_size, s.offset, std::min<uint64_t>(s.filesz, kMaxNameBytes),
                           path, "PT_INTERP");
      if (!interp) return interp.error();
      info.interpreter = interp->substr(0, interp->find('\0'));
    } else if (s.type == kPtDynamic) {
      auto needed = NeededNames(in, file_size, segs, s, path);
      if (!needed) return needed.error();
      info.needed = std::move(*needed);
    }
  }
  return info;
}

Result<bool> IsDynamicElf(const std::string& path) {
  auto info = ReadElfInfo(path);
  if (!info) return info.error();
  return !info->interpreter.empty() || !info->needed.empty();
}

std::string ElfMachineName(uint16_t machine) {
  switch (machine) {
    case kElfMachineX86_64:
      return "x86-64";
    case kElfMachineAarch64:
      return "aarch64";
  }
  return "machine " + std::to_string(machine);
}

std::vector<std::string> DefaultSearchDirs(uint16_t machine) {
  switch (machine) {
    case kElfMachineAarch64:
      return {"/usr/aarch64-linux-gnu/lib", "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu"};
    case kElfMachineX86_64:
      return {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64"};
  }
  return {};
}

namespace {

// What goes into one bundle, before it is packed.
struct Plan {
  agent::BundleLayout layout;
  std::vector<BundledFile> files;  // name order
  std::string machine;
};

std::string Joined(const std::vector<std::string>& dirs) {
  std::string s;
  for (const std::string& d : dirs) s += (s.empty() ? "" : ", ") + d;
  return s;
}

// The file called `name` for `machine` in the first of `dirs` that has one.
Result<std::pair<std::string, ElfInfo>> FindLibrary(const std::string& name, uint16_t machine,
                                                    const std::vector<std::string>& dirs,
                                                    const std::string& needed_by) {
  std::string passed;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    const fs::path candidate = fs::path(dir) / name;
    if (!fs::is_regular_file(candidate, ec)) continue;
    auto info = ReadElfInfo(candidate.string());
    if (!info) {
      passed += "; passed over " + candidate.string() + ": " + info.message();
      continue;
    }
    if (info->machine != machine) {
      passed += "; passed over " + candidate.string() + " (" + ElfMachineName(info->machine) + ")";
      continue;
    }
    return std::pair{fs::canonical(candidate, ec).string(), std::move(*info)};
  }
  return MakeError("cannot bundle: " + name + ", needed by " + needed_by + ", is in none of the " +
                   ElfMachineName(machine) + " library folders " + Joined(dirs) + passed);
}

std::vector<std::string> SearchDirs(const BundleRequest& req, uint16_t machine) {
  if (!req.search_dirs.empty()) return req.search_dirs;
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path own = fs::absolute(req.exe, ec).parent_path().parent_path() / "lib";
  if (fs::is_directory(own, ec)) dirs.push_back(own.lexically_normal().string());
  for (std::string& d : DefaultSearchDirs(machine)) dirs.push_back(std::move(d));
  return dirs;
}

// Adds a file under lib/; false when that name is packed already.
bool AddLib(std::map<std::string, BundledFile>& files, const std::string& name, uint32_t mode,
            const std::string& host_path) {
  const std::string in_bundle = "lib/" + name;
  if (files.count(in_bundle) != 0) return false;
  files[in_bundle] = BundledFile{in_bundle, mode, 0, host_path};
  return true;
}

struct Need {
  std::string name, by;
};

Result<Plan> PlanBundle(const BundleRequest& req) {
  auto exe = ReadElfInfo(req.exe);
  if (!exe) return exe.error();
  const uint16_t machine = exe->machine;
  const std::vector<std::string> dirs = SearchDirs(req, machine);
  const std::string exe_name = fs::path(req.exe).filename().string();
  Plan plan;
  plan.machine = ElfMachineName(machine);
  plan.layout.exec = "bin/" + exe_name;
  std::map<std::string, BundledFile> files;
  std::error_code ec;
  files[plan.layout.exec] = {plan.layout.exec, 0755, 0, fs::canonical(req.exe, ec).string()};
  std::deque<Need> todo;
  for (const std::string& n : exe->needed) todo.push_back({n, exe_name});
  const std::string loader_name = fs::path(exe->interpreter).filename().string();
  if (req.with_loader && !loader_name.empty()) {
    auto found = FindLibrary(loader_name, machine, dirs, exe_name + " (its PT_INTERP)");
    if (!found) return found.error();
    AddLib(files, loader_name, 0755, found->first);
    plan.layout.loader = "lib/" + loader_name;
  }
  for (const std::string& lib : req.extra_files) {
    auto info = ReadElfInfo(lib);
    if (!info) return info.error();
    if (info->machine != machine) {
      return Bad(lib, "is an " + ElfMachineName(info->machine) + " file, but '" + req.exe +
                          "' is " + ElfMachineName(machine));
    }
    AddLib(files, fs::path(lib).filename().string(), 0644, fs::canonical(lib, ec).string());
    for (const std::string& n : info->needed) todo.push_back({n, lib});
  }
  for (; !todo.empty(); todo.pop_front()) {
    const Need need = todo.front();
    // The running loader provides itself (libc names it as needed).
    if (need.name == loader_name || files.count("lib/" + need.name) != 0) continue;
    auto found = FindLibrary(need.name, machine, dirs, need.by);
    if (!found) return found.error();
    AddLib(files, need.name, 0644, found->first);
    for (const std::string& n : found->second.needed) todo.push_back({n, need.name});
  }
  for (auto& [name, f] : files) {
    f.size = fs::file_size(f.host_path, ec);
    if (ec) return MakeError("cannot read '" + f.host_path + "': " + ec.message());
    plan.files.push_back(std::move(f));
  }
  return plan;
}

Result<void> Pack(const Plan& plan, const std::string& out) {
  std::vector<agent::BundleFile> files;
  for (const BundledFile& f : plan.files) files.push_back({f.name, f.mode, f.host_path});
  return agent::PackBundleFile(plan.layout, std::move(files), out);
}

// sha256 over the layout and each file's name, mode and contents.
Result<std::string> PlanDigest(const Plan& plan) {
  agent::Sha256 h;
  const auto add = [&h](const std::string& s) {
    const uint64_t n = s.size();
    h.Update(&n, sizeof n);
    h.Update(s.data(), s.size());
  };
  add(plan.layout.exec);
  add(plan.layout.loader);
  add(plan.layout.library_dir);
  for (const BundledFile& f : plan.files) {
    auto sha = agent::Sha256File(f.host_path);
    if (!sha) return sha.error();
    add(f.name);
    add(std::to_string(f.mode));
    add(*sha);
  }
  return h.FinishHex();
}

}  // namespace

Result<BundleReport> MakeBundle(const BundleRequest& req) {
  if (req.out.empty()) return MakeError(ErrorKind::kInvalidInput, "no output file for the bundle");
  auto plan = PlanBundle(req);
  if (!plan) return plan.error();
  if (auto packed = Pack(*plan, req.out); !packed) return packed.error();
  auto sha = agent::Sha256File(req.out);
  if (!sha) return sha.error();
  BundleReport report{req.out, *sha, plan->machine, plan->layout.loader, plan->files, 0};
  for (const BundledFile& f : report.files) report.total_bytes += f.size;
  return report;
}

Result<std::string> CachedBundle(const BundleRequest& req, const std::string& cache_dir) {
  auto plan = PlanBundle(req);
  if (!plan) return plan.error();
  auto digest = PlanDigest(*plan);
  if (!digest) return digest.error();
  const fs::path path = fs::path(cache_dir) / (fs::path(req.exe).filename().string() + "-" +
                                               digest->substr(0, 16) + ".bundle");
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path.string();
  fs::create_directories(cache_dir, ec);
  if (ec) return MakeError("cannot create '" + cache_dir + "': " + ec.message());
  if (auto packed = Pack(*plan, path.string()); !packed) return packed.error();
  return path.string();
}

}  // namespace dfarm::harness
