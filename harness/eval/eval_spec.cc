#include "harness/eval/eval_spec.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "agent/base/sha256.h"
#include "agent/protocol/input_set.h"
#include "harness/eval/eval_tasks.h"
#include "harness/spec/spec_paths.h"
#include "nlohmann/json.hpp"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using eval_tasks::Bad;
using eval_tasks::Trim;

// A whole non-negative integer, or -1.
int64_t IndexOf(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoll(s);
}

// One name per line; blank lines at the end are not classes.
Result<std::vector<std::string>> ReadLabels(const fs::path& path, const std::string& where) {
  std::ifstream in(path);
  if (!in) return Bad(where, "labels file '" + path.string() + "' cannot be read");
  std::vector<std::string> classes;
  for (std::string line; std::getline(in, line);) classes.push_back(Trim(line));
  while (!classes.empty() && classes.back().empty()) classes.pop_back();
  if (classes.empty()) return Bad(where, "labels file '" + path.string() + "' lists no class");
  return classes;
}

// The class index of `label`: a name in `classes` (the labels file), else a
// class index (below the class count when there are classes); else an error
// naming `entry`.
Result<int32_t> ClassIndex(const std::string& label, const std::vector<std::string>& classes,
                           const std::string& entry) {
  auto it = std::find(classes.begin(), classes.end(), label);
  if (it != classes.end()) return static_cast<int32_t>(it - classes.begin());
  const int64_t i = IndexOf(label);
  if (i >= 0 && (classes.empty() || i < static_cast<int64_t>(classes.size()))) {
    return static_cast<int32_t>(i);
  }
  if (classes.empty()) {
    return MakeError(ErrorKind::kInvalidInput,
                     entry + ": label '" + label +
                         "' is not a class index, and no labels file names classes (give "
                         "\"labels\")");
  }
  return MakeError(ErrorKind::kInvalidInput,
                   entry + ": label '" + label + "' is neither a class of the labels file nor " +
                       "a class index below " + std::to_string(classes.size()));
}

// `<class>/<image>`: every image of every sub-folder, classes by folder name.
Result<void> LoadFolder(const fs::path& dir, const std::string& where, EvalSpec& e) {
  std::error_code ec;
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec)) class_dirs.push_back(entry.path());
  }
  std::sort(class_dirs.begin(), class_dirs.end());
  if (class_dirs.empty()) {
    return Bad(where, "folder '" + dir.string() + "' has no class folders (<class>/<image>)");
  }
  const bool named = !e.classes.empty();
  if (!named) {
    for (const fs::path& c : class_dirs) e.classes.push_back(c.filename().string());
  }
  for (const fs::path& c : class_dirs) {
    const std::string entry = where + ": folder '" + c.filename().string() + "/'";
    auto label = ClassIndex(c.filename().string(), e.classes, entry);
    if (!label) return label.error();
    std::vector<std::string> files;
    for (const auto& f : fs::directory_iterator(c, ec)) {
      if (f.is_regular_file(ec) && IsImageFile(f.path())) files.push_back(f.path().string());
    }
    std::sort(files.begin(), files.end());
    for (std::string& f : files) {
      e.images.push_back(std::move(f));
      e.labels.push_back(*label);
    }
  }
  if (e.images.empty()) return Bad(where, "no .png/.jpg/.jpeg image under '" + dir.string() + "'");
  return Ok();
}

// `image,label` per line (a first line "image,label" is a header).
Result<void> LoadList(const fs::path& file, const std::string& where, EvalSpec& e) {
  std::ifstream in(file);
  if (!in) return Bad(where, "list file '" + file.string() + "' cannot be read");
  const bool by_index = e.classes.empty();
  int32_t most = -1;
  size_t line_no = 0;
  std::error_code ec;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = Trim(line);
    if (line.empty() || line[0] == '#' || (line_no == 1 && line == "image,label")) continue;
    const std::string entry = file.filename().string() + " line " + std::to_string(line_no);
    const size_t comma = line.rfind(',');
    if (comma == std::string::npos) return Bad(where, entry + ": expected image,label");
    const fs::path image = (file.parent_path() / Trim(line.substr(0, comma))).lexically_normal();
    if (!fs::is_regular_file(image, ec)) {
      return Bad(where, entry + ": image '" + Trim(line.substr(0, comma)) + "' is not a file");
    }
    auto label = ClassIndex(Trim(line.substr(comma + 1)), e.classes, entry);
    if (!label) return Bad(where, label.message());
    most = std::max(most, *label);
    e.images.push_back(image.string());
    e.labels.push_back(*label);
  }
  if (e.images.empty()) return Bad(where, "list file '" + file.string() + "' lists no image");
  if (by_index) {
    for (int32_t i = 0; i <= most; ++i) e.classes.push_back(std::to_string(i));
  }
  return Ok();
}

