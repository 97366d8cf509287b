#include "harness/eval/ssd_anchors.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <type_traits>

#include "harness/eval/eval_tasks.h"
#include "harness/spec/spec_paths.h"
#include "nlohmann/json.hpp"

namespace dfarm::harness {
namespace {

using eval_tasks::Bad;
using nlohmann::json;

// The generator's options, as SsdAnchorsCalculatorOptions names them.
struct AnchorOptions {
  int num_layers = 0;
  float min_scale = 0, max_scale = 0;
  int input_height = 0, input_width = 0;
  float offset_x = 0.5f, offset_y = 0.5f;
  std::vector<int> strides, feature_map_height, feature_map_width;
  std::vector<float> aspect_ratios;
  bool reduce_lowest = false;
  float interpolated_ratio = 1.0f;
  bool fixed_size = false;
};

const std::set<std::string> kOptionKeys = {"num_layers",
                                           "min_scale",
                                           "max_scale",
                                           "input_size_height",
                                           "input_size_width",
                                           "anchor_offset_x",
                                           "anchor_offset_y",
                                           "strides",
                                           "feature_map_height",
                                           "feature_map_width",
                                           "aspect_ratios",
                                           "reduce_boxes_in_lowest_layer",
                                           "interpolated_scale_aspect_ratio",
                                           "fixed_anchor_size"};

// `v` as a message shows it: whole numbers without a fraction.
std::string Num(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return json(v).dump();
}

// Number `key` of `o` in [lo, hi] into `out` (left as is when absent and
// not `required`).
Result<void> Number(const json& o, const char* key, const std::string& at, double lo, double hi,
                    bool required, float& out) {
  if (!o.contains(key)) {
    return required
               ? Bad(at + "." + key, "missing: give a number from " + Num(lo) + " to " + Num(hi))
               : Ok();
  }
  const json& v = o[key];
  if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi) {
    return Bad(at + "." + key,
               "expected a number from " + Num(lo) + " to " + Num(hi) + ", got " + v.dump());
  }
  out = v.get<float>();
  return Ok();
}

Result<void> Whole(const json& o, const char* key, const std::string& at, int lo, int hi,
                   int& out) {
  const json& v = o.contains(key) ? o[key] : json();
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return Bad(at + "." + key, "expected an integer from " + std::to_string(lo) + " to " +
                                   std::to_string(hi) +
                                   (o.contains(key) ? ", got " + v.dump() : ", missing"));
  }
  out = v.get<int>();
  return Ok();
}

Result<void> Flag(const json& o, const char* key, const std::string& at, bool& out) {
  if (!o.contains(key)) return Ok();
  if (!o[key].is_boolean()) return Bad(at + "." + key, "expected true or false");
  out = o[key].get<bool>();
  return Ok();
}

// List `key` of `o`: `count` entries (0: any number, at least one), each
// in [lo, hi].
template <typename T>
Result<void> List(const json& o, const char* key, const std::string& at, size_t count, double lo,
                  double hi, std::vector<T>& out) {
  const json& v = o[key];
  const bool fits = v.is_array() && !v.empty() && (count == 0 || v.size() == count) &&
                    std::all_of(v.begin(), v.end(), [&](const json& x) {
                      return (std::is_integral_v<T> ? x.is_number_integer() : x.is_number()) &&
                             x.get<double>() >= lo && x.get<double>() <= hi;
                    });
  if (!fits) {
    return Bad(at + "." + key,
               "expected a list of " + (count ? std::to_string(count) + " " : std::string()) +
                   (std::is_integral_v<T> ? "integers" : "numbers") + " from " + Num(lo) + " to " +
                   Num(hi) + (count ? " (one per layer)" : "") + ", got " + v.dump());
  }
  for (const json& x : v) out.push_back(x.get<T>());
  return Ok();
}

