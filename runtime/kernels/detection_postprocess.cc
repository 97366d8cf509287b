// TFLite_Detection_PostProcess (custom op): SSD box decoding and non-max
// suppression, as TensorFlow Lite's detection_postprocess kernel does it.
//
// Inputs: box_encodings [1, num_boxes, >= 4] (y, x, h, w per box, CENTER_SIZE
// coding), class_predictions [1, num_boxes, num_classes (+1 background)],
// anchors [num_boxes, 4] (y, x, h, w). All float32, or box_encodings and
// anchors uint8 (quantized) and class_predictions float32 or uint8.
// Outputs (float32): boxes [1, N, 4] (ymin, xmin, ymax, xmax), classes [1, N],
// scores [1, N], num_detections [1], N = max_detections * max_classes_per_detection.
//
// custom_options is a flexbuffer map: max_detections, max_classes_per_detection,
// num_classes, nms_score_threshold, nms_iou_threshold, y_scale, x_scale,
// h_scale, w_scale (required; TFLite would read a missing key as 0),
// detections_per_class (default 100), use_regular_nms (default false).
//
// Decoding (in double, as TFLite): ycenter = y / y_scale * anchor.h + anchor.y,
// half_h = 0.5 * exp(h / h_scale) * anchor.h, likewise x and w.
// Single-class NMS: keep scores >= nms_score_threshold, sort them decreasing
// (stable: ties keep the lower box index first), greedily select a box and drop
// every later one whose IoU with it is > nms_iou_threshold.
// Fast NMS: each box is ranked by its best class score; one NMS over boxes;
// each selected box emits its top min(max_classes_per_detection, num_classes)
// classes. Regular NMS: one NMS per class (at most min(detections_per_class,
// max_detections) boxes each), merged by score into the best max_detections;
// on equal scores a later class comes first, as TFLite's merge does.
// Output rows past the detections are zero (TFLite leaves fast NMS's stale).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "flatbuffers/flexbuffers.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/kernels.h"

namespace dfarm::runtime {
namespace {

constexpr int kNumCoords = 4;
constexpr int kDefaultDetectionsPerClass = 100;

struct Box {
  float ymin, xmin, ymax, xmax;
};

struct BoxScore {
  int index;  // box * num_classes_with_background + class + label_offset
  float score;
};

struct DetectionData : OpData {
  int max_detections = 0;
  int max_classes_per_detection = 0;
  int detections_per_class = kDefaultDetectionsPerClass;
  bool use_regular_nms = false;
  float score_threshold = 0.0f;
  float iou_threshold = 0.0f;
  int num_classes = 0;
  double y_scale = 0, x_scale = 0, h_scale = 0, w_scale = 0;

  int num_boxes = 0;
  int coords_per_box = 0;
  int num_classes_with_background = 0;
  int label_offset = 0;
  int num_outputs = 0;  // N

