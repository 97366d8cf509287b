#include "harness/eval/eval_tasks.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "harness/spec/input_sets.h"
#include "harness/spec/spec_paths.h"
#include "nlohmann/json.hpp"

namespace dfarm::harness::eval_tasks {

Error Bad(const std::string& where, const std::string& why) {
  return MakeError(ErrorKind::kInvalidInput, where + ": " + why);
}

std::string Trim(std::string s) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An integer field `key` of `o` in [lo, hi].
Result<int64_t> Integer(const json& o, const char* key, const std::string& at, int64_t lo,
                        int64_t hi) {
  if (!o.contains(key) || !o[key].is_number_integer() || o[key].get<int64_t>() < lo ||
      o[key].get<int64_t>() > hi) {
    return Bad(at + "." + key, "expected an integer from " + std::to_string(lo) + " to " +
                                   std::to_string(hi) +
                                   (o.contains(key) ? ", got " + o[key].dump() : ", missing"));
  }
  return o[key].get<int64_t>();
}

Result<void> CheckKeys(const json& d, const std::string& at, const std::set<std::string>& keys) {
  for (const auto& item : d.items()) {
    if (keys.count(item.key())) continue;
    std::string known;
    for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
    return Bad(at, "unknown key '" + item.key() + "' (expected " + known + ")");
  }
  return Ok();
}

Result<void> ParseSsdDecoder(const json& d, const std::string& at, EvalSpec& e) {
  if (auto r = CheckKeys(d, at,
                         {"type", "boxes", "classes", "scores", "count", "class_offset",
                          "box_order", "max_detections"});
      !r) {
    return r;
  }
  e.box_outputs.clear();
  for (const char* key : {"boxes", "classes", "scores", "count"}) {
    auto v = Integer(d, key, at, 0, 1023);
    if (!v) return v.error();
    e.box_outputs.push_back(static_cast<uint32_t>(*v));
  }
  if (d.contains("class_offset")) {
    auto v = Integer(d, "class_offset", at, 0, 1000);
    if (!v) return v.error();
    e.offset = static_cast<int32_t>(*v);
  }
  if (d.contains("max_detections")) {
    auto v = Integer(d, "max_detections", at, 1, 1000);
    if (!v) return v.error();
    e.max_detections = static_cast<uint32_t>(*v);
  }
  if (d.contains("box_order")) {
    if (d["box_order"] != "yxyx" && d["box_order"] != "xyxy") {
      return Bad(at + ".box_order",
                 "expected \"yxyx\" (TFLite's post-process: ymin, xmin, ymax, xmax) or "
                 "\"xyxy\", normalized to the image");
    }
    e.box_order = d["box_order"].get<std::string>();
  }
  return Ok();
}

// "ssd_anchors": the outputs and the keys every detection decoder shares
// here, the rest in ParseSsdAnchorDecoder.
Result<void> ParseAnchorsDecoder(const json& d, const std::string& at,
                                 const std::string& spec_folder, EvalSpec& e) {
  if (auto r = CheckKeys(d, at,
                         {"type", "boxes", "scores", "class_offset", "max_detections", "anchors",
                          "anchors_file", "scales", "box_format", "box_size", "score",
                          "score_threshold", "iou_threshold", "max_candidates"});
      !r) {
    return r;
  }
  e.box_outputs.clear();
  for (const char* key : {"boxes", "scores"}) {
    auto v = Integer(d, key, at, 0, 1023);
    if (!v) return v.error();
    e.box_outputs.push_back(static_cast<uint32_t>(*v));
  }
  for (auto [key, lo, hi] :
       {std::tuple{"class_offset", 0, 1000}, std::tuple{"max_detections", 1, 1000}}) {
    if (!d.contains(key)) continue;
    auto v = Integer(d, key, at, lo, hi);
    if (!v) return v.error();
    if (std::string(key) == "class_offset") e.offset = static_cast<int32_t>(*v);
    if (std::string(key) == "max_detections") e.max_detections = static_cast<uint32_t>(*v);
  }
  auto decoder = ParseSsdAnchorDecoder(d, at, spec_folder);
  if (!decoder) return decoder.error();
  e.box_order = "yxyx";
  e.anchor_decoder = std::move(*decoder);
  return Ok();
}

// COCO's "categories": names in order and ids.
Result<void> ReadCategories(const json& doc, const std::string& at, std::vector<int64_t>& ids,
                            EvalSpec& e) {
  if (!doc.contains("categories") || !doc["categories"].is_array() || doc["categories"].empty()) {
    return Bad(at + ": categories", "expected a non-empty list of {\"id\",\"name\"}");
  }
  for (size_t i = 0; i < doc["categories"].size(); ++i) {
    const json& c = doc["categories"][i];
    const std::string entry = at + ": categories[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) {
      return Bad(entry, "expected {\"id\": integer, \"name\": string}");
    }
    auto id = Integer(c, "id", entry, 0, int64_t{1} << 40);
    if (!id) return id.error();
    ids.push_back(*id);
    e.classes.push_back(c["name"].get<std::string>());
  }
  return Ok();
}