Result<void> ReadSizes(const json& o, const std::string& at, AnchorOptions& a) {
  if (auto r = Whole(o, "num_layers", at, 1, 64, a.num_layers); !r) return r;
  if (auto r = Whole(o, "input_size_height", at, 1, 16384, a.input_height); !r) return r;
  if (auto r = Whole(o, "input_size_width", at, 1, 16384, a.input_width); !r) return r;
  const size_t layers = static_cast<size_t>(a.num_layers);
  if (!o.contains("strides")) return Bad(at, "missing \"strides\": one per layer");
  if (auto r = List(o, "strides", at, layers, 1, 16384, a.strides); !r) return r;
  if (o.contains("feature_map_height") != o.contains("feature_map_width")) {
    return Bad(at,
               "give both \"feature_map_height\" and \"feature_map_width\" (one per layer), "
               "or neither (the strides set the grids)");
  }
  if (o.contains("feature_map_height")) {
    if (auto r = List(o, "feature_map_height", at, layers, 1, 16384, a.feature_map_height); !r) {
      return r;
    }
    if (auto r = List(o, "feature_map_width", at, layers, 1, 16384, a.feature_map_width); !r) {
      return r;
    }
  }
  return Ok();
}

Result<AnchorOptions> ReadOptions(const json& o, const std::string& at) {
  if (!o.is_object()) {
    return Bad(at,
               "expected an object of SsdAnchorsCalculator options (num_layers, min_scale, "
               "max_scale, input_size_height, input_size_width, strides, aspect_ratios, ...)");
  }
  for (const auto& item : o.items()) {
    if (kOptionKeys.count(item.key())) continue;
    std::string known;
    for (const std::string& k : kOptionKeys) known += (known.empty() ? "" : ", ") + k;
    return Bad(at, "unknown key '" + item.key() + "' (expected " + known + ")");
  }
  AnchorOptions a;
  if (auto r = ReadSizes(o, at, a); !r) return r.error();
  if (auto r = Number(o, "min_scale", at, 1e-6, 100, true, a.min_scale); !r) return r.error();
  if (auto r = Number(o, "max_scale", at, 1e-6, 100, true, a.max_scale); !r) return r.error();
  if (auto r = Number(o, "anchor_offset_x", at, 0, 1, false, a.offset_x); !r) return r.error();
  if (auto r = Number(o, "anchor_offset_y", at, 0, 1, false, a.offset_y); !r) return r.error();
  if (auto r =
          Number(o, "interpolated_scale_aspect_ratio", at, 0, 100, false, a.interpolated_ratio);
      !r) {
    return r.error();
  }
  if (!o.contains("aspect_ratios")) return Bad(at, "missing \"aspect_ratios\": e.g. [1.0]");
  if (auto r = List(o, "aspect_ratios", at, 0, 1e-6, 100, a.aspect_ratios); !r) return r.error();
  if (auto r = Flag(o, "reduce_boxes_in_lowest_layer", at, a.reduce_lowest); !r) return r.error();
  if (auto r = Flag(o, "fixed_anchor_size", at, a.fixed_size); !r) return r.error();
  return a;
}

// SsdAnchorsCalculator's scale of layer `index` of `count`.
float LayerScale(const AnchorOptions& a, int index, int count) {
  if (count == 1) return (a.min_scale + a.max_scale) * 0.5f;
  return a.min_scale + (a.max_scale - a.min_scale) * 1.0 * index / (count - 1.0f);
}

// The (scale, aspect ratio) pairs of the layers [first, end) sharing a stride.
void LayerShapes(const AnchorOptions& a, int first, int end, std::vector<float>& scales,
                 std::vector<float>& ratios) {
  const int count = static_cast<int>(a.strides.size());
  for (int layer = first; layer < end; ++layer) {
    const float scale = LayerScale(a, layer, count);
    if (layer == 0 && a.reduce_lowest) {
      ratios.insert(ratios.end(), {1.0f, 2.0f, 0.5f});
      scales.insert(scales.end(), {0.1f, scale, scale});
      continue;
    }
    for (float ratio : a.aspect_ratios) {
      ratios.push_back(ratio);
      scales.push_back(scale);
    }
    if (a.interpolated_ratio > 0) {
      const float next = layer == count - 1 ? 1.0f : LayerScale(a, layer + 1, count);
      scales.push_back(std::sqrt(scale * next));
      ratios.push_back(a.interpolated_ratio);
    }
  }
}

}  // namespace

