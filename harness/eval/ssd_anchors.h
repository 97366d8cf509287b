// The "ssd_anchors" detection decoder of a model's "eval" (eval_spec.h):
// a model that ends in raw box regressors [1,N,K] (K >= 4) and class scores
// [1,N,C], decoded against N anchors on the host. The anchors come from a
// generator configuration (MediaPipe's SsdAnchorsCalculator options) or a
// text file; the runner lists each image's candidate rows (dfarm-runner
// --task-outputs anchors:...) and DecodeAnchorRows turns them into
// detections: box decode, per-class NMS, the best max_detections.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner_json.h"  // runner::TaskDetection
#include "nlohmann/json_fwd.hpp"

namespace dfarm::harness {

// One anchor: centre and size, normalized to the input image.
struct SsdAnchor {
  double y = 0, x = 0, h = 0, w = 0;
};

// How the decoder reads the box output and the scores.
struct SsdAnchorDecoder {
  // The box output's first four values per anchor: "yxhw" (y centre, x
  // centre, height, width offsets) or "xywh".
  std::string box_format = "yxhw";
  // Divisors of the four offsets; "exponential" box size: h = exp(th /
  // scale_h) * anchor.h, else th / scale_h * anchor.h (likewise w).
  double scale_y = 1, scale_x = 1, scale_h = 1, scale_w = 1;
  bool exponential_size = false;
  // The score activation the runner applies: "sigmoid", "softmax" (over an
  // anchor's C scores) or "raw".
  std::string score = "sigmoid";
  double score_threshold = 0.5;   // rows below it are not candidates
  double iou_threshold = 0.5;     // NMS suppresses a box of IoU above it
  uint32_t max_candidates = 100;  // rows per image the runner lists at most
  std::shared_ptr<const std::vector<SsdAnchor>> anchors;
  // As given: the generator options (an object) or the absolute anchors file.
  std::string anchor_options;  // JSON text; "" when a file gives them
  std::string anchors_file;
};

// The decoder keys of "ssd_anchors" other than type, boxes, scores,
// class_offset and max_detections (eval_tasks reads those): "anchors" (the
// generator's options) or "anchors_file" (relative to `spec_folder`),
// "scales" {"y","x","h","w"} (each above 0, default 1), "box_format",
// "box_size" ("linear" | "exponential"), "score", "score_threshold",
// "iou_threshold" (0..1), "max_candidates" (1..100000). Errors name the
// field under `at` and what to give.
Result<SsdAnchorDecoder> ParseSsdAnchorDecoder(const nlohmann::json& d, const std::string& at,
                                               const std::string& spec_folder);

// Those keys back in spec form (ParseSsdAnchorDecoder reads them), into `out`.
void AddSsdAnchorDecoderJson(const SsdAnchorDecoder& decoder, nlohmann::json& out);

// MediaPipe SsdAnchorsCalculator's anchors for `options` (its option names:
// num_layers, min_scale, max_scale, input_size_height, input_size_width,
// strides, aspect_ratios, anchor_offset_x/_y, feature_map_height/_width,
// reduce_boxes_in_lowest_layer, interpolated_scale_aspect_ratio,
// fixed_anchor_size), computed in float as it does. Errors name the field
// under `at` and what to give.
Result<std::vector<SsdAnchor>> GenerateSsdAnchors(const nlohmann::json& options,
                                                  const std::string& at);

// A text file of one "y_center,x_center,h,w" per line (normalized; blank
// lines, '#' comments and that header line are skipped). Errors name the
// file and line.
Result<std::vector<SsdAnchor>> ReadAnchorsFile(const std::string& path, const std::string& at);

// The runner's candidate rows of one image (runner::TaskDetection of kind
// "anchors": class, activated score, the box output's first four values,
// anchor index) as detections: each box decoded against its anchor (ymin,
// xmin, ymax, xmax normalized), greedy NMS per class in score order (ties:
// the lower anchor first), then the max_detections best of all classes.
// An error names a row whose anchor index is not below the anchor count.
Result<std::vector<runner::TaskDetection>> DecodeAnchorRows(
    const SsdAnchorDecoder& decoder, const std::vector<runner::TaskDetection>& rows,
    uint32_t max_detections);

}  // namespace dfarm::harness