// "limit" (the first N) or "sample" (N drawn with the seed, kept in set
// order), then the one-job bound on input sets.
Result<void> Subset(const std::string& where, EvalSpec& e) {
  std::vector<size_t> keep(e.images.size());
  std::iota(keep.begin(), keep.end(), size_t{0});
  if (e.sample > 0 && e.sample < keep.size()) {
    std::mt19937_64 rng(e.seed);
    std::shuffle(keep.begin(), keep.end(), rng);
    keep.resize(e.sample);
    std::sort(keep.begin(), keep.end());
  }
  if (e.limit > 0 && e.limit < keep.size()) keep.resize(e.limit);
  if (keep.size() > agent::kMaxInputSetsPerJob) {
    return Bad(where, std::to_string(keep.size()) + " images; a job takes at most " +
                          std::to_string(agent::kMaxInputSetsPerJob) +
                          ": set \"sample\" (a seeded subset) or \"limit\" (the first N)");
  }
  const auto pick = [&keep](auto& values) {
    if (values.empty()) return;
    std::remove_reference_t<decltype(values)> kept;
    for (size_t i : keep) kept.push_back(values[i]);
    values = std::move(kept);
  };
  pick(e.images);
  pick(e.labels);
  pick(e.mask_files);
  pick(e.widths);
  pick(e.heights);
  std::vector<size_t> renumber(keep.empty() ? 0 : *std::max_element(keep.begin(), keep.end()) + 1,
                               SIZE_MAX);
  for (size_t k = 0; k < keep.size(); ++k) renumber[keep[k]] = k;
  std::vector<EvalTruthBox> truth;
  for (EvalTruthBox t : e.truth) {
    if (t.image >= renumber.size() || renumber[t.image] == SIZE_MAX) continue;
    t.image = renumber[t.image];
    truth.push_back(t);
  }
  e.truth = std::move(truth);
  return Ok();
}

Result<std::string> DatasetId(const EvalSpec& e) {
  agent::Sha256 hash;
  const auto add = [&hash](const std::string& text) { hash.Update(text.data(), text.size()); };
  for (const std::string& c : e.classes) add(c + "\n");
  for (size_t i = 0; i < e.images.size(); ++i) {
    auto sha = agent::Sha256File(e.images[i]);
    if (!sha)
      return MakeError(ErrorKind::kInvalidInput, "image '" + e.images[i] + "': " + sha.message());
    add(*sha + " " + (i < e.labels.size() ? std::to_string(e.labels[i]) : "") + "\n");
    if (i < e.mask_files.size()) {
      auto mask = agent::Sha256File(e.mask_files[i]);
      if (!mask) {
        return MakeError(ErrorKind::kInvalidInput,
                         "mask '" + e.mask_files[i] + "': " + mask.message());
      }
      add("mask " + *mask + "\n");
    }
    if (i < e.widths.size()) {
      add("size " + std::to_string(e.widths[i]) + "x" + std::to_string(e.heights[i]) + "\n");
    }
  }
  for (const EvalTruthBox& t : e.truth) {
    add(nlohmann::json::array({t.image, t.category, t.x, t.y, t.w, t.h}).dump() + "\n");
  }
  for (int64_t id : e.category_ids) add("category " + std::to_string(id) + "\n");
  fs::path name = fs::path(e.dataset);
  std::string stem = name.filename().string();
  if (stem.empty()) stem = name.parent_path().filename().string();
  if (fs::path(stem).has_extension()) stem = fs::path(stem).stem().string();
  return stem + "@" + hash.FinishHex().substr(0, 12);
}

Result<uint32_t> Count(const json& o, const char* key, const std::string& where, uint32_t lo,
                       uint32_t hi) {
  const json& v = o[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return Bad(where + "." + key, "expected an integer from " + std::to_string(lo) + " to " +
                                      std::to_string(hi) + ", got " + v.dump());
  }
  return static_cast<uint32_t>(v.get<int64_t>());
}

Result<void> ParseDecoder(const json& o, const std::string& where, const std::string& spec_folder,
                          EvalSpec& e) {
  if (!o.contains("decoder")) return Ok();
  const json& d = o["decoder"];
  const std::string at = where + ".decoder";
  if (e.task != "classification") return eval_tasks::ParseDecoder(d, at, spec_folder, e);
  if (!d.is_object())
    return Bad(at, "expected an object {\"output\":..,\"offset\":..,\"top_k\":..}");
  for (const auto& item : d.items()) {
    if (item.key() != "output" && item.key() != "offset" && item.key() != "top_k") {
      return Bad(at, "unknown key '" + item.key() + "' (expected output, offset, top_k)");
    }
  }
  if (d.contains("output")) {
    auto v = Count(d, "output", at, 0, 1023);
    if (!v) return v.error();
    e.output = *v;
  }
  if (d.contains("offset")) {
    auto v = Count(d, "offset", at, 0, 1000);
    if (!v) return v.error();
    e.offset = static_cast<int32_t>(*v);
  }
  if (d.contains("top_k")) {
    auto v = Count(d, "top_k", at, 1, 100);
    if (!v) return v.error();
    e.top_k = *v;
  }
  return Ok();
}

