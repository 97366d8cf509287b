#include "harness/spec/spec.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "agent/base/json_input.h"
#include "agent/protocol/auth.h"
#include "agent/protocol/job_limits.h"
#include "agent/protocol/runner_kinds.h"
#include "delegates/delegate_names.h"
#include "delegates/delegate_options.h"
#include "harness/devices/device_uri.h"
#include "harness/run/terminal_text.h"
#include "harness/spec/json_type_name.h"
#include "harness/spec/matrix.h"
#include "harness/spec/spec_paths.h"
#include "reports/store/store.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxDelegateConfigs = 10000;
constexpr size_t kMaxRunners = 16;
constexpr size_t kMaxNameChars = 64;
constexpr double kMaxTempC = 150.0;

// The benchmark ranges a spec takes: within what an agent takes
// (agent/protocol/job_limits.h), so that a job the spec allows is never
// refused by the agent (which would end it infra and count against the device).
constexpr uint32_t kMaxWarmupRuns = 10000;
constexpr uint32_t kMaxNumRuns = 100000;
constexpr uint32_t kMaxNumThreads = 256;
constexpr uint32_t kMaxTimeoutS = 24 * 3600;
// More trials than this is a typo, not a plan (each trial is a whole job).
constexpr uint32_t kMaxRepeats = 1000;
static_assert(kMaxWarmupRuns <= agent::kMaxWarmupRuns);
static_assert(FarmSpec{}.priority == store::kRunPriorityDefault);
static_assert(FarmSpec{}.unserved_timeout_s == store::kUnservedTimeoutDefaultS);
static_assert(kMaxNumRuns <= agent::kMaxNumRuns);
static_assert(kMaxNumThreads <= agent::kMaxNumThreads);
static_assert(uint64_t{kMaxTimeoutS} * 1000 <= agent::kDefaultMaxTimeoutMs);
static_assert(std::all_of(delegates::kBuiltinDelegateNames.begin(),
                          delegates::kBuiltinDelegateNames.end(), agent::IsValidDelegateName),
              "every built-in delegate name must be one an agent takes");

// Runner names, ABI names and tags: [A-Za-z0-9_.-]{1,64}.
bool IsPlainName(const std::string& s) {
  return !s.empty() && s.size() <= kMaxNameChars &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
             std::string::npos;
}

