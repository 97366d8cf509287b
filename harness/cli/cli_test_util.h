// For the tests of harness/cli: runs cli::Main in-process and keeps what it
// printed.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "harness/cli/cli.h"

namespace dfarm::cli::test_util {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

// Runs `dfarm ARGS...` through cli::Main.
inline Outcome Call(std::vector<std::string> args) {
  args.insert(args.begin(), "dfarm");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  int code = Main(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

}  // namespace dfarm::cli::test_util