// Model class -> category id from "category_ids", "labels" or the order.
Result<void> MapCategories(const json& v, const std::vector<int64_t>& ids, const std::string& where,
                           EvalSpec& e) {
  if (v.contains("category_ids")) {
    const json& list = v["category_ids"];
    if (!list.is_array() || list.empty()) {
      return Bad(where + ".category_ids", "expected a list: model class i -> COCO category id");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const int64_t id = list[i].is_number_integer() ? list[i].get<int64_t>() : -2;
      if (id != -1 && std::find(ids.begin(), ids.end(), id) == ids.end()) {
        return Bad(where + ".category_ids[" + std::to_string(i) + "]",
                   list[i].dump() + " is not a category id of the annotations (-1: no category)");
      }
      e.category_ids.push_back(id);
    }
    return Ok();
  }
  if (e.labels_file.empty()) {
    e.category_ids = ids;
    return Ok();
  }
  std::ifstream in(e.labels_file);
  bool any = false;
  for (std::string line; std::getline(in, line);) {
    const auto it = std::find(e.classes.begin(), e.classes.end(), Trim(line));
    const bool found = it != e.classes.end();
    e.category_ids.push_back(found ? ids[static_cast<size_t>(it - e.classes.begin())] : -1);
    any = any || found;
  }
  if (!any) {
    return Bad(where + ".labels", "no line of '" + e.labels_file +
                                      "' is a category name of the annotations: give "
                                      "\"category_ids\" (model class i -> category id)");
  }
  return Ok();
}

// COCO's "images": id -> index; file, width and height of each.
Result<std::map<int64_t, size_t>> ReadImages(const json& doc, const std::string& at,
                                             const fs::path& folder, EvalSpec& e) {
  if (!doc.contains("images") || !doc["images"].is_array() || doc["images"].empty()) {
    return Bad(at + ": images", "expected a non-empty list of {\"id\",\"file_name\",...}");
  }
  std::map<int64_t, size_t> index;
  std::error_code ec;
  for (size_t i = 0; i < doc["images"].size(); ++i) {
    const json& im = doc["images"][i];
    const std::string entry = at + ": images[" + std::to_string(i) + "]";
    if (!im.is_object() || !im.contains("file_name") || !im["file_name"].is_string()) {
      return Bad(entry + ".file_name", "expected the image's file name");
    }
    auto id = Integer(im, "id", entry, 0, int64_t{1} << 52);
    auto w = Integer(im, "width", entry, 1, 1 << 16);
    auto h = Integer(im, "height", entry, 1, 1 << 16);
    if (!id) return id.error();
    if (!w) return w.error();
    if (!h) return h.error();
    const fs::path file = (folder / im["file_name"].get<std::string>()).lexically_normal();
    if (!fs::is_regular_file(file, ec)) {
      return Bad(entry + ".file_name", "'" + file.string() + "' is not a file");
    }
    if (!index.emplace(*id, e.images.size()).second) {
      return Bad(entry + ".id", std::to_string(*id) + " is the id of an earlier image too");
    }
    e.images.push_back(file.string());
    e.widths.push_back(static_cast<uint32_t>(*w));
    e.heights.push_back(static_cast<uint32_t>(*h));
  }
  return index;
}