// A value as a message quotes it: compact JSON, cut short (json_input.h).
std::string Quoted(const json& v) {
  return Abbreviated(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

class Parser {
 public:
  explicit Parser(std::string spec_path) : spec_path_(std::move(spec_path)) {}

  Error Fail(const std::string& where, const std::string& why) const {
    std::string at = where.empty() ? "" : where + ": ";
    return MakeError(ErrorKind::kInvalidInput, "spec '" + spec_path_ + "': " + at + why);
  }

  // Checks that `obj` has only `allowed` keys.
  Result<void> CheckKeys(const json& obj, const std::string& where,
                         std::initializer_list<const char*> allowed) const {
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (const char* a : allowed) known = known || key == a;
      if (!known) {
        std::string list;
        for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
        return Fail("", "unknown key '" + Abbreviated(key) + "' " +
                            (where.empty() ? "at top level" : "in " + where) + " (expected " +
                            list + ")");
      }
    }
    return Ok();
  }

  // A bounded unsigned field of a spec section.
  struct UintField {
    const char* key;
    uint32_t* out;
    uint32_t lo, hi;
  };

  // Reads those of `fields` that `section` (named `where`) has, in order.
  Result<void> ReadUints(const json& section, const std::string& where,
                         std::initializer_list<UintField> fields) const {
    for (const UintField& f : fields) {
      if (!section.contains(f.key)) continue;
      auto v = Uint(section[f.key], where + "." + f.key, f.lo, f.hi);
      if (!v) return v.error();
      *f.out = *v;
    }
    return Ok();
  }

  Result<uint32_t> Uint(const json& v, const std::string& where, uint32_t lo, uint32_t hi) const {
    if (!v.is_number_integer() && !v.is_number_unsigned()) {
      return Fail(where, std::string("expected an integer, got ") + JsonTypeName(v));
    }
    // A non-negative number is held as unsigned: read as int64 it would wrap
    // (18446744073709551615 as -1).
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0) {
      return Fail(where, std::to_string(v.get<int64_t>()) + " is out of range [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    uint64_t n = v.get<uint64_t>();
    if (n < lo || n > hi) {
      return Fail(where, std::to_string(n) + " is out of range [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
    }
    return static_cast<uint32_t>(n);
  }

  // The spec sections in the order they are checked (the first error wins).
  Result<SweepSpec> Parse(const std::string& text) const {
    auto doc = ParseDocument(text);
    if (!doc) return doc.error();
    SweepSpec spec;
    for (Section section :
         {&Parser::ParseName, &Parser::ParseModels, &Parser::ParseDelegates, &Parser::ParseDevices,
          &Parser::ParseDeviceTags, &Parser::ParseDeviceClasses, &Parser::ParseRunners,
          &Parser::ParsePairing, &Parser::ParseCooldown, &Parser::ParseBenchmark,
          &Parser::ParseScheduler, &Parser::ParseFarm}) {
      if (auto r = (this->*section)(*doc, spec); !r) return r.error();
    }
    if (auto r = CheckMatrixSize(spec); !r) return r.error();
    if (auto r = CheckEvalRunners(spec); !r) return r.error();
    return spec;
  }

  // A model's "eval" needs every runner to list task outputs: kinds dfarm
  // and tflite (Google's tools have no --task-outputs).
  Result<void> CheckEvalRunners(const SweepSpec& spec) const {
    for (const ModelSpec& m : spec.models) {
      if (!m.eval && m.data_error.empty()) continue;
      for (const RunnerSpec& r : spec.runners) {
        if (agent::SpeaksRunnerContract(r.kind)) continue;
        return Fail("runners", "runner '" + r.name + "' is of kind '" + r.kind +
                                   "', which cannot score task accuracy (model '" + m.file +
                                   "' has an \"eval\"; only kinds \"dfarm\" and \"tflite\")");
      }
    }
    return Ok();
  }

  // The matrix's job count, refused past kMaxSweepJobs before anything is
  // expanded. A device selector counts as one device (the sweep counts again
  // once it has matched them: PlanSweep).
  Result<void> CheckMatrixSize(const SweepSpec& spec) const {
    const uint64_t devices = spec.devices.size() + spec.device_selectors.size();
    const uint64_t runners = std::max<size_t>(spec.runners.size(), 1);
    if (auto n = CountMatrixJobs(MatrixAxes(spec, devices, runners)); !n) {
      return Fail("", n.message());
    }
    return Ok();
  }

 private:
  // Reads one top-level section of `doc` into `spec`.
  using Section = Result<void> (Parser::*)(const json& doc, SweepSpec& spec) const;

  // The JSON object with only the known top-level keys.
  Result<json> ParseDocument(const std::string& text) const {
    if (auto r = CheckJsonNesting(text, "spec '" + spec_path_ + "'"); !r) return r.error();
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      // The parser's message quotes the token it stopped in: a long one is cut.
      return Fail("", "invalid JSON: " + Abbreviated(e.what(), 2 * kMaxQuotedChars));
    }
    if (!doc.is_object()) {
      return Fail("", std::string("expected a JSON object, got ") + JsonTypeName(doc));
    }
    if (auto r =
            CheckKeys(doc, "",
                      {"name", "models", "delegates", "devices", "device_tags", "device_classes",
                       "runners", "pairing", "benchmark", "scheduler", "cooldown", "farm"});
        !r) {
      return r.error();
    }
    return doc;
  }

  // "name": a string; the spec file's stem when absent or empty.
  Result<void> ParseName(const json& doc, SweepSpec& spec) const {
    if (doc.contains("name")) {
      if (!doc["name"].is_string()) {
        return Fail("name", std::string("expected a string, got ") + JsonTypeName(doc["name"]));
      }
      spec.name = doc["name"].get<std::string>();
    }
    if (spec.name.empty()) spec.name = fs::path(spec_path_).stem().string();
    return Ok();
  }

  // "models": existing files, relative to the spec's folder, no file twice.
  Result<void> ParseModels(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("models")) return Fail("", "missing key 'models'");
    const json& models = doc["models"];
    if (!models.is_array()) {
      return Fail("models", std::string("expected an array of paths, got ") + JsonTypeName(models));
    }
    if (models.empty()) return Fail("models", "is empty; list at least one .tflite file");
    std::map<std::string, size_t> seen_models;
    for (size_t i = 0; i < models.size(); ++i) {
      auto model = ParseModel(models[i], "models[" + std::to_string(i) + "]");
      if (!model) return model.error();
      auto [it, inserted] = seen_models.emplace(model->path, i);
      if (!inserted) {
        const std::string shown =
            models[i].is_string() ? models[i].get<std::string>() : model->path;
        return Fail(
            "models[" + std::to_string(i) + "]",
            "'" + shown + "' is the same file as models[" + std::to_string(it->second) + "]");
      }
      spec.models.push_back(std::move(*model));
    }
    return Ok();
  }

  // The "eval" object `v` as given, with the paths ParseEvalObject resolved
  // in `e` (dataset, labels, images) made absolute.
  json GivenEval(const json& v, const EvalSpec& e) const {
    json given = v;
    given["dataset"] = e.dataset;
    if (!e.labels_file.empty()) given["labels"] = e.labels_file;
    if (v.contains("images")) {
      given["images"] =
          ResolveSpecPath(v["images"].get<std::string>(), SpecFolder().string()).string();
    }
    return given;
  }

  // One model: a path, or {"path":..., "inputs":...} (harness/spec/input_sets.h).
  Result<ModelSpec> ParseModel(const json& m, const std::string& where) const {
    if (m.is_object()) {
      if (auto r = CheckKeys(m, where, {"path", "inputs", "eval"}); !r) return r.error();
      if (!m.contains("path")) return Fail(where, "missing key 'path' (the .tflite file)");
      auto model = ParseModel(m["path"], where + ".path");
      if (!model) return model.error();
      if (m.contains("eval")) {
        if (m.contains("inputs")) {
          return Fail(where,
                      "has both \"inputs\" and \"eval\": an eval's images are the "
                      "model's inputs; leave \"inputs\" out");
        }
        const std::string at = where + " '" + model->file + "'.eval";
        auto eval = ParseEvalObject(m["eval"], at, SpecFolder().string());
        if (!eval) return Fail("", eval.message());
        if (auto loaded = LoadEvalData(m["eval"], at, SpecFolder().string(), *eval); !loaded) {
          model->data_error = loaded.message();
          model->eval_given = GivenEval(m["eval"], *eval).dump();
          return model;
        }
        auto inputs = eval->Inputs(at + ".preprocess");
        if (!inputs) return Fail("", inputs.message());
        model->inputs = std::move(*inputs);
        model->eval = std::move(*eval);
      }
      if (m.contains("inputs")) {
        auto inputs = ParseInputsSpec(m["inputs"], where + " '" + model->file + "'.inputs",
                                      SpecFolder().string());
        if (!inputs) return Fail("", inputs.message());
        model->inputs = std::move(*inputs);
      }
      return model;
    }
    if (!m.is_string()) {
      return Fail(where, std::string("expected a path string, got ") + JsonTypeName(m) +
                             " (or an object {\"path\":...,\"inputs\":...})");
    }
    std::string given = m.get<std::string>();
    if (given.empty()) return Fail(where, "empty path");
    fs::path p(given);
    if (p.is_relative()) p = SpecFolder() / p;
    p = p.lexically_normal();
    std::error_code ec;
    if (!fs::exists(p, ec)) return Fail(where, "file '" + Abbreviated(given) + "' does not exist");
    if (!fs::is_regular_file(p, ec))
      return Fail(where, "'" + Abbreviated(given) + "' is not a regular file");
    return ModelSpec{p.string(), p.filename().string(), {}, std::nullopt};
  }

  // "delegates": entries expanded into configurations, none twice; default cpu.
  Result<void> ParseDelegates(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("delegates")) {
      spec.delegates.push_back(DelegateSpec{"cpu", {}});
      return Ok();
    }
    const json& ds = doc["delegates"];
    if (!ds.is_array()) {
      return Fail("delegates", std::string("expected an array, got ") + JsonTypeName(ds));
    }
    if (ds.empty()) return Fail("delegates", "is empty; leave it out for [{\"name\":\"cpu\"}]");
    std::set<std::string> seen;
    std::optional<Error> unknown_name;  // that of the first entry with an unknown name
    for (size_t i = 0; i < ds.size(); ++i) {
      std::string where = "delegates[" + std::to_string(i) + "]";
      auto expanded = ParseDelegate(ds[i], where);
      if (!expanded) return expanded.error();
      if (const std::string& name = expanded->front().name;
          !unknown_name && !delegates::IsBuiltinDelegateName(name) &&
          !(HasToolRunner(doc) && agent::IsToolDelegateName(name))) {
        unknown_name =
            Fail(ds[i].is_object() ? where + ".name" : where,
                 "unknown delegate '" + Abbreviated(name) +
                     "'; known: " + delegates::BuiltinDelegateNamesList() + " (and " +
                     ToolOnlyDelegateNames() + " for a benchmark_model or inference_diff runner)");
      }
      if (spec.delegates.size() + expanded->size() > kMaxSweepJobs) {
        return Fail(where, "brings the delegate configurations past " +
                               std::to_string(kMaxSweepJobs) + ", the most jobs of one sweep");
      }
      for (DelegateSpec& d : *expanded) {
        std::string id = d.name + "|" + d.OptionsString();
        if (!seen.insert(id).second) {
          return Fail(where, "duplicate delegate configuration '" + d.name +
                                 (d.options.empty() ? "" : "(" + d.OptionsString() + ")") + "'");
        }
        spec.delegates.push_back(std::move(d));
      }
    }
    // Checked last, so that a misspelt name does not hide a broken entry.
    if (unknown_name) return *unknown_name;
    return Ok();
  }

  // "nnapi, hexagon": the tool delegates that are not also ours.
  static std::string ToolOnlyDelegateNames() {
    std::string names;
    for (std::string_view name : agent::kToolDelegateNames) {
      if (delegates::IsBuiltinDelegateName(name)) continue;
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    return names;
  }

  // A "runners" entry of a tool kind (benchmark_model, inference_diff), whose
  // delegates (nnapi, hexagon; gpu is ours too) a spec may then name.
  static bool HasToolRunner(const json& doc) {
    if (!doc.contains("runners") || !doc["runners"].is_array()) return false;
    for (const json& r : doc["runners"]) {
      if (r.is_object() && r.contains("kind") && r["kind"].is_string() &&
          !agent::SpeaksRunnerContract(r["kind"].get<std::string>())) {
        return true;
      }
    }
    return false;
  }

  // "devices": device URIs (no URI twice) and selectors; default ["local"].
  Result<void> ParseDevices(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("devices")) {
      spec.devices.push_back("local");
      return Ok();
    }
    const json& ds = doc["devices"];
    if (!ds.is_array()) {
      return Fail("devices", std::string("expected an array, got ") + JsonTypeName(ds));
    }
    if (ds.empty()) return Fail("devices", "is empty; leave it out for [\"local\"]");
    std::set<std::string> seen;
    for (size_t i = 0; i < ds.size(); ++i) {
      std::string where = "devices[" + std::to_string(i) + "]";
      if (ds[i].is_object() && ds[i].contains("uri")) {
        auto name = ParseDeviceObject(ds[i], where, spec);
        if (!name) return name.error();
        if (!seen.insert(*name).second) return Fail(where, "duplicate device '" + *name + "'");
        spec.devices.push_back(*name);
        continue;
      }
      if (ds[i].is_object()) {
        auto sel = ParseSelector(ds[i], where);
        if (!sel) return sel.error();
        spec.device_selectors.push_back(std::move(*sel));
        continue;
      }
      if (!ds[i].is_string()) {
        return Fail(where, std::string("expected a device URI string, a device object "
                                       "{\"uri\":...,\"token_file\":...} or a selector "
                                       "object {\"abi\":...,\"tags\":[...]}, got ") +
                               JsonTypeName(ds[i]));
      }
      std::string name = ds[i].get<std::string>();
      if (name != kAnyDevice) {
        if (auto r = CheckDeviceName(name); !r) return Fail(where, r.message());
      }
      if (!seen.insert(name).second) return Fail(where, "duplicate device '" + name + "'");
      spec.devices.push_back(name);
    }
    return Ok();
  }

  // "device_tags": {"DEVICE":["tag",...]}.
  Result<void> ParseDeviceTags(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("device_tags")) return Ok();
    const json& t = doc["device_tags"];
    if (!t.is_object()) {
      return Fail(
          "device_tags",
          std::string("expected an object {\"DEVICE\":[\"tag\",...]}, got ") + JsonTypeName(t));
    }
    for (const auto& [device, tags] : t.items()) {
      std::string where = "device_tags." + device;
      if (auto r = CheckDeviceName(device); !r) return Fail(where, r.message());
      auto list = ParseTags(tags, where);
      if (!list) return list.error();
      spec.device_tags[device] = std::move(*list);
    }
    return Ok();
  }

  // "device_classes": {"CLASS":["device-name glob",...]}.
  Result<void> ParseDeviceClasses(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("device_classes")) return Ok();
    const json& c = doc["device_classes"];
    if (!c.is_object()) {
      return Fail("device_classes",
                  std::string("expected an object {\"CLASS\":[\"device-name glob\",...]}, got ") +
                      JsonTypeName(c));
    }
    for (const auto& [name, globs] : c.items()) {
      const std::string where = "device_classes." + Abbreviated(name);
      if (!IsPlainName(name)) return Fail(where, "a class name must be [A-Za-z0-9_.-]{1,64}");
      if (!globs.is_array()) {
        return Fail(where, std::string("expected an array of device-name globs, got ") +
                               JsonTypeName(globs));
      }
      if (globs.empty()) return Fail(where, "is an empty list of globs");
      for (size_t i = 0; i < globs.size(); ++i) {
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!globs[i].is_string() || globs[i].get<std::string>().empty()) {
          return Fail(at, "expected a non-empty glob string ('*', '?' over the device name), got " +
                              Quoted(globs[i]));
        }
        spec.device_classes[name].push_back(globs[i].get<std::string>());
      }
    }
    return Ok();
  }

  // "runners": at most kMaxRunners, no name twice.
  Result<void> ParseRunners(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("runners")) return Ok();
    const json& rs = doc["runners"];
    if (!rs.is_array()) {
      return Fail("runners", std::string("expected an array, got ") + JsonTypeName(rs));
    }
    if (rs.empty()) return Fail("runners", "is empty; leave it out for the default runner");
    if (rs.size() > kMaxRunners) {
      return Fail("runners", "has " + std::to_string(rs.size()) + " entries, more than " +
                                 std::to_string(kMaxRunners));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < rs.size(); ++i) {
      std::string where = "runners[" + std::to_string(i) + "]";
      auto r = ParseRunner(rs[i], where);
      if (!r) return r.error();
      if (!names.insert(r->name).second) {
        return Fail(where + ".name", "duplicate runner name '" + r->name + "'");
      }
      spec.runners.push_back(std::move(*r));
    }
    return Ok();
  }

  // "pairing": {"baseline_runner": NAME}, NAME one of exactly two runners
  // (runners are parsed before).
  Result<void> ParsePairing(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("pairing")) return Ok();
    const json& p = doc["pairing"];
    if (!p.is_object()) {
      return Fail("pairing", std::string("expected an object {\"baseline_runner\": NAME}, got ") +
                                 JsonTypeName(p));
    }
    if (auto r = CheckKeys(p, "pairing", {"baseline_runner", "stepped"}); !r) return r.error();
    if (p.contains("stepped")) {
      if (!p["stepped"].is_boolean()) {
        return Fail("pairing.stepped",
                    std::string("expected true or false, got ") + JsonTypeName(p["stepped"]));
      }
      spec.pairing.stepped = p["stepped"].get<bool>();
    }
    if (!p.contains("baseline_runner")) {
      return Fail("pairing", "missing key 'baseline_runner' (the name of the baseline runner)");
    }
    const json& name = p["baseline_runner"];
    if (!name.is_string()) {
      return Fail("pairing.baseline_runner",
                  std::string("expected a runner name, got ") + JsonTypeName(name));
    }
    std::string names;
    bool known = false;
    for (const RunnerSpec& r : spec.runners) {
      names += (names.empty() ? "'" : ", '") + r.name + "'";
      known = known || r.name == name.get<std::string>();
    }
    if (spec.runners.size() != 2) {
      return Fail("pairing",
                  "pairs exactly two runners (a baseline and a candidate); the spec has " +
                      std::to_string(spec.runners.size()) + " in 'runners'");
    }
    if (!known) {
      return Fail("pairing.baseline_runner", "'" + Abbreviated(name.get<std::string>()) +
                                                 "' is not one of the spec's runners (" + names +
                                                 ")");
    }
    spec.pairing.baseline_runner = name.get<std::string>();
    return Ok();
  }

  // "cooldown": pause_ms, max_temp_c, max_wait_s (into spec.scheduler.cooldown).
  Result<void> ParseCooldown(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("cooldown")) return Ok();
    const json& c = doc["cooldown"];
    if (!c.is_object()) {
      return Fail("cooldown", std::string("expected an object, got ") + JsonTypeName(c));
    }
    if (auto r =
            CheckKeys(c, "cooldown", {"pause_ms", "max_temp_c", "max_wait_s", "max_cpu_busy_pct"});
        !r) {
      return r.error();
    }
    CooldownSpec& cd = spec.scheduler.cooldown;
    if (auto r = ReadUints(c, "cooldown",
                           {{"pause_ms", &cd.pause_ms, 0, 3600 * 1000},
                            {"max_wait_s", &cd.max_wait_s, 0, 24 * 3600}});
        !r) {
      return r.error();
    }
    if (auto r = ReadLimit(c, "max_temp_c", kMaxTempC, "0: no temperature rule", &cd.max_temp_c);
        !r) {
      return r.error();
    }
    return ReadLimit(c, "max_cpu_busy_pct", 100.0, "0: no load rule", &cd.max_cpu_busy_pct);
  }

  // cooldown.KEY, a number in [0, max], into *out when present.
  Result<void> ReadLimit(const json& c, const char* key, double max, const char* zero_means,
                         double* out) const {
    if (!c.contains(key)) return Ok();
    const json& t = c[key];
    const std::string field = std::string("cooldown.") + key;
    if (!t.is_number()) {
      return Fail(field, std::string("expected a number, got ") + JsonTypeName(t));
    }
    const double v = t.get<double>();
    if (!(v >= 0.0 && v <= max)) {
      return Fail(field, Quoted(t) + " is out of range [0, " +
                             std::to_string(static_cast<int>(max)) + "] (" + zero_means + ")");
    }
    *out = v;
    return Ok();
  }

  // "benchmark": runs, the num_threads axis, timeout, accuracy reference.
  Result<void> ParseBenchmark(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("benchmark")) return Ok();
    const json& b = doc["benchmark"];
    if (!b.is_object()) {
      return Fail("benchmark", std::string("expected an object, got ") + JsonTypeName(b));
    }
    if (auto r =
            CheckKeys(b, "benchmark",
                      {"warmup_runs", "num_runs", "num_threads", "timeout_s", "accuracy_reference",
                       "repeats", "order_seed", "profile", "cpu_affinity", "sustained_s"});
        !r) {
      return r.error();
    }
    if (auto r = ReadUints(b, "benchmark",
                           {{"warmup_runs", &spec.benchmark.warmup_runs, 0, kMaxWarmupRuns},
                            {"num_runs", &spec.benchmark.num_runs, 1, kMaxNumRuns}});
        !r) {
      return r.error();
    }
    if (auto r = ParseNumThreads(b, spec); !r) return r.error();
    if (auto r = ReadUints(b, "benchmark",
                           {{"timeout_s", &spec.benchmark.timeout_s, 1, kMaxTimeoutS},
                            {"repeats", &spec.benchmark.repeats, 1, kMaxRepeats},
                            {"order_seed", &spec.benchmark.order_seed, 0, UINT32_MAX}});
        !r) {
      return r.error();
    }
    if (b.contains("accuracy_reference")) {
      const json& a = b["accuracy_reference"];
      if (!a.is_string() || (a.get<std::string>() != "cpu" && a.get<std::string>() != "none")) {
        return Fail("benchmark.accuracy_reference",
                    "expected \"cpu\" or \"none\", got " + Quoted(a));
      }
      spec.benchmark.accuracy_reference = a.get<std::string>();
    }
    if (auto r = ParseCpuAffinity(b, spec); !r) return r.error();
    if (auto r = ParseSustained(b, spec); !r) return r.error();
    return ParseProfile(b, spec);
  }

  // benchmark.cpu_affinity: "big", "little" or a CPU list "0-3,6".
  Result<void> ParseCpuAffinity(const json& b, SweepSpec& spec) const {
    if (!b.contains("cpu_affinity")) return Ok();
    const json& a = b["cpu_affinity"];
    static const std::regex kList("[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*");
    if (!a.is_string() ||
        (a != "big" && a != "little" && !std::regex_match(a.get<std::string>(), kList))) {
      return Fail("benchmark.cpu_affinity",
                  "expected \"big\", \"little\" or a CPU list such as \"0-3,6\", got " + Quoted(a));
    }
    spec.benchmark.cpu_affinity = a.get<std::string>();
    return Ok();
  }

  // benchmark.sustained_s: seconds of sustained mode, for runners that speak
  // our contract (dfarm, tflite). Runners are parsed before.
  Result<void> ParseSustained(const json& b, SweepSpec& spec) const {
    if (!b.contains("sustained_s")) return Ok();
    const json& v = b["sustained_s"];
    constexpr double kMaxS = agent::kMaxSustainedMs / 1000.0;
    if (!v.is_number() || v.get<double>() < 0.1 || v.get<double>() > kMaxS) {
      return Fail("benchmark.sustained_s", "expected seconds from 0.1 to " +
                                               std::to_string(static_cast<int>(kMaxS)) + ", got " +
                                               Quoted(v));
    }
    spec.benchmark.sustained_s = v.get<double>();
    if (spec.benchmark.timeout_s + spec.benchmark.sustained_s > kMaxTimeoutS) {
      return Fail("benchmark.sustained_s",
                  "with timeout_s " + std::to_string(spec.benchmark.timeout_s) +
                      " a job may take longer than the agent's limit of " +
                      std::to_string(kMaxTimeoutS) + " s; lower one of them");
    }
    for (const RunnerSpec& r : spec.runners) {
      if (agent::SpeaksRunnerContract(r.kind)) continue;
      return Fail("benchmark.sustained_s",
                  "runner '" + r.name + "' is of kind '" + r.kind +
                      "', which has no sustained mode (only kinds \"dfarm\" and \"tflite\"); "
                      "leave out benchmark.sustained_s or that runner");
    }
    return Ok();
  }

  // benchmark.profile: a bool; true only when every runner is of kind dfarm
  // (the others have no --profile). Runners are parsed before.
  Result<void> ParseProfile(const json& b, SweepSpec& spec) const {
    if (!b.contains("profile")) return Ok();
    if (!b["profile"].is_boolean()) {
      return Fail("benchmark.profile",
                  std::string("expected true or false, got ") + JsonTypeName(b["profile"]));
    }
    spec.benchmark.profile = b["profile"].get<bool>();
    if (!spec.benchmark.profile) return Ok();
    for (const RunnerSpec& r : spec.runners) {
      if (agent::RunnerKindProfiles(r.kind)) continue;
      return Fail("benchmark.profile",
                  "runner '" + r.name + "' is of kind '" + r.kind +
                      "', which cannot profile (only runners of kind \"dfarm\" take --profile); "
                      "leave out benchmark.profile or that runner");
    }
    return Ok();
  }

  // benchmark.num_threads: one count, or a list of distinct counts (the axis).
  Result<void> ParseNumThreads(const json& b, SweepSpec& spec) const {
    if (!b.contains("num_threads")) return Ok();
    if (!b["num_threads"].is_array()) {
      if (auto r = ReadUints(b, "benchmark",
                             {{"num_threads", &spec.benchmark.num_threads, 1, kMaxNumThreads}});
          !r) {
        return r.error();
      }
      spec.num_threads = {spec.benchmark.num_threads};
      return Ok();
    }
    const json& list = b["num_threads"];
    if (list.empty()) return Fail("benchmark.num_threads", "is an empty list");
    std::set<uint32_t> seen;
    spec.num_threads.clear();
    for (size_t i = 0; i < list.size(); ++i) {
      std::string at = "benchmark.num_threads[" + std::to_string(i) + "]";
      auto v = Uint(list[i], at, 1, kMaxNumThreads);
      if (!v) return v.error();
      if (!seen.insert(*v).second) return Fail(at, "duplicate value " + std::to_string(*v));
      spec.num_threads.push_back(*v);
    }
    spec.benchmark.num_threads = spec.num_threads.front();
    return Ok();
  }

  // "scheduler": retries, backoff, quarantine, failover.
  Result<void> ParseScheduler(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("scheduler")) return Ok();
    const json& s = doc["scheduler"];
    if (!s.is_object()) {
      return Fail("scheduler", std::string("expected an object, got ") + JsonTypeName(s));
    }
    if (auto r =
            CheckKeys(s, "scheduler", {"retries", "backoff_ms", "quarantine_after", "failover"});
        !r) {
      return r.error();
    }
    if (auto r = ReadUints(s, "scheduler",
                           {{"retries", &spec.scheduler.retries, 0, 100},
                            {"backoff_ms", &spec.scheduler.backoff_ms, 0, 600000},
                            {"quarantine_after", &spec.scheduler.quarantine_after, 1, 1000000}});
        !r) {
      return r.error();
    }
    if (s.contains("failover")) {
      const json& f = s["failover"];
      if (!f.is_string() || (f != "none" && f != "same_abi")) {
        return Fail("scheduler.failover",
                    "expected \"none\" or \"same_abi\", got " +
                        (f.is_string() ? "'" + f.get<std::string>() + "'" : JsonTypeName(f)));
      }
      spec.scheduler.failover = f.get<std::string>();
    }
    return Ok();
  }

  // "farm": {"priority": 0..9, "unserved_timeout_s": 0..604800}.
  Result<void> ParseFarm(const json& doc, SweepSpec& spec) const {
    if (!doc.contains("farm")) return Ok();
    const json& f = doc["farm"];
    if (!f.is_object())
      return Fail("farm", std::string("expected an object, got ") + JsonTypeName(f));
    if (auto r = CheckKeys(f, "farm", {"priority", "unserved_timeout_s"}); !r) return r.error();
    return ReadUints(
        f, "farm",
        {{"priority", &spec.farm.priority, static_cast<uint32_t>(store::kRunPriorityMin),
          static_cast<uint32_t>(store::kRunPriorityMax)},
         {"unserved_timeout_s", &spec.farm.unserved_timeout_s, 0,
          static_cast<uint32_t>(store::kUnservedTimeoutMaxS)}});
  }

  // The folder of the spec file, which anchors relative paths.
  fs::path SpecFolder() const { return fs::absolute(fs::path(spec_path_)).parent_path(); }

  // A list of tags: plain names, no duplicates, at least one.
  Result<std::vector<std::string>> ParseTags(const json& v, const std::string& where) const {
    if (!v.is_array()) {
      return Fail(where, std::string("expected an array of tag strings, got ") + JsonTypeName(v));
    }
    if (v.empty()) return Fail(where, "is an empty list of tags");
    std::vector<std::string> tags;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string at = where + "[" + std::to_string(i) + "]";
      if (!v[i].is_string()) {
        return Fail(at, std::string("expected a tag string, got ") + JsonTypeName(v[i]));
      }
      std::string tag = v[i].get<std::string>();
      if (!IsPlainName(tag)) return Fail(at, "tag '" + tag + "' must be [A-Za-z0-9_.-]{1,64}");
      if (std::find(tags.begin(), tags.end(), tag) != tags.end()) {
        return Fail(at, "duplicate tag '" + tag + "'");
      }
      tags.push_back(std::move(tag));
    }
    return tags;
  }

  // {"uri":"tcp://HOST:PORT", "token_file":"lab.token"}: a device with its
  // token file (relative to the spec's folder), read with the agent's rules so
  // that a missing, short or loosely protected file fails here. Returns the URI.
  Result<std::string> ParseDeviceObject(const json& d, const std::string& where,
                                        SweepSpec& spec) const {
    if (auto r = CheckKeys(d, where, {"uri", "token_file"}); !r) return r.error();
    if (!d["uri"].is_string()) {
      return Fail(where + ".uri",
                  std::string("expected a device URI string, got ") + JsonTypeName(d["uri"]));
    }
    std::string name = d["uri"].get<std::string>();
    auto uri = ParseDeviceUri(name);
    if (!uri) return Fail(where + ".uri", uri.message());
    if (!d.contains("token_file")) return name;
    const std::string at = where + ".token_file";
    if (uri->kind != DeviceUri::Kind::kTcp) {
      return Fail(at, "a token file applies to tcp:// devices only; '" + name +
                          "' is reached over a private channel (leave token_file out)");
    }
    if (!d["token_file"].is_string() || d["token_file"].get<std::string>().empty()) {
      return Fail(at, std::string("expected a file name, got ") + JsonTypeName(d["token_file"]));
    }
    fs::path p(d["token_file"].get<std::string>());
    if (p.is_relative()) p = SpecFolder() / p;
    p = p.lexically_normal();
    if (auto token = agent::ReadTokenFile(p.string()); !token) return Fail(at, token.message());
    spec.device_token_files[name] = p.string();
    return name;
  }

  // {"abi":"arm64-v8a"} and/or {"tags":["fast"]}.
  Result<DeviceSelector> ParseSelector(const json& d, const std::string& where) const {
    if (auto r = CheckKeys(d, where, {"abi", "tags", "os", "soc", "min_memory_mb"}); !r) {
      return r.error();
    }
    if (d.empty()) {
      return Fail(where,
                  "a device selector needs one of \"abi\", \"tags\", \"os\", \"soc\", "
                  "\"min_memory_mb\"");
    }
    DeviceSelector sel;
    if (d.contains("abi")) {
      if (!d["abi"].is_string()) {
        return Fail(where + ".abi",
                    std::string("expected a string, got ") + JsonTypeName(d["abi"]));
      }
      sel.abi = d["abi"].get<std::string>();
      if (!IsPlainName(sel.abi)) {
        return Fail(where + ".abi", "ABI '" + sel.abi + "' must be [A-Za-z0-9_.-]{1,64}");
      }
    }
    if (d.contains("tags")) {
      auto tags = ParseTags(d["tags"], where + ".tags");
      if (!tags) return tags.error();
      sel.tags = std::move(*tags);
    }
    for (const char* key : {"os", "soc"}) {
      if (!d.contains(key)) continue;
      const std::string at = where + "." + key;
      if (!d[key].is_string()) {
        return Fail(at, std::string("expected a string, got ") + JsonTypeName(d[key]));
      }
      const std::string v = d[key].get<std::string>();
      if (v.empty() || v.find_first_of(";=") != std::string::npos) {
        return Fail(at, "'" + v + "' must be a non-empty text without ';' or '='");
      }
      (std::string(key) == "os" ? sel.os : sel.soc) = v;
    }
    if (d.contains("min_memory_mb")) {
      const json& m = d["min_memory_mb"];
      if (!m.is_number_unsigned() || m.get<uint64_t>() == 0 || m.get<uint64_t>() > (1ull << 40)) {
        return Fail(where + ".min_memory_mb", "expected a whole number of MiB > 0");
      }
      sel.min_memory_mb = m.get<int64_t>();
    }
    return sel;
  }

  // {"name":"main","builds":{"x86_64":"build/bin/dfarm-runner",...}}.
  Result<RunnerSpec> ParseRunner(const json& r, const std::string& where) const {
    if (!r.is_object()) {
      return Fail(where, std::string("expected an object {\"name\":...,\"builds\":{...}}, got ") +
                             JsonTypeName(r));
    }
    if (auto c = CheckKeys(r, where, {"name", "kind", "builds"}); !c) return c.error();
    if (!r.contains("name")) return Fail(where, "missing key 'name'");
    if (!r["name"].is_string()) {
      return Fail(where + ".name",
                  std::string("expected a string, got ") + JsonTypeName(r["name"]));
    }
    RunnerSpec out;
    out.name = r["name"].get<std::string>();
    if (!IsPlainName(out.name)) {
      return Fail(where + ".name", "runner name '" + out.name + "' must be [A-Za-z0-9_.-]{1,64}");
    }
    if (r.contains("kind")) {
      if (!r["kind"].is_string()) {
        return Fail(where + ".kind",
                    std::string("expected a string, got ") + JsonTypeName(r["kind"]));
      }
      out.kind = r["kind"].get<std::string>();
      if (!agent::IsRunnerKind(out.kind)) {
        return Fail(where + ".kind",
                    "unknown runner kind '" + out.kind +
                        "' (known: dfarm, tflite, benchmark_model, inference_diff)");
      }
    }
    if (!r.contains("builds")) {
      if (out.kind == agent::kRunnerKindDfarm || out.kind == agent::kRunnerKindTflite) return out;
      return Fail(where, "missing key 'builds': a " + out.kind +
                             " runner is a binary you bring; name it per ABI, e.g. "
                             "\"builds\":{\"x86_64\":\"/path/to/" +
                             out.kind + "\"}");
    }
    const json& b = r["builds"];
    if (!b.is_object()) {
      return Fail(where + ".builds",
                  std::string("expected an object {\"ABI\":\"path\"}, got ") + JsonTypeName(b));
    }
    if (b.empty()) return Fail(where + ".builds", "is empty; name one dfarm-runner per ABI");
    for (const auto& [abi, path] : b.items()) {
      std::string at = where + ".builds." + abi;
      if (!IsPlainName(abi)) return Fail(at, "ABI '" + abi + "' must be [A-Za-z0-9_.-]{1,64}");
      if (!path.is_string()) {
        return Fail(at, std::string("expected a path string, got ") + JsonTypeName(path));
      }
      std::string given = path.get<std::string>();
      if (given.empty()) return Fail(at, "empty path");
      fs::path p(given);
      if (p.is_relative()) p = SpecFolder() / p;
      p = p.lexically_normal();
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) {
        return Fail(at, "runner build '" + p.string() + "' is not a file");
      }
      out.builds[abi] = p.string();
    }
    return out;
  }

  // Options given as a list, in spec order: each is a matrix axis.
  using OptionGrid = std::vector<std::pair<std::string, std::vector<std::string>>>;

  // One delegate entry; option lists expand into several configurations.
  Result<std::vector<DelegateSpec>> ParseDelegate(const json& d, const std::string& where) const {
    DelegateSpec out;
    OptionGrid grid;
    if (d.is_string()) {
      out.name = d.get<std::string>();
    } else if (d.is_object()) {
      if (auto r = CheckKeys(d, where, {"name", "options"}); !r) return r.error();
      if (!d.contains("name")) return Fail(where, "missing key 'name'");
      if (!d["name"].is_string()) {
        return Fail(where + ".name",
                    std::string("expected a string, got ") + JsonTypeName(d["name"]));
      }
      out.name = d["name"].get<std::string>();
      if (d.contains("options")) {
        if (auto r = ParseDelegateOptions(d["options"], where + ".options", out, grid); !r) {
          return r.error();
        }
      }
    } else {
      return Fail(where, std::string("expected an object {\"name\":...} or a string, got ") +
                             JsonTypeName(d));
    }
    if (out.name.empty()) return Fail(where, "empty delegate name");
    if (auto r = ResolvePluginPaths(out, grid, where + ".options"); !r) return r.error();
    auto configs = ExpandOptionGrid(out, grid, where + ".options");
    if (!configs) return configs.error();
    for (const DelegateSpec& c : *configs) {
      if (auto r = CheckOptionsSize(c, where + ".options"); !r) return r.error();
    }
    return configs;
  }

  // The options string an agent gets (JobSpec::delegate_options) fits what
  // it takes.
  Result<void> CheckOptionsSize(const DelegateSpec& d, const std::string& where) const {
    const std::string sent = d.AgentOptionsString();
    if (sent.size() <= agent::kMaxDelegateOptionsBytes) return Ok();
    return Fail(where, "'" + sent.substr(0, 32) + "...' is " + std::to_string(sent.size()) +
                           " bytes, more than the agent takes (" +
                           std::to_string(agent::kMaxDelegateOptionsBytes) + ")");
  }

  // A delegate's "options" object (named `where`): scalars into out.options,
  // lists into `grid`.
  Result<void> ParseDelegateOptions(const json& o, const std::string& where, DelegateSpec& out,
                                    OptionGrid& grid) const {
    if (!o.is_object()) {
      return Fail(where, std::string("expected an object, got ") + JsonTypeName(o));
    }
    for (const auto& [key, value] : o.items()) {
      std::string at = where + "." + TerminalSafe(key, 64);
      if (key.empty() || key.find_first_of(":;") != std::string::npos) {
        return Fail(at, "option names must be non-empty and contain no ':' or ';'");
      }
      if (agent::FindControlByte(key) != std::string::npos) {
        return Fail(at, "option names must not contain control characters");
      }
      if (value.is_array()) {
        auto values = OptionValues(value, at);
        if (!values) return values.error();
        grid.emplace_back(key, std::move(*values));
        continue;
      }
      auto v = OptionValue(value, at);
      if (!v) return v.error();
      out.options[key] = *v;
    }
    return Ok();
  }

  // A listed option value: at least one, none twice.
  Result<std::vector<std::string>> OptionValues(const json& list, const std::string& at) const {
    if (list.empty()) return Fail(at, "is an empty list");
    std::vector<std::string> values;
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      std::string at_i = at + "[" + std::to_string(i) + "]";
      auto v = OptionValue(list[i], at_i);
      if (!v) return v.error();
      if (!seen.insert(*v).second) return Fail(at_i, "duplicate value '" + *v + "'");
      values.push_back(std::move(*v));
    }
    return values;
  }

  // A plugin file (`path`, given once or listed) is a host file, relative to
  // the spec's folder; made absolute in place.
  Result<void> ResolvePluginPaths(DelegateSpec& out, OptionGrid& grid,
                                  const std::string& where) const {
    if (auto it = out.options.find(kPluginPathOption); it != out.options.end()) {
      auto resolved = ResolvePluginPath(it->second, where + "." + kPluginPathOption);
      if (!resolved) return resolved.error();
      it->second = *resolved;
    }
    for (auto& [key, values] : grid) {
      if (key != kPluginPathOption) continue;
      for (size_t i = 0; i < values.size(); ++i) {
        auto resolved =
            ResolvePluginPath(values[i], where + "." + key + "[" + std::to_string(i) + "]");
        if (!resolved) return resolved.error();
        values[i] = *resolved;
      }
    }
    return Ok();
  }

  // The cartesian product of `base` over the listed options, the last key
  // varying fastest; at most kMaxDelegateConfigs.
  Result<std::vector<DelegateSpec>> ExpandOptionGrid(const DelegateSpec& base,
                                                     const OptionGrid& grid,
                                                     const std::string& where) const {
    std::vector<DelegateSpec> configs = {base};
    for (const auto& [key, values] : grid) {
      std::vector<DelegateSpec> next;
      for (const DelegateSpec& c : configs) {
        for (const std::string& v : values) {
          DelegateSpec e = c;
          e.options[key] = v;
          next.push_back(std::move(e));
        }
      }
      configs = std::move(next);
      if (configs.size() > kMaxDelegateConfigs) {
        return Fail(where, "expands into more than " + std::to_string(kMaxDelegateConfigs) +
                               " configurations");
      }
    }
    return configs;
  }

  // An absolute, normalized path to an existing regular file.
  Result<std::string> ResolvePluginPath(const std::string& given, const std::string& at) const {
    if (given.empty()) return Fail(at, "empty path");
    fs::path p(given);
    if (p.is_relative()) p = SpecFolder() / p;
    p = p.lexically_normal();
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      return Fail(at, "delegate plugin '" + p.string() + "' is not a file");
    }
    return p.string();
  }

  // A scalar option value as the runner gets it.
  Result<std::string> OptionValue(const json& value, const std::string& at) const {
    std::string v;
    if (value.is_string()) {
      v = value.get<std::string>();
    } else if (value.is_boolean() || value.is_number()) {
      v = value.dump();
    } else {
      return Fail(at, std::string("expected a string, number, boolean or a list of them, got ") +
                          JsonTypeName(value));
    }
    if (v.find(';') != std::string::npos) return Fail(at, "option values must not contain ';'");
    if (size_t i = agent::FindControlByte(v); i != std::string::npos) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(v[i]));
      return Fail(at, std::string("option values must not contain control characters (byte ") +
                          byte + " at offset " + std::to_string(i) + ")");
    }
    return v;
  }

  std::string spec_path_;
};

}  // namespace

