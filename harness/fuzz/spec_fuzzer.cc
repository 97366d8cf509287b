// libFuzzer target for the sweep spec: the input is a spec file's text.
// harness::ParseSpec must refuse a bad spec with an error (never crash, hang
// or trip a sanitizer); a spec it accepts must serialise (SweepSpec::ToJson).
// Built only with -DDFARM_BUILD_FUZZERS=ON and clang; see README.md here.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/spec/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = dfarm::harness::ParseSpec(text, "/fuzz/spec.json");
  if (!spec.ok()) {
    if (spec.message().empty()) __builtin_trap();  // a refusal names its reason
    return 0;
  }
  const std::string json = spec.value().ToJson();
  if (json.empty()) __builtin_trap();
  return 0;
}
