#include "delegates/registry.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "delegates/delegate_names.h"
#include "delegates/external/external_delegate.h"
#ifdef DFARM_HAVE_XNNPACK
#include "delegates/xnnpack/xnnpack_delegate.h"
#endif
#ifdef DFARM_HAVE_OPENCL
#include "delegates/gpu/gpu_delegate.h"
#endif

namespace dfarm::delegates {
namespace {

constexpr const char* kNoOptions[] = {nullptr};
constexpr const char* kExternalOptions[] = {"path",
                                            "max_delegated_partitions",
                                            "min_nodes_per_partition",
                                            "require_full_delegation",
                                            "first_delegate_node_index",
                                            "last_delegate_node_index",
                                            nullptr};
#ifdef DFARM_HAVE_XNNPACK
constexpr const char* kXnnpackOptions[] = {"threads",
                                           "fp16",
                                           "max_delegated_partitions",
                                           "min_nodes_per_partition",
                                           "require_full_delegation",
                                           "first_delegate_node_index",
                                           "last_delegate_node_index",
                                           nullptr};
#endif
#ifdef DFARM_HAVE_OPENCL
constexpr const char* kGpuOptions[] = {"precision_loss_allowed",
                                       "inference_preference",
                                       "serialization_dir",
                                       "model_token",
                                       "quantized_models_allowed",
                                       "max_delegated_partitions",
                                       "min_nodes_per_partition",
                                       "require_full_delegation",
                                       "first_delegate_node_index",
                                       "last_delegate_node_index",
                                       nullptr};
#endif

void AddReferenceKernels(runtime::OpResolver& resolver) { resolver.AddAllReferenceOps(); }

// The CPU comes last: delegates claim nodes, the reference kernels run the rest.
constexpr std::array kDelegates = {
    RegisteredDelegate{"cpu", "kernels of runtime/ (--num-threads threads)", kNoOptions,
                       &AddReferenceKernels},
    RegisteredDelegate{
        "external",
        "a plugin from a shared library (delegates/external/dfarm_delegate_plugin.h); "
        "other options go to the plugin",
        kExternalOptions, &AddReferenceKernels, &CreateExternalDelegate, true},
#ifdef DFARM_HAVE_XNNPACK
    RegisteredDelegate{
        "xnnpack",
        "XNNPACK (libxnnpack; float32, fp16, int8/uint8): threads (default 1), fp16 (true/false)",
        kXnnpackOptions, &AddReferenceKernels, &CreateXnnpackDelegate},
#endif
#ifdef DFARM_HAVE_OPENCL
    RegisteredDelegate{
        "gpu",
        "OpenCL (float32, int8/uint8 computed in float): precision_loss_allowed (fp16 "
        "storage, true/false), inference_preference (fast_single_answer|sustained_speed), "
        "serialization_dir + model_token (compiled-program cache), quantized_models_allowed "
        "(true/false, default true)",
        kGpuOptions, &AddReferenceKernels, &CreateGpuDelegate},
#endif
};

// kDelegates registers the built-in delegates of delegate_names.h, each
// once, and (XNNPACK and gpu aside) all of them.
constexpr bool RegistersOnlyBuiltinNames() {
  for (size_t i = 0; i < kDelegates.size(); ++i) {
    if (!IsBuiltinDelegateName(kDelegates[i].name)) return false;
    for (size_t j = 0; j < i; ++j) {
      if (std::string_view(kDelegates[i].name) == kDelegates[j].name) return false;
    }
  }
  return true;
}
#ifdef DFARM_HAVE_XNNPACK
constexpr size_t kXnnpackLeftOut = 0;
#else
constexpr size_t kXnnpackLeftOut = 1;
#endif
#ifdef DFARM_HAVE_OPENCL
constexpr size_t kGpuLeftOut = 0;
#else
constexpr size_t kGpuLeftOut = 1;  // no OpenCL headers
#endif
constexpr size_t kBuiltinsLeftOut = kXnnpackLeftOut + kGpuLeftOut;
static_assert(RegistersOnlyBuiltinNames() &&
                  kDelegates.size() + kBuiltinsLeftOut == kBuiltinDelegateNames.size(),
              "kDelegates and kBuiltinDelegateNames (delegates/delegate_names.h) disagree");

std::string JoinNames() {
  std::string names;
  for (const RegisteredDelegate& d : kDelegates) {
    if (!names.empty()) names += ", ";
    names += d.name;
  }
  return names;
}

}  // namespace

std::vector<std::string> AvailableDelegates() {
  std::vector<std::string> names;
  for (const RegisteredDelegate& d : kDelegates) names.emplace_back(d.name);
  return names;
}

runtime::Status FindDelegate(std::string_view name, const RegisteredDelegate** delegate_out) {
  for (const RegisteredDelegate& d : kDelegates) {
    if (name == d.name) {
      *delegate_out = &d;
      return runtime::Status::Ok();
    }
  }
  return runtime::Status::Error("unknown delegate '" + std::string(name) +
                                "' (available: " + JoinNames() + ")");
}

runtime::Status CheckDelegateOptions(const RegisteredDelegate& delegate,
                                     const DelegateOptions& options) {
  for (const auto& [key, value] : options) {
    bool known = false;
    std::string accepted;
    for (const char* const* k = delegate.option_keys; *k != nullptr; ++k) {
      known = known || key == *k;
      accepted += accepted.empty() ? *k : std::string(", ") + *k;
    }
    if (!known && delegate.passes_other_options) continue;
    if (!known) {
      return runtime::Status::Error(
          "delegate '" + std::string(delegate.name) + "' has no option '" + key + "' (" +
          (accepted.empty() ? std::string("it takes none") : "accepted: " + accepted) + ")");
    }
  }
  return runtime::Status::Ok();
}

runtime::Status ParsePartitionOptions(const DelegateOptions& options,
                                      runtime::DelegatePartitionOptions* out) {
  for (const auto& [key, value] : options) {
    // Named captures: clang 14 cannot capture a structured binding.
    auto bad = [&key = key, &value = value](const char* expected) {
      return runtime::Status::Error("delegate option '" + key + "' has value '" + value +
                                    "', expected " + expected);
    };
    if (key == "require_full_delegation") {
      if (value == "true" || value == "1") {
        out->require_full_delegation = true;
      } else if (value == "false" || value == "0") {
        out->require_full_delegation = false;
      } else {
        return bad("true or false");
      }
      continue;
    }
    int* target = key == "max_delegated_partitions"    ? &out->max_delegated_partitions
                  : key == "min_nodes_per_partition"   ? &out->min_nodes_per_partition
                  : key == "first_delegate_node_index" ? &out->first_delegate_node_index
                  : key == "last_delegate_node_index"  ? &out->last_delegate_node_index
                                                       : nullptr;
    if (target == nullptr) continue;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(value.c_str(), &end, 10);
    const bool at_least_one = target == &out->min_nodes_per_partition;
    const long lowest = at_least_one ? 1 : 0;
    if (value.empty() || *end != '\0' || errno != 0 || n < lowest || n > 1000000) {
      return bad(at_least_one                               ? "an integer >= 1"
                 : target == &out->max_delegated_partitions ? "an integer >= 0 (0: no limit)"
                                                            : "a node index >= 0");
    }
    *target = static_cast<int>(n);
  }
  return runtime::Status::Ok();
}

}  // namespace dfarm::delegates
