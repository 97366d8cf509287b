#include "delegates/registry.h"

#include <array>
#include <cstring>

namespace dfarm::delegates {
namespace {

constexpr const char* kNoOptions[] = {nullptr};

void AddReferenceKernels(runtime::OpResolver& resolver) { resolver.AddAllReferenceOps(); }

constexpr std::array kDelegates = {
    Delegate{"cpu", "reference kernels of runtime/ (single-threaded)", kNoOptions,
             &AddReferenceKernels},
};

std::string JoinNames() {
  std::string names;
  for (const Delegate& d : kDelegates) {
    if (!names.empty()) names += ", ";
    names += d.name;
  }
  return names;
}

}  // namespace

std::vector<std::string> AvailableDelegates() {
  std::vector<std::string> names;
  for (const Delegate& d : kDelegates) names.emplace_back(d.name);
  return names;
}

runtime::Status FindDelegate(std::string_view name, const Delegate** delegate_out) {
  for (const Delegate& d : kDelegates) {
    if (name == d.name) {
      *delegate_out = &d;
      return runtime::Status::Ok();
    }
  }
  return runtime::Status::Error("unknown delegate '" + std::string(name) +
                                "' (available: " + JoinNames() + ")");
}

runtime::Status CheckDelegateOptions(const Delegate& delegate, const DelegateOptions& options) {
  for (const auto& [key, value] : options) {
    bool known = false;
    std::string accepted;
    for (const char* const* k = delegate.option_keys; *k != nullptr; ++k) {
      known = known || key == *k;
      accepted += accepted.empty() ? *k : std::string(", ") + *k;
    }
    if (!known) {
      return runtime::Status::Error(
          "delegate '" + std::string(delegate.name) + "' has no option '" + key + "' (" +
          (accepted.empty() ? std::string("it takes none") : "accepted: " + accepted) + ")");
    }
  }
  return runtime::Status::Ok();
}

}  // namespace dfarm::delegates