Result<std::vector<SsdAnchor>> GenerateSsdAnchors(const json& options, const std::string& at) {
  auto read = ReadOptions(options, at);
  if (!read) return read.error();
  const AnchorOptions& a = *read;
  std::vector<SsdAnchor> anchors;
  int layer = 0;
  while (layer < a.num_layers) {
    int end = layer;
    while (end < a.num_layers && a.strides[end] == a.strides[layer]) ++end;
    std::vector<float> scales, ratios;
    LayerShapes(a, layer, end, scales, ratios);
    int rows = 0, cols = 0;
    if (!a.feature_map_height.empty()) {
      rows = a.feature_map_height[layer];
      cols = a.feature_map_width[layer];
    } else {
      rows = static_cast<int>(std::ceil(1.0f * a.input_height / a.strides[layer]));
      cols = static_cast<int>(std::ceil(1.0f * a.input_width / a.strides[layer]));
    }
    if (anchors.size() + static_cast<size_t>(rows) * cols * scales.size() > 10'000'000) {
      return Bad(at, "more than 10000000 anchors: check strides and feature map sizes");
    }
    for (int y = 0; y < rows; ++y) {
      for (int x = 0; x < cols; ++x) {
        for (size_t k = 0; k < scales.size(); ++k) {
          const float root = std::sqrt(ratios[k]);
          const float cx = (x + a.offset_x) * 1.0f / cols;
          const float cy = (y + a.offset_y) * 1.0f / rows;
          const float h = a.fixed_size ? 1.0f : scales[k] / root;
          const float w = a.fixed_size ? 1.0f : scales[k] * root;
          anchors.push_back({cy, cx, h, w});
        }
      }
    }
    layer = end;
  }
  return anchors;
}

Result<std::vector<SsdAnchor>> ReadAnchorsFile(const std::string& path, const std::string& at) {
  std::ifstream in(path);
  if (!in) return Bad(at, "anchors file '" + path + "' cannot be read");
  std::vector<SsdAnchor> anchors;
  size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = eval_tasks::Trim(line);
    if (line.empty() || line[0] == '#' || line == "y_center,x_center,h,w") continue;
    double v[4];
    size_t field = 0, start = 0;
    for (; field < 4 && start <= line.size(); ++field) {
      const size_t comma = std::min(line.find(',', start), line.size());
      const std::string text = eval_tasks::Trim(line.substr(start, comma - start));
      char* end = nullptr;
      v[field] = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v[field])) break;
      start = comma + 1;
    }
    if (field != 4 || start <= line.size() || v[2] <= 0 || v[3] <= 0) {
      return Bad(at, "anchors file '" + path + "' line " + std::to_string(line_no) + ": '" + line +
                         "' is not y_center,x_center,h,w (four numbers, h and w above 0)");
    }
    anchors.push_back({v[0], v[1], v[2], v[3]});
  }
  if (anchors.empty()) return Bad(at, "anchors file '" + path + "' lists no anchor");
  return anchors;
}

