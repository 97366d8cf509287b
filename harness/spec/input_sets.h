// Real inputs for a model (spec model "inputs", docs/CONTRACTS.md): sets of
// raw input_<i>.bin files, or images decoded on the host (PNG with libpng,
// JPEG with libjpeg) and preprocessed into one raw input tensor each. Every
// set is packed into one artifact (agent/protocol/input_set.h) that travels
// to devices by sha256 like a model; the device only ever sees input_<i>.bin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "nlohmann/json_fwd.hpp"

namespace dfarm::harness {

// {"images": [...] or "dir/", "size": [H, W], ...}: one input set per image,
// each the model's input 0 (a model with more inputs fails on input_1.bin).
struct ImageInputsSpec {
  std::vector<std::string> images;  // absolute paths, in order
  uint32_t height = 0;              // "size": [height, width]
  uint32_t width = 0;
  std::string layout = "NHWC";   // or "NCHW"
  std::string channels = "RGB";  // "BGR", "GRAY"
  // Each 8-bit channel value x (0..255) becomes x * scale + offset ("scale":
  // [scale, offset]), or, with "mean"/"std" (one value, or one per channel),
  // (x - mean[c]) / std[c].
  double scale = 1.0;
  double offset = 0.0;
  std::vector<double> mean;
  std::vector<double> std;
  std::string dtype = "float32";  // "uint8", "int8"
  // uint8/int8: q = round(v / quant_scale) + quant_zero_point, saturated
  // ("quantization": [scale, zero_point]; default [1, 0]).
  double quant_scale = 1.0;
  int32_t quant_zero_point = 0;
};

// A model's "inputs": raw sets, images, or none (seeded random inputs).
struct InputsSpec {
  // Raw sets: the folder given (absolute) and its sets: the folder itself
  // when it holds input_0.bin, else each sub-folder (sorted by name).
  std::string folder;
  std::vector<std::string> set_dirs;
  std::vector<ImageInputsSpec> images;  // 0 or 1
  bool empty() const { return set_dirs.empty() && images.empty(); }
  // The spec form, paths absolute (SweepSpec::ToJson).
  nlohmann::json ToJson() const;
};

// Parses a model's "inputs" value `v` (named `where` in messages, e.g.
// "models[0] 'm.tflite'.inputs"); relative paths resolve against
// `spec_folder`. Errors (kInvalidInput) name the field and what to do.
Result<InputsSpec> ParseInputsSpec(const nlohmann::json& v, const std::string& where,
                                   const std::string& spec_folder);

// A decoded image: 8-bit channels interleaved, RGB (channels 3).
struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
};

// Decodes a PNG or JPEG file (told apart by its first bytes) to RGB.
Result<Image> DecodeImage(const std::string& path);

// Bilinear resize with half-pixel centres (like TF's resize_bilinear with
// half_pixel_centers and OpenCV's INTER_LINEAR), as floats 0..255, RGB.
std::vector<float> ResizeBilinear(const Image& image, uint32_t height, uint32_t width);

// The raw input tensor (input_0.bin bytes, little-endian) of one image under `spec`.
Result<std::string> ImageToTensor(const Image& image, const ImageInputsSpec& spec);

// One packed input set on the host, ready to push.
struct PreparedInputSet {
  std::string sha256;  // of the packed artifact
  std::string path;    // the packed file (in the cache folder)
  std::string label;   // the set folder or image it came from, for messages
};

// Packs every set of `inputs` (decoding and preprocessing images) into
// `cache_dir`/<sha256>.dfin (created; an existing file of that name is kept).
// An error names the set or image at fault.
Result<std::vector<PreparedInputSet>> PrepareInputSets(const InputsSpec& inputs,
                                                       const std::string& cache_dir);

// A cache folder of dfarm's on this host: $`env` when set, else
// $XDG_CACHE_HOME/dfarm/NAME, else ~/.cache/dfarm/NAME, else
// TMPDIR/dfarm-NAME-UID.
std::string CacheDir(const char* env, const std::string& name);

// Where packed sets go: CacheDir("DFARM_INPUTS_CACHE", "inputs").
std::string DefaultInputsCacheDir();

}  // namespace dfarm::harness
