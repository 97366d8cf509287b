// The delegates this build of the runtime offers, by name. For now only
// "cpu": the reference kernels of runtime/. The full delegate interface
// (per-node support, partitions, plugins) comes later.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/op_resolver.h"
#include "runtime/status.h"

namespace dfarm::delegates {

using DelegateOptions = std::vector<std::pair<std::string, std::string>>;

struct Delegate {
  const char* name;
  const char* description;
  // The option keys this delegate accepts; null-terminated, may be empty.
  const char* const* option_keys;
  // Registers the kernels the delegate runs into `resolver`.
  void (*add_kernels)(runtime::OpResolver& resolver);
};

// Names of the delegates in this build, in registration order.
std::vector<std::string> AvailableDelegates();

// The delegate called `name` (static storage), or an Error such as
// "unknown delegate 'gpu' (available: cpu)".
runtime::Status FindDelegate(std::string_view name, const Delegate** delegate_out);

// Error naming the first option key the delegate does not accept.
runtime::Status CheckDelegateOptions(const Delegate& delegate, const DelegateOptions& options);

}  // namespace dfarm::delegates
