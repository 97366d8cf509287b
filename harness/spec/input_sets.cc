#include "harness/spec/input_sets.h"

#include <jpeglib.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/protocol/input_set.h"
#include "harness/spec/json_type_name.h"
#include "harness/spec/matrix.h"
#include "harness/spec/spec_paths.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint32_t kMaxImageSide = 8192;

Error Invalid(const std::string& where, const std::string& why) {
  return MakeError(ErrorKind::kInvalidInput, where + ": " + why);
}

bool HasInput0(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "input_0.bin", ec);
}

// "inputs": "sets/": the folder itself is one set when it holds input_0.bin,
// else each sub-folder is one.
Result<InputsSpec> ParseRawSets(const std::string& given, const std::string& where,
                                const std::string& spec_folder) {
  if (given.empty()) return Invalid(where, "empty path");
  fs::path dir = ResolveSpecPath(given, spec_folder);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Invalid(where, "'" + given +
                              "' is not a folder (expected a folder of input_<i>.bin "
                              "files, or of one sub-folder per input set)");
  }
  InputsSpec out;
  out.folder = dir.string();
  if (HasInput0(dir)) {
    out.set_dirs.push_back(dir.string());
    return out;
  }
  std::vector<std::string> subs;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) subs.push_back(e.path().string());
  }
  std::sort(subs.begin(), subs.end());
  for (const std::string& s : subs) {
    if (!HasInput0(s)) {
      return Invalid(where, "set folder '" + s + "' has no input_0.bin (every sub-folder of '" +
                                given + "' is one input set of input_<i>.bin files)");
    }
  }
  if (subs.empty()) {
    return Invalid(where, "folder '" + given + "' holds neither input_0.bin nor set sub-folders");
  }
  if (subs.size() > agent::kMaxInputSetsPerJob) {
    return Invalid(where, std::to_string(subs.size()) + " input sets; at most " +
                              std::to_string(agent::kMaxInputSetsPerJob));
  }
  out.set_dirs = std::move(subs);
  return out;
}

// "images": a list of files or a folder (its .png/.jpg/.jpeg files by name).
Result<std::vector<std::string>> ParseImageList(const json& v, const std::string& where,
                                                const std::string& spec_folder) {
  std::vector<std::string> images;
  std::error_code ec;
  if (v.is_string()) {
    fs::path dir = ResolveSpecPath(v.get<std::string>(), spec_folder);
    if (!fs::is_directory(dir, ec)) {
      return Invalid(where, "'" + v.get<std::string>() + "' is not a folder of images");
    }
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file(ec) && IsImageFile(e.path())) images.push_back(e.path().string());
    }
    std::sort(images.begin(), images.end());
    if (images.empty()) {
      return Invalid(where, "folder '" + v.get<std::string>() + "' holds no .png/.jpg/.jpeg file");
    }
  } else if (v.is_array()) {
    if (v.empty()) return Invalid(where, "is empty; list at least one image");
    for (size_t i = 0; i < v.size(); ++i) {
      std::string at = where + "[" + std::to_string(i) + "]";
      if (!v[i].is_string()) {
        return Invalid(at, std::string("expected an image path, got ") + JsonTypeName(v[i]));
      }
      fs::path p = ResolveSpecPath(v[i].get<std::string>(), spec_folder);
      if (!fs::is_regular_file(p, ec)) {
        return Invalid(at, "image '" + v[i].get<std::string>() + "' is not a file");
      }
      images.push_back(p.string());
    }
  } else {
    return Invalid(
        where, std::string("expected a list of image paths or a folder, got ") + JsonTypeName(v));
  }
  if (images.size() > agent::kMaxInputSetsPerJob) {
    return Invalid(where, std::to_string(images.size()) + " images; at most " +
                              std::to_string(agent::kMaxInputSetsPerJob) + " input sets per model");
  }
  return images;
}

