// The detection and segmentation parts of a model's "eval" (eval_spec.h):
// their decoders, the COCO annotations and the image + mask pairs. Internal
// to harness/eval; ParseEvalSpec calls them.
#pragma once

#include <string>

#include "agent/base/result.h"
#include "harness/eval/eval_spec.h"
#include "nlohmann/json_fwd.hpp"

namespace dfarm::harness::eval_tasks {

// "WHERE: WHY" as an invalid-input error: how every eval spec message reads.
Error Bad(const std::string& where, const std::string& why);

// `s` without white space at either end.
std::string Trim(std::string s);

// The "decoder" of a detection ({"type":"ssd_postprocess","boxes","classes",
// "scores","count","class_offset","box_order","max_detections"}, or
// {"type":"ssd_anchors","boxes","scores","class_offset","max_detections",...}
// as ParseSsdAnchorDecoder reads the rest, its anchors file relative to
// `spec_folder`) or a segmentation ({"type":"logits"|"probabilities",
// "output"}) into `e`; `at` names it in messages.
Result<void> ParseDecoder(const nlohmann::json& d, const std::string& at,
                          const std::string& spec_folder, EvalSpec& e);

// A COCO annotations JSON `file` (its images under `images_folder`) into
// `e`: the images in the JSON's order, their sizes, the truth boxes, the
// categories and the class -> category map (from `v`'s "category_ids" or
// "labels", else the categories' order). Errors name the file and field.
Result<void> LoadCoco(const std::string& file, const std::string& images_folder,
                      const nlohmann::json& v, const std::string& where, EvalSpec& e);

// Image + mask pairs: a folder with images/ and masks/ (same stems, masks
// .png) or a list file `image,mask`; the paths only (LoadMasks reads them).
Result<void> LoadPairs(const std::string& dataset, const std::string& where, EvalSpec& e);

// Decodes the evaluated images' masks into e.masks: each an 8-bit gray PNG
// of its image's size, every value a class (below e.classes' count when a
// labels file names the classes, else e.classes becomes "0".."max") or the
// ignore label. Errors name the mask file and what is wrong.
Result<void> LoadMasks(const std::string& where, EvalSpec& e);

}  // namespace dfarm::harness::eval_tasks