  // Scratch, sized in Prepare so Eval allocates nothing.
  std::vector<Box> decoded;
  std::vector<float> dequantized_scores;  // when class_predictions is uint8
  std::vector<float> class_scores;        // one class's (or each box's best) score per box
  std::vector<float> keep_scores;
  std::vector<int> keep_indices;
  std::vector<int> order;
  std::vector<uint8_t> active;
  std::vector<int> selected;
  std::vector<int> sorted_classes;  // fast NMS: num_boxes x num_classes
  std::vector<BoxScore> merged;     // regular NMS: kept detections, then one class's
  std::vector<BoxScore> merge_scratch;
};

// A strict total order for "a (index i) comes before b (index j)" in a
// decreasing sort: larger first, NaN last, ties by lower index.
bool Before(float a, int i, float b, int j) {
  const bool nan_a = std::isnan(a), nan_b = std::isnan(b);
  if (nan_a != nan_b) return nan_b;
  if (!nan_a && a != b) return a > b;
  return i < j;
}

Status ReadOptions(const Node& node, DetectionData* d) {
  const flatbuffers::Vector<uint8_t>* custom = node.op->custom_options();
  if (custom == nullptr || custom->size() == 0) {
    return Status::Error("custom_options are missing (a flexbuffer map is expected)");
  }
  if (!flexbuffers::VerifyBuffer(custom->data(), custom->size())) {
    return Status::Error("custom_options are not a valid flexbuffer");
  }
  const flexbuffers::Reference root = flexbuffers::GetRoot(custom->data(), custom->size());
  if (!root.IsMap()) return Status::Error("custom_options are not a flexbuffer map");
  const flexbuffers::Map m = root.AsMap();
  const char* required[] = {"max_detections",
                            "max_classes_per_detection",
                            "num_classes",
                            "nms_score_threshold",
                            "nms_iou_threshold",
                            "y_scale",
                            "x_scale",
                            "h_scale",
                            "w_scale"};
  for (const char* key : required) {
    if (m[key].IsNull()) {
      return Status::Error(std::string("custom_options lack '") + key + "'");
    }
  }
  d->max_detections = m["max_detections"].AsInt32();
  d->max_classes_per_detection = m["max_classes_per_detection"].AsInt32();
  if (!m["detections_per_class"].IsNull()) {
    d->detections_per_class = m["detections_per_class"].AsInt32();
  }
  if (!m["use_regular_nms"].IsNull()) d->use_regular_nms = m["use_regular_nms"].AsBool();
  d->score_threshold = m["nms_score_threshold"].AsFloat();
  d->iou_threshold = m["nms_iou_threshold"].AsFloat();
  d->num_classes = m["num_classes"].AsInt32();
  d->y_scale = m["y_scale"].AsFloat();
  d->x_scale = m["x_scale"].AsFloat();
  d->h_scale = m["h_scale"].AsFloat();
  d->w_scale = m["w_scale"].AsFloat();

  if (d->max_detections < 0) {
    return Status::Error("max_detections " + std::to_string(d->max_detections) +
                         " must not be negative");
  }
  if (!(d->iou_threshold > 0.0f && d->iou_threshold <= 1.0f)) {
    return Status::Error("nms_iou_threshold " + std::to_string(d->iou_threshold) +
                         " must be in (0, 1]");
  }
  if (d->num_classes <= 0) {
    return Status::Error("num_classes " + std::to_string(d->num_classes) + " must be positive");
  }
  if (d->max_classes_per_detection <= 0) {
    return Status::Error("max_classes_per_detection " +
                         std::to_string(d->max_classes_per_detection) + " must be positive");
  }
  if (d->use_regular_nms && std::min(d->detections_per_class, d->max_detections) <= 0) {
    return Status::Error("regular NMS needs detections_per_class and max_detections > 0, got " +
                         std::to_string(d->detections_per_class) + " and " +
                         std::to_string(d->max_detections));
  }
  for (double scale : {d->y_scale, d->x_scale, d->h_scale, d->w_scale}) {
    if (scale == 0.0 || !std::isfinite(scale)) {
      return Status::Error("y_scale, x_scale, h_scale and w_scale must be finite and non-zero");
    }
  }
  return Status::Ok();
}

// The input shapes against each other and num_classes; sets num_boxes,
// coords_per_box, num_classes_with_background and label_offset.
Status CheckInputShapes(const Tensor& boxes, const Tensor& classes, const Tensor& anchors,
                        DetectionData* d) {
  if (boxes.rank() != 3 || boxes.shape[0] != 1 || boxes.shape[2] < kNumCoords) {
    return Status::Error("box_encodings must be [1, num_boxes, >= 4], got " +
                         ShapeToString(boxes.shape));
  }
  d->num_boxes = boxes.shape[1];
  d->coords_per_box = boxes.shape[2];
  if (classes.rank() != 3 || classes.shape[0] != 1 || classes.shape[1] != d->num_boxes) {
    return Status::Error("class_predictions must be [1, " + std::to_string(d->num_boxes) +
                         ", classes], got " + ShapeToString(classes.shape));
  }
  if (anchors.rank() != 2 || anchors.shape[0] != d->num_boxes || anchors.shape[1] != kNumCoords) {
    return Status::Error("anchors must be [" + std::to_string(d->num_boxes) + ", 4], got " +
                         ShapeToString(anchors.shape));
  }
  d->num_classes_with_background = classes.shape[2];
  d->label_offset = d->num_classes_with_background - d->num_classes;
  if (d->label_offset != 0 && d->label_offset != 1) {
    return Status::Error("class_predictions hold " +
                         std::to_string(d->num_classes_with_background) +
                         " classes per box, but num_classes is " + std::to_string(d->num_classes) +
                         " (one background class at most)");
  }
  return Status::Ok();
}

// float32 inputs, or uint8 box_encodings and anchors with float32 or uint8
// class_predictions.
Status CheckInputDtypes(const Tensor& boxes, const Tensor& classes, const Tensor& anchors) {
  if (boxes.dtype == DType::kFloat32) {
    if (anchors.dtype != DType::kFloat32) {
      return Status::Error(std::string("anchors must be float32 like box_encodings, got ") +
                           DTypeName(anchors.dtype));
    }
  } else if (boxes.dtype == DType::kUint8) {
    if (anchors.dtype != DType::kUint8) {
      return Status::Error(std::string("anchors must be uint8 like box_encodings, got ") +
                           DTypeName(anchors.dtype));
    }
  } else {
    return Status::Unsupported(std::string("box_encodings of dtype ") + DTypeName(boxes.dtype) +
                               " are not supported (float32 or uint8)");
  }
  if (classes.dtype != DType::kFloat32 && classes.dtype != DType::kUint8) {
    return Status::Unsupported(std::string("class_predictions of dtype ") +
                               DTypeName(classes.dtype) + " are not supported (float32 or uint8)");
  }
  return Status::Ok();
}

// The four float32 outputs and their shapes for N detection rows; sets
// num_outputs to N.
Status CheckOutputs(const Node& node, DetectionData* d) {
  const int64_t n =
      static_cast<int64_t>(d->max_detections) * std::max(0, d->max_classes_per_detection);
  const char* names[] = {"detection_boxes", "detection_classes", "detection_scores",
                         "num_detections"};
  for (int i = 0; i < 4; ++i) {
    if (node.outputs[i]->dtype != DType::kFloat32) {
      return Status::Error(std::string(names[i]) + " must be float32, got " +
                           DTypeName(node.outputs[i]->dtype));
    }
  }
  if (n > std::numeric_limits<int32_t>::max() / kNumCoords) {
    return Status::Error("max_detections * max_classes_per_detection is too large");
  }
  const int32_t n32 = static_cast<int32_t>(n);
  const int32_t box_shape[] = {1, n32, kNumCoords};
  const int32_t row_shape[] = {1, n32};
  const int32_t count_shape[] = {1};
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[0], box_shape));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[1], row_shape));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[2], row_shape));
  DFARM_RETURN_IF_ERROR(CheckOutputShape(*node.outputs[3], count_shape));
  d->num_outputs = n32;
  return Status::Ok();
}