Result<void> ReadAnnotations(const json& doc, const std::string& at,
                             const std::map<int64_t, size_t>& images,
                             const std::vector<int64_t>& ids, EvalSpec& e) {
  if (!doc.contains("annotations") || !doc["annotations"].is_array()) {
    return Bad(at + ": annotations", "expected a list of {\"image_id\",\"category_id\",\"bbox\"}");
  }
  for (size_t i = 0; i < doc["annotations"].size(); ++i) {
    const json& a = doc["annotations"][i];
    const std::string entry = at + ": annotations[" + std::to_string(i) + "]";
    if (!a.is_object()) return Bad(entry, "expected an object");
    auto image = Integer(a, "image_id", entry, 0, int64_t{1} << 52);
    auto category = Integer(a, "category_id", entry, 0, int64_t{1} << 40);
    if (!image) return image.error();
    if (!category) return category.error();
    if (!images.count(*image)) {
      return Bad(entry + ".image_id", std::to_string(*image) + " is not an image's id");
    }
    if (std::find(ids.begin(), ids.end(), *category) == ids.end()) {
      return Bad(entry + ".category_id", std::to_string(*category) + " is not a category's id");
    }
    if (a.contains("iscrowd") && a["iscrowd"] != 0) {
      return Bad(entry + ".iscrowd",
                 "crowd annotations are not scored (COCO's crowd rules are "
                 "not implemented): leave them out");
    }
    const json& b = a.contains("bbox") ? a["bbox"] : json();
    if (!b.is_array() || b.size() != 4 ||
        !std::all_of(b.begin(), b.end(), [](const json& x) { return x.is_number(); })) {
      return Bad(entry + ".bbox", "expected [x, y, width, height] in pixels");
    }
    EvalTruthBox t{images.at(*image),  *category,          b[0].get<double>(),
                   b[1].get<double>(), b[2].get<double>(), b[3].get<double>()};
    if (t.x < 0 || t.y < 0 || t.w < 0 || t.h < 0) {
      return Bad(entry + ".bbox", b.dump() + " has a negative coordinate or size");
    }
    e.truth.push_back(t);
  }
  return Ok();
}

// The mask of each pair's stem in masks/, for each image of images/.
Result<void> LoadPairFolder(const fs::path& dir, const std::string& where, EvalSpec& e) {
  std::error_code ec;
  if (!fs::is_directory(dir / "images", ec) || !fs::is_directory(dir / "masks", ec)) {
    return Bad(where, "folder '" + dir.string() +
                          "' needs images/ and masks/ (a mask <stem>.png per image <stem>.*)");
  }
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(dir / "images", ec)) {
    if (f.is_regular_file(ec) && IsImageFile(f.path())) files.push_back(f.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    const fs::path mask = dir / "masks" / (fs::path(f).stem().string() + ".png");
    if (!fs::is_regular_file(mask, ec)) {
      return Bad(where, "image '" + fs::path(f).filename().string() + "' has no mask '" +
                            mask.string() + "'");
    }
    e.images.push_back(f);
    e.mask_files.push_back(mask.string());
  }
  if (e.images.empty()) return Bad(where, "no image under '" + (dir / "images").string() + "'");
  return Ok();
}

// `image,mask` per line (a first line "image,mask" is a header).
Result<void> LoadPairList(const fs::path& file, const std::string& where, EvalSpec& e) {
  std::ifstream in(file);
  if (!in) return Bad(where, "list file '" + file.string() + "' cannot be read");
  size_t line_no = 0;
  std::error_code ec;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = Trim(line);
    if (line.empty() || line[0] == '#' || (line_no == 1 && line == "image,mask")) continue;
    const std::string entry = file.filename().string() + " line " + std::to_string(line_no);
    const size_t comma = line.rfind(',');
    if (comma == std::string::npos) return Bad(where, entry + ": expected image,mask");
    const std::string names[2] = {Trim(line.substr(0, comma)), Trim(line.substr(comma + 1))};
    for (const std::string& name : names) {
      if (!fs::is_regular_file(file.parent_path() / name, ec)) {
        return Bad(where, entry + ": '" + name + "' is not a file");
      }
    }
    e.images.push_back((file.parent_path() / names[0]).lexically_normal().string());
    e.mask_files.push_back((file.parent_path() / names[1]).lexically_normal().string());
  }
  if (e.images.empty()) return Bad(where, "list file '" + file.string() + "' lists no pair");
  return Ok();
}