std::vector<std::string> PluginPaths(const SweepSpec& spec) {
  std::vector<std::string> paths;
  for (const DelegateSpec& d : spec.delegates) {
    auto it = d.options.find(kPluginPathOption);
    if (it != d.options.end() && std::find(paths.begin(), paths.end(), it->second) == paths.end()) {
      paths.push_back(it->second);
    }
  }
  return paths;
}

namespace {

// "k1:v1;k2:v2" in key order, the plugin path as `plugin` maps it (nullopt:
// left out).
std::string JoinOptions(
    const std::map<std::string, std::string>& options,
    const std::function<std::optional<std::string>(const std::string&)>& plugin) {
  delegates::DelegateOptions listed;
  for (const auto& [k, v] : options) {
    std::optional<std::string> value = v;
    if (k == kPluginPathOption) value = plugin(v);
    if (value) listed.emplace_back(k, std::move(*value));
  }
  return delegates::FormatDelegateOptions(listed);
}

}  // namespace

std::string DelegateSpec::OptionsString() const {
  return JoinOptions(options, [](const std::string& path) { return path; });
}

std::string DelegateSpec::PluginPath() const {
  auto it = options.find(kPluginPathOption);
  return it == options.end() ? std::string() : it->second;
}

std::string DelegateSpec::ShownOptionsString() const {
  return JoinOptions(options, [](const std::string& path) {
    return std::optional<std::string>(fs::path(path).filename().string());
  });
}