namespace {

// A number `key` of `d` in [lo, hi] into `out`; left as is when absent.
Result<void> Real(const json& d, const char* key, const std::string& at, double lo, double hi,
                  double& out) {
  if (!d.contains(key)) return Ok();
  if (!d[key].is_number() || !(d[key].get<double>() >= lo) || !(d[key].get<double>() <= hi)) {
    return Bad(at + "." + key,
               "expected a number from " + Num(lo) + " to " + Num(hi) + ", got " + d[key].dump());
  }
  out = d[key].get<double>();
  return Ok();
}

// A string `key` of `d` among `allowed` into `out`; left as is when absent.
Result<void> Choice(const json& d, const char* key, const std::string& at,
                    const std::vector<std::string>& allowed, const std::string& why,
                    std::string& out) {
  if (!d.contains(key)) return Ok();
  if (d[key].is_string() &&
      std::find(allowed.begin(), allowed.end(), d[key].get<std::string>()) != allowed.end()) {
    out = d[key].get<std::string>();
    return Ok();
  }
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  return Bad(at + "." + key, "expected " + list + " (" + why + "), got " + d[key].dump());
}

Result<void> ParseScales(const json& d, const std::string& at, SsdAnchorDecoder& out) {
  if (!d.contains("scales")) return Ok();
  const json& s = d["scales"];
  const std::string where = at + ".scales";
  if (!s.is_object()) return Bad(where, "expected {\"y\":..,\"x\":..,\"h\":..,\"w\":..}");
  for (const auto& item : s.items()) {
    if (item.key() != "y" && item.key() != "x" && item.key() != "h" && item.key() != "w") {
      return Bad(where, "unknown key '" + item.key() + "' (expected y, x, h, w)");
    }
  }
  for (auto [key, dst] : {std::pair{"y", &out.scale_y}, std::pair{"x", &out.scale_x},
                          std::pair{"h", &out.scale_h}, std::pair{"w", &out.scale_w}}) {
    if (auto r = Real(s, key, where, 1e-9, 1e9, *dst); !r) return r;
  }
  return Ok();
}

Result<void> LoadAnchors(const json& d, const std::string& at, const std::string& spec_folder,
                         SsdAnchorDecoder& out) {
  if (d.contains("anchors") == d.contains("anchors_file")) {
    return Bad(at,
               "give \"anchors\" (SsdAnchorsCalculator options: num_layers, min_scale, ...) "
               "or \"anchors_file\" (one y_center,x_center,h,w per line), one of them");
  }
  Result<std::vector<SsdAnchor>> anchors = std::vector<SsdAnchor>{};
  if (d.contains("anchors")) {
    anchors = GenerateSsdAnchors(d["anchors"], at + ".anchors");
    out.anchor_options = d["anchors"].dump();
  } else {
    if (!d["anchors_file"].is_string() || d["anchors_file"] == "") {
      return Bad(at + ".anchors_file", "expected the path of a text file of anchors");
    }
    out.anchors_file = ResolveSpecPath(d["anchors_file"].get<std::string>(), spec_folder).string();
    anchors = ReadAnchorsFile(out.anchors_file, at + ".anchors_file");
  }
  if (!anchors) return anchors.error();
  out.anchors = std::make_shared<const std::vector<SsdAnchor>>(std::move(*anchors));
  return Ok();
}

double Iou(const runner::TaskDetection& a, const runner::TaskDetection& b) {
  const double ih = std::min(a.ymax, b.ymax) - std::max(a.ymin, b.ymin);
  const double iw = std::min(a.xmax, b.xmax) - std::max(a.xmin, b.xmin);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  const double area_a = (a.ymax - a.ymin) * (a.xmax - a.xmin);
  const double area_b = (b.ymax - b.ymin) * (b.xmax - b.xmin);
  const double uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0;
}

// Higher score first; ties: the lower anchor, then the lower class.
bool Better(const runner::TaskDetection& a, const runner::TaskDetection& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.anchor != b.anchor) return a.anchor < b.anchor;
  return a.class_index < b.class_index;
}

// Row `r`'s box decoded against `a`: ymin, xmin, ymax, xmax in its slots.
runner::TaskDetection DecodeBox(const SsdAnchorDecoder& d, const SsdAnchor& a,
                                runner::TaskDetection r) {
  const double v[4] = {r.ymin, r.xmin, r.ymax, r.xmax};  // the four offsets as listed
  const bool yx = d.box_format == "yxhw";
  const double ty = yx ? v[0] : v[1], tx = yx ? v[1] : v[0];
  const double th = yx ? v[2] : v[3], tw = yx ? v[3] : v[2];
  const double cy = ty / d.scale_y * a.h + a.y;
  const double cx = tx / d.scale_x * a.w + a.x;
  const double h = d.exponential_size ? std::exp(th / d.scale_h) * a.h : th / d.scale_h * a.h;
  const double w = d.exponential_size ? std::exp(tw / d.scale_w) * a.w : tw / d.scale_w * a.w;
  r.ymin = cy - h / 2;
  r.xmin = cx - w / 2;
  r.ymax = cy + h / 2;
  r.xmax = cx + w / 2;
  return r;
}

}  // namespace

