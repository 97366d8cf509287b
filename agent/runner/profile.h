// Per-node and per-op-type timing of an allocated interpreter, one step of
// Invoke() at a time (Interpreter::InvokeStep). A delegated partition is one
// step, timed as a whole; when its delegate times the nodes inside it
// (Delegate::EnableProfiling, Interpreter::InvokeStepProfiled) the partition
// also runs once more per profile run with per-node timing, and each of its
// nodes gets an entry of its own after the partition's.
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
  std::string op;          // "CONV_2D"; "DELEGATE" for a delegated partition as a whole
  std::string delegate;    // "cpu" or the delegate's name
  int partition = -1;      // set for a delegated partition and for each node timed inside one
  std::vector<int> nodes;  // a partition's nodes (its whole entry); empty otherwise
  double mean_us = 0;
  // A node timed inside its partition by the delegate (op its own, partition
  // set, nodes empty); it follows the partition's entry.
  bool in_partition = false;
};

struct OpProfile {
  std::string op;
  size_t count = 0;     // entries of this op type
  double total_us = 0;  // sum of the entries' mean_us: one run's worth
  double pct = 0;       // share of all counted entries' total_us, 0..100
};

struct Profile {
  uint32_t runs = 0;
  // In execution order. by_op counts a partition whose nodes were timed
  // inside it by those nodes, not by its DELEGATE entry.
  std::vector<NodeProfile> nodes;
  std::vector<OpProfile> by_op;  // by descending total_us
};

// A partition whose nodes were timed inside it: its time as a whole (its
// DELEGATE entry) beside the sum of its nodes' entries.
struct PartitionTime {
  int partition = -1;
  std::string delegate;
  size_t nodes = 0;
  double whole_us = 0;
  double nodes_us = 0;
};
std::vector<PartitionTime> PartitionTimes(const Profile& profile);

// "partition 0 (xnnpack, 12 nodes): 812.0 us as a whole, its nodes 790.5 us
// (97.4%)\n" per PartitionTimes() entry; empty when there is none.
std::string PartitionProfileText(const Profile& profile);

// Runs `interpreter` `runs` times step by step, timing each step that does
// work, and each partition's nodes where its delegate can time them (one
// untimed profiled run first: it finds which can, and warms them). Inputs
// must be filled; outputs change as with Invoke(). `placement` is the
// interpreter's. Returns the first failing step's status.
runtime::Status ProfileRuns(runtime::Interpreter& interpreter, const runtime::Placement& placement,
                            uint32_t runs, Profile* profile_out);

}  // namespace dfarm::runner