Result<std::vector<double>> Numbers(const json& v, const std::string& where, size_t min_n,
                                    size_t max_n) {
  std::vector<double> out;
  if (v.is_number()) {
    out.push_back(v.get<double>());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number()) {
        return Invalid(where + "[" + std::to_string(i) + "]",
                       std::string("expected a number, got ") + JsonTypeName(v[i]));
      }
      out.push_back(v[i].get<double>());
    }
  } else {
    return Invalid(where, std::string("expected a list of numbers, got ") + JsonTypeName(v));
  }
  if (out.size() < min_n || out.size() > max_n) {
    return Invalid(where,
                   "expected " +
                       (min_n == max_n ? std::to_string(min_n)
                                       : std::to_string(min_n) + " to " + std::to_string(max_n)) +
                       " numbers, got " + std::to_string(out.size()));
  }
  for (double d : out) {
    if (!std::isfinite(d)) return Invalid(where, "numbers must be finite");
  }
  return out;
}

Result<std::string> OneOf(const json& v, const std::string& where,
                          const std::vector<const char*>& allowed) {
  std::string list;
  for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + "\"" + a + "\"";
  if (!v.is_string()) return Invalid(where, std::string("expected one of ") + list);
  std::string s = v.get<std::string>();
  for (const char* a : allowed) {
    if (s == a) return s;
  }
  return Invalid(where, "'" + s + "' is not one of " + list);
}

// "size": [height, width].
Result<void> ParseSize(const json& o, const std::string& where, ImageInputsSpec& out) {
  if (!o.contains("size")) {
    return Invalid(where, "missing key 'size' ([height, width] of the model's image input)");
  }
  const json& s = o["size"];
  if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer()) {
    return Invalid(where + ".size", "expected [height, width], two integers");
  }
  const int64_t h = s[0].get<int64_t>(), w = s[1].get<int64_t>();
  if (h < 1 || w < 1 || h > kMaxImageSide || w > kMaxImageSide) {
    return Invalid(where + ".size",
                   "height and width must be in 1.." + std::to_string(kMaxImageSide));
  }
  out.height = static_cast<uint32_t>(h);
  out.width = static_cast<uint32_t>(w);
  return Ok();
}

// "scale" or "mean"/"std", and "quantization".
Result<void> ParseNormalization(const json& o, const std::string& where, ImageInputsSpec& out) {
  const size_t c = out.channels == "GRAY" ? 1 : 3;
  if (o.contains("scale") && (o.contains("mean") || o.contains("std"))) {
    return Invalid(where, "give either \"scale\" or \"mean\"/\"std\", not both");
  }
  if (o.contains("scale")) {
    auto s = Numbers(o["scale"], where + ".scale", 2, 2);
    if (!s) return s.error();
    out.scale = (*s)[0];
    out.offset = (*s)[1];
  }
  if (o.contains("mean") || o.contains("std")) {
    out.mean.assign(c, 0.0);
    out.std.assign(c, 1.0);
    for (auto [key, dst] : {std::pair{"mean", &out.mean}, std::pair{"std", &out.std}}) {
      if (!o.contains(key)) continue;
      auto n = Numbers(o[key], where + "." + key, 1, c);
      if (!n) return n.error();
      if (n->size() != 1 && n->size() != c) {
        return Invalid(where + "." + key, "expected 1 or " + std::to_string(c) + " values");
      }
      for (size_t i = 0; i < c; ++i) (*dst)[i] = (*n)[n->size() == 1 ? 0 : i];
    }
    for (double s : out.std) {
      if (s == 0) return Invalid(where + ".std", "must not be 0");
    }
  }
  if (o.contains("quantization")) {
    if (out.dtype == "float32") {
      return Invalid(where + ".quantization", "applies to dtype uint8 or int8 only");
    }
    auto q = Numbers(o["quantization"], where + ".quantization", 2, 2);
    if (!q) return q.error();
    if (!((*q)[0] > 0)) return Invalid(where + ".quantization", "the scale must be > 0");
    if ((*q)[1] != std::floor((*q)[1]) || std::fabs((*q)[1]) > 255) {
      return Invalid(where + ".quantization", "the zero point must be an integer in -255..255");
    }
    out.quant_scale = (*q)[0];
    out.quant_zero_point = static_cast<int32_t>((*q)[1]);
  }
  return Ok();
}

