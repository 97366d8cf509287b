// Runs the conformance catalog (catalog.h) through a delegate and through the
// reference kernels and compares, with a per-dtype tolerance.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "delegates/conformance/catalog.h"
#include "delegates/registry.h"
#include "runtime/status.h"

namespace dfarm::conformance {

// |delegate - reference| <= abs + rel * |reference|, per element.
struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
};
// float32: 1e-5 absolute + 1e-5 relative.
inline constexpr Tolerance kFloat32Tolerance{1e-5, 1e-5};
// A delegate computing in float16 (xnnpack fp16=true, gpu
// precision_loss_allowed=true): 1e-2 + 1e-2, about ten half-precision steps
// (2^-10 relative) on the catalog's values in [-1, 1] for one op.
inline constexpr Tolerance kFloat16Tolerance{1e-2, 1e-2};
// The gpu delegate in float32: 1e-4 + 1e-4. OpenCL's exp, tanh and
// division may differ from the host's by a few ulps, and a device may
// contract a*b+c into fma.
inline constexpr Tolerance kGpuFloat32Tolerance{1e-4, 1e-4};

// A delegate by its registry name and options ("external" needs `path`).
struct DelegateUnderTest {
  std::string name;
  delegates::DelegateOptions options;
  std::string Label() const;  // "xnnpack", "external(path=...)"
  // kFloat16Tolerance when options hold fp16=true (or 1), or
  // precision_loss_allowed=true for gpu; kGpuFloat32Tolerance for other gpu;
  // else kFloat32Tolerance.
  Tolerance DefaultTolerance() const;
};

// Parses "NAME" or "NAME:OPTIONS", OPTIONS in the one delegate-option syntax
// "key:value;key:value" (delegates/delegate_options.h); false when malformed.
// The old spelling "NAME:key=value,key=value" (no ':' after the name's) is
// still read, and sets *old_syntax so the tool can say it is deprecated.
bool ParseDelegateSpec(const std::string& spec, DelegateUnderTest* out, bool* old_syntax = nullptr);

struct CaseResult {
  std::string case_name;
  std::string delegate;
  bool claimed = false;  // the delegate took the op's node
  std::string reason;    // why not, when not claimed
  double max_abs_error = 0.0;
  double max_steps = 0.0;  // quantized cases: max_abs_error in output quantization steps
  bool pass = false;       // not claimed counts as a pass
  std::string error;       // a failure other than a mismatch
};

// Runs `c` with the reference kernels and with `delegate` on the same seeded
// inputs. A case the delegate does not claim passes without comparison. A
// quantized case (c.quantum > 0) is compared within kQuantizedSteps steps
// plus `tolerance` (which float16 storage of the float edges may need).
CaseResult RunCase(const ConformanceCase& c, const DelegateUnderTest& delegate,
                   const Tolerance& tolerance = kFloat32Tolerance);

struct PartitionResult {
  std::string case_name;
  std::string delegate;
  int partitions = 0;
  int delegated_nodes = 0;
  double max_abs_error = 0.0;
  bool pass = false;
  std::string error;
};

// Checks the partition count and delegated node count by hand, and the outputs.
PartitionResult RunPartitionCase(const PartitionCase& c, const DelegateUnderTest& delegate,
                                 const Tolerance& tolerance = kFloat32Tolerance);

// Per-node times inside a delegate's partitions (Delegate::EnableProfiling,
// Interpreter::InvokeStepProfiled), judged by structure only, never by how
// long anything took: the model runs once with Invoke(), then its outputs
// are set to NaN and it runs again step by step, every partition through
// InvokeStepProfiled. Passes when the delegate times no node (not asked to
// support it: `supported` false), or when each timed partition gives one
// finite time >= 0 per node, every node's float32 outputs right after it
// match the reference kernels' (run with nothing folded, so every node's
// output exists) within `tolerance`, and the profiled run's outputs match
// Invoke()'s (a delegate that times nodes by running them apart, as xnnpack
// does, must still compute the same).
struct NodeProfileResult {
  std::string delegate;
  bool supported = false;    // the delegate's EnableProfiling() said Ok
  int partitions = 0;        // delegated partitions
  int timed_nodes = 0;       // nodes given a time
  int delegated_nodes = 0;   // nodes in partitions
  double max_abs_error = 0;  // profiled run vs Invoke()
  bool pass = false;
  std::string error;
};
NodeProfileResult RunNodeProfile(const std::vector<uint8_t>& model, const std::string& name,
                                 const DelegateUnderTest& delegate,
                                 const Tolerance& tolerance = kFloat32Tolerance);

// Why `delegate` cannot be run here as given: an unknown name (the message
// lists the built-in ones) or options its delegate refuses; "" when it can.
std::string CheckDelegate(const DelegateUnderTest& delegate);

// How many cases (catalog and partition cases) RunAll runs for `filter`.
size_t CountCases(const std::string& filter);

// Runs every case (whose name contains `filter`, when not empty) for every
// delegate and writes the table to `os`; returns the number of failures.
int RunAll(const std::vector<DelegateUnderTest>& delegates, std::ostream& os,
           const std::string& filter = {});

}  // namespace dfarm::conformance
