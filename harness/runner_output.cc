// The runner's JSON (docs/CONTRACTS.md) turned into what the store keeps.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "harness/scheduler.h"
#include "harness/sweep.h"

namespace dfarm::harness {
namespace {

using nlohmann::json;

// The "placement" object (docs/CONTRACTS.md); unset when it is malformed.
std::optional<store::Placement> ParsePlacement(const json& p) {
  if (!p.is_object() || !p.contains("partitions") || !p["partitions"].is_number_integer() ||
      !p.contains("nodes") || !p["nodes"].is_array()) {
    return std::nullopt;
  }
  store::Placement out;
  out.partitions = p["partitions"].get<int64_t>();
  for (const json& n : p["nodes"]) {
    if (!n.is_object() || !n.contains("index") || !n["index"].is_number_integer()) {
      return std::nullopt;
    }
    store::PlacementNode node;
    node.node_index = n["index"].get<int64_t>();
    node.op = n.contains("op") && n["op"].is_string() ? n["op"].get<std::string>() : "";
    node.delegate = n.contains("delegate") && n["delegate"].is_string()
                        ? n["delegate"].get<std::string>()
                        : "cpu";
    if (n.contains("partition") && n["partition"].is_number_integer()) {
      node.partition = n["partition"].get<int64_t>();
    }
    node.folded = n.contains("folded") && n["folded"].is_boolean() && n["folded"].get<bool>();
    node.reason =
        n.contains("reason") && n["reason"].is_string() ? n["reason"].get<std::string>() : "";
    out.nodes.push_back(std::move(node));
  }
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const store::PlacementNode& a, const store::PlacementNode& b) {
              return a.node_index < b.node_index;
            });
  for (size_t i = 1; i < out.nodes.size(); ++i) {
    if (out.nodes[i].node_index == out.nodes[i - 1].node_index) return std::nullopt;
  }
  return out;
}

double Real(const json& o, const char* key) {
  // The runner writes null for a figure over no compared element.
  return o.contains(key) && o[key].is_number() ? o[key].get<double>() : std::nan("");
}

int64_t Count(const json& o, const char* key) {
  return o.contains(key) && o[key].is_number() ? o[key].get<int64_t>() : 0;
}

// The "accuracy" section of a parsed runner document (docs/CONTRACTS.md), by
// output index; empty when there is none.
Result<std::vector<store::OutputAccuracy>> ParseAccuracy(const json& doc) {
  std::vector<store::OutputAccuracy> out;
  if (!doc.contains("accuracy")) return out;
  const json& acc = doc["accuracy"];
  if (!acc.is_object() || !acc.contains("outputs") || !acc["outputs"].is_array()) {
    return MakeError("runner JSON: \"accuracy\" must be an object with an \"outputs\" array");
  }
  std::string reference = acc.contains("reference") && acc["reference"].is_string()
                              ? acc["reference"].get<std::string>()
                              : "";
  for (size_t i = 0; i < acc["outputs"].size(); ++i) {
    const json& o = acc["outputs"][i];
    if (!o.is_object() || !o.contains("index") || !o["index"].is_number_integer()) {
      return MakeError("runner JSON: accuracy.outputs[" + std::to_string(i) +
                       "] has no integer \"index\"");
    }
    store::OutputAccuracy a;
    a.output_index = o["index"].get<int64_t>();
    a.name = o.contains("name") && o["name"].is_string() ? o["name"].get<std::string>() : "";
    a.reference = reference;
    a.compared = Count(o, "compared");
    a.mean_abs_error = Real(o, "mean_abs_error");
    a.std_abs_error = Real(o, "std_abs_error");
    a.max_abs_error = Real(o, "max_abs_error");
    a.rmse = Real(o, "rmse");
    a.nan_count = Count(o, "nan_count");
    a.inf_count = Count(o, "inf_count");
    a.reference_nan_count = Count(o, "reference_nan_count");
    a.reference_inf_count = Count(o, "reference_inf_count");
    if (o.contains("top1_agree") && o["top1_agree"].is_boolean()) {
      a.top1_agree = o["top1_agree"].get<bool>();
    }
    if (o.contains("top5_agree") && o["top5_agree"].is_boolean()) {
      a.top5_agree = o["top5_agree"].get<bool>();
    }
    if (o.contains("max_abs_error_lsb") && o["max_abs_error_lsb"].is_number()) {
      a.max_abs_error_lsb = o["max_abs_error_lsb"].get<double>();
    }
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.output_index < b.output_index; });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].output_index == out[i - 1].output_index) {
      return MakeError("runner JSON: accuracy lists output " + std::to_string(out[i].output_index) +
                       " twice");
    }
  }
  return out;
}

}  // namespace

Result<std::vector<store::OutputAccuracy>> ParseRunnerAccuracy(const std::string& text) {
  try {
    json doc = json::parse(text);
    if (!doc.is_object()) return MakeError("runner JSON is not an object");
    return ParseAccuracy(doc);
  } catch (const json::exception& e) {
    return MakeError(std::string("runner JSON: ") + e.what());
  }
}

Result<RunnerOutput> ParseRunnerJson(const std::string& text) {
  RunnerOutput out;
  try {
    json doc = json::parse(text);
    if (!doc.is_object()) return MakeError("runner JSON is not an object");
    out.status = doc.value("status", "");
    out.error = doc.value("error", "");
    if (doc.contains("metrics") && doc["metrics"].is_object()) {
      const json& m = doc["metrics"];
      store::Metrics metrics;
      auto num = [&](const char* key) { return m.value(key, 0.0); };
      auto integer = [&](const char* key) -> int64_t {
        return m.contains(key) && m[key].is_number() ? m[key].get<int64_t>() : 0;
      };
      metrics.init_us = num("init_us");
      metrics.first_us = num("first_us");
      metrics.warmup_mean_us = num("warmup_mean_us");
      metrics.mean_us = num("mean_us");
      metrics.std_us = num("std_us");
      metrics.min_us = num("min_us");
      metrics.max_us = num("max_us");
      metrics.p50_us = num("p50_us");
      metrics.p90_us = num("p90_us");
      metrics.p99_us = num("p99_us");
      metrics.num_runs = integer("num_runs");
      metrics.peak_rss_bytes = integer("peak_rss_bytes");
      metrics.arena_bytes = integer("arena_bytes");
      if (doc.contains("threads_used") && doc["threads_used"].is_number_integer()) {
        metrics.threads_used = doc["threads_used"].get<int64_t>();
      }
      out.metrics = metrics;
    }
    if (doc.contains("samples_us") && doc["samples_us"].is_array()) {
      for (const json& s : doc["samples_us"]) {
        if (s.is_number()) out.samples_us.push_back(s.get<double>());
      }
    }
    if (doc.contains("placement")) out.placement = ParsePlacement(doc["placement"]);
    // A malformed accuracy section is left out; the rest of the result counts.
    if (auto accuracy = ParseAccuracy(doc)) out.accuracy = std::move(*accuracy);
  } catch (const json::exception& e) {
    return MakeError(std::string("runner JSON: ") + e.what());
  }
  return out;
}

}  // namespace dfarm::harness
