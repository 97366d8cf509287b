// How much of its graph a delegate cell's delegate took, as every view that
// shows the cell's latency says it (`dfarm show`, the HTML heatmap, the
// dashboard's matrix, the gate): a latency measured with nodes left on the
// CPU must never read as the delegate's speed. This file owns the wording.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dfarm::store {

struct JobRow;

// A job of a delegate other than cpu whose delegate took fewer nodes than
// the graph runs at Invoke() (nodes folded at load do not count: they never
// run).
struct PartialDelegation {
  std::string delegate;   // the job's delegate, as its cell names it ("xnnpack")
  int64_t delegated = 0;  // nodes a delegate ran
  int64_t nodes = 0;      // nodes that run at Invoke(): the placement's, folded ones left out
  std::string reason;     // the main reason, shortened (ShortReason); "" when none was recorded

  // True when the delegate took no node: the latency is the CPU path's.
  bool TookNone() const { return delegated == 0; }
  // "xnnpack: 0 of 60 nodes": where there is room for little.
  std::string Count() const;
  // "xnnpack: 0 of 60 nodes (tensor 3 is sized only at Prepare())": Count()
  // and the reason, when there is one.
  std::string Label() const;
};

// Unset for a cpu job, a job without a placement or with one that lists no
// nodes (a tool's log that counts none), and a job whose delegate took every
// node that runs. The reason is the placement summary's main_reason.
std::optional<PartialDelegation> PartialDelegationOf(const JobRow& job);
// The trial of `jobs` (one cell's) whose delegate took the fewest nodes,
// the first of equals; unset when no trial is partial.
std::optional<PartialDelegation> PartialDelegationOf(const std::vector<const JobRow*>& jobs);

// At most this many characters of a reason in a label.
inline constexpr size_t kMaxReasonChars = 64;

// A placement reason ("name: why", one per delegate asked, joined by "; ")
// as a label shows it: the entry of `delegate` (else the first) without its
// "name: ", cut at a word to at most kMaxReasonChars with "..." when longer.
std::string ShortReason(const std::string& reason, const std::string& delegate);

}  // namespace dfarm::store
