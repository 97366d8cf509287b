#include <iostream>

#include "harness/cli/cli.h"

int main(int argc, char** argv) { return dfarm::cli::Main(argc, argv, std::cout, std::cerr); }
