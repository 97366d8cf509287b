// Task accuracy on labelled data, computed on the host from a job's outputs:
// top-k accuracy for classification, COCO's box mAP and recall for detection,
// mean IoU and pixel accuracy for segmentation. Pure functions of their
// arguments, no I/O. Every metric can be evaluated on any multiset of the
// set's images (indices into it, repeats allowed), which is what a bootstrap
// over images (stats::BootstrapOverItems) draws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace dfarm::eval {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The images 0..n-1 once each: a metric over the whole set.
std::vector<size_t> AllImages(size_t n);

// --- classification ---------------------------------------------------------

// The rank of class `label` among `scores` (0: the best): the number of
// classes with a higher score, or the same score at a lower index (ties go
// to the lower index, as a stable sort by descending score orders them). A
// label outside the scores, or a NaN score, ranks after every class.
size_t LabelRank(const float* scores, size_t count, size_t label);

// Per-image ranks as a job's stored per_image (store::TaskAccuracy):
// {"ranks":[...]}; and back (empty when the text holds none).
std::string RanksJson(const std::vector<size_t>& ranks);
std::vector<size_t> RanksFromJson(const std::string& per_image);

// The fraction of `images` whose rank (ranks[image]) is below k: top-1 is
// k = 1, top-5 k = 5. NaN for no images.
double TopKAccuracy(const std::vector<size_t>& ranks, size_t k, const std::vector<size_t>& images);

// --- detection --------------------------------------------------------------

// A box by its corners, in any unit (IoU does not depend on it):
// x0 <= x1, y0 <= y1.
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// COCO's box IoU: intersection over union of the areas, 0 when the union is
// empty.
double BoxIou(const Box& a, const Box& b);

struct TruthBox {
  size_t image = 0;
  int category = 0;
  Box box;
};

struct DetectedBox {
  size_t image = 0;
  int category = 0;
  Box box;
  double score = 0;
};

struct DetectionMetrics {
  double map = kNaN;      // AP averaged over IoU .50:.05:.95 and categories
  double map50 = kNaN;    // AP at IoU .50
  double map75 = kNaN;    // AP at IoU .75
  double recall = kNaN;   // COCO's AR at max_detections, over the same IoUs
  size_t categories = 0;  // categories with at least one truth box
};

// COCO's bounding-box evaluation (pycocotools' COCOeval, iouType "bbox", area
// range "all", no crowd annotations): per image and category the
// max_detections highest-scoring detections (a stable sort by descending
// score) are matched greedily, each to the unmatched truth box of the
// highest IoU at or above the threshold; precision is made monotone and read
// at the 101 recall points 0, .01, ..., 1 (0 past the last recall reached).
// Categories without a truth box in the evaluated images are left out of
// the means, as are detections of them.
class CocoEvaluator {
 public:
  CocoEvaluator(size_t images, const std::vector<TruthBox>& truth,
                const std::vector<DetectedBox>& detections, size_t max_detections = 100);

  size_t images() const { return images_; }
  // Over a multiset of images: an image drawn twice counts twice.
  DetectionMetrics Evaluate(const std::vector<size_t>& images) const;

 private:
  static constexpr int kThresholds = 10;
  // One image's detections of one category after matching: their scores in
  // evaluation order and, per IoU threshold, whether each matched.
  struct Matched {
    size_t truth = 0;
    std::vector<double> scores;
    std::vector<std::vector<bool>> hit;  // [threshold][detection]
  };
  double AveragePrecision(const std::vector<const Matched*>& per_image, int threshold,
                          double* recall) const;

  size_t images_;
  std::vector<int> categories_;
  std::vector<std::vector<Matched>> matched_;  // [category index][image]
};

// A labelled set's truth boxes and a job's detections on it, as a job's
// stored per_image (store::TaskAccuracy): {"images":N,"truth":[[image,
// category,x0,y0,x1,y1],...],"detections":[[image,category,x0,y0,x1,y1,
// score],...]}; and back (unset when the text holds no such object).
struct DetectionSet {
  size_t images = 0;
  std::vector<TruthBox> truth;
  std::vector<DetectedBox> detections;
};
std::string DetectionJson(const DetectionSet& set);
std::optional<DetectionSet> DetectionFromJson(const std::string& per_image);

// --- segmentation -----------------------------------------------------------

struct SegmentationMetrics {
  double mean_iou = kNaN;        // over classes present in truth or prediction
  double pixel_accuracy = kNaN;  // correct pixels over counted pixels
  size_t classes = 0;            // classes in the mean
};

// Per-image pixel counts of a segmentation, then metrics over any multiset of
// images: IoU of a class is its intersection over its union summed over the
// images (the dataset-level IoU), the mean over classes whose union is not
// empty. Truth pixels equal to `ignore_label` (when set, >= 0) are not counted.
class SegmentationCounts {
 public:
  SegmentationCounts(int classes, int ignore_label = -1);

  // Adds one image: truth and predicted class per pixel, same length. A
  // value outside [0, classes) in either is counted as a miss (in no class).
  void AddImage(const std::vector<int32_t>& truth, const std::vector<int32_t>& predicted);
  size_t images() const { return per_image_.size(); }
  SegmentationMetrics Evaluate(const std::vector<size_t>& images) const;

  // The counts as a job's stored per_image: {"classes":C,"ignore":L,
  // "counts":[[correct,counted,intersection_0,truth_0,predicted_0,...],...]}
  // (one list per image); and back (unset when the text holds none).
  std::string ToJson() const;
  static std::optional<SegmentationCounts> FromJson(const std::string& per_image);

 private:
  struct ImageCounts {
    std::vector<uint64_t> intersection, truth, predicted;
    uint64_t correct = 0, counted = 0;
  };
  int classes_;
  int ignore_label_;
  std::vector<ImageCounts> per_image_;
};

}  // namespace dfarm::eval
