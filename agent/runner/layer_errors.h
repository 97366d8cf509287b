// The per-layer error profile of a delegated run (--accuracy-reference
// layers, the culprit finder's evidence): every tensor a step of the job's
// interpreter writes where the host can see it (a CPU node's outputs, a
// delegated partition's outputs) compared with the same tensor of a
// reference interpreter over the same model and inputs. A partition whose
// delegate runs it node by node (Interpreter::InvokeStepProfiled, after
// Delegate::EnableProfiling: xnnpack, gpu) shows every node's outputs, each
// under its own node and op; others show their outputs as one "DELEGATE".
#pragma once

#include <vector>

#include "agent/runner/runner_values.h"
#include "runtime/interpreter.h"
#include "runtime/status.h"

namespace dfarm::runner {

// Runs `reference` and then `got` step by step (Interpreter::InvokeStep),
// keeping a copy of each tensor the reference wrote (as doubles, dequantized)
// and comparing each visible tensor of `got` right after the step that wrote
// it, before the arena reuses its storage. Both interpreters must be of the
// same model, allocated, with the same input values filled in. Returns the
// entries in execution order; the first failing step's status otherwise.
runtime::Status CompareLayers(runtime::Interpreter& got, runtime::Interpreter& reference,
                              std::vector<LayerError>* layers_out);

}  // namespace dfarm::runner
