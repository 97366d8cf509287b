// dfarm-conformance: runs the op conformance catalog through delegates and the
// reference kernels and prints a table; exits 1 on any failure, 2 on a bad
// command line (an unknown option or delegate, options a delegate refuses, a
// --case that names no case), before anything runs.
//   dfarm-conformance xnnpack:threads:2 external:path:/x/libdfarm_example_delegate.so
#include <cstring>
#include <iostream>

#include "delegates/conformance/conformance.h"

int main(int argc, char** argv) {
  using dfarm::conformance::DelegateUnderTest;
  std::vector<DelegateUnderTest> delegates;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--case") == 0) {
      if (i + 1 >= argc) {
        std::cerr << "dfarm-conformance: --case needs a SUBSTRING of a case name (see --help)\n";
        return 2;
      }
      filter = argv[++i];
      continue;
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: dfarm-conformance [--case SUBSTRING] DELEGATE[:key:value;...]...\n"
                   "Runs every catalog case each delegate claims through it and through the\n"
                   "reference kernels (float32 tolerance 1e-5 abs + 1e-5 rel; quantized\n"
                   "outputs within 2 quantization steps), plus the partition checks.\n"
                   "Exit codes: 0 every case passed, 1 some case failed, 2 bad command line\n"
                   "(unknown option or delegate, refused options, a --case matching no case).\n"
                   "--version prints the version.\n";
      return 0;
    }
    if (std::strcmp(argv[i], "--version") == 0) {
      std::cout << "dfarm-conformance " << DFARM_VERSION << "\n";
      return 0;
    }
    if (argv[i][0] == '-') {
      std::cerr << "dfarm-conformance: unknown option '" << argv[i] << "' (see --help)\n";
      return 2;
    }
    DelegateUnderTest d;
    bool old_syntax = false;
    if (!dfarm::conformance::ParseDelegateSpec(argv[i], &d, &old_syntax)) {
      std::cerr << "dfarm-conformance: bad delegate '" << argv[i]
                << "', expected NAME or NAME:key:value;key:value\n";
      return 2;
    }
    if (old_syntax) {
      std::cerr << "dfarm-conformance: '" << argv[i]
                << "' uses the deprecated key=value,... option syntax; write "
                   "NAME:key:value;key:value (the syntax of dfarm-runner --delegate-options)\n";
    }
    if (const std::string why = dfarm::conformance::CheckDelegate(d); !why.empty()) {
      std::cerr << "dfarm-conformance: " << why << "\n";
      return 2;
    }
    delegates.push_back(std::move(d));
  }
  if (delegates.empty()) {
    std::cerr << "dfarm-conformance: name at least one delegate (see --help)\n";
    return 2;
  }
  if (dfarm::conformance::CountCases(filter) == 0) {
    std::cerr << "dfarm-conformance: no case name contains '" << filter
              << "' (run without --case to see every case)\n";
    return 2;
  }
  return dfarm::conformance::RunAll(delegates, std::cout, filter) == 0 ? 0 : 1;
}