// Sizes the scratch so that Eval allocates nothing.
void SizeScratch(bool uint8_scores, DetectionData* d) {
  const size_t nb = static_cast<size_t>(d->num_boxes);
  d->decoded.resize(nb);
  if (uint8_scores) {
    d->dequantized_scores.resize(nb * static_cast<size_t>(d->num_classes_with_background));
  }
  d->class_scores.resize(nb);
  d->keep_scores.resize(nb);
  d->keep_indices.resize(nb);
  d->order.resize(nb);
  d->active.resize(nb);
  d->selected.resize(nb);
  if (d->use_regular_nms) {
    const int64_t per_class = std::min(d->detections_per_class, d->max_detections);
    const int64_t total = static_cast<int64_t>(nb) * d->num_classes;
    d->merged.resize(static_cast<size_t>(std::min<int64_t>(d->max_detections, total) +
                                         std::min<int64_t>(per_class, nb)));
    d->merge_scratch.resize(d->merged.size());
  } else {
    d->sorted_classes.resize(nb * static_cast<size_t>(d->num_classes));
  }
}

Status Prepare(Node& node) {
  DFARM_RETURN_IF_ERROR(CheckArity(node, 3, 3, 4));
  const Tensor* boxes = node.inputs[0];
  const Tensor* classes = node.inputs[1];
  const Tensor* anchors = node.inputs[2];
  if (boxes == nullptr || classes == nullptr || anchors == nullptr) {
    return Status::Error("box_encodings, class_predictions and anchors are all required");
  }
  auto d = std::make_unique<DetectionData>();
  DFARM_RETURN_IF_ERROR(ReadOptions(node, d.get()));
  DFARM_RETURN_IF_ERROR(CheckInputShapes(*boxes, *classes, *anchors, d.get()));
  DFARM_RETURN_IF_ERROR(CheckInputDtypes(*boxes, *classes, *anchors));
  DFARM_RETURN_IF_ERROR(CheckOutputs(node, d.get()));
  SizeScratch(classes->dtype == DType::kUint8, d.get());
  node.data = std::move(d);
  return Status::Ok();
}

float Dequantize(uint8_t q, const Tensor& t) {
  return (static_cast<float>(q) - static_cast<float>(t.zero_point)) * t.scale;
}

