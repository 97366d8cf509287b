// dfarm-runner: see agent/runner/runner.h and docs/CONTRACTS.md.
#include <iostream>

#include "agent/runner/runner.h"

int main(int argc, char** argv) {
  return dfarm::runner::RunnerMain(argc, argv, std::cout, std::cerr);
}