Result<std::vector<runner::TaskDetection>> DecodeAnchorRows(
    const SsdAnchorDecoder& decoder, const std::vector<runner::TaskDetection>& rows,
    uint32_t max_detections) {
  const size_t count = decoder.anchors ? decoder.anchors->size() : 0;
  std::map<int64_t, std::vector<runner::TaskDetection>> by_class;
  for (const runner::TaskDetection& r : rows) {
    if (r.anchor < 0 || static_cast<size_t>(r.anchor) >= count) {
      return MakeError("the runner listed anchor " + std::to_string(r.anchor) + " but the " +
                       "decoder has " + std::to_string(count) + " anchors");
    }
    if (r.score < decoder.score_threshold) continue;
    by_class[r.class_index].push_back(
        DecodeBox(decoder, (*decoder.anchors)[static_cast<size_t>(r.anchor)], r));
  }
  std::vector<runner::TaskDetection> kept;
  for (auto& [cls, boxes] : by_class) {
    std::sort(boxes.begin(), boxes.end(), Better);
    const size_t first = kept.size();
    for (const runner::TaskDetection& b : boxes) {
      const bool suppressed = std::any_of(
          kept.begin() + static_cast<std::ptrdiff_t>(first), kept.end(),
          [&](const runner::TaskDetection& k) { return Iou(k, b) > decoder.iou_threshold; });
      if (!suppressed) kept.push_back(b);
    }
  }
  std::sort(kept.begin(), kept.end(), Better);
  if (kept.size() > max_detections) kept.resize(max_detections);
  return kept;
}

}  // namespace dfarm::harness

namespace dfarm::harness {

Result<SsdAnchorDecoder> ParseSsdAnchorDecoder(const json& d, const std::string& at,
                                               const std::string& spec_folder) {
  SsdAnchorDecoder out;
  if (auto r = LoadAnchors(d, at, spec_folder, out); !r) return r.error();
  if (auto r = ParseScales(d, at, out); !r) return r.error();
  if (auto r = Choice(d, "box_format", at, {"yxhw", "xywh"},
                      "the order of the box output's first four values", out.box_format);
      !r) {
    return r.error();
  }
  std::string size = "linear";
  if (auto r = Choice(d, "box_size", at, {"linear", "exponential"},
                      "h = th / scale_h * anchor h, or exp(th / scale_h) * anchor h", size);
      !r) {
    return r.error();
  }
  out.exponential_size = size == "exponential";
  if (auto r = Choice(d, "score", at, {"sigmoid", "softmax", "raw"},
                      "the activation of the class scores", out.score);
      !r) {
    return r.error();
  }
  const double most = out.score == "raw" ? 1e9 : 1;
  if (auto r =
          Real(d, "score_threshold", at, out.score == "raw" ? -1e9 : 0, most, out.score_threshold);
      !r) {
    return r.error();
  }
  if (auto r = Real(d, "iou_threshold", at, 0, 1, out.iou_threshold); !r) return r.error();
  double candidates = out.max_candidates;
  if (auto r = Real(d, "max_candidates", at, 1, 100000, candidates); !r) return r.error();
  if (candidates != std::floor(candidates)) {
    return Bad(at + ".max_candidates", "expected an integer from 1 to 100000");
  }
  out.max_candidates = static_cast<uint32_t>(candidates);
  return out;
}

void AddSsdAnchorDecoderJson(const SsdAnchorDecoder& decoder, json& out) {
  if (!decoder.anchor_options.empty()) {
    out["anchors"] = json::parse(decoder.anchor_options);
  } else {
    out["anchors_file"] = decoder.anchors_file;
  }
  out["scales"] = {{"y", decoder.scale_y},
                   {"x", decoder.scale_x},
                   {"h", decoder.scale_h},
                   {"w", decoder.scale_w}};
  out["box_format"] = decoder.box_format;
  out["box_size"] = decoder.exponential_size ? "exponential" : "linear";
  out["score"] = decoder.score;
  out["score_threshold"] = decoder.score_threshold;
  out["iou_threshold"] = decoder.iou_threshold;
  out["max_candidates"] = decoder.max_candidates;
}

}  // namespace dfarm::harness
