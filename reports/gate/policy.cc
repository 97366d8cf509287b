#include "reports/gate/policy.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "agent/base/json_input.h"

namespace dfarm::gate {
namespace {

using nlohmann::json;

// A value as a message quotes it: compact JSON, cut short (json_input.h).
std::string Quoted(const json& v) {
  return Abbreviated(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

// Reads the members of one JSON object, refusing keys it does not know.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string where, const std::string& path)
      : object_(object), where_(std::move(where)), path_(path) {}

  // Marks `key` known; returns the value when present.
  const json* Get(const std::string& key) {
    known_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  Result<void> Number(const std::string& key, double& value, double low, double high) {
    const json* v = Get(key);
    if (v == nullptr) return {};
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < low ||
        v->get<double>() > high) {
      return Bad(key, "must be a number in [" + Num(low) + ", " + Num(high) + "]", *v);
    }
    value = v->get<double>();
    return {};
  }

  Result<void> Optional(const std::string& key, std::optional<double>& value, double low,
                        double high) {
    const json* v = Get(key);
    if (v == nullptr) return {};
    if (v->is_null()) {
      value.reset();
      return {};
    }
    double d = 0;
    if (auto r = Number(key, d, low, high); !r) return r;
    value = d;
    return {};
  }

  Result<void> Bool(const std::string& key, bool& value) {
    const json* v = Get(key);
    if (v == nullptr) return {};
    if (!v->is_boolean()) return Bad(key, "must be true or false", *v);
    value = v->get<bool>();
    return {};
  }

  Result<void> String(const std::string& key, std::string& value,
                      const std::vector<std::string>& allowed = {}) {
    const json* v = Get(key);
    if (v == nullptr || v->is_null()) return {};
    if (!v->is_string()) return Bad(key, "must be a string", *v);
    std::string s = v->get<std::string>();
    if (!allowed.empty()) {
      bool found = false;
      std::string list;
      for (const auto& a : allowed) {
        found = found || a == s;
        list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
      }
      if (!found) return Bad(key, "must be one of " + list, *v);
    }
    value = std::move(s);
    return {};
  }

  // Fails naming every key that no Get asked for.
  Result<void> CheckUnknown() const {
    std::string unknown;
    for (const auto& [key, value] : object_.items()) {
      if (known_.count(key) == 0) {
        unknown += (unknown.empty() ? "'" : ", '") + Abbreviated(key) + "'";
      }
    }
    if (unknown.empty()) return {};
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    return MakeError(ErrorKind::kInvalidInput, "policy '" + path_ + "': unknown key " +
                                                   Abbreviated(unknown, 2 * kMaxQuotedChars) +
                                                   " in " + where_ + " (known: " + list + ")");
  }

  Error Bad(const std::string& key, const std::string& why, const json& v) const {
    return MakeError(ErrorKind::kInvalidInput, "policy '" + path_ + "': " + where_ + "." + key +
                                                   " " + why + ", got " + Quoted(v));
  }

 private:
  static std::string Num(double d) {
    std::ostringstream s;
    s << d;
    return s.str();
  }

  const json& object_;
  std::string where_;
  const std::string& path_;
  std::set<std::string> known_;
};

Error NotObject(const std::string& path, const std::string& where, const json& v) {
  return MakeError(ErrorKind::kInvalidInput,
                   "policy '" + path + "': " + where + " must be an object, got " + Quoted(v));
}

Result<void> ParseLatency(const json& j, const std::string& path, LatencyPolicy& p) {
  if (!j.is_object()) return NotObject(path, "latency", j);
  ObjectReader r(j, "latency", path);
  double resamples = p.bootstrap_resamples;
  double seed = static_cast<double>(p.seed);
  for (auto result :
       {r.Number("min_effect", p.min_effect, 0, 10), r.Number("alpha", p.alpha, 1e-9, 1),
        r.Number("confidence", p.confidence, 0.5, 0.9999),
        r.Number("bootstrap_resamples", resamples, 100, 1e6), r.Number("seed", seed, 0, 9e15),
        r.String("metric", p.metric, {"median"}), r.Bool("exclude_noisy", p.exclude_noisy),
        r.CheckUnknown()}) {
    if (!result) return result;
  }
  p.bootstrap_resamples = static_cast<int>(resamples);
  p.seed = static_cast<uint64_t>(seed);
  return {};
}

Result<AccuracyRule> ParseRule(const json& j, const std::string& where, const std::string& path) {
  if (!j.is_object()) return NotObject(path, where, j);
  AccuracyRule rule;
  ObjectReader r(j, where, path);
  constexpr double kBig = 1e300;
  std::string nan_inf;
  for (auto result : {r.String("model", rule.model), r.String("output", rule.output),
                      r.String("dtype", rule.dtype, {"*", "float", "quantized"}),
                      r.Optional("max_abs_error", rule.max_abs_error, 0, kBig),
                      r.Optional("mean_abs_error", rule.mean_abs_error, 0, kBig),
                      r.Optional("rmse", rule.rmse, 0, kBig),
                      r.Optional("max_abs_error_lsb", rule.max_abs_error_lsb, 0, kBig),
                      r.Optional("min_top1_agreement", rule.min_top1_agreement, 0, 1),
                      r.Optional("min_top5_agreement", rule.min_top5_agreement, 0, 1),
                      r.Optional("min_snr_db", rule.min_snr_db, -1000, 1000),
                      r.Optional("min_psnr_db", rule.min_psnr_db, -1000, 1000),
                      r.String("nan_inf", nan_inf, {"fail", "ignore"}),
                      r.Optional("max_abs_error_growth", rule.max_abs_error_growth, 1, kBig),
                      r.Optional("mean_abs_error_growth", rule.mean_abs_error_growth, 1, kBig),
                      r.Optional("rmse_growth", rule.rmse_growth, 1, kBig),
                      r.Optional("growth_floor", rule.growth_floor, 0, kBig), r.CheckUnknown()}) {
    if (!result) return result.error();
  }
  if (!nan_inf.empty()) rule.nan_inf = nan_inf;
  return rule;
}

Result<void> ParseMemory(const json& j, const std::string& path, MemoryPolicy& p) {
  if (!j.is_object()) return NotObject(path, "memory", j);
  ObjectReader r(j, "memory", path);
  for (auto result :
       {r.Optional("max_peak_rss_growth", p.max_peak_rss_growth, 0, 1e6),
        r.Optional("max_arena_growth", p.max_arena_growth, 0, 1e6), r.CheckUnknown()}) {
    if (!result) return result;
  }
  return {};
}

Result<void> ParseTask(const json& j, const std::string& path, TaskPolicy& p) {
  if (!j.is_object()) return NotObject(path, "task", j);
  ObjectReader r(j, "task", path);
  std::optional<double> confidence = p.confidence;
  std::optional<double> resamples = p.bootstrap_resamples;
  for (auto result :
       {r.Optional("max_top1_drop", p.max_top1_drop, 0, 100),
        r.Optional("max_top5_drop", p.max_top5_drop, 0, 100),
        r.Optional("max_top1_drop_vs_cpu", p.max_top1_drop_vs_cpu, 0, 100),
        r.Optional("max_top5_drop_vs_cpu", p.max_top5_drop_vs_cpu, 0, 100),
        r.Optional("max_map_drop", p.max_map_drop, 0, 100),
        r.Optional("max_map_drop_vs_cpu", p.max_map_drop_vs_cpu, 0, 100),
        r.Optional("max_miou_drop", p.max_miou_drop, 0, 100),
        r.Optional("max_miou_drop_vs_cpu", p.max_miou_drop_vs_cpu, 0, 100),
        r.Optional("confidence", confidence, 0.5, 0.999),
        r.Optional("bootstrap_resamples", resamples, 100, 100000), r.CheckUnknown()}) {
    if (!result) return result;
  }
  if (confidence) p.confidence = *confidence;
  if (resamples) p.bootstrap_resamples = static_cast<int>(*resamples);
  return {};
}

Result<void> ParseDeviceClasses(const json& j, const std::string& path, Policy& p) {
  if (!j.is_object()) return NotObject(path, "device_classes", j);
  p.device_classes.clear();
  for (const auto& [name, globs] : j.items()) {
    if (!globs.is_array() || globs.empty()) {
      return MakeError(ErrorKind::kInvalidInput,
                       "policy '" + path + "': device_classes." + Abbreviated(name) +
                           " must be a non-empty list of device-name globs, got " + Quoted(globs));
    }
    for (const auto& g : globs) {
      if (!g.is_string()) {
        return MakeError(ErrorKind::kInvalidInput, "policy '" + path + "': device_classes." +
                                                       Abbreviated(name) + " holds a non-string " +
                                                       Quoted(g));
      }
      p.device_classes[name].push_back(g.get<std::string>());
    }
  }
  return {};
}

Result<void> ParseSections(const json& doc, const std::string& path, Policy& p) {
  ObjectReader top(doc, "the policy", path);
  if (const json* v = top.Get("latency")) {
    if (auto r = ParseLatency(*v, path, p.latency); !r) return r;
  }
  bool keep_defaults = false;
  if (auto r = top.Bool("accuracy_defaults", keep_defaults); !r) return r;
  if (const json* v = top.Get("accuracy")) {
    if (!v->is_array()) {
      return MakeError(
          ErrorKind::kInvalidInput,
          "policy '" + path + "': accuracy must be a list of rules, got " + Quoted(*v));
    }
    std::vector<AccuracyRule> rules;
    for (size_t i = 0; i < v->size(); ++i) {
      auto rule = ParseRule((*v)[i], "accuracy[" + std::to_string(i) + "]", path);
      if (!rule) return rule.error();
      rules.push_back(std::move(*rule));
    }
    if (keep_defaults) rules.insert(rules.end(), p.accuracy.begin(), p.accuracy.end());
    p.accuracy = std::move(rules);
  }
  if (const json* v = top.Get("memory")) {
    if (auto r = ParseMemory(*v, path, p.memory); !r) return r;
  }
  if (const json* v = top.Get("task")) {
    if (auto r = ParseTask(*v, path, p.task); !r) return r;
  }
  if (const json* v = top.Get("placement")) {
    if (!v->is_object()) return NotObject(path, "placement", *v);
    ObjectReader r(*v, "placement", path);
    if (auto b = r.Bool("fallback_is_failure", p.placement.fallback_is_failure); !b) return b;
    if (auto c = r.CheckUnknown(); !c) return c;
  }
  if (const json* v = top.Get("failures")) {
    if (!v->is_object()) return NotObject(path, "failures", *v);
    ObjectReader r(*v, "failures", path);
    for (auto result :
         {r.Bool("ok_to_failed_is_failure", p.failures.ok_to_failed_is_failure),
          r.Bool("failed_alone_is_failure", p.failures.failed_alone_is_failure),
          r.Bool("missing_is_failure", p.failures.missing_is_failure), r.CheckUnknown()}) {
      if (!result) return result;
    }
  }
  if (const json* v = top.Get("device_classes")) {
    if (auto r = ParseDeviceClasses(*v, path, p); !r) return r;
  }
  top.Get("$comment");
  return top.CheckUnknown();
}

json OptionalJson(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

Policy DefaultPolicy() {
  Policy p;
  // Float outputs against the CPU reference. Measured on models/ (docs/gate.md):
  // fp32 xnnpack max_abs_error <= 2.6e-4, rmse <= 3.9e-5, mean <= 2.7e-5;
  // fp16 xnnpack max_abs_error >= 0.07 on the worst output of every model.
  AccuracyRule float_rule;
  float_rule.dtype = "float";
  float_rule.max_abs_error = 2e-3;
  float_rule.mean_abs_error = 5e-4;
  float_rule.rmse = 5e-4;
  float_rule.nan_inf = "fail";
  float_rule.max_abs_error_growth = 4;
  float_rule.growth_floor = 1e-4;
  p.accuracy.push_back(float_rule);
  // Quantized outputs (int8/uint8, the same scale on both sides): in steps.
  AccuracyRule quantized_rule;
  quantized_rule.dtype = "quantized";
  quantized_rule.max_abs_error_lsb = 2;
  quantized_rule.nan_inf = "fail";
  p.accuracy.push_back(quantized_rule);
  return p;
}

Result<Policy> ParsePolicy(const std::string& json_text, const std::string& path_for_messages) {
  if (auto r = CheckJsonNesting(json_text, "policy '" + path_for_messages + "'"); !r) {
    return r.error();
  }
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return MakeError(ErrorKind::kInvalidInput,
                     "policy '" + path_for_messages + "' is not valid JSON (see docs/gate.md)");
  }
  if (!doc.is_object()) return NotObject(path_for_messages, "the policy", doc);
  Policy p = DefaultPolicy();
  p.source = path_for_messages;
  if (auto r = ParseSections(doc, path_for_messages, p); !r) return r.error();
  return p;
}

Result<Policy> LoadPolicy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return MakeError(ErrorKind::kInvalidInput, "cannot read policy '" + path + "'");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParsePolicy(text.str(), path);
}

std::string PolicyToJson(const Policy& p) {
  json rules = json::array();
  for (const auto& r : p.accuracy) {
    rules.push_back({{"model", r.model},
                     {"output", r.output},
                     {"dtype", r.dtype},
                     {"max_abs_error", OptionalJson(r.max_abs_error)},
                     {"mean_abs_error", OptionalJson(r.mean_abs_error)},
                     {"rmse", OptionalJson(r.rmse)},
                     {"max_abs_error_lsb", OptionalJson(r.max_abs_error_lsb)},
                     {"min_top1_agreement", OptionalJson(r.min_top1_agreement)},
                     {"min_top5_agreement", OptionalJson(r.min_top5_agreement)},
                     {"min_snr_db", OptionalJson(r.min_snr_db)},
                     {"min_psnr_db", OptionalJson(r.min_psnr_db)},
                     {"nan_inf", r.nan_inf ? json(*r.nan_inf) : json(nullptr)},
                     {"max_abs_error_growth", OptionalJson(r.max_abs_error_growth)},
                     {"mean_abs_error_growth", OptionalJson(r.mean_abs_error_growth)},
                     {"rmse_growth", OptionalJson(r.rmse_growth)},
                     {"growth_floor", OptionalJson(r.growth_floor)}});
  }
  json doc = {{"latency",
               {{"min_effect", p.latency.min_effect},
                {"alpha", p.latency.alpha},
                {"confidence", p.latency.confidence},
                {"bootstrap_resamples", p.latency.bootstrap_resamples},
                {"seed", p.latency.seed},
                {"metric", p.latency.metric},
                {"exclude_noisy", p.latency.exclude_noisy}}},
              {"accuracy", rules},
              {"memory",
               {{"max_peak_rss_growth", OptionalJson(p.memory.max_peak_rss_growth)},
                {"max_arena_growth", OptionalJson(p.memory.max_arena_growth)}}},
              {"task",
               {{"max_top1_drop", OptionalJson(p.task.max_top1_drop)},
                {"max_top5_drop", OptionalJson(p.task.max_top5_drop)},
                {"max_top1_drop_vs_cpu", OptionalJson(p.task.max_top1_drop_vs_cpu)},
                {"max_top5_drop_vs_cpu", OptionalJson(p.task.max_top5_drop_vs_cpu)},
                {"max_map_drop", OptionalJson(p.task.max_map_drop)},
                {"max_map_drop_vs_cpu", OptionalJson(p.task.max_map_drop_vs_cpu)},
                {"max_miou_drop", OptionalJson(p.task.max_miou_drop)},
                {"max_miou_drop_vs_cpu", OptionalJson(p.task.max_miou_drop_vs_cpu)},
                {"confidence", p.task.confidence},
                {"bootstrap_resamples", p.task.bootstrap_resamples}}},
              {"placement", {{"fallback_is_failure", p.placement.fallback_is_failure}}},
              {"failures",
               {{"ok_to_failed_is_failure", p.failures.ok_to_failed_is_failure},
                {"failed_alone_is_failure", p.failures.failed_alone_is_failure},
                {"missing_is_failure", p.failures.missing_is_failure}}},
              {"device_classes", p.device_classes}};
  return doc.dump(2);
}

}  // namespace dfarm::gate
