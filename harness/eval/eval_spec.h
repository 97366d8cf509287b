// A model's "eval" in the sweep spec (docs/CONTRACTS.md): task accuracy on a
// labelled set. The set's images become the job's input sets (preprocessed
// like spec "inputs" images), the runner lists what the task needs of each
// image's outputs (--task-outputs) and the host scores them against the
// labels (harness/eval/task_accuracy.h).
//
// "task" "classification" (the default): an ImageNet-style folder
// (`<class>/<image>`) or a list file (`image,label` per line, paths relative
// to the file), with an optional labels file (one class name per line; line
// i is class i).
// "detection": a COCO-format annotations JSON (images, annotations with
// bbox [x,y,w,h] and category_id, categories) whose images lie in "images"
// (default: the JSON's folder); the decoder names a detection post-process's
// four outputs (boxes ymin,xmin,ymax,xmax normalized, classes, scores,
// count) or, "ssd_anchors", a model's raw box regressors and class scores
// with the anchors to decode them against (harness/eval/ssd_anchors.h);
// model class c is category category_ids[c - class_offset].
// "segmentation": image + mask pairs (a folder with images/ and masks/ of
// the same stems, or a list file `image,mask`); a mask is an 8-bit gray PNG
// of the image's size whose pixel value is the class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/eval/ssd_anchors.h"
#include "harness/spec/input_sets.h"
#include "nlohmann/json_fwd.hpp"

namespace dfarm::harness {

// One COCO ground-truth box: the evaluated image it belongs to (an index into
// EvalSpec::images), its category id and bbox [x, y, w, h] in pixels.
struct EvalTruthBox {
  size_t image = 0;
  int64_t category = 0;
  double x = 0, y = 0, w = 0, h = 0;
};

// A segmentation mask: one class value per pixel, row-major.
struct EvalMask {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> values;
};

struct EvalSpec {
  std::string task = "classification";
  std::string dataset;      // absolute: the folder, list file or annotations JSON given
  std::string labels_file;  // absolute; "" when none was given
  // Class names, index = class; from the labels file, else the sorted
  // folder names (folder sets) or the largest index (list files of indices);
  // detection: the COCO categories' names, in category_ids order;
  // segmentation: the labels file, else "0".."N-1" up to the largest mask value.
  std::vector<std::string> classes;
  // The images evaluated (after "limit"/"sample"), absolute, in set order,
  // and each one's class index (classification).
  std::vector<std::string> images;
  std::vector<int32_t> labels;
  // "decoder": the output holding the class scores and the offset of class
  // 0 in it (1 for models whose output 0 is a background class).
  uint32_t output = 0;
  int32_t offset = 0;
  // detection: "images" (absolute; the folder file_name is relative to), the
  // decoder's outputs (boxes, classes, scores, count), the box order
  // ("yxyx" or "xyxy", normalized to the image), at most max_detections
  // rows per image, model class c -> category_ids[c - class_offset]
  // ("category_ids", else "labels" matched to category names, else the
  // categories in the JSON's order); each image's COCO width and height and
  // the truth boxes of the evaluated images.
  std::string images_folder;
  std::vector<uint32_t> box_outputs;  // boxes, classes, scores, count; ssd_anchors: boxes, scores
  std::string box_order = "yxyx";
  // Decoder "ssd_anchors" (unset: "ssd_postprocess"); its boxes decode to
  // "yxyx".
  std::optional<SsdAnchorDecoder> anchor_decoder;
  uint32_t max_detections = 100;
  std::vector<int64_t> category_ids;
  std::vector<uint32_t> widths, heights;
  std::vector<EvalTruthBox> truth;
  // segmentation: decoder "type" ("logits" | "probabilities"), each image's
  // mask file and mask (shared: jobs copy the spec), "ignore_label" (truth
  // pixels of that value are not counted; -1: none).
  std::string activation = "logits";
  std::vector<std::string> mask_files;
  std::shared_ptr<const std::vector<EvalMask>> masks;
  int32_t ignore_label = -1;
  uint32_t top_k = 5;   // classes the runner lists per image (top-1 and top-k)
  uint32_t limit = 0;   // "limit": the first N images; 0: all
  uint32_t sample = 0;  // "sample": N images drawn with `seed`; 0: none
  uint32_t seed = 1;
  std::string preprocess = "{}";  // "preprocess" as given (JSON text)
  // The set's identity: "<name>@<12 hex>" over each evaluated image's
  // content, its label and the class names.
  std::string dataset_id;

  // The spec form (paths absolute), which ParseEvalSpec reads back.
  nlohmann::json ToJson() const;
  // The runner's --task-outputs for it: "topk:K:OUTPUT", "boxes:B,C,S,N:MAX",
  // "anchors:B,S:SCORE:OFFSET:THRESHOLD:MAX" or "classmap:OUTPUT:ACTIVATION".
  std::string TaskOutputsArg() const;
  // The images as spec "inputs" (preprocess applied), one input set each;
  // `where` names "preprocess" in messages.
  Result<InputsSpec> Inputs(const std::string& where = "eval.preprocess") const;
};

// Parses and loads a model's "eval" value `v` (`where` names it in messages,
// e.g. "models[0] 'm.tflite'.eval"); relative paths resolve against
// `spec_folder`. Errors (kInvalidInput) name the field, or the file and
// entry (a missing image, a label the labels file lacks), and what to do.
Result<EvalSpec> ParseEvalSpec(const nlohmann::json& v, const std::string& where,
                               const std::string& spec_folder);

// ParseEvalSpec's two steps, for a caller that treats their errors apart (a
// sweep spec stops at a malformed "eval" object, while bad labelled data
// fails only that model's jobs). ParseEvalObject checks the object (its
// keys, their types, the decoder) and resolves its paths without reading a
// file; LoadEvalData reads the dataset into `e` (the labels file, the images
// or annotations, the masks), its errors naming the file and entry. Then
// EvalSpec::Inputs checks "preprocess" against the images.
Result<EvalSpec> ParseEvalObject(const nlohmann::json& v, const std::string& where,
                                 const std::string& spec_folder);
Result<void> LoadEvalData(const nlohmann::json& v, const std::string& where,
                          const std::string& spec_folder, EvalSpec& e);

}  // namespace dfarm::harness
