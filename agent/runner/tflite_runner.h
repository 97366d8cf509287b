// dfarm-tflite-runner: dfarm-runner's job contract (its command
// line, --json document and exit codes; docs/CONTRACTS.md) on TensorFlow
// Lite's own C library, libtensorflowlite_c.so, loaded at run time
// (tflite_c.h). It measures, summarizes and reports with dfarm-runner's code
// (runner.h) and makes the same inputs (tensor_files.h), so the two runtimes
// are compared on equal terms; "runtime" in the document tells them apart.
// tflite_runner_main.cc is a thin shell over TfliteRunnerMain().
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"
#include "agent/runner/runner.h"
#include "agent/runner/tflite_c.h"

namespace dfarm::runner {

inline constexpr const char* kTfliteRunnerName = "dfarm-tflite-runner";
inline constexpr const char* kTfliteLibraryName = "libtensorflowlite_c.so";

// Where the library is looked for, in order: `flag` (--tflite-lib) alone when
// given, else `env` ($DFARM_TFLITE_LIB) alone when set, else the bare name
// (the dynamic loader's search: LD_LIBRARY_PATH, a bundle loader's
// --library-path) and then <exe_dir>/../lib/libtensorflowlite_c.so.
std::vector<std::string> TfliteLibraryCandidates(const std::string& flag, const char* env,
                                                 const std::string& exe_dir);

// The first candidate that loads; an error naming every place tried and why
// each failed.
Result<std::unique_ptr<tflite::Library>> LoadTfliteLibrary(
    const std::vector<std::string>& candidates);

// TensorFlow Lite's "Replacing N node(s) with delegate (NAME) node, yielding
// K partitions" lines in `log`: the partitions (summed over the lines) and
// no nodes, as the C API cannot list them. Unset when there is no such line.
std::optional<JobPlacement> PlacementFromTfliteLog(std::string_view log);

// One job on `library`, never throws; progress notes go to `log`. Delegates:
// "cpu" (TFLite's builtin kernels, --num-threads of them), "xnnpack"
// (TFLite's XNNPACK delegate; options threads, fp16) and "external" (a
// TFLite external delegate plugin, option path; the other options go to it).
RunOutcome RunTflite(const RunnerOptions& options, const tflite::Library& library,
                     std::ostream& log);

// The whole program: dfarm-runner's command line plus --tflite-lib PATH.
int TfliteRunnerMain(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dfarm::runner