Result<InputsSpec> ParseImages(const json& o, const std::string& where,
                               const std::string& spec_folder) {
  for (const auto& item : o.items()) {
    const std::string& key = item.key();  // not a structured binding: clang 14 lambdas
    static const char* kKeys[] = {"images", "size", "layout", "channels",    "scale",
                                  "mean",   "std",  "dtype",  "quantization"};
    if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; })) {
      return Invalid(where, "unknown key '" + key +
                                "' (expected images, size, layout, channels, scale, mean, std, "
                                "dtype, quantization)");
    }
  }
  if (!o.contains("images")) {
    return Invalid(where, "missing key 'images' (a list of PNG/JPEG files or a folder of them)");
  }
  ImageInputsSpec spec;
  auto images = ParseImageList(o["images"], where + ".images", spec_folder);
  if (!images) return images.error();
  spec.images = std::move(*images);
  if (auto r = ParseSize(o, where, spec); !r) return r.error();
  struct Choice {
    const char* key;
    std::string* dst;
    std::vector<const char*> allowed;
  };
  const Choice choices[] = {{"layout", &spec.layout, {"NHWC", "NCHW"}},
                            {"channels", &spec.channels, {"RGB", "BGR", "GRAY"}},
                            {"dtype", &spec.dtype, {"float32", "uint8", "int8"}}};
  for (const Choice& c : choices) {
    if (!o.contains(c.key)) continue;
    auto v = OneOf(o[c.key], where + "." + c.key, c.allowed);
    if (!v) return v.error();
    *c.dst = *v;
  }
  if (auto r = ParseNormalization(o, where, spec); !r) return r.error();
  InputsSpec out;
  out.images.push_back(std::move(spec));
  return out;
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  *ok = static_cast<bool>(in) || in.eof();
  return s.str();
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// libjpeg reports errors through longjmp back into DecodeJpeg.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

Result<Image> DecodeJpeg(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return MakeError(ErrorKind::kInvalidInput, "cannot read image '" + path + "'");
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  Image image;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return MakeError(ErrorKind::kInvalidInput,
                     "cannot decode JPEG '" + path + "': " + std::string(err.message));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f.get());
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  image.width = cinfo.output_width;
  image.height = cinfo.output_height;
  image.rgb.resize(static_cast<size_t>(image.width) * image.height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = image.rgb.data() + static_cast<size_t>(cinfo.output_scanline) * image.width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return image;
}

Result<Image> DecodePng(const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&png, path.c_str())) {
    return MakeError(ErrorKind::kInvalidInput,
                     "cannot decode PNG '" + path + "': " + std::string(png.message));
  }
  png.format = PNG_FORMAT_RGB;  // alpha dropped over black, gray and palette expanded
  Image image;
  image.width = png.width;
  image.height = png.height;
  image.rgb.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, image.rgb.data(), 0, nullptr)) {
    std::string why = png.message;
    png_image_free(&png);
    return MakeError(ErrorKind::kInvalidInput, "cannot decode PNG '" + path + "': " + why);
  }
  return image;
}

// Writes `bytes` to `path` unless it holds them already, through a temp file
// and rename (a cached file that was damaged is written again).
Result<void> WriteOnce(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) == bytes.size()) {
    bool ok = false;
    if (ReadFile(path, &ok) == bytes && ok) return Ok();
  }
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return MakeError("cannot write '" + temp + "'");
  }
  fs::rename(temp, path, ec);
  if (ec) return MakeError("cannot rename '" + temp + "' to '" + path + "': " + ec.message());
  return Ok();
}

