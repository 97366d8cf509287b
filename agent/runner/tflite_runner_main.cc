// dfarm-tflite-runner: see agent/runner/tflite_runner.h and docs/CONTRACTS.md.
#include <iostream>

#include "agent/runner/tflite_runner.h"

int main(int argc, char** argv) {
  return dfarm::runner::TfliteRunnerMain(argc, argv, std::cout, std::cerr);
}
