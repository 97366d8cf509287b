#include "harness/run/cooldown.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "harness/run/job_outcome.h"  // HottestC

namespace dfarm::harness {
namespace {

// One rule of the cooldown: a reading the device gives and its limit.
struct CooldownRule {
  const char* name;   // "temperature", "load"
  bool load = false;  // the load rule (whose failure makes the job noisy)
  double limit = 0;
  std::function<Result<std::optional<double>>()> read;
  const char* absent;  // why there is no reading when the device gives none
  bool active = true;  // false once skipped
  std::optional<double> last;

  // "90.0 C > 50.0 C" / "CPUs 87% busy > 50%".
  std::string Excess() const {
    char text[96];
    if (load) {
      std::snprintf(text, sizeof text, "CPUs %.0f%% busy > %.0f%%", *last, limit);
    } else {
      std::snprintf(text, sizeof text, "device still at %.1f C > %.1f C", *last, limit);
    }
    return text;
  }
};

void AddNote(std::string* note, const std::string& line) {
  *note += (note->empty() ? "" : "; ") + line;
}

// Reads each active rule once; false when one is over its limit. A rule the
// device cannot answer is skipped from then on, with a note.
bool RulesPass(std::vector<CooldownRule>& rules, CooldownOutcome* out) {
  bool pass = true;
  for (CooldownRule& r : rules) {
    if (!r.active) continue;
    auto v = r.read ? r.read() : Result<std::optional<double>>(std::optional<double>());
    if (!v || !*v) {
      AddNote(&out->note, std::string("cooldown ") + r.name +
                              " rule skipped: " + (v ? r.absent : v.message().c_str()));
      r.active = false;
      continue;
    }
    out->checked = true;
    r.last = **v;
    pass = pass && **v <= r.limit;
  }
  return pass;
}

}  // namespace

CooldownOutcome WaitForCooldown(const CooldownSpec& spec, const CooldownSource& source) {
  CooldownOutcome out;
  const auto start = source.now();
  auto cancelled = [&] { return source.cancelled && source.cancelled(); };
  if (spec.pause_ms > 0) source.sleep(std::chrono::milliseconds(spec.pause_ms));
  std::vector<CooldownRule> rules;
  if (spec.max_temp_c > 0) {
    rules.push_back({"temperature", false, spec.max_temp_c, source.hottest_c,
                     "the device exposes no thermal zone"});
  }
  if (spec.max_cpu_busy_pct > 0) {
    rules.push_back({"load", true, spec.max_cpu_busy_pct, source.busy_pct,
                     "the agent reports no CPU busy share (update dfarm-agent)"});
  }
  const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::seconds(spec.max_wait_s));
  const auto wait_start = source.now();
  while (!rules.empty() && !cancelled() && !RulesPass(rules, &out)) {
    const auto waited = source.now() - wait_start;
    if (waited >= limit) {
      out.gave_up = true;
      std::string excess;
      for (const CooldownRule& r : rules) {
        if (!r.active || !r.last || *r.last <= r.limit) continue;
        excess += (excess.empty() ? "" : " and ") + r.Excess();
        out.noisy = out.noisy || r.load;
      }
      AddNote(&out.note, (out.noisy ? "noisy: " : "") + excess + " after waiting " +
                             std::to_string(spec.max_wait_s) + " s to cool down; ran anyway");
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(limit - waited);
    source.sleep(std::min(kCooldownPoll, std::max(left, std::chrono::milliseconds(1))));
  }
  for (const CooldownRule& r : rules) {
    (r.load ? out.last_busy_pct : out.last_temp_c) = r.last;
  }
  out.waited_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(source.now() - start).count();
  return out;
}

CooldownSource AgentCooldownSource(agent::AgentClient& client, const std::atomic<bool>* cancel) {
  CooldownSource source;
  source.now = [] { return std::chrono::steady_clock::now(); };
  source.sleep = [cancel](std::chrono::milliseconds d) {
    auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end && !(cancel && cancel->load())) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(50), end - std::chrono::steady_clock::now()));
    }
  };
  // One DeviceStateRequest per poll (the agent reads the busy share over
  // 100 ms): WaitForCooldown asks for the temperature first, and the load
  // rule takes the state that reading fetched; alone, it asks itself.
  auto fetched = std::make_shared<std::optional<agent::DeviceState>>();
  source.hottest_c = [&client, fetched]() -> Result<std::optional<double>> {
    auto state = client.QueryDeviceState();
    if (!state) return state.error();
    *fetched = *state;
    return HottestC(*state);
  };
  source.busy_pct = [&client, fetched]() -> Result<std::optional<double>> {
    std::optional<agent::DeviceState> state;
    state.swap(*fetched);
    if (!state) {
      auto asked = client.QueryDeviceState();
      if (!asked) return asked.error();
      state = std::move(*asked);
    }
    return state->cpu_busy_pct;
  };
  source.cancelled = [cancel] { return cancel && cancel->load(); };
  return source;
}

}  // namespace dfarm::harness