Result<std::string> ReadRawSet(const std::string& dir) {
  std::vector<std::string> files;
  for (size_t i = 0;; ++i) {
    std::string path = (fs::path(dir) / ("input_" + std::to_string(i) + ".bin")).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) break;
    bool ok = false;
    files.push_back(ReadFile(path, &ok));
    if (!ok) return MakeError("cannot read '" + path + "'");
  }
  auto packed = agent::PackInputSet(files);
  if (!packed) return MakeError("input set '" + dir + "': " + packed.message());
  return packed;
}

}  // namespace

fs::path ResolveSpecPath(const std::string& given, const std::string& spec_folder) {
  fs::path p(given);
  if (p.is_relative()) p = fs::path(spec_folder) / p;
  return p.lexically_normal();
}

bool IsImageFile(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

Result<InputsSpec> ParseInputsSpec(const json& v, const std::string& where,
                                   const std::string& spec_folder) {
  if (v.is_string()) return ParseRawSets(v.get<std::string>(), where, spec_folder);
  if (v.is_object()) return ParseImages(v, where, spec_folder);
  return Invalid(where,
                 std::string("expected a folder of input sets or an object {\"images\":...}, "
                             "got ") +
                     JsonTypeName(v));
}

json InputsSpec::ToJson() const {
  if (!folder.empty()) return folder;
  if (images.empty()) return nullptr;
  const ImageInputsSpec& s = images.front();
  json o = {{"images", s.images},
            {"size", {s.height, s.width}},
            {"layout", s.layout},
            {"channels", s.channels},
            {"dtype", s.dtype}};
  if (s.mean.empty()) {
    o["scale"] = {s.scale, s.offset};
  } else {
    o["mean"] = s.mean;
    o["std"] = s.std;
  }
  if (s.dtype != "float32") o["quantization"] = {s.quant_scale, s.quant_zero_point};
  return o;
}

Result<Image> DecodeImage(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return MakeError(ErrorKind::kInvalidInput, "cannot read image '" + path + "'");
  unsigned char head[8] = {};
  size_t got = std::fread(head, 1, sizeof head, f.get());
  f.reset();
  if (got == 8 && png_sig_cmp(head, 0, 8) == 0) return DecodePng(path);
  if (got >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) return DecodeJpeg(path);
  return MakeError(ErrorKind::kInvalidInput,
                   "image '" + path + "' is neither a PNG nor a JPEG file");
}

std::vector<float> ResizeBilinear(const Image& image, uint32_t height, uint32_t width) {
  std::vector<float> out(static_cast<size_t>(height) * width * 3);
  if (image.width == 0 || image.height == 0) return out;
  const double sy = static_cast<double>(image.height) / height;
  const double sx = static_cast<double>(image.width) / width;
  auto at = [&](uint32_t y, uint32_t x, int c) {
    return static_cast<double>(image.rgb[(static_cast<size_t>(y) * image.width + x) * 3 + c]);
  };
  for (uint32_t y = 0; y < height; ++y) {
    const double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, image.height - 1.0);
    const uint32_t y0 = static_cast<uint32_t>(fy);
    const uint32_t y1 = std::min(y0 + 1, image.height - 1);
    const double wy = fy - y0;
    for (uint32_t x = 0; x < width; ++x) {
      const double fx = std::clamp((x + 0.5) * sx - 0.5, 0.0, image.width - 1.0);
      const uint32_t x0 = static_cast<uint32_t>(fx);
      const uint32_t x1 = std::min(x0 + 1, image.width - 1);
      const double wx = fx - x0;
      for (int c = 0; c < 3; ++c) {
        const double top = at(y0, x0, c) * (1 - wx) + at(y0, x1, c) * wx;
        const double bottom = at(y1, x0, c) * (1 - wx) + at(y1, x1, c) * wx;
        out[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<float>(top * (1 - wy) + bottom * wy);
      }
    }
  }
  return out;
}

Result<std::string> ImageToTensor(const Image& image, const ImageInputsSpec& spec) {
  if (spec.height == 0 || spec.width == 0) {
    return MakeError(ErrorKind::kInvalidInput, "image inputs need a size");
  }
  const std::vector<float> rgb = ResizeBilinear(image, spec.height, spec.width);
  const size_t c_count = spec.channels == "GRAY" ? 1 : 3;
  const size_t h = spec.height, w = spec.width;
  const size_t elem = spec.dtype == "float32" ? 4 : 1;
  std::string out(h * w * c_count * elem, '\0');
  for (size_t y = 0; y < h; ++y) {
    for (size_t x = 0; x < w; ++x) {
      const float* px = &rgb[(y * w + x) * 3];
      for (size_t c = 0; c < c_count; ++c) {
        double v;
        if (c_count == 1) {
          v = 0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2];
        } else {
          v = px[spec.channels == "BGR" ? 2 - c : c];
        }
        v = spec.mean.empty() ? v * spec.scale + spec.offset : (v - spec.mean[c]) / spec.std[c];
        const size_t index =
            spec.layout == "NCHW" ? (c * h + y) * w + x : (y * w + x) * c_count + c;
        if (spec.dtype == "float32") {
          const float f = static_cast<float>(v);
          std::memcpy(&out[index * 4], &f, 4);  // little-endian hosts (x86_64, aarch64)
          continue;
        }
        const double lo = spec.dtype == "uint8" ? 0 : -128, hi = spec.dtype == "uint8" ? 255 : 127;
        const double q =
            std::clamp(std::round(v / spec.quant_scale) + spec.quant_zero_point, lo, hi);
        const int qi = static_cast<int>(q);
        out[index] = static_cast<char>(static_cast<uint8_t>(qi & 0xff));
      }
    }
  }
  return out;
}

