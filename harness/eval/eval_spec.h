// A model's "eval" in the sweep spec (docs/CONTRACTS.md): task accuracy on a
// labelled set. The set's images become the job's input sets (preprocessed
// like spec "inputs" images), the runner lists each image's best classes
// (--task-outputs) and the host scores them against the labels
// (harness/eval/task_accuracy.h).
//
// Classification sets come as an ImageNet-style folder (`<class>/<image>`)
// or a list file (`image,label` per line, paths relative to the file), with
// an optional labels file (one class name per line; line i is class i).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/spec/input_sets.h"
#include "nlohmann/json_fwd.hpp"

namespace dfarm::harness {

struct EvalSpec {
  std::string task = "classification";
  std::string dataset;      // absolute: the folder or list file given
  std::string labels_file;  // absolute; "" when none was given
  // Class names, index = class; from the labels file, else the sorted
  // folder names (folder sets) or the largest index (list files of indices).
  std::vector<std::string> classes;
  // The images evaluated (after "limit"/"sample"), absolute, in set order,
  // and each one's class index.
  std::vector<std::string> images;
  std::vector<int32_t> labels;
  // "decoder": the output holding the class scores and the offset of class
  // 0 in it (1 for models whose output 0 is a background class).
  uint32_t output = 0;
  int32_t offset = 0;
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
  // The runner's --task-outputs for it: "topk:K:OUTPUT".
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

}  // namespace dfarm::harness