// The task and the keys it takes.
Result<void> ParseTask(const json& v, const std::string& where, EvalSpec& e) {
  if (v.contains("task")) {
    if (!v["task"].is_string()) return Bad(where + ".task", "expected a string");
    e.task = v["task"].get<std::string>();
  }
  if (e.task != "classification" && e.task != "detection" && e.task != "segmentation") {
    return Bad(where + ".task", "'" + e.task +
                                    "' is not a task: expected \"classification\", "
                                    "\"detection\" or \"segmentation\"");
  }
  std::set<std::string> keys = {"task",    "dataset", "labels", "preprocess",
                                "decoder", "limit",   "sample", "seed"};
  if (e.task == "detection") keys.insert({"images", "category_ids"});
  if (e.task == "segmentation") keys.insert("ignore_label");
  for (const auto& item : v.items()) {
    if (keys.count(item.key())) continue;
    std::string known;
    for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
    return Bad(where,
               "unknown key '" + item.key() + "' for task " + e.task + " (expected " + known + ")");
  }
  if (e.task == "detection" && !v.contains("decoder")) {
    return Bad(where,
               "missing \"decoder\": {\"type\":\"ssd_postprocess\",\"boxes\":..,"
               "\"classes\":..,\"scores\":..,\"count\":..} (output indices) or "
               "{\"type\":\"ssd_anchors\",\"boxes\":..,\"scores\":..,\"anchors\":{..}}");
  }
  if (v.contains("images") && (!v["images"].is_string() || v["images"] == "")) {
    return Bad(where + ".images", "expected the folder the annotations' file_name is relative to");
  }
  return Ok();
}

Result<void> ParseKeys(const json& v, const std::string& where, const std::string& spec_folder,
                       EvalSpec& e) {
  if (auto r = ParseTask(v, where, e); !r) return r;
  if (!v.contains("dataset") || !v["dataset"].is_string() ||
      v["dataset"].get<std::string>().empty()) {
    return Bad(where, e.task == "detection" ? "missing \"dataset\": a COCO annotations JSON"
                      : e.task == "segmentation"
                          ? "missing \"dataset\": a folder (images/, masks/) or a list file "
                            "image,mask"
                          : "missing \"dataset\": a folder <class>/<image> or a list file "
                            "image,label");
  }
  if (v.contains("labels") && !v["labels"].is_string()) {
    return Bad(where + ".labels", "expected the path of a labels file (one class per line)");
  }
  if (!v.contains("preprocess") || !v["preprocess"].is_object()) {
    return Bad(where,
               "missing \"preprocess\": an object as spec \"inputs\" images take "
               "(size, channels, layout, scale or mean/std, dtype), without \"images\"");
  }
  e.preprocess = v["preprocess"].dump();
  if (v["preprocess"].contains("images")) {
    return Bad(where + ".preprocess", "\"images\" comes from the dataset; leave it out");
  }
  for (auto [key, dst, lo, hi] :
       {std::tuple{"limit", &e.limit, 1u, 1000000u}, std::tuple{"sample", &e.sample, 1u, 1000000u},
        std::tuple{"seed", &e.seed, 0u, 4294967295u}}) {
    if (!v.contains(key)) continue;
    auto n = Count(v, key, where, lo, hi);
    if (!n) return n.error();
    *dst = *n;
  }
  if (v.contains("ignore_label")) {
    auto n = Count(v, "ignore_label", where, 0, 255);
    if (!n) return n.error();
    e.ignore_label = static_cast<int32_t>(*n);
  }
  return ParseDecoder(v, where, spec_folder, e);
}

// The dataset of `e.task` (e.dataset and e.classes of a labels file set).
Result<void> Load(const json& v, const std::string& where, const std::string& spec_folder,
                  EvalSpec& e) {
  const fs::path dataset = e.dataset;
  std::error_code ec;
  if (e.task == "detection") {
    e.classes.clear();  // the categories' names; the labels file maps classes to them
    e.images_folder = v.contains("images")
                          ? ResolveSpecPath(v["images"].get<std::string>(), spec_folder).string()
                          : dataset.parent_path().string();
    return eval_tasks::LoadCoco(e.dataset, e.images_folder, v, where, e);
  }
  if (e.task == "segmentation") return eval_tasks::LoadPairs(e.dataset, where + ".dataset", e);
  return fs::is_directory(dataset, ec) ? LoadFolder(dataset, where + ".dataset", e)
         : fs::is_regular_file(dataset, ec)
             ? LoadList(dataset, where + ".dataset", e)
             : Bad(where + ".dataset",
                   "'" + dataset.string() + "' is neither a folder nor a list file");
}

}  // namespace