Result<std::vector<PreparedInputSet>> PrepareInputSets(const InputsSpec& inputs,
                                                       const std::string& cache_dir) {
  std::vector<PreparedInputSet> out;
  if (inputs.empty()) return out;
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return MakeError("cannot create the inputs cache '" + cache_dir + "': " + ec.message());
  auto add = [&](const std::string& packed, const std::string& label) -> Result<void> {
    PreparedInputSet set;
    set.sha256 = Sha256OfBytes(packed);
    set.path = (fs::path(cache_dir) / (set.sha256 + ".dfin")).string();
    set.label = label;
    if (auto r = WriteOnce(set.path, packed); !r) return r.error();
    out.push_back(std::move(set));
    return Ok();
  };
  for (const std::string& dir : inputs.set_dirs) {
    auto packed = ReadRawSet(dir);
    if (!packed) return packed.error();
    if (auto r = add(*packed, dir); !r) return r.error();
  }
  for (const ImageInputsSpec& spec : inputs.images) {
    for (const std::string& path : spec.images) {
      auto image = DecodeImage(path);
      if (!image) return image.error();
      auto tensor = ImageToTensor(*image, spec);
      if (!tensor) return MakeError(tensor.message() + " ('" + path + "')");
      auto packed = agent::PackInputSet({*tensor});
      if (!packed) return packed.error();
      if (auto r = add(*packed, path); !r) return r.error();
    }
  }
  return out;
}

std::string CacheDir(const char* env, const std::string& name) {
  if (const char* d = std::getenv(env); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    return (fs::path(x) / "dfarm" / name).string();
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return (fs::path(home) / ".cache" / "dfarm" / name).string();
  }
  std::string folder = "dfarm-";
  folder += name;
  folder += '-';
  folder += std::to_string(::getuid());
  return (fs::temp_directory_path() / folder).string();
}

std::string DefaultInputsCacheDir() { return CacheDir("DFARM_INPUTS_CACHE", "inputs"); }

}  // namespace dfarm::harness
