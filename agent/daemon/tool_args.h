// The command lines of Google's tools as runners (runner kinds
// "benchmark_model" and "inference_diff", agent/protocol/runner_kinds.h):
// a job's settings mapped to their flags (docs/CONTRACTS.md, "Runner kinds").
#pragma once

#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/types.h"

namespace dfarm::agent {

// The tool's arguments (without argv[0]) for `job` on the model at
// model_path; plugin_path (the store path of job.plugin_sha256, or "") is the
// external delegate. An option or delegate the tool has no flag for is an
// error naming it (the job is then refused as infra, not run differently).
Result<std::vector<std::string>> ToolArgs(const JobSpec& job, const std::string& model_path,
                                          const std::string& plugin_path);

}  // namespace dfarm::agent