// The mask of `file`: its gray values, at the size of `image_file`.
Result<EvalMask> ReadMask(const std::string& file, const std::string& image_file) {
  auto mask = DecodeImage(file);
  if (!mask) return MakeError(ErrorKind::kInvalidInput, "mask '" + file + "': " + mask.message());
  auto image = DecodeImage(image_file);
  if (!image) {
    return MakeError(ErrorKind::kInvalidInput, "image '" + image_file + "': " + image.message());
  }
  if (mask->width != image->width || mask->height != image->height) {
    return MakeError(ErrorKind::kInvalidInput,
                     "mask '" + file + "' is " + std::to_string(mask->width) + "x" +
                         std::to_string(mask->height) + " but its image '" + image_file + "' is " +
                         std::to_string(image->width) + "x" + std::to_string(image->height) +
                         ": a mask has its image's size");
  }
  EvalMask m{mask->width, mask->height, {}};
  m.values.reserve(mask->rgb.size() / 3);
  for (size_t p = 0; p < mask->rgb.size(); p += 3) {
    if (mask->rgb[p] != mask->rgb[p + 1] || mask->rgb[p] != mask->rgb[p + 2]) {
      const size_t at = p / 3;
      return MakeError(ErrorKind::kInvalidInput,
                       "mask '" + file + "' pixel (" + std::to_string(at % mask->width) + "," +
                           std::to_string(at / mask->width) +
                           ") is a colour: a mask is an 8-bit gray PNG, its value the class");
    }
    m.values.push_back(mask->rgb[p]);
  }
  return m;
}

}  // namespace

Result<void> ParseDecoder(const json& d, const std::string& at, const std::string& spec_folder,
                          EvalSpec& e) {
  if (!d.is_object()) return Bad(at, "expected an object {\"type\":..,...}");
  const std::string type = d.contains("type") && d["type"].is_string() ? d["type"] : "";
  if (e.task == "detection") {
    if (type == "ssd_anchors") return ParseAnchorsDecoder(d, at, spec_folder, e);
    if (type != "ssd_postprocess") {
      return Bad(at + ".type",
                 "a detection decoder is \"ssd_postprocess\" (TFLite's "
                 "detection post-process outputs) or \"ssd_anchors\" (raw box regressors "
                 "and class scores decoded against anchors)");
    }
    return ParseSsdDecoder(d, at, e);
  }
  if (type != "logits" && type != "probabilities") {
    return Bad(at + ".type", "a segmentation decoder is \"logits\" or \"probabilities\"");
  }
  if (auto r = CheckKeys(d, at, {"type", "output"}); !r) return r;
  e.activation = type;
  if (d.contains("output")) {
    auto v = Integer(d, "output", at, 0, 1023);
    if (!v) return v.error();
    e.output = static_cast<uint32_t>(*v);
  }
  return Ok();
}

Result<void> LoadCoco(const std::string& file, const std::string& images_folder, const json& v,
                      const std::string& where, EvalSpec& e) {
  const std::string at = where + ".dataset '" + file + "'";
  std::ifstream in(file);
  if (!in) return Bad(at, "cannot be read");
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return Bad(at, "is not a JSON object (COCO annotations)");
  std::vector<int64_t> ids;
  if (auto r = ReadCategories(doc, at, ids, e); !r) return r;
  auto images = ReadImages(doc, at, images_folder, e);
  if (!images) return images.error();
  if (auto r = ReadAnnotations(doc, at, *images, ids, e); !r) return r;
  return MapCategories(v, ids, where, e);
}

Result<void> LoadPairs(const std::string& dataset, const std::string& where, EvalSpec& e) {
  std::error_code ec;
  if (fs::is_directory(dataset, ec)) return LoadPairFolder(dataset, where, e);
  if (fs::is_regular_file(dataset, ec)) return LoadPairList(dataset, where, e);
  return Bad(where, "'" + dataset + "' is neither a folder (images/, masks/) nor a list file");
}

Result<void> LoadMasks(const std::string& where, EvalSpec& e) {
  auto masks = std::make_shared<std::vector<EvalMask>>();
  const bool named = !e.classes.empty();
  int most = 1;
  for (size_t i = 0; i < e.images.size(); ++i) {
    auto m = ReadMask(e.mask_files[i], e.images[i]);
    if (!m) return Bad(where, m.message());
    for (uint8_t value : m->values) {
      if (value == e.ignore_label) continue;
      if (named && value >= e.classes.size()) {
        return Bad(where, "mask '" + e.mask_files[i] + "' has value " + std::to_string(value) +
                              ", not a class of the labels file (0.." +
                              std::to_string(e.classes.size() - 1) + ") nor \"ignore_label\"");
      }
      most = std::max(most, int{value});
    }
    masks->push_back(std::move(*m));
  }
  if (!named) {
    for (int c = 0; c <= most; ++c) e.classes.push_back(std::to_string(c));
  }
  e.masks = std::move(masks);
  return Ok();
}

}  // namespace dfarm::harness::eval_tasks
