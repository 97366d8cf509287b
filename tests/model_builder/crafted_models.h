// Crafted models, as a hostile user could submit them: shapes our kernels'
// Prepare refuses (or, for an empty tensor, runs to TFLite's empty result)
// that a delegate trusting the declared shapes would take to an abort or an
// out-of-bounds access. The delegate and runner tests run each on every
// path; the model fuzzer keeps them as seeds.
#pragma once

#include <string>
#include <vector>

#include "tests/model_builder/model_builder.h"

namespace dfarm::testing {

struct CraftedModel {
  std::string name;  // a file name stem: "zero_sized_add"
  ModelBuilder builder;
  // Empty: the model loads and runs on every path, its one output empty (as
  // in TFLite). Else AllocateTensors() fails with kError (the runner's
  // model_error), its message holding this.
  std::string error;
};

// Each has one float32 input and one output.
std::vector<CraftedModel> CraftedShapeModels();

}  // namespace dfarm::testing
