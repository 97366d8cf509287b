// The `dfarm` command line. Main() is the whole program; dfarm_main.cc only
// calls it, and tests call it in-process with their own streams.
#pragma once

#include <ostream>

#include "agent/base/result.h"

namespace dfarm::cli {

// Exit codes (harness/README.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitJobsFailed = 1;  // the sweep ran, some job did not end ok
inline constexpr int kExitUsage = 2;       // bad arguments, bad spec, unknown run
inline constexpr int kExitInfra = 3;       // device or database trouble
inline constexpr int kExitInterrupted = 130;

// The exit code of a failure of this kind: kInvalidInput and kNotFound are
// usage errors (2), anything else is infrastructure (3).
int ExitCodeFor(ErrorKind kind);

int Main(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace dfarm::cli
