// libFuzzer target for the runner's --json document as the host reads it:
// runner_json::ParseRunnerJson and ParseRunnerAccuracy (agent/runner/), and
// the harness's conversion harness::ParseRunnerJson (harness/run/runner_output.cc)
// on arbitrary text. Each must refuse bad text with an error. A document that
// parses must write back (WriteRunnerJson) to text that parses again to the
// same value (a failure document: its status and error; the runner writes
// nothing else in one), and the harness must read that text the same way. Built only with
// -DDFARM_BUILD_FUZZERS=ON and clang; see README.md here.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/runner/runner_json.h"
#include "harness/run/runner_output.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rj = dfarm::runner_json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto harness_view = dfarm::harness::ParseRunnerJson(std::string(text));
  auto accuracy = rj::ParseRunnerAccuracy(text);
  Check(accuracy.ok() || !accuracy.message().empty());

  auto doc = rj::ParseRunnerJson(text);
  // The harness reads exactly what the runner's parser reads.
  Check(doc.ok() == harness_view.ok());
  if (!doc.ok()) {
    Check(!doc.message().empty());
    return 0;
  }
  // Write-back round trip: the written text parses to the same value (the
  // same text again when written), and the harness reads it the same way.
  const std::string written = rj::WriteRunnerJson(doc.value());
  auto again = rj::ParseRunnerJson(written);
  Check(again.ok());
  Check(rj::WriteRunnerJson(again.value()) == written);
  Check(rj::ToJson(again.value()).dump() == rj::ToJson(doc.value()).dump());
  auto harness_again = dfarm::harness::ParseRunnerJson(written);
  Check(harness_again.ok());
  Check(harness_again.value().status == harness_view.value().status);
  // A failure document is written with its status and error only, an ok one
  // without an error.
  if (!rj::IsOk(doc.value())) {
    Check(harness_again.value().error == harness_view.value().error);
    return 0;
  }
  Check(harness_again.value().samples_us == harness_view.value().samples_us);
  Check(harness_again.value().metrics.has_value() == harness_view.value().metrics.has_value());
  Check(harness_again.value().accuracy.has_value() == harness_view.value().accuracy.has_value());
  Check(harness_again.value().placement.has_value() == harness_view.value().placement.has_value());
  return 0;
}