Result<EvalSpec> ParseEvalObject(const json& v, const std::string& where,
                                 const std::string& spec_folder) {
  if (!v.is_object()) return Bad(where, "expected an object {\"task\":..,\"dataset\":..,...}");
  EvalSpec e;
  if (auto r = ParseKeys(v, where, spec_folder, e); !r) return r.error();
  e.dataset = ResolveSpecPath(v["dataset"].get<std::string>(), spec_folder).string();
  if (v.contains("labels")) {
    e.labels_file = ResolveSpecPath(v["labels"].get<std::string>(), spec_folder).string();
  }
  return e;
}

Result<void> LoadEvalData(const json& v, const std::string& where, const std::string& spec_folder,
                          EvalSpec& e) {
  if (!e.labels_file.empty()) {
    auto classes = ReadLabels(e.labels_file, where + ".labels");
    if (!classes) return classes.error();
    e.classes = std::move(*classes);
  }
  if (auto loaded = Load(v, where, spec_folder, e); !loaded) return loaded.error();
  if (auto r = Subset(where, e); !r) return r.error();
  if (e.task == "segmentation") {
    if (auto r = eval_tasks::LoadMasks(where + ".dataset", e); !r) return r.error();
  }
  auto id = DatasetId(e);
  if (!id) return Bad(where + ".dataset", id.message());
  e.dataset_id = *id;
  return Ok();
}

Result<EvalSpec> ParseEvalSpec(const json& v, const std::string& where,
                               const std::string& spec_folder) {
  auto e = ParseEvalObject(v, where, spec_folder);
  if (!e) return e.error();
  if (auto r = LoadEvalData(v, where, spec_folder, *e); !r) return r.error();
  if (auto inputs = e->Inputs(where + ".preprocess"); !inputs) return inputs.error();
  return e;
}

json EvalSpec::ToJson() const {
  json o = {{"task", task},
            {"dataset", dataset},
            {"preprocess", json::parse(preprocess)},
            {"decoder", {{"output", output}, {"offset", offset}, {"top_k", top_k}}}};
  if (task == "detection" && anchor_decoder) {
    o["decoder"] = {{"type", "ssd_anchors"},
                    {"boxes", box_outputs[0]},
                    {"scores", box_outputs[1]},
                    {"class_offset", offset},
                    {"max_detections", max_detections}};
    AddSsdAnchorDecoderJson(*anchor_decoder, o["decoder"]);
  } else if (task == "detection") {
    o["decoder"] = {{"type", "ssd_postprocess"}, {"boxes", box_outputs[0]},
                    {"classes", box_outputs[1]}, {"scores", box_outputs[2]},
                    {"count", box_outputs[3]},   {"class_offset", offset},
                    {"box_order", box_order},    {"max_detections", max_detections}};
  }
  if (task == "detection") {
    o["images"] = images_folder;
    o["category_ids"] = category_ids;
  } else if (task == "segmentation") {
    o["decoder"] = {{"type", activation}, {"output", output}};
    if (ignore_label >= 0) o["ignore_label"] = ignore_label;
  }
  if (!labels_file.empty()) o["labels"] = labels_file;
  if (limit > 0) o["limit"] = limit;
  if (sample > 0) o["sample"] = sample;
  if (seed != 1) o["seed"] = seed;
  return o;
}

std::string EvalSpec::TaskOutputsArg() const {
  if (task == "detection" && anchor_decoder) {
    char threshold[32];
    const auto end =
        std::to_chars(threshold, threshold + sizeof threshold, anchor_decoder->score_threshold);
    return "anchors:" + std::to_string(box_outputs[0]) + "," + std::to_string(box_outputs[1]) +
           ":" + anchor_decoder->score + ":" + std::to_string(offset) + ":" +
           std::string(threshold, end.ptr) + ":" + std::to_string(anchor_decoder->max_candidates);
  }
  if (task == "detection") {
    return "boxes:" + std::to_string(box_outputs[0]) + "," + std::to_string(box_outputs[1]) + "," +
           std::to_string(box_outputs[2]) + "," + std::to_string(box_outputs[3]) + ":" +
           std::to_string(max_detections);
  }
  if (task == "segmentation") return "classmap:" + std::to_string(output) + ":" + activation;
  return "topk:" + std::to_string(top_k) + ":" + std::to_string(output);
}

Result<InputsSpec> EvalSpec::Inputs(const std::string& where) const {
  json o = json::parse(preprocess);
  o["images"] = images;
  return ParseInputsSpec(o, where, "/");
}

}  // namespace dfarm::harness
