#include "agent/runner/runner_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "agent/base/json_input.h"
#include "agent/protocol/status.h"

namespace dfarm::runner_json {
namespace {

using nlohmann::json;

// ---- Writing ----

json TensorsJson(const std::vector<TensorEntry>& tensors) {
  json list = json::array();
  for (const TensorEntry& t : tensors) {
    json entry = {{"index", t.index}, {"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}};
    if (t.sha256) entry["sha256"] = *t.sha256;
    list.push_back(std::move(entry));
  }
  return list;
}

json NumberJson(const Number& n) {
  return std::visit([](auto v) { return json(v); }, n);
}

// Non-finite reals are written as null (nlohmann writes NaN and Inf so too).
json OutputAccuracyJson(const OutputAccuracy& a) {
  json o = {{"index", a.index},
            {"name", a.name},
            {"compared", a.compared},
            {"mean_abs_error", a.mean_abs_error},
            {"std_abs_error", a.std_abs_error},
            {"max_abs_error", a.max_abs_error},
            {"rmse", a.rmse},
            {"nan_count", a.nan_count},
            {"inf_count", a.inf_count},
            {"reference_nan_count", a.reference_nan_count},
            {"reference_inf_count", a.reference_inf_count}};
  if (a.max_abs_error_lsb) o["max_abs_error_lsb"] = NumberJson(*a.max_abs_error_lsb);
  if (a.top1_agree) o["top1_agree"] = *a.top1_agree;
  if (a.top5_agree) o["top5_agree"] = *a.top5_agree;
  if (a.top1_agreement) o["top1_agreement"] = *a.top1_agreement;
  if (a.top5_agreement) o["top5_agreement"] = *a.top5_agreement;
  if (a.snr_db) o["snr_db"] = *a.snr_db;
  if (a.psnr_db) o["psnr_db"] = *a.psnr_db;
  return o;
}

// ---- Reading ----

std::string String(const json& o, const char* key, const char* fallback = "") {
  return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : fallback;
}

std::optional<int64_t> Integer(const json& o, const char* key) {
  if (!o.contains(key) || !o[key].is_number_integer()) return std::nullopt;
  return o[key].get<int64_t>();
}

// Any number, truncated (saturated outside int64_t, where the conversion
// would be undefined); 0 when absent or not a number.
int64_t Count(const json& o, const char* key) {
  if (!o.contains(key) || !o[key].is_number()) return 0;
  if (!o[key].is_number_float()) return o[key].get<int64_t>();
  const double d = o[key].get<double>();
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (d < -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

// NaN when absent or not a number: the runner writes null for a figure over
// no compared element.
double Real(const json& o, const char* key) {
  return o.contains(key) && o[key].is_number() ? o[key].get<double>() : std::nan("");
}

std::optional<bool> Bool(const json& o, const char* key) {
  if (!o.contains(key) || !o[key].is_boolean()) return std::nullopt;
  return o[key].get<bool>();
}

// Strict: a present figure that is not a number (or bool) fails the document.
Metrics ParseMetrics(const json& m) {
  auto real = [&](const char* key) { return m.value(key, 0.0); };
  Metrics out;
  out.init_us = real("init_us");
  out.first_us = real("first_us");
  out.warmup_mean_us = real("warmup_mean_us");
  out.mean_us = real("mean_us");
  out.std_us = real("std_us");
  out.min_us = real("min_us");
  out.max_us = real("max_us");
  out.p50_us = real("p50_us");
  out.p90_us = real("p90_us");
  out.p99_us = real("p99_us");
  out.num_runs = Count(m, "num_runs");
  out.peak_rss_bytes = Count(m, "peak_rss_bytes");
  out.arena_bytes = Count(m, "arena_bytes");
  if (m.contains("init_cold_us")) out.init_cold_us = m["init_cold_us"].get<double>();
  if (m.contains("init_warm_us")) out.init_warm_us = m["init_warm_us"].get<double>();
  return out;
}

// "delegate_stats": an object of numbers; other values are skipped.
runner::DelegateStats ParseDelegateStats(const json& doc) {
  runner::DelegateStats out;
  if (!doc.contains("delegate_stats") || !doc["delegate_stats"].is_object()) return out;
  for (const auto& [key, value] : doc["delegate_stats"].items()) {
    if (value.is_number()) out.emplace_back(key, value.get<double>());
  }
  return out;
}

std::vector<TensorEntry> ParseTensors(const json& doc, const char* key) {
  std::vector<TensorEntry> out;
  if (!doc.contains(key) || !doc[key].is_array()) return out;
  for (const json& t : doc[key]) {
    if (!t.is_object()) continue;
    TensorEntry tensor;
    tensor.index = Integer(t, "index").value_or(0);
    tensor.name = String(t, "name");
    tensor.dtype = String(t, "dtype");
    if (t.contains("shape") && t["shape"].is_array()) {
      for (const json& d : t["shape"]) {
        if (d.is_number_integer()) tensor.shape.push_back(d.get<int64_t>());
      }
    }
    if (t.contains("sha256") && t["sha256"].is_string()) {
      tensor.sha256 = t["sha256"].get<std::string>();
    }
    out.push_back(std::move(tensor));
  }
  return out;
}

// Unset when malformed: no integer partitions, no nodes array, a node without
// an integer index, or an index listed twice. Nodes sorted by index.
std::optional<JobPlacement> ParsePlacement(const json& p) {
  if (!p.is_object() || !Integer(p, "partitions") || !p.contains("nodes") ||
      !p["nodes"].is_array()) {
    return std::nullopt;
  }
  JobPlacement out;
  out.partitions = *Integer(p, "partitions");
  for (const json& n : p["nodes"]) {
    if (!n.is_object() || !Integer(n, "index")) return std::nullopt;
    PlacementNode node;
    node.index = *Integer(n, "index");
    node.op = String(n, "op");
    node.delegate = String(n, "delegate", "cpu");
    node.partition = Integer(n, "partition");
    node.folded = Bool(n, "folded").value_or(false);
    node.reason = String(n, "reason");
    out.nodes.push_back(std::move(node));
  }
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const PlacementNode& a, const PlacementNode& b) { return a.index < b.index; });
  for (size_t i = 1; i < out.nodes.size(); ++i) {
    if (out.nodes[i].index == out.nodes[i - 1].index) return std::nullopt;
  }
  return out;
}

OutputAccuracy ParseOutputAccuracy(const json& o) {
  OutputAccuracy a;
  a.index = o["index"].get<int64_t>();
  a.name = String(o, "name");
  a.compared = Count(o, "compared");
  a.mean_abs_error = Real(o, "mean_abs_error");
  a.std_abs_error = Real(o, "std_abs_error");
  a.max_abs_error = Real(o, "max_abs_error");
  a.rmse = Real(o, "rmse");
  a.nan_count = Count(o, "nan_count");
  a.inf_count = Count(o, "inf_count");
  a.reference_nan_count = Count(o, "reference_nan_count");
  a.reference_inf_count = Count(o, "reference_inf_count");
  if (o.contains("max_abs_error_lsb") && o["max_abs_error_lsb"].is_number()) {
    const json& lsb = o["max_abs_error_lsb"];
    a.max_abs_error_lsb =
        lsb.is_number_integer() ? Number(lsb.get<int64_t>()) : Number(lsb.get<double>());
  }
  a.top1_agree = Bool(o, "top1_agree");
  a.top5_agree = Bool(o, "top5_agree");
  for (auto [key, field] : {std::pair{"top1_agreement", &a.top1_agreement},
                            std::pair{"top5_agreement", &a.top5_agreement},
                            std::pair{"snr_db", &a.snr_db}, std::pair{"psnr_db", &a.psnr_db}}) {
    if (o.contains(key) && o[key].is_number()) *field = o[key].get<double>();
  }
  return a;
}

std::optional<JobProfile> ParseProfile(const json& doc) {
  if (!doc.contains("profile") || !doc["profile"].is_object()) return std::nullopt;
  const json& p = doc["profile"];
  JobProfile out;
  out.runs = Integer(p, "runs").value_or(0);
  if (p.contains("nodes") && p["nodes"].is_array()) {
    for (const json& n : p["nodes"]) {
      if (!n.is_object()) continue;
      ProfileNode node;
      node.index = Integer(n, "index").value_or(0);
      node.op = String(n, "op");
      node.delegate = String(n, "delegate");
      node.partition = Integer(n, "partition");
      if (n.contains("nodes") && n["nodes"].is_array()) {
        for (const json& i : n["nodes"]) {
          if (i.is_number_integer()) node.nodes.push_back(i.get<int64_t>());
        }
      }
      node.mean_us = Real(n, "mean_us");
      out.nodes.push_back(std::move(node));
    }
  }
  if (p.contains("by_op") && p["by_op"].is_array()) {
    for (const json& o : p["by_op"]) {
      if (!o.is_object()) continue;
      out.by_op.push_back(
          {String(o, "op"), Count(o, "count"), Real(o, "total_us"), Real(o, "pct")});
    }
  }
  return out;
}

// Malformed windows are left out; a window with no run is not a window.
std::optional<JobSustained> ParseSustained(const json& doc) {
  if (!doc.contains("sustained") || !doc["sustained"].is_object()) return std::nullopt;
  const json& s = doc["sustained"];
  JobSustained out;
  out.secs = Real(s, "secs");
  out.window_ms = Real(s, "window_ms");
  if (s.contains("windows") && s["windows"].is_array()) {
    for (const json& w : s["windows"]) {
      if (!w.is_object() || Count(w, "runs") <= 0) continue;
      out.windows.push_back({Real(w, "t_ms"), Count(w, "runs"), Real(w, "mean_us"),
                             Real(w, "p50_us"), Real(w, "max_us")});
    }
  }
  return out;
}

// A list of non-negative integers, or unset.
std::optional<std::vector<int64_t>> Indices(const json& list) {
  if (!list.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const json& i : list) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0) return std::nullopt;
    out.push_back(i.get<int64_t>());
  }
  return out;
}

// "boxes" sets: per set a list of [class, score, ymin, xmin, ymax, xmax];
// "anchors" (`anchors`): [class, score, v0, v1, v2, v3, anchor].
bool ParseDetections(const json& sets, bool anchors, TaskOutputs& out) {
  const size_t width = anchors ? 7 : 6;
  for (const json& set : sets) {
    if (!set.is_array()) return false;
    std::vector<TaskDetection> rows;
    for (const json& r : set) {
      if (!r.is_array() || r.size() != width || !r[0].is_number_integer()) return false;
      for (size_t i = 1; i < 6; ++i) {
        if (!r[i].is_number()) return false;
      }
      if (anchors && (!r[6].is_number_integer() || r[6].get<int64_t>() < 0)) return false;
      rows.push_back({r[0].get<int64_t>(), r[1].get<double>(), r[2].get<double>(),
                      r[3].get<double>(), r[4].get<double>(), r[5].get<double>(),
                      anchors ? r[6].get<int64_t>() : -1});
    }
    out.detections.push_back(std::move(rows));
  }
  return true;
}

// "classmap" sets: per set {"height","width","rle":[value,count,...]}.
bool ParseClassMaps(const json& sets, TaskOutputs& out) {
  for (const json& set : sets) {
    if (!set.is_object() || !set.contains("rle")) return false;
    TaskClassMap m;
    m.height = Count(set, "height");
    m.width = Count(set, "width");
    auto rle = Indices(set["rle"]);
    if (!rle || rle->size() % 2 != 0) return false;
    m.rle = std::move(*rle);
    out.maps.push_back(std::move(m));
  }
  return true;
}

// "steps" of a stepped pair; unset when absent or not an object.
std::optional<JobSteps> ParseSteps(const json& doc) {
  if (!doc.contains("steps") || !doc["steps"].is_object()) return std::nullopt;
  const json& s = doc["steps"];
  JobSteps out;
  const auto text = [&s](const char* key) {
    return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : std::string();
  };
  out.role = text("role");
  out.order = text("order");
  out.partner_error = text("partner_error");
  if (s.contains("partner_steps") && s["partner_steps"].is_number_integer()) {
    out.partner_steps = s["partner_steps"].get<int64_t>();
  }
  if (s.contains("starts_us") && s["starts_us"].is_array()) {
    for (const json& t : s["starts_us"]) {
      if (t.is_number()) out.starts_us.push_back(t.get<double>());
    }
  }
  return out;
}

// Unset when absent or malformed (an unknown kind, a set not of its kind's
// form): the host then has no task outputs to judge.
std::optional<TaskOutputs> ParseTaskOutputs(const json& doc) {
  if (!doc.contains("task_outputs") || !doc["task_outputs"].is_object()) return std::nullopt;
  const json& t = doc["task_outputs"];
  TaskOutputs out;
  if (!t.contains("kind") || !t["kind"].is_string() || !t.contains("sets") ||
      !t["sets"].is_array()) {
    return std::nullopt;
  }
  out.kind = t["kind"].get<std::string>();
  if (out.kind == "boxes" || out.kind == "anchors") {
    const bool anchors = out.kind == "anchors";
    auto outputs = t.contains("outputs") ? Indices(t["outputs"]) : std::nullopt;
    if (!outputs || outputs->size() != (anchors ? 2u : 4u)) return std::nullopt;
    out.box_outputs = std::move(*outputs);
    out.max_boxes = Count(t, "max");
    if (anchors) {
      if (!t.contains("score") || !t["score"].is_string() || !t.contains("threshold") ||
          !t["threshold"].is_number()) {
        return std::nullopt;
      }
      out.activation = t["score"].get<std::string>();
      out.threshold = t["threshold"].get<double>();
      out.class_offset = Count(t, "offset");
      out.anchors = Count(t, "anchors");
    }
    if (!ParseDetections(t["sets"], anchors, out)) return std::nullopt;
    return out;
  }
  out.output = Count(t, "output");
  if (out.kind == "classmap") {
    if (!t.contains("activation") || !t["activation"].is_string()) return std::nullopt;
    out.activation = t["activation"].get<std::string>();
    if (!ParseClassMaps(t["sets"], out)) return std::nullopt;
    return out;
  }
  if (out.kind != "topk") return std::nullopt;
  out.k = Count(t, "k");
  for (const json& set : t["sets"]) {
    auto indices = Indices(set);
    if (!indices) return std::nullopt;
    out.sets.push_back(std::move(*indices));
  }
  return out;
}

Result<std::optional<Accuracy>> AccuracyOf(const json& doc) {
  if (!doc.contains("accuracy")) return std::optional<Accuracy>();
  const json& acc = doc["accuracy"];
  if (!acc.is_object() || !acc.contains("outputs") || !acc["outputs"].is_array()) {
    return MakeError("runner JSON: \"accuracy\" must be an object with an \"outputs\" array");
  }
  Accuracy out;
  out.reference = String(acc, "reference");
  out.sets = Integer(acc, "sets");
  for (size_t i = 0; i < acc["outputs"].size(); ++i) {
    const json& o = acc["outputs"][i];
    if (!o.is_object() || !Integer(o, "index")) {
      return MakeError("runner JSON: accuracy.outputs[" + std::to_string(i) +
                       "] has no integer \"index\"");
    }
    out.outputs.push_back(ParseOutputAccuracy(o));
  }
  if (acc.contains("layers") && acc["layers"].is_array()) {
    for (const json& l : acc["layers"]) {
      if (!l.is_object()) continue;
      runner::LayerError e;
      e.node = Integer(l, "node").value_or(0);
      e.op = String(l, "op");
      e.delegate = String(l, "delegate");
      e.partition = Integer(l, "partition").value_or(-1);
      e.tensor = Integer(l, "tensor").value_or(0);
      e.name = String(l, "name");
      e.max_abs_error = Real(l, "max_abs_error");
      e.mean_abs_error = Real(l, "mean_abs_error");
      out.layers.push_back(std::move(e));
    }
  }
  std::sort(out.outputs.begin(), out.outputs.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  for (size_t i = 1; i < out.outputs.size(); ++i) {
    if (out.outputs[i].index == out.outputs[i - 1].index) {
      return MakeError("runner JSON: accuracy lists output " +
                       std::to_string(out.outputs[i].index) + " twice");
    }
  }
  return std::optional<Accuracy>(std::move(out));
}

// Throws json::exception on a wrongly typed status, error or metrics figure.
Document ParseDocument(const json& doc) {
  Document out;
  out.status = doc.value("status", "");
  out.error = doc.value("error", "");
  out.model = String(doc, "model");
  out.delegate = String(doc, "delegate");
  if (doc.contains("runtime") && doc["runtime"].is_object()) {
    out.runtime = RuntimeEntry{String(doc["runtime"], "kind"), String(doc["runtime"], "version")};
  }
  out.num_threads = Integer(doc, "num_threads");
  out.threads_used = Integer(doc, "threads_used");
  if (doc.contains("metrics") && doc["metrics"].is_object()) {
    out.metrics = ParseMetrics(doc["metrics"]);
  }
  if (doc.contains("samples_us") && doc["samples_us"].is_array()) {
    for (const json& s : doc["samples_us"]) {
      if (s.is_number()) out.samples_us.push_back(s.get<double>());
    }
  }
  out.inputs = ParseTensors(doc, "inputs");
  out.outputs = ParseTensors(doc, "outputs");
  if (doc.contains("placement")) out.placement = ParsePlacement(doc["placement"]);
  if (auto accuracy = AccuracyOf(doc)) out.accuracy = std::move(*accuracy);
  out.profile = ParseProfile(doc);
  out.sustained = ParseSustained(doc);
  out.task_outputs = ParseTaskOutputs(doc);
  out.delegate_stats = ParseDelegateStats(doc);
  out.steps = ParseSteps(doc);
  if (doc.contains("partner") && doc["partner"].is_object()) {
    out.partner = doc["partner"].dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return out;
}

}  // namespace

bool IsOk(const Document& doc) {
  return doc.status == runner::RunnerStatusName(runner::RunnerStatus::kOk);
}

json ToJson(const Document& doc) {
  if (!IsOk(doc)) return {{"status", doc.status}, {"error", doc.error}};
  json out = {{"status", doc.status},
              {"model", doc.model},
              {"delegate", doc.delegate},
              {"samples_us", doc.samples_us},
              {"inputs", TensorsJson(doc.inputs)},
              {"outputs", TensorsJson(doc.outputs)}};
  if (doc.runtime) {
    out["runtime"] = {{"kind", doc.runtime->kind}, {"version", doc.runtime->version}};
  }
  if (doc.num_threads) out["num_threads"] = *doc.num_threads;
  if (doc.threads_used) out["threads_used"] = *doc.threads_used;
  if (doc.metrics) out["metrics"] = MetricsJson(*doc.metrics);
  if (doc.placement) out["placement"] = PlacementJson(*doc.placement);
  if (doc.accuracy) out["accuracy"] = AccuracyJson(*doc.accuracy);
  if (doc.profile) out["profile"] = ProfileJson(*doc.profile);
  if (doc.sustained) out["sustained"] = SustainedJson(*doc.sustained);
  if (doc.task_outputs) out["task_outputs"] = TaskOutputsJson(*doc.task_outputs);
  if (!doc.delegate_stats.empty()) out["delegate_stats"] = DelegateStatsJson(doc.delegate_stats);
  if (doc.steps) out["steps"] = StepsJson(*doc.steps);
  if (doc.partner) {
    json partner = json::parse(*doc.partner, nullptr, false);
    if (partner.is_object()) out["partner"] = std::move(partner);
  }
  return out;
}

std::string WriteRunnerJson(const Document& doc) {
  return ToJson(doc).dump(-1, ' ', false, json::error_handler_t::replace);
}

json MetricsJson(const Metrics& m) {
  json out = {
      {"init_us", m.init_us},        {"first_us", m.first_us}, {"warmup_mean_us", m.warmup_mean_us},
      {"mean_us", m.mean_us},        {"std_us", m.std_us},     {"min_us", m.min_us},
      {"max_us", m.max_us},          {"p50_us", m.p50_us},     {"p90_us", m.p90_us},
      {"p99_us", m.p99_us},          {"num_runs", m.num_runs}, {"peak_rss_bytes", nullptr},
      {"arena_bytes", m.arena_bytes}};
  // null: unknown (0 in Metrics); ParseMetrics reads it back as 0.
  if (m.peak_rss_bytes > 0) out["peak_rss_bytes"] = m.peak_rss_bytes;
  if (m.init_cold_us) out["init_cold_us"] = *m.init_cold_us;
  if (m.init_warm_us) out["init_warm_us"] = *m.init_warm_us;
  return out;
}

json DelegateStatsJson(const runner::DelegateStats& stats) {
  json out = json::object();
  for (const auto& [name, value] : stats) out[name] = value;
  return out;
}

json PlacementJson(const JobPlacement& placement) {
  json nodes = json::array();
  for (const PlacementNode& n : placement.nodes) {
    json node = {{"index", n.index}, {"op", n.op}, {"delegate", n.delegate}};
    if (n.partition) node["partition"] = *n.partition;
    if (n.folded) node["folded"] = true;
    if (!n.reason.empty()) node["reason"] = n.reason;
    nodes.push_back(std::move(node));
  }
  return {{"partitions", placement.partitions}, {"nodes", std::move(nodes)}};
}

json ProfileJson(const JobProfile& p) {
  json nodes = json::array();
  for (const ProfileNode& n : p.nodes) {
    json node = {
        {"index", n.index}, {"op", n.op}, {"delegate", n.delegate}, {"mean_us", n.mean_us}};
    if (n.partition) node["partition"] = *n.partition;
    if (n.partition && !n.nodes.empty()) node["nodes"] = n.nodes;
    nodes.push_back(std::move(node));
  }
  json by_op = json::array();
  for (const ProfileOp& o : p.by_op) {
    by_op.push_back({{"op", o.op}, {"count", o.count}, {"total_us", o.total_us}, {"pct", o.pct}});
  }
  return {{"runs", p.runs}, {"nodes", std::move(nodes)}, {"by_op", std::move(by_op)}};
}

json TaskOutputsJson(const TaskOutputs& task) {
  if (task.kind == "boxes" || task.kind == "anchors") {
    const bool anchors = task.kind == "anchors";
    json sets = json::array();
    for (const std::vector<TaskDetection>& set : task.detections) {
      json rows = json::array();
      for (const TaskDetection& d : set) {
        json row = {d.class_index, d.score, d.ymin, d.xmin, d.ymax, d.xmax};
        if (anchors) row.push_back(d.anchor);
        rows.push_back(std::move(row));
      }
      sets.push_back(std::move(rows));
    }
    json out = {{"kind", task.kind},
                {"outputs", task.box_outputs},
                {"max", task.max_boxes},
                {"sets", std::move(sets)}};
    if (anchors) {
      out["score"] = task.activation;
      out["offset"] = task.class_offset;
      out["threshold"] = task.threshold;
      out["anchors"] = task.anchors;
    }
    return out;
  }
  if (task.kind == "classmap") {
    json sets = json::array();
    for (const TaskClassMap& m : task.maps) {
      sets.push_back({{"height", m.height}, {"width", m.width}, {"rle", m.rle}});
    }
    return {{"kind", task.kind},
            {"output", task.output},
            {"activation", task.activation},
            {"sets", std::move(sets)}};
  }
  return {{"kind", task.kind}, {"k", task.k}, {"output", task.output}, {"sets", task.sets}};
}

// "steps": role and starts_us always; the driver's order and partner_steps;
// partner_error only when set.
json StepsJson(const JobSteps& s) {
  json out = json::object();
  out["role"] = s.role;
  out["starts_us"] = s.starts_us;
  if (s.role == "driver") {
    out["order"] = s.order;
    out["partner_steps"] = s.partner_steps;
  }
  if (!s.partner_error.empty()) out["partner_error"] = s.partner_error;
  return out;
}

json SustainedJson(const JobSustained& s) {
  json windows = json::array();
  for (const SustainedWindow& w : s.windows) {
    json entry = json::object();
    entry["t_ms"] = w.t_ms;
    entry["runs"] = w.runs;
    entry["mean_us"] = w.mean_us;
    entry["p50_us"] = w.p50_us;
    entry["max_us"] = w.max_us;
    windows.push_back(std::move(entry));
  }
  json out = json::object();
  out["secs"] = s.secs;
  out["window_ms"] = s.window_ms;
  out["windows"] = std::move(windows);
  return out;
}

json LayerErrorJson(const LayerError& l) {
  json entry = json::object();
  entry["node"] = l.node;
  entry["op"] = l.op;
  entry["delegate"] = l.delegate;
  if (l.partition >= 0) entry["partition"] = l.partition;
  entry["tensor"] = l.tensor;
  entry["name"] = l.name;
  entry["max_abs_error"] = l.max_abs_error;
  entry["mean_abs_error"] = l.mean_abs_error;
  return entry;
}

json AccuracyJson(const Accuracy& accuracy) {
  json outputs = json::array();
  for (const OutputAccuracy& a : accuracy.outputs) outputs.push_back(OutputAccuracyJson(a));
  json out = {{"reference", accuracy.reference}, {"outputs", std::move(outputs)}};
  if (accuracy.sets) out["sets"] = *accuracy.sets;
  if (!accuracy.layers.empty()) {
    json layers = json::array();
    for (const runner::LayerError& l : accuracy.layers) layers.push_back(LayerErrorJson(l));
    out["layers"] = std::move(layers);
  }
  return out;
}

Result<Document> ParseRunnerJson(std::string_view text) {
  if (auto r = CheckJsonNesting(text, "runner JSON"); !r) return r.error();
  try {
    json doc = json::parse(text);
    if (!doc.is_object()) return MakeError("runner JSON is not an object");
    return ParseDocument(doc);
  } catch (const json::exception& e) {
    return MakeError(std::string("runner JSON: ") + e.what());
  }
}

Result<std::optional<Accuracy>> ParseRunnerAccuracy(std::string_view text) {
  if (auto r = CheckJsonNesting(text, "runner JSON"); !r) return r.error();
  try {
    json doc = json::parse(text);
    if (!doc.is_object()) return MakeError("runner JSON is not an object");
    return AccuracyOf(doc);
  } catch (const json::exception& e) {
    return MakeError(std::string("runner JSON: ") + e.what());
  }
}

}  // namespace dfarm::runner_json
