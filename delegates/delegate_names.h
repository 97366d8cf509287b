// The names of the built-in delegates, the one list of them:
// delegates/registry.cc registers these (static_asserts that it registers
// no other; "xnnpack" only when the build found XNNPACK, "gpu" only when it
// found the OpenCL headers), and the harness
// checks a spec's delegate names against it without linking the delegates.
// A plugin is not a name of its own: it is "external" with a `path` option.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace dfarm::delegates {

inline constexpr std::array<std::string_view, 4> kBuiltinDelegateNames = {"cpu", "xnnpack", "gpu",
                                                                          "external"};

constexpr bool IsBuiltinDelegateName(std::string_view name) {
  for (std::string_view known : kBuiltinDelegateNames) {
    if (name == known) return true;
  }
  return false;
}

// "cpu, xnnpack, gpu, external", for messages.
inline std::string BuiltinDelegateNamesList() {
  std::string list;
  for (std::string_view name : kBuiltinDelegateNames) {
    if (!list.empty()) list += ", ";
    list += name;
  }
  return list;
}

}  // namespace dfarm::delegates
