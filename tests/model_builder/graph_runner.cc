#include "tests/model_builder/graph_runner.h"

namespace dfarm::testing {

runtime::Status GraphRunner::Init(const ModelBuilder& builder,
                                  const runtime::InterpreterOptions& options,
                                  const KernelOverrides& overrides) {
  std::vector<uint8_t> bytes = builder.Build();
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer("test.tflite", bytes, &model_));
  resolver_.AddAllReferenceOps();
  for (const auto& [code, registration] : overrides) resolver_.AddBuiltin(code, registration);
  interpreter_ = std::make_unique<runtime::Interpreter>(*model_, resolver_, options);
  return interpreter_->AllocateTensors();
}

}  // namespace dfarm::testing