Status DecodeBoxes(const Node& node, DetectionData& d) {
  const Tensor& enc = *node.inputs[0];
  const Tensor& anchors = *node.inputs[2];
  for (int i = 0; i < d.num_boxes; ++i) {
    float b[kNumCoords], a[kNumCoords];  // y, x, h, w
    const int64_t base = static_cast<int64_t>(i) * d.coords_per_box;
    for (int c = 0; c < kNumCoords; ++c) {
      if (enc.dtype == DType::kFloat32) {
        b[c] = enc.data_as<float>()[base + c];
        a[c] = anchors.data_as<float>()[i * kNumCoords + c];
      } else {
        b[c] = Dequantize(enc.data_as<uint8_t>()[base + c], enc);
        a[c] = Dequantize(anchors.data_as<uint8_t>()[i * kNumCoords + c], anchors);
      }
    }
    const float ycenter = static_cast<float>(b[0] / d.y_scale * a[2] + a[0]);
    const float xcenter = static_cast<float>(b[1] / d.x_scale * a[3] + a[1]);
    const float half_h = static_cast<float>(0.5 * std::exp(b[2] / d.h_scale) * a[2]);
    const float half_w = static_cast<float>(0.5 * std::exp(b[3] / d.w_scale) * a[3]);
    Box& box = d.decoded[i];
    box = {ycenter - half_h, xcenter - half_w, ycenter + half_h, xcenter + half_w};
    if (box.ymin > box.ymax || box.xmin > box.xmax) {
      return Status::Error("decoded box " + std::to_string(i) + " has min > max (anchor " +
                           std::to_string(i) + " has a negative height or width)");
    }
  }
  return Status::Ok();
}

float IntersectionOverUnion(const Box& a, const Box& b) {
  const float area_a = (a.ymax - a.ymin) * (a.xmax - a.xmin);
  const float area_b = (b.ymax - b.ymin) * (b.xmax - b.xmin);
  if (area_a <= 0 || area_b <= 0) return 0.0f;
  const float ymin = std::max(a.ymin, b.ymin), xmin = std::max(a.xmin, b.xmin);
  const float ymax = std::min(a.ymax, b.ymax), xmax = std::min(a.xmax, b.xmax);
  const float inter = std::max(ymax - ymin, 0.0f) * std::max(xmax - xmin, 0.0f);
  return inter / (area_a + area_b - inter);
}

// NMS over d.class_scores; writes the selected box indices (best first) to
// d.selected and returns how many.
int NonMaxSuppressionSingleClass(DetectionData& d, int max_selected) {
  int kept = 0;
  for (int i = 0; i < d.num_boxes; ++i) {
    if (d.class_scores[i] >= d.score_threshold) {
      d.keep_scores[kept] = d.class_scores[i];
      d.keep_indices[kept] = i;
      ++kept;
    }
  }
  // Kept scores are never NaN (NaN >= threshold is false), so the order is total.
  std::iota(d.order.begin(), d.order.begin() + kept, 0);
  const float* scores = d.keep_scores.data();
  std::sort(d.order.begin(), d.order.begin() + kept,
            [scores](int i, int j) { return Before(scores[i], i, scores[j], j); });
  const int limit = std::min(kept, max_selected);
  std::fill(d.active.begin(), d.active.begin() + kept, uint8_t{1});
  int num_active = kept, num_selected = 0;
  for (int i = 0; i < kept; ++i) {
    if (num_active == 0 || num_selected >= limit) break;
    if (!d.active[i]) continue;
    const int box_i = d.keep_indices[d.order[i]];
    d.selected[num_selected++] = box_i;
    d.active[i] = 0;
    --num_active;
    for (int j = i + 1; j < kept; ++j) {
      if (!d.active[j]) continue;
      if (IntersectionOverUnion(d.decoded[box_i], d.decoded[d.keep_indices[d.order[j]]]) >
          d.iou_threshold) {
        d.active[j] = 0;
        --num_active;
      }
    }
  }
  return num_selected;
}

struct Outputs {
  Box* boxes;
  float* classes;
  float* scores;
};

