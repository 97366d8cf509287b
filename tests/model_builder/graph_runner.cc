#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {

runtime::Status GraphRunner::Init(const ModelBuilder& builder) {
  std::vector<uint8_t> bytes = builder.Build();
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("test.tflite", bytes, &model_));
  resolver_.AddAllReferenceOps();
  interpreter_ = std::make_unique<runtime::Interpreter>(*model_, resolver_);
  return interpreter_->AllocateTensors();
}

}  // namespace dfarm::testing
