#include "agent/runner/tensor_files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <system_error>

#include "agent/base/regular_file.h"
#include "runtime/fp16.h"

namespace dfarm::runner {
namespace {

using runtime::DType;
using runtime::Tensor;

template <typename T, typename Dist>
void Fill(Tensor& t, std::mt19937& rng, Dist dist) {
  T* data = t.data_as<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) data[i] = static_cast<T>(dist(rng));
}

// A seeded gaussian over the tensor's real range, quantized with its params.
template <typename T>
void FillQuantized(Tensor& t, std::mt19937& rng) {
  constexpr double kMin = std::numeric_limits<T>::min();
  constexpr double kMax = std::numeric_limits<T>::max();
  const double scale = t.scale;
  const double zero_point = static_cast<double>(t.zero_point);
  const double real_min = scale * (kMin - zero_point);
  const double real_max = scale * (kMax - zero_point);
  std::normal_distribution<double> dist((real_min + real_max) / 2, (real_max - real_min) / 6);
  T* data = t.data_as<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double q = std::round(dist(rng) / scale) + zero_point;
    data[i] = static_cast<T>(std::clamp(q, kMin, kMax));
  }
}

bool HasUsableQuantization(const Tensor& t) {
  return t.quantized && !t.per_channel_quantized && std::isfinite(t.scale) && t.scale > 0.0f;
}

std::string Describe(const Tensor& t, size_t index, const char* role) {
  return std::string(role) + " " + std::to_string(index) + " '" + t.name + "' (" +
         runtime::DescribeTensor(t) + ")";
}

}  // namespace

void FillRandomInputs(runtime::Interpreter& interpreter, uint32_t seed) {
  FillRandomInputs(interpreter.inputs(), seed);
}

Result<void> LoadInputs(runtime::Interpreter& interpreter, const std::string& dir) {
  return LoadInputs(interpreter.inputs(), dir);
}

Result<void> DumpOutputs(const runtime::Interpreter& interpreter, const std::string& dir) {
  return DumpOutputs(interpreter.outputs(), dir);
}

void FillRandomInputs(const std::vector<runtime::Tensor*>& inputs, uint32_t seed) {
  std::mt19937 rng(seed);
  for (Tensor* t : inputs) {
    switch (t->dtype) {
      case DType::kFloat32:
        Fill<float>(*t, rng, std::uniform_real_distribution<float>(-1.0f, 1.0f));
        break;
      case DType::kFloat16: {
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        uint16_t* data = t->data_as<uint16_t>();
        for (int64_t i = 0; i < t->num_elements(); ++i) data[i] = runtime::FloatToHalf(dist(rng));
        break;
      }
      case DType::kInt8:
        if (HasUsableQuantization(*t)) {
          FillQuantized<int8_t>(*t, rng);
        } else {
          Fill<int8_t>(*t, rng, std::uniform_int_distribution<int>(-128, 127));
        }
        break;
      case DType::kUint8:
        if (HasUsableQuantization(*t)) {
          FillQuantized<uint8_t>(*t, rng);
        } else {
          Fill<uint8_t>(*t, rng, std::uniform_int_distribution<int>(0, 255));
        }
        break;
      case DType::kInt16:
        Fill<int16_t>(*t, rng, std::uniform_int_distribution<int>(-100, 100));
        break;
      case DType::kInt32:
        Fill<int32_t>(*t, rng, std::uniform_int_distribution<int>(-100, 100));
        break;
      case DType::kInt64:
        Fill<int64_t>(*t, rng, std::uniform_int_distribution<int>(-100, 100));
        break;
      case DType::kBool:
        Fill<uint8_t>(*t, rng, std::uniform_int_distribution<int>(0, 1));
        break;
    }
  }
}

Result<void> LoadInputs(const std::vector<runtime::Tensor*>& inputs, const std::string& dir) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& t = *inputs[i];
    std::string path =
        (std::filesystem::path(dir) / ("input_" + std::to_string(i) + ".bin")).string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return MakeError("input file '" + path + "' is missing (expected " + std::to_string(t.bytes) +
                       " bytes for " + Describe(t, i, "input") + ")");
    }
    uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec || size != t.bytes) {
      return MakeError("input file '" + path + "' has " + std::to_string(size) +
                       " bytes, expected " + std::to_string(t.bytes) + " bytes for " +
                       Describe(t, i, "input"));
    }
    auto fd = OpenRegularFile(path, "input file");  // never blocks on a FIFO
    if (!fd) return fd.error();
    size_t done = 0;
    while (done < t.bytes) {
      ssize_t n = ::read(fd->get(), reinterpret_cast<char*>(t.data) + done, t.bytes - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return MakeError("cannot read input file '" + path + "'");
      done += static_cast<size_t>(n);
    }
  }
  return Ok();
}

Result<void> DumpOutputs(const std::vector<runtime::Tensor*>& outputs, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return MakeError("cannot create output folder '" + dir + "': " + ec.message());
  nlohmann::json index = nlohmann::json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = *outputs[i];
    std::string path =
        (std::filesystem::path(dir) / ("output_" + std::to_string(i) + ".bin")).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
    if (!out) return MakeError("cannot write output file '" + path + "'");
    index.push_back({{"index", i},
                     {"name", t.name},
                     {"dtype", runtime::DTypeName(t.dtype)},
                     {"shape", t.shape}});
  }
  std::string path = (std::filesystem::path(dir) / "outputs.json").string();
  std::ofstream out(path, std::ios::trunc);
  out << index.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!out) return MakeError("cannot write '" + path + "'");
  return Ok();
}

}  // namespace dfarm::runner
