// Per-node and per-op-type timing of an allocated interpreter, one step of
// Invoke() at a time (Interpreter::InvokeStep). A delegated partition is one
// step, timed as a whole. When its delegate times the nodes inside it
// (Delegate::EnableProfiling, Interpreter::InvokeStepProfiled), each profile
// run also runs the partition profiled: its nodes get an entry each after
// the partition's, and the partition's entry is its time in that same run,
// which its nodes' times split (DelegateKernel::InvokeProfiled), so they add
// up to it; its plain run's time is kept beside (plain_us).
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
  // The entry of a partition whose nodes are timed: its mean time in plain
  // runs (InvokeStep), beside mean_us, its time in the profiled runs. Not in
  // the runner's JSON (runner_json::ProfileNode).
  double plain_us = 0;
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

// A partition whose nodes were timed inside it: its DELEGATE entry's time
// (the profiled runs'), the sum of its nodes' entries (the same, but for
// rounding) and its time in plain runs.
struct PartitionTime {
  int partition = -1;
  std::string delegate;
  size_t nodes = 0;
  double whole_us = 0;
  double nodes_us = 0;
  double plain_us = 0;
};
std::vector<PartitionTime> PartitionTimes(const Profile& profile);

// "partition 0 (xnnpack, 12 nodes): 812.0 us profiled (its nodes 812.0 us),
// 790.5 us run plainly (102.7%)\n" per PartitionTimes() entry, the share
// being the profiled time's of the plain one; empty when there is none.
std::string PartitionProfileText(const Profile& profile);

// Runs `interpreter` `runs` times step by step, timing each step that does
// work, and each partition's nodes where its delegate can time them (one
// untimed profiled run first: it finds which can, and warms them; then each
// run is a pass of plain steps and, where some can, a pass with those
// partitions profiled). Inputs
// must be filled; outputs change as with Invoke(). `placement` is the
// interpreter's. Returns the first failing step's status.
runtime::Status ProfileRuns(runtime::Interpreter& interpreter, const runtime::Placement& placement,
                            uint32_t runs, Profile* profile_out);

}  // namespace dfarm::runner
