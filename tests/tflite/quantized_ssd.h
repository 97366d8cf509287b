// A deep quantized network shaped like SSD MobileNet v2, written with
// tests/model_builder, for the TensorFlow Lite cross-check
// (tflite_quantized_ssd_test.cc) and the benchmark beside TFLite's
// (tflite_benchmark.cc): a stem convolution, inverted residual blocks (1x1
// expand RELU6, 3x3 depthwise RELU6 at stride 1 and 2, one with depth
// multiplier 2, 1x1 projection), residual ADDs of differently scaled inputs,
// an average pool, box and class heads RESHAPEd and CONCATENATEd from
// differently scaled inputs, LOGISTIC scores, and
// TFLite_Detection_PostProcess at the end (its four outputs declared [], as
// converters write them; uint8 box encodings, scores and anchors as TF1's
// quantized SSDs take them, int8 ones DEQUANTIZEd to float first, as TFLite
// 2.9's kernel takes only uint8 or float). uint8 has per-tensor weights (as
// TF1's quantized SSDs), int8 per-channel ones; seeded weights and scales in
// the ranges real converters write. Every activation is also a model output,
// so a difference is traced to the first layer that makes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dfarm::tflite_test {

// A built network: the model, its uint8 or int8 input codes, the name of
// each quantized output (every activation, in creation order).
struct Network {
  std::vector<uint8_t> model;
  std::vector<uint8_t> input;
  std::vector<std::string> names;  // per quantized output
  bool detections = false;         // then 4 float32 outputs follow: boxes, classes, scores, count
};

// TFLite_Detection_PostProcess's custom_options (a flexbuffer map): one
// class per detection, box scales y/x 10 and h/w 5, and these.
struct DetectionSpec {
  int max_detections = 10;
  int detections_per_class = 5;
  int num_classes = 1;  // without the background column
  float score_threshold = 0.5f;
  float iou_threshold = 0.5f;
  bool regular_nms = false;
};
std::vector<uint8_t> DetectionOptions(const DetectionSpec& spec);

// The SSD network on a 96x96x3 input; fast NMS on odd seeds, regular NMS
// on even ones.
Network BuildSsd(bool int8, uint32_t seed);

// Ops outside SSD on the same integer arithmetic: TRANSPOSE_CONV (TFLite's
// own requantization, away from zero) and, int8 only as in TFLite 2.9,
// BATCH_MATMUL (TFLite's GEMM, halves upward), after a linear stem
// convolution.
Network BuildGemmOps(bool int8, uint32_t seed);

}  // namespace dfarm::tflite_test
