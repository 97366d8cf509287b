#include "harness/farm/queue_job.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace dfarm::harness {

using json = nlohmann::json;

std::string SelectorTarget(const DeviceSelector& sel) {
  store::TargetSelector t;
  t.abi = sel.abi;
  t.os = sel.os;
  t.soc = sel.soc;
  t.tags = sel.tags;
  t.min_memory_mb = sel.min_memory_mb;
  return store::TargetString(t);
}

store::DeviceTraits TraitsOf(const std::string& name, const agent::DeviceInfo& info,
                             const std::vector<std::string>& tags) {
  store::DeviceTraits t;
  t.name = name;
  t.abi = info.abi;
  t.os = info.os_release.empty() ? info.os : info.os + " " + info.os_release;
  t.cpu = info.cpu;
  if (auto soc = info.properties.find("ro.soc.model"); soc != info.properties.end()) {
    t.cpu += " " + soc->second;
  }
  t.memory_bytes = static_cast<int64_t>(info.memory_bytes);
  t.tags = tags;
  if (auto model = info.properties.find("ro.product.model"); model != info.properties.end()) {
    t.model = model->second;
  }
  return t;
}

namespace {

// Row-major runs of a mask's values: value, count, value, count, ...
std::vector<uint32_t> MaskRuns(const EvalMask& m) {
  std::vector<uint32_t> runs;
  for (uint8_t v : m.values) {
    if (!runs.empty() && runs[runs.size() - 2] == v) {
      ++runs.back();
    } else {
      runs.insert(runs.end(), {v, 1});
    }
  }
  return runs;
}

// Decoder "ssd_anchors": the anchors ([y, x, h, w] each) and how to decode.
void AddAnchorDecoder(const SsdAnchorDecoder& d, json& out) {
  json anchors = json::array();
  for (const SsdAnchor& a : *d.anchors) anchors.push_back({a.y, a.x, a.h, a.w});
  out["anchors"] = std::move(anchors);
  out["box_format"] = d.box_format;
  out["box_scales"] = {d.scale_y, d.scale_x, d.scale_h, d.scale_w};
  out["box_size"] = d.exponential_size ? "exponential" : "linear";
  out["score"] = d.score;
  out["score_threshold"] = d.score_threshold;
  out["iou_threshold"] = d.iou_threshold;
  out["max_candidates"] = d.max_candidates;
}

SsdAnchorDecoder ReadAnchorDecoder(const json& e) {
  SsdAnchorDecoder d;
  auto anchors = std::make_shared<std::vector<SsdAnchor>>();
  for (const json& a : e.at("anchors")) {
    anchors->push_back({a.at(0).get<double>(), a.at(1).get<double>(), a.at(2).get<double>(),
                        a.at(3).get<double>()});
  }
  d.anchors = std::move(anchors);
  d.box_format = e.at("box_format").get<std::string>();
  const json& s = e.at("box_scales");
  d.scale_y = s.at(0).get<double>();
  d.scale_x = s.at(1).get<double>();
  d.scale_h = s.at(2).get<double>();
  d.scale_w = s.at(3).get<double>();
  d.exponential_size = e.at("box_size") == "exponential";
  d.score = e.at("score").get<std::string>();
  d.score_threshold = e.at("score_threshold").get<double>();
  d.iou_threshold = e.at("iou_threshold").get<double>();
  d.max_candidates = e.at("max_candidates").get<uint32_t>();
  return d;
}

// Detection's truth and decoder, segmentation's masks and decoder: what a
// node scores boxes and class maps with (only what the eval has).
void AddTaskScoring(const EvalSpec& e, json& out) {
  if (!e.box_outputs.empty()) {
    json truth = json::array();
    for (const EvalTruthBox& t : e.truth)
      truth.push_back({t.image, t.category, t.x, t.y, t.w, t.h});
    out["box_outputs"] = e.box_outputs;
    out["box_order"] = e.box_order;
    out["max_detections"] = e.max_detections;
    out["category_ids"] = e.category_ids;
    out["sizes"] = {e.widths, e.heights};
    out["truth"] = std::move(truth);
  }
  if (e.anchor_decoder) AddAnchorDecoder(*e.anchor_decoder, out);
  if (e.masks) {
    json masks = json::array();
    for (const EvalMask& m : *e.masks) masks.push_back({m.width, m.height, MaskRuns(m)});
    out["activation"] = e.activation;
    out["classes"] = e.classes;
    out["ignore_label"] = e.ignore_label;
    out["masks"] = std::move(masks);
  }
}

void ReadTaskScoring(const json& e, EvalSpec& eval) {
  if (e.contains("box_outputs")) {
    eval.box_outputs = e["box_outputs"].get<std::vector<uint32_t>>();
    eval.box_order = e.at("box_order").get<std::string>();
    eval.max_detections = e.at("max_detections").get<uint32_t>();
    eval.category_ids = e.at("category_ids").get<std::vector<int64_t>>();
    eval.widths = e.at("sizes").at(0).get<std::vector<uint32_t>>();
    eval.heights = e.at("sizes").at(1).get<std::vector<uint32_t>>();
    for (const json& t : e.at("truth")) {
      eval.truth.push_back({t.at(0).get<size_t>(), t.at(1).get<int64_t>(), t.at(2).get<double>(),
                            t.at(3).get<double>(), t.at(4).get<double>(), t.at(5).get<double>()});
    }
    eval.images.resize(eval.widths.size());  // counted, not read
  }
  if (e.contains("anchors")) eval.anchor_decoder = ReadAnchorDecoder(e);
  if (e.contains("masks")) {
    eval.activation = e.at("activation").get<std::string>();
    eval.classes = e.at("classes").get<std::vector<std::string>>();
    eval.ignore_label = e.at("ignore_label").get<int32_t>();
    auto masks = std::make_shared<std::vector<EvalMask>>();
    for (const json& m : e["masks"]) {
      EvalMask mask{m.at(0).get<uint32_t>(), m.at(1).get<uint32_t>(), {}};
      const auto runs = m.at(2).get<std::vector<uint32_t>>();
      for (size_t r = 0; r + 1 < runs.size(); r += 2) {
        mask.values.insert(mask.values.end(), runs[r + 1], static_cast<uint8_t>(runs[r]));
      }
      if (mask.values.size() != size_t{mask.width} * mask.height) {
        throw std::out_of_range("eval.masks: a mask's runs do not cover its pixels");
      }
      masks->push_back(std::move(mask));
    }
    eval.images.resize(masks->size());
    eval.masks = std::move(masks);
  }
}

}  // namespace

