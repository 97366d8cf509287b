// The delegates this build of the runtime offers, by name: "cpu" (the
// reference kernels of runtime/) and the delegates of runtime/delegate.h
// ("external": a plugin loaded from a shared library, delegates/external/;
// "xnnpack": XNNPACK, delegates/xnnpack/, when the build found it).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delegates/delegate_options.h"
#include "runtime/delegate.h"
#include "runtime/op_resolver.h"
#include "runtime/status.h"

namespace dfarm::delegates {

// A delegate this build offers, as the registry lists it (the runtime's
// delegate object it creates is runtime::Delegate).
struct RegisteredDelegate {
  const char* name;
  const char* description;
  // The option keys this delegate accepts; null-terminated, may be empty.
  const char* const* option_keys;
  // Registers the kernels the delegate runs into `resolver`.
  void (*add_kernels)(runtime::OpResolver& resolver);
  // Makes the runtime delegate from `options` (checked by
  // CheckDelegateOptions); null for "cpu", which only adds kernels. A
  // failure is a delegate error (kError) or kUnsupported on this machine.
  runtime::Status (*create)(const DelegateOptions& options,
                            std::unique_ptr<runtime::Delegate>* delegate_out) = nullptr;
  // True when keys outside option_keys go on to the delegate, which checks
  // them itself (an external plugin's own options).
  bool passes_other_options = false;
};

// The partition options every created delegate accepts:
// max_delegated_partitions (0: no limit), min_nodes_per_partition (>= 1),
// require_full_delegation (true/false, 1/0), first_delegate_node_index and
// last_delegate_node_index (node indices >= 0: only nodes in that range are
// offered). Other keys are ignored here.
inline constexpr const char* kPartitionOptionKeys[] = {
    "max_delegated_partitions", "min_nodes_per_partition", "require_full_delegation",
    "first_delegate_node_index", "last_delegate_node_index"};

// Reads the partition options from `options`; an Error names a bad value.
runtime::Status ParsePartitionOptions(const DelegateOptions& options,
                                      runtime::DelegatePartitionOptions* out);

// Names of the delegates in this build, in registration order.
std::vector<std::string> AvailableDelegates();

// The delegate called `name` (static storage), or an Error such as
// "unknown delegate 'gpu' (available: cpu)".
runtime::Status FindDelegate(std::string_view name, const RegisteredDelegate** delegate_out);

// Error naming the first option key the delegate does not accept.
runtime::Status CheckDelegateOptions(const RegisteredDelegate& delegate,
                                     const DelegateOptions& options);

}  // namespace dfarm::delegates
