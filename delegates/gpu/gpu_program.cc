#include "delegates/gpu/gpu_program.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "delegates/gpu/gpu_kernels.h"

namespace dfarm::delegates::gpu {
namespace {

using runtime::Status;

struct DeviceState {
  GpuDevice device;
  Status status;
};

DeviceState* CreateDeviceState() {
  auto* state = new DeviceState();
  std::string error;
  GpuDevice& d = state->device;
  d.api = LoadOpenCl(&error);
  if (d.api == nullptr) {
    state->status = Status::Unsupported(error);
    return state;
  }
  if (!PickOpenClDevice(*d.api, &d.platform, &d.device, &d.info, &error)) {
    state->status = Status::Unsupported(error);
    return state;
  }
  cl_int err = CL_SUCCESS;
  d.context = d.api->clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &err);
  if (d.context == nullptr || err != CL_SUCCESS) {
    state->status = Status::Unsupported("could not create an OpenCL context on " + d.info.name +
                                        ": " + OpenClErrorName(err));
    return state;
  }
  size_t wg = 1;
  if (d.api->clGetDeviceInfo(d.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(wg), &wg, nullptr) ==
      CL_SUCCESS) {
    d.max_work_group_size = wg;
  }
  return state;
}

uint64_t Fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// What a cache file must start with to be taken: the key of the program.
std::string CacheHeader(const GpuDevice& device, const ProgramRequest& request) {
  return "dfarm-gpu-program 1\ndevice " + device.info.name + "\ndriver " +
         device.info.driver_version + "\noptions " + request.build_options + "\nsource " +
         Hex(Fnv1a(kGpuKernelSource)) + "\n";
}

// The program cache of the process: (context, build options) -> program.
struct ProgramCache {
  std::mutex mu;
  std::map<std::pair<cl_context, std::string>, cl_program> programs;
};
ProgramCache& Cache() {
  static ProgramCache* cache = new ProgramCache();  // never freed: read at exit
  return *cache;
}

std::string BuildLog(const GpuDevice& d, cl_program program) {
  size_t size = 0;
  d.api->clGetProgramBuildInfo(program, d.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  if (size > 0) {
    d.api->clGetProgramBuildInfo(program, d.device, CL_PROGRAM_BUILD_LOG, size, log.data(),
                                 nullptr);
  }
  // The first lines: enough to see the first error.
  std::istringstream in(log);
  std::string line, head;
  for (int n = 0; n < 12 && std::getline(in, line); ++n) head += "\n  " + line;
  return head;
}

// Builds `program` (source or binary), timing it into stats->compile_us.
cl_int Build(const GpuDevice& d, cl_program program, const std::string& options,
             ProgramStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const cl_int err =
      d.api->clBuildProgram(program, 1, &d.device, options.c_str(), nullptr, nullptr);
  stats->compile_us +=
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return err;
}

// The binary stored for `request`, or empty when there is none that matches.
std::string ReadCacheFile(const GpuDevice& d, const ProgramRequest& request) {
  std::ifstream in(ProgramCachePath(d, request), std::ios::binary);
  if (!in) return {};
  std::stringstream data;
  data << in.rdbuf();
  const std::string bytes = data.str();
  const std::string header = CacheHeader(d, request);
  if (bytes.size() <= header.size() || bytes.compare(0, header.size(), header) != 0) return {};
  return bytes.substr(header.size());
}

// A program built from the cached binary, or null (a corrupt or foreign
// binary is dropped: the caller compiles).
cl_program LoadBinary(const GpuDevice& d, const ProgramRequest& request, ProgramStats* stats) {
  const std::string binary = ReadCacheFile(d, request);
  if (binary.empty()) return nullptr;
  const size_t size = binary.size();
  const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program =
      d.api->clCreateProgramWithBinary(d.context, 1, &d.device, &size, &bytes, &status, &err);
  if (program == nullptr) return nullptr;
  if (err != CL_SUCCESS || status != CL_SUCCESS ||
      Build(d, program, request.build_options, stats) != CL_SUCCESS) {
    d.api->clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

Status Compile(const GpuDevice& d, const ProgramRequest& request, ProgramStats* stats,
               cl_program* out) {
  const char* source = kGpuKernelSource;
  cl_int err = CL_SUCCESS;
  cl_program program = d.api->clCreateProgramWithSource(d.context, 1, &source, nullptr, &err);
  if (program == nullptr || err != CL_SUCCESS) {
    return Status::Error("clCreateProgramWithSource failed: " + OpenClErrorName(err));
  }
  err = Build(d, program, request.build_options, stats);
  if (err != CL_SUCCESS) {
    const std::string log = BuildLog(d, program);
    d.api->clReleaseProgram(program);
    return Status::Error("the gpu delegate's kernels failed to build on " + d.info.name +
                         " (options '" + request.build_options + "'): " + OpenClErrorName(err) +
                         log);
  }
  *out = program;
  return Status::Ok();
}

// Writes the program's binary to its cache file, atomically (tmp + rename).
// Best effort: a directory that cannot be written only costs the next start.
void WriteCacheFile(const GpuDevice& d, const ProgramRequest& request, cl_program program) {
  size_t size = 0;
  if (d.api->clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) !=
          CL_SUCCESS ||
      size == 0) {
    return;
  }
  std::vector<unsigned char> binary(size);
  unsigned char* ptr = binary.data();
  if (d.api->clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) !=
      CL_SUCCESS) {
    return;
  }
  const std::string path = ProgramCachePath(d, request);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::string header = CacheHeader(d, request);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(binary.data()), static_cast<std::streamsize>(size));
    if (!out) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

Status SharedGpuDevice(const GpuDevice** device_out) {
  static const DeviceState* state = CreateDeviceState();  // never freed: see the header
  if (!state->status.ok()) return state->status;
  *device_out = &state->device;
  return Status::Ok();
}

std::string ProgramCachePath(const GpuDevice& device, const ProgramRequest& request) {
  std::string token;
  for (char ch : request.model_token) {
    const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                       (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    token += plain ? ch : '_';
  }
  if (token.empty()) token = "model";
  return request.serialization_dir + "/" + token + "-" + Hex(Fnv1a(CacheHeader(device, request))) +
         ".clbin";
}

Status GetProgram(const GpuDevice& device, const ProgramRequest& request, ProgramStats* stats,
                  cl_program* program_out) {
  ProgramCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  const auto key = std::make_pair(device.context, request.build_options);
  const bool to_disk = !request.serialization_dir.empty();
  if (auto it = cache.programs.find(key); it != cache.programs.end()) {
    ++stats->reused;
    if (to_disk && !FileExists(ProgramCachePath(device, request))) {
      WriteCacheFile(device, request, it->second);
    }
    *program_out = it->second;
    return Status::Ok();
  }
  cl_program program = to_disk ? LoadBinary(device, request, stats) : nullptr;
  if (program != nullptr) {
    ++stats->loaded;
  } else {
    DFARM_RETURN_IF_ERROR(Compile(device, request, stats, &program));
    ++stats->compiled;
    if (to_disk) WriteCacheFile(device, request, program);
  }
  cache.programs.emplace(key, program);
  *program_out = program;
  return Status::Ok();
}

void ClearProgramCacheForTesting() {
  ProgramCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  const GpuDevice* device = nullptr;
  if (SharedGpuDevice(&device).ok()) {
    for (auto& [key, program] : cache.programs) device->api->clReleaseProgram(program);
  }
  cache.programs.clear();
}

}  // namespace dfarm::delegates::gpu
