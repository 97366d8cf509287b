// Per-node and per-op-type timing of an allocated interpreter, one step of
// Invoke() at a time (Interpreter::InvokeStep); a delegated partition is one
// step, timed as a whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/delegate.h"
#include "runtime/interpreter.h"
#include "runtime/status.h"

namespace dfarm::runner {

struct NodeProfile {
  int index = -1;          // the node (a partition's first node)
  std::string op;          // "CONV_2D"; "DELEGATE" for a delegated partition
  std::string delegate;    // "cpu" or the delegate's name
  int partition = -1;      // set for a delegated partition
  std::vector<int> nodes;  // a partition's nodes; empty otherwise
  double mean_us = 0;
};

struct OpProfile {
  std::string op;
  size_t count = 0;     // steps of this op type
  double total_us = 0;  // sum of the steps' mean_us: one run's worth
  double pct = 0;       // share of all steps' total_us, 0..100
};

struct Profile {
  uint32_t runs = 0;
  std::vector<NodeProfile> nodes;  // in execution order
  std::vector<OpProfile> by_op;    // by descending total_us
};

// Runs `interpreter` `runs` times step by step, timing each step that does
// work. Inputs must be filled; outputs change as with Invoke(). `placement`
// is the interpreter's. Returns the first failing step's status.
runtime::Status ProfileRuns(runtime::Interpreter& interpreter, const runtime::Placement& placement,
                            uint32_t runs, Profile* profile_out);

}  // namespace dfarm::runner