std::string DelegateSpec::AgentOptionsString() const {
  return JoinOptions(options, [](const std::string&) { return std::optional<std::string>(); });
}

std::string SweepSpec::ToJson() const {
  json doc;
  doc["name"] = name;
  doc["models"] = json::array();
  for (const ModelSpec& m : models) {
    if (m.eval) {
      doc["models"].push_back({{"path", m.path}, {"eval", m.eval->ToJson()}});
    } else if (!m.eval_given.empty()) {
      doc["models"].push_back({{"path", m.path}, {"eval", json::parse(m.eval_given)}});
    } else if (m.inputs.empty()) {
      doc["models"].push_back(m.path);
    } else {
      doc["models"].push_back({{"path", m.path}, {"inputs", m.inputs.ToJson()}});
    }
  }
  doc["delegates"] = json::array();
  for (const DelegateSpec& d : delegates) {
    json o = {{"name", d.name}};
    if (!d.options.empty()) o["options"] = d.options;
    doc["delegates"].push_back(o);
  }
  doc["devices"] = json::array();
  for (const std::string& d : devices) {
    auto token_file = device_token_files.find(d);
    if (token_file == device_token_files.end()) {
      doc["devices"].push_back(d);
    } else {
      doc["devices"].push_back({{"uri", d}, {"token_file", token_file->second}});
    }
  }
  for (const DeviceSelector& sel : device_selectors) {
    json o = json::object();
    if (!sel.abi.empty()) o["abi"] = sel.abi;
    if (!sel.tags.empty()) o["tags"] = sel.tags;
    if (!sel.os.empty()) o["os"] = sel.os;
    if (!sel.soc.empty()) o["soc"] = sel.soc;
    if (sel.min_memory_mb > 0) o["min_memory_mb"] = sel.min_memory_mb;
    doc["devices"].push_back(o);
  }
  if (!device_tags.empty()) doc["device_tags"] = device_tags;
  if (!device_classes.empty()) doc["device_classes"] = device_classes;
  if (!runners.empty()) {
    doc["runners"] = json::array();
    for (const RunnerSpec& r : runners) {
      json entry = {{"name", r.name}};
      if (r.kind != agent::kRunnerKindDfarm) entry["kind"] = r.kind;
      if (!r.builds.empty()) entry["builds"] = r.builds;
      doc["runners"].push_back(std::move(entry));
    }
  }
  if (pairing.enabled()) {
    doc["pairing"] = {{"baseline_runner", pairing.baseline_runner}};
    if (!pairing.stepped) doc["pairing"]["stepped"] = false;
  }
  doc["benchmark"] = {
      {"warmup_runs", benchmark.warmup_runs},
      {"num_runs", benchmark.num_runs},
      {"num_threads", num_threads.size() == 1 ? json(num_threads.front()) : json(num_threads)},
      {"timeout_s", benchmark.timeout_s},
      {"accuracy_reference", benchmark.accuracy_reference},
      {"repeats", benchmark.repeats},
      {"order_seed", benchmark.order_seed}};
  if (benchmark.profile) doc["benchmark"]["profile"] = true;
  if (!benchmark.cpu_affinity.empty()) doc["benchmark"]["cpu_affinity"] = benchmark.cpu_affinity;
  if (benchmark.sustained_s > 0) doc["benchmark"]["sustained_s"] = benchmark.sustained_s;
  doc["scheduler"] = {{"retries", scheduler.retries},
                      {"backoff_ms", scheduler.backoff_ms},
                      {"quarantine_after", scheduler.quarantine_after},
                      {"failover", scheduler.failover}};
  doc["farm"] = {{"priority", farm.priority}, {"unserved_timeout_s", farm.unserved_timeout_s}};
  doc["cooldown"] = {{"pause_ms", scheduler.cooldown.pause_ms},
                     {"max_temp_c", scheduler.cooldown.max_temp_c},
                     {"max_wait_s", scheduler.cooldown.max_wait_s},
                     {"max_cpu_busy_pct", scheduler.cooldown.max_cpu_busy_pct}};
  return doc.dump();
}

std::string HostAbi() {
  utsname u{};
  if (::uname(&u) != 0) return "unknown";
  std::string m = u.machine;
  if (m == "x86_64" || m == "amd64") return "x86_64";
  if (m == "aarch64" || m == "arm64") return kArm64Abi;
  return m;
}

std::string Arm64BuildOf(const std::string& host_program) {
  fs::path p(host_program);
  return (p.parent_path().parent_path() / "arm64" / "bin" / p.filename()).string();
}

Result<void> CheckDeviceName(const std::string& name) {
  auto uri = ParseDeviceUri(name);
  if (!uri) return uri.error();
  return Ok();
}

Result<SweepSpec> ParseSpec(const std::string& text, const std::string& spec_path) {
  try {
    return Parser(spec_path).Parse(text);
  } catch (const std::exception& e) {  // nlohmann type errors we did not foresee
    return MakeError(ErrorKind::kInvalidInput, "spec '" + spec_path + "': " + e.what());
  }
}

Result<SweepSpec> LoadSpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorKind::kInvalidInput, "spec '" + path + "': cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseSpec(text.str(), path);
}

}  // namespace dfarm::harness