int RegularNms(DetectionData& d, const float* scores, const Outputs& out) {
  const int per_class = std::min(d.detections_per_class, d.max_detections);
  const int stride = d.num_classes_with_background;
  int size = 0;
  for (int c = 0; c < d.num_classes; ++c) {
    for (int b = 0; b < d.num_boxes; ++b) {
      d.class_scores[b] = scores[static_cast<int64_t>(b) * stride + c + d.label_offset];
    }
    const int num_selected = NonMaxSuppressionSingleClass(d, per_class);
    for (int i = 0; i < num_selected; ++i) {
      const int b = d.selected[i];
      d.merged[size + i] = {b * stride + c + d.label_offset, d.class_scores[b]};
    }
    // Both runs are sorted decreasing; a new entry goes before an old one of
    // equal score (TFLite merges with score >=). Only the best max_detections stay.
    const int total = std::min(size + num_selected, d.max_detections);
    int a = 0, b = 0;
    for (int k = 0; k < total; ++k) {
      if (b < num_selected && (a >= size || d.merged[size + b].score >= d.merged[a].score)) {
        d.merge_scratch[k] = d.merged[size + b];
        ++b;
      } else {
        d.merge_scratch[k] = d.merged[a++];
      }
    }
    std::copy(d.merge_scratch.begin(), d.merge_scratch.begin() + total, d.merged.begin());
    size = total;
  }
  for (int i = 0; i < size; ++i) {
    const int box = d.merged[i].index / stride;
    out.boxes[i] = d.decoded[box];
    out.classes[i] = static_cast<float>(d.merged[i].index - box * stride - d.label_offset);
    out.scores[i] = d.merged[i].score;
  }
  return size;
}

int FastNms(DetectionData& d, const float* scores, const Outputs& out) {
  const int per_box = std::min(d.max_classes_per_detection, d.num_classes);
  const int stride = d.num_classes_with_background;
  for (int b = 0; b < d.num_boxes; ++b) {
    const float* box_scores = scores + static_cast<int64_t>(b) * stride + d.label_offset;
    int* order = d.sorted_classes.data() + static_cast<int64_t>(b) * d.num_classes;
    if (per_box == 1) {
      // TFLite's ArgMaxVector: the first strictly greater value wins.
      int best = 0;
      for (int c = 1; c < d.num_classes; ++c) {
        if (box_scores[c] > box_scores[best]) best = c;
      }
      order[0] = best;
    } else {
      std::iota(order, order + d.num_classes, 0);
      std::partial_sort(order, order + per_box, order + d.num_classes, [box_scores](int i, int j) {
        return Before(box_scores[i], i, box_scores[j], j);
      });
    }
    d.class_scores[b] = box_scores[order[0]];
  }
  const int num_selected = NonMaxSuppressionSingleClass(d, d.max_detections);
  for (int i = 0; i < num_selected; ++i) {
    const int b = d.selected[i];
    const float* box_scores = scores + static_cast<int64_t>(b) * stride + d.label_offset;
    const int* order = d.sorted_classes.data() + static_cast<int64_t>(b) * d.num_classes;
    for (int k = 0; k < per_box; ++k) {
      const int row = d.max_classes_per_detection * i + k;
      out.boxes[row] = d.decoded[b];
      out.classes[row] = static_cast<float>(order[k]);
      out.scores[row] = box_scores[order[k]];
    }
  }
  return num_selected;
}

Status Eval(Node& node) {
  DetectionData& d = *node.data_as<DetectionData>();
  DFARM_RETURN_IF_ERROR(DecodeBoxes(node, d));
  const Tensor& classes = *node.inputs[1];
  const float* scores = classes.data_as<float>();
  if (classes.dtype == DType::kUint8) {
    const uint8_t* q = classes.data_as<uint8_t>();
    const double scale = classes.scale;
    for (size_t i = 0; i < d.dequantized_scores.size(); ++i) {
      d.dequantized_scores[i] =
          static_cast<float>(scale * (static_cast<int32_t>(q[i]) - classes.zero_point));
    }
    scores = d.dequantized_scores.data();
  }
  Outputs out{reinterpret_cast<Box*>(node.outputs[0]->data), node.outputs[1]->data_as<float>(),
              node.outputs[2]->data_as<float>()};
  std::memset(node.outputs[0]->data, 0, node.outputs[0]->bytes);
  std::memset(node.outputs[1]->data, 0, node.outputs[1]->bytes);
  std::memset(node.outputs[2]->data, 0, node.outputs[2]->bytes);
  const int count = d.use_regular_nms ? RegularNms(d, scores, out) : FastNms(d, scores, out);
  node.outputs[3]->data_as<float>()[0] = static_cast<float>(count);
  return Status::Ok();
}

}  // namespace

const OpRegistration* RegisterDetectionPostProcess() {
  static const OpRegistration registration = {&Prepare, &Eval};
  return &registration;
}

}  // namespace dfarm::runtime