std::string EncodePayload(const SweepJob& job,
                          const std::map<std::string, std::string>& runner_builds) {
  json options = json::object();
  for (const auto& [k, v] : job.delegate.options) {
    if (k != kPluginPathOption || job.plugin_sha256.empty()) options[k] = v;
  }
  json doc = {
      {"v", 1},
      {"model", {{"file", job.model.file}, {"sha256", job.model_sha256}}},
      {"delegate", {{"name", job.delegate.name}, {"options", options}}},
      {"inputs", job.input_set_sha256s},
      {"benchmark",
       {{"warmup_runs", job.benchmark.warmup_runs},
        {"num_runs", job.benchmark.num_runs},
        {"num_threads", job.benchmark.num_threads},
        {"timeout_s", job.benchmark.timeout_s},
        {"accuracy_reference", job.benchmark.accuracy_reference}}},
      {"runner", job.runner},
      {"runner_builds", runner_builds},
  };
  // Only when asked, so payloads of older runs read the same.
  if (job.benchmark.profile) doc["benchmark"]["profile"] = true;
  if (!job.benchmark.cpu_affinity.empty()) {
    doc["benchmark"]["cpu_affinity"] = job.benchmark.cpu_affinity;
  }
  if (job.benchmark.sustained_s > 0) doc["benchmark"]["sustained_s"] = job.benchmark.sustained_s;
  if (job.model.eval) {
    // What the node needs to score the runner's task outputs: the labels.
    const EvalSpec& e = *job.model.eval;
    doc["eval"] = {{"task", e.task},     {"dataset", e.dataset_id}, {"labels", e.labels},
                   {"output", e.output}, {"offset", e.offset},      {"top_k", e.top_k}};
    AddTaskScoring(e, doc["eval"]);
    // Version 2: nodes that predate decoder "ssd_anchors" refuse the job,
    // naming the version, instead of misreading its two box outputs.
    if (e.anchor_decoder) doc["v"] = 2;
  }
  if (!job.plugin_sha256.empty()) {
    std::string file = job.delegate.PluginPath();
    const size_t slash = file.rfind('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    doc["plugin"] = {{"file", file}, {"sha256", job.plugin_sha256}};
  }
  return doc.dump();
}

namespace {

Result<SweepJob> Decode(const store::JobRow& row, const std::string& abi, const FetchFile& fetch,
                        const json& doc) {
  if (doc.value("v", 0) != 1 && doc.value("v", 0) != 2) {
    return MakeError(ErrorKind::kInvalidInput,
                     "its payload has version " + doc.value("v", json()).dump() +
                         ", which this dfarm does not know (update dfarm on this node)");
  }
  SweepJob job;
  job.id = row.id;
  job.claim_id = row.claim_id;
  job.device = row.device;
  job.job_key = row.job_key;
  job.trial = static_cast<uint32_t>(row.trial);
  job.model_sha256 = doc.at("model").at("sha256").get<std::string>();
  job.model.file = doc.at("model").at("file").get<std::string>();
  auto model = fetch(job.model_sha256, "model '" + job.model.file + "'");
  if (!model) return model.error();
  job.model.path = *model;
  job.delegate.name = doc.at("delegate").at("name").get<std::string>();
  for (const auto& [k, v] : doc.at("delegate").at("options").items()) {
    job.delegate.options[k] = v.get<std::string>();
  }
  if (doc.contains("plugin")) {
    job.plugin_sha256 = doc["plugin"].at("sha256").get<std::string>();
    auto plugin = fetch(job.plugin_sha256,
                        "delegate plugin '" + doc["plugin"].value("file", std::string()) + "'");
    if (!plugin) return plugin.error();
    job.delegate.options[kPluginPathOption] = *plugin;
  }
  for (const json& sha : doc.at("inputs")) {
    job.input_set_sha256s.push_back(sha.get<std::string>());
    auto path = fetch(job.input_set_sha256s.back(), "input set of '" + job.model.file + "'");
    if (!path) return path.error();
    job.input_set_paths.push_back(*path);
  }
  const json& b = doc.at("benchmark");
  job.benchmark.warmup_runs = b.at("warmup_runs").get<uint32_t>();
  job.benchmark.num_runs = b.at("num_runs").get<uint32_t>();
  job.benchmark.num_threads = b.at("num_threads").get<uint32_t>();
  job.benchmark.timeout_s = b.at("timeout_s").get<uint32_t>();
  job.benchmark.accuracy_reference = b.at("accuracy_reference").get<std::string>();
  job.benchmark.profile = b.value("profile", false);
  job.benchmark.cpu_affinity = b.value("cpu_affinity", std::string());
  job.benchmark.sustained_s = b.value("sustained_s", 0.0);
  if (doc.contains("eval")) {
    const json& e = doc["eval"];
    EvalSpec eval;
    eval.task = e.at("task").get<std::string>();
    eval.dataset_id = e.at("dataset").get<std::string>();
    eval.labels = e.at("labels").get<std::vector<int32_t>>();
    eval.output = e.at("output").get<uint32_t>();
    eval.offset = e.at("offset").get<int32_t>();
    eval.top_k = e.at("top_k").get<uint32_t>();
    ReadTaskScoring(e, eval);
    job.model.eval = std::move(eval);
  }
  job.runner = doc.at("runner").get<std::string>();
  if (!row.runner_kind.empty()) job.runner_kind = row.runner_kind;
  const json& builds = doc.at("runner_builds");
  if (!builds.contains(abi)) {
    std::string have;
    for (const auto& [a, sha] : builds.items()) have += (have.empty() ? "" : ", ") + a;
    return MakeError(ErrorKind::kInvalidInput,
                     "runner '" + (job.runner.empty() ? std::string("default") : job.runner) +
                         "' has no build for ABI '" + abi +
                         "' (it has: " + (have.empty() ? "none" : have) + ")");
  }
  job.runner_sha256 = builds[abi].get<std::string>();
  auto runner = fetch(job.runner_sha256, "dfarm-runner for " + abi);
  if (!runner) return runner.error();
  job.runner_path = *runner;
  return job;
}

}  // namespace

Result<SweepJob> DecodePayload(const store::JobRow& row, const std::string& abi,
                               const FetchFile& fetch) {
  try {
    return Decode(row, abi, fetch, json::parse(row.payload));
  } catch (const std::exception& e) {
    return MakeError(ErrorKind::kInvalidInput, "job " + std::to_string(row.id) +
                                                   " has a payload this node cannot read (" +
                                                   e.what() + ")");
  }
}

}  // namespace dfarm::harness
