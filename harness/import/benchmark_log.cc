// Parsers of benchmark_model's and inference_diff's text output (benchmark_log.h).
#include "harness/import/benchmark_log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <sstream>

#include "agent/protocol/runner_kinds.h"
#include "agent/protocol/status.h"

namespace dfarm::harness {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A number at the start of `s` ("870557", "7.07479", "1.96e-05", "89.270%").
std::optional<double> Number(std::string_view s) {
  const std::string text(Trim(s));
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// The lines of `text`, the "#" lines at its very start left out.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  bool at_start = true;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (at_start && StartsWith(line, "#")) continue;
    at_start = false;
    lines.push_back(line);
  }
  return lines;
}

// Strips what a logger puts before a message: an Android logcat prefix
// ("05-31 10:31:13.022 21767 21767 I tflite  : "), a TFLite level ("INFO: ",
// "VERBOSE: "...), LiteRT's source location ("[benchmark_litert_model.h:94] ").
std::string_view StripPrefixes(std::string_view line) {
  static const std::regex kLogcat(
      R"(^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+\S+\s*: ?)");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(line.begin(), line.end(), m, kLogcat)) line.remove_prefix(m.length(0));
  for (std::string_view level : {"INFO: ", "VERBOSE: ", "WARNING: ", "ERROR: "}) {
    if (StartsWith(line, level)) {
      line.remove_prefix(level.size());
      break;
    }
  }
  static const std::regex kSource(R"(^\[[\w./-]+:\d+\] ?)");
  if (std::regex_search(line.begin(), line.end(), m, kSource)) line.remove_prefix(m.length(0));
  return line;
}

// "Init: 870557, First inference: 130565" -> {{"Init", 870557}, ...}.
std::vector<std::pair<std::string, double>> NamedFields(std::string_view list) {
  std::vector<std::pair<std::string, double>> fields;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view field = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const size_t colon = field.rfind(':');
    if (colon == std::string_view::npos) continue;
    if (auto v = Number(field.substr(colon + 1))) {
      fields.emplace_back(std::string(Trim(field.substr(0, colon))), *v);
    }
  }
  return fields;
}

// "count=50 first=1 curr=2 min=1 max=3 avg=2 std=0" -> the stat line.
BenchmarkRunStats RunStats(std::string_view s) {
  BenchmarkRunStats r;
  std::istringstream in{std::string(s)};
  std::string token;
  while (in >> token) {
    const size_t eq = token.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = token.substr(0, eq);
    const double v = Number(std::string_view(token).substr(eq + 1)).value_or(0);
    if (key == "count") r.count = static_cast<int64_t>(v);
    if (key == "first") r.first_us = v;
    if (key == "curr") r.curr_us = v;
    if (key == "min") r.min_us = v;
    if (key == "max") r.max_us = v;
    if (key == "avg") r.avg_us = v;
    if (key == "std") r.std_us = v;
  }
  return r;
}

// A TensorFlow Lite delegate in the names a sweep's jobs use: ours
// (delegates/delegate_names.h: xnnpack, gpu for Metal, OpenCL, OpenGL), the
// tool runners' nnapi and hexagon (agent::kToolDelegateNames), so an
// imported log matches a sweep of the same tool; Core ML and any other
// kernel are "external" with the option kind naming it; an EXTERNAL
// delegate (a plugin library) is "external" without one.
struct NamedDelegate {
  std::string name;
  std::string kind;
};

// A delegate word or kernel the tools print; unset for another word.
std::optional<NamedDelegate> KnownDelegate(std::string_view word) {
  const std::string w = Lower(word);
  if (Contains(w, "xnnpack")) return NamedDelegate{"xnnpack", ""};
  for (std::string_view gpu : {"gpu", "metal", "opencl", "opengl"}) {
    if (Contains(w, gpu)) return NamedDelegate{"gpu", ""};
  }
  for (std::string_view tool : agent::kToolDelegateNames) {
    if (Contains(w, tool)) return NamedDelegate{std::string(tool), ""};
  }
  if (Contains(w, "coreml")) return NamedDelegate{"external", "coreml"};
  if (Contains(w, "core ml")) return NamedDelegate{"external", "coreml"};
  if (Contains(w, "external")) return NamedDelegate{"external", ""};
  return std::nullopt;
}

// A delegate kernel ("TfLiteXNNPackDelegate"): an unknown one is an
// external delegate of that kind.
NamedDelegate OurDelegate(std::string_view kernel) {
  return KnownDelegate(kernel).value_or(NamedDelegate{"external", std::string(Trim(kernel))});
}

// What TensorFlow Lite's own lines say of the delegate (both tools print
// them): the delegate created, applied and the nodes it took.
struct DelegateLines {
  std::optional<NamedDelegate> flag;     // "Use X: [1]", "External delegate path: [...]"
  std::optional<NamedDelegate> applied;  // "Explicitly applied X delegate"
  std::optional<NamedDelegate> created;  // a creation line of another than XNNPACK
  bool created_xnnpack = false;          // TFLite creates XNNPACK by default
  bool default_failed = false;           // "Ignoring failed application of the default ..."
  std::string execution;                 // BenchmarkLog::delegate_execution
  std::vector<BenchmarkDelegation> delegations;

  void Created(const NamedDelegate& d) {
    if (d.name == "xnnpack") {
      created_xnnpack = true;
    } else if (!created) {
      created = d;
    }
  }
  bool Handle(std::string_view line);
  // The delegate the lines name (strongest first: the flag, the applied
  // line, the first Replacing line's kernel, a creation line); unset when none.
  std::optional<NamedDelegate> Named() const;
};

bool HandleReplacing(std::string_view line, DelegateLines& d) {
  static const std::regex kReplacing(
      R"(Replacing (\d+) (?:out of (\d+) )?node\(s\) with delegate \(([^)]+)\) node, yielding (\d+) partition)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, kReplacing)) return false;
  BenchmarkDelegation r;
  r.delegated_nodes = std::atoll(m[1].str().c_str());
  r.total_nodes = m[2].matched ? std::atoll(m[2].str().c_str()) : 0;
  r.kernel = m[3].str();
  r.partitions = std::atoll(m[4].str().c_str());
  d.delegations.push_back(std::move(r));
  return true;
}

bool HandleExecution(std::string_view line, DelegateLines& d) {
  static const std::regex kExplicit(
      R"(Explicitly applied (\w+) delegate|Though (\w+) delegate is explicitly applied)");
  std::match_results<std::string_view::const_iterator> m;
  if (!Contains(line, "executed by the delegate")) return false;
  if (Contains(line, "completely executed")) d.execution = "completely";
  if (Contains(line, "partially executed")) d.execution = "partially";
  if (Contains(line, "will not be executed")) d.execution = "not";
  if (std::regex_search(line.begin(), line.end(), m, kExplicit) && !d.applied) {
    d.applied = OurDelegate(m[1].matched ? m[1].str() : m[2].str());
  }
  return true;
}

// "Created TensorFlow Lite XNNPACK delegate for CPU.", "Created TensorFlow
// Lite delegate for GPU." (NNAPI, Hexagon, Metal), the tools' "GPU delegate
// created." / "GPU delegate is created." (XNNPACK, NNAPI, Hexagon, EXTERNAL,
// CoreML), "Created 1 GPU delegate kernels.", Hexagon's "Hexagon delegate: N
// nodes delegated out of M nodes.".
bool HandleCreation(std::string_view line, DelegateLines& d) {
  static const std::regex kCreatedFor(R"(^Created TensorFlow Lite (?:(\w+) )?delegate for (\w+))");
  static const std::regex kToolCreated(
      R"(^(XNNPACK|GPU|NNAPI|Hexagon|EXTERNAL|CoreML|Core ML) delegate (?:is )?created)",
      std::regex::icase);
  static const std::regex kHexagon(
      R"(^Hexagon delegate: (\d+) nodes delegated out of (\d+) nodes)");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(line.begin(), line.end(), m, kCreatedFor)) {
    d.Created(OurDelegate(m[1].matched ? m[1].str() : m[2].str()));
  } else if (std::regex_search(line.begin(), line.end(), m, kToolCreated)) {
    d.Created(OurDelegate(m[1].str()));
  } else if (StartsWith(line, "Created ") && Contains(line, " GPU delegate kernels")) {
    d.Created({"gpu", ""});
  } else if (std::regex_search(line.begin(), line.end(), m, kHexagon)) {
    d.Created({"hexagon", ""});
    if (std::atoll(m[1].str().c_str()) == 0) {  // no Replacing line follows: the count is here
      d.delegations.push_back({"TfLiteHexagonDelegate", 0, std::atoll(m[2].str().c_str()), 0});
      d.execution = "not";
    }
  } else if (StartsWith(line, "Ignoring failed application of the default TensorFlow Lite")) {
    d.default_failed = true;
  } else {
    return false;
  }
  return true;
}

bool DelegateLines::Handle(std::string_view line) {
  return HandleReplacing(line, *this) || HandleExecution(line, *this) ||
         HandleCreation(line, *this);
}

std::optional<NamedDelegate> DelegateLines::Named() const {
  if (flag) return flag;
  if (applied) return applied;
  if (!delegations.empty()) return OurDelegate(delegations.front().kernel);
  if (created) return created;
  if (created_xnnpack) return NamedDelegate{"xnnpack", ""};
  return std::nullopt;
}

// Fills the delegate fields of a log from its lines. A delegate that took
// no node (the "will not be executed" line, a default delegate whose
// application failed, Hexagon's "0 nodes delegated") keeps its name with
// delegate_execution "not".
void FinishDelegate(const DelegateLines& d, std::string& name,
                    std::map<std::string, std::string>& options, std::string& execution) {
  auto named = d.Named();
  if (!named) return;
  name = named->name;
  if (!named->kind.empty()) options["kind"] = named->kind;
  execution = d.execution;
  const bool default_only = !d.flag && !d.applied && !d.created && name == "xnnpack";
  if (d.default_failed && default_only) execution = "not";
}

enum class Section { kNone, kInit, kRegular };

struct State {
  BenchmarkLog log;
  std::vector<BenchmarkRunStats> stats;  // the top-level stat lines, in order
  std::optional<BenchmarkRunStats> profile_timings;
  std::optional<double> timings_mean_us;  // "Inference (avg)" of a timings line
  bool have_timings_line = false;
  bool litert_inference = false;
  Section section = Section::kNone;
  bool in_summary = false;
  DelegateLines delegate;
};

bool HandleTimings(std::string_view line, State& st) {
  runner::Metrics& m = st.log.metrics;
  if (StartsWith(line, "Inference timings in us:")) {
    for (const auto& [name, v] : NamedFields(line.substr(line.find(':') + 1))) {
      if (name == "Init") m.init_us = v;
      if (name == "First inference") m.first_us = v;
      if (name == "Warmup (avg)") m.warmup_mean_us = v;
      if (name == "Inference (avg)") st.timings_mean_us = v;
    }
  } else if (StartsWith(line, "Average inference timings in us:")) {
    st.log.format = "tflite-1.x";
    for (const auto& [name, v] : NamedFields(line.substr(line.find(':') + 1))) {
      if (name == "Warmup") m.warmup_mean_us = v;
      if (name == "Init") m.init_us = v;
      if (name == "Inference") st.timings_mean_us = v;
    }
  } else {
    return false;
  }
  st.have_timings_line = st.timings_mean_us.has_value();
  return true;
}

bool HandleStats(std::string_view line, State& st) {
  if (StartsWith(line, "count=")) {
    st.stats.push_back(RunStats(line));
    return true;
  }
  if (StartsWith(line, "Timings (microseconds):")) {
    if (st.section != Section::kInit) st.profile_timings = RunStats(line.substr(23));
    return true;
  }
  return false;
}

bool HandleMemory(std::string_view line, State& st) {
  BenchmarkLog& log = st.log;
  static const std::regex kDelta(R"(init=([0-9.eE+-]+)\s+overall=([0-9.eE+-]+))");
  std::match_results<std::string_view::const_iterator> m;
  if (StartsWith(line, "Memory footprint delta from the start of the tool")) {
    if (std::regex_search(line.begin(), line.end(), m, kDelta)) {
      log.init_footprint_mb = Number(m[1].str());
      log.overall_footprint_mb = Number(m[2].str());
    }
  } else if (StartsWith(line, "Overall peak memory footprint (MB) via periodic monitoring:")) {
    log.peak_memory_mb = Number(line.substr(line.rfind(':') + 1));
  } else if (StartsWith(line, "Init footprint:")) {
    log.init_footprint_mb = Number(line.substr(15));
  } else if (StartsWith(line, "Overall footprint:")) {
    log.overall_footprint_mb = Number(line.substr(18));
  } else if (StartsWith(line, "Peak memory usage") && !Contains(line, "not available")) {
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) log.peak_memory_mb = Number(line.substr(colon + 1));
  } else {
    return false;
  }
  return true;
}

// LiteRT's benchmark_litert_model results, in milliseconds.
bool HandleLiteRt(std::string_view line, State& st) {
  static const std::regex kLine(
      R"(^(Model initialization|Warmup \(first\)|Warmup \(avg\)|Inference \((?:avg|min|max|std)\)):\s+([0-9.eE+-]+)(?: ms)?(?: \((\d+) runs\))?)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, kLine)) return false;
  st.log.format = "litert";
  runner::Metrics& out = st.log.metrics;
  const std::string name = m[1].str();
  const double us = Number(m[2].str()).value_or(0) * 1000.0;
  if (name == "Model initialization") out.init_us = us;
  if (name == "Warmup (first)") out.first_us = us;
  if (name == "Warmup (avg)") out.warmup_mean_us = us;
  if (name == "Inference (min)") out.min_us = us;
  if (name == "Inference (max)") out.max_us = us;
  if (name == "Inference (std)") out.std_us = us;  // printed without a unit; ms like the rest
  if (name == "Inference (avg)") {
    out.mean_us = us;
    if (m[3].matched) out.num_runs = std::atoll(m[3].str().c_str());
    st.litert_inference = true;
  }
  return true;
}

// A flag echo "Name: [value]" (not a profiling row, which starts with blanks).
bool HandleFlag(std::string_view line, State& st) {
  static const std::regex kFlag(R"(^([A-Za-z#][^:\[\]]*): \[(.*)\]$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(line.begin(), line.end(), m, kFlag)) return false;
  const std::string name = m[1].str();
  const std::string value = m[2].str();
  st.log.flags.emplace_back(name, value);
  if (name == "Graph") st.log.graph = value;
  const std::string lower = Lower(name);
  const bool on = value == "1" || value == "true";
  if (StartsWith(lower, "use ") && on && !st.delegate.flag) {
    st.delegate.flag = KnownDelegate(lower.substr(4));
  }
  if (lower == "external delegate path" && !value.empty()) {
    st.delegate.flag = NamedDelegate{"external", ""};
  }
  return true;
}

// A row of "Summary by node type": TYPE COUNT AVG_MS AVG% CDF% MEM_KB TIMES_CALLED
// (TYPE may hold blanks: XNNPACK's "Convolution (NHWC, QC8) GEMM").
std::optional<BenchmarkOpTypeProfile> OpTypeRow(std::string_view line) {
  std::istringstream in{std::string(line)};
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  if (tokens.size() < 7) return std::nullopt;
  const size_t n = tokens.size() - 6;
  std::vector<double> v;
  for (size_t i = n; i < tokens.size(); ++i) {
    auto x = Number(tokens[i]);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  BenchmarkOpTypeProfile row;
  for (size_t i = 0; i < n; ++i) row.node_type += (i ? " " : "") + tokens[i];
  row.count = static_cast<int64_t>(v[0]);
  row.avg_ms = v[1];
  row.avg_pct = v[2];
  row.cdf_pct = v[3];
  row.mem_kb = v[4];
  row.times_called = static_cast<int64_t>(v[5]);
  return row;
}

bool HandleProfile(std::string_view line, State& st) {
  if (Contains(line, "Profiling Info for Benchmark Initialization")) {
    st.section = Section::kInit;
  } else if (Contains(line, "Profiling Info for Regular Benchmark Runs")) {
    st.section = Section::kRegular;
  } else if (StartsWith(line, "Number of nodes executed:")) {
    if (st.section != Section::kInit && st.log.nodes_executed == 0) {
      st.log.nodes_executed = static_cast<int64_t>(Number(line.substr(25)).value_or(0));
    }
  } else if (Contains(line, "Summary by node type")) {
    st.in_summary = st.section != Section::kInit && st.log.op_profile.empty();
  } else if (st.in_summary) {
    if (Contains(line, "[Node type]")) return true;
    auto row = OpTypeRow(line);
    if (row) st.log.op_profile.push_back(std::move(*row));
    st.in_summary = row.has_value();
  } else {
    return false;
  }
  return true;
}

bool HandleFailure(std::string_view line, State& st) {
  if (StartsWith(line, "Failed to ")) {
    if (st.log.failure.empty() || st.log.failure == "Benchmarking failed.") {
      st.log.failure = std::string(Trim(line));
    }
    return true;
  }
  if (StartsWith(line, "Benchmarking failed.")) {
    if (st.log.failure.empty()) st.log.failure = "Benchmarking failed.";
    return true;
  }
  return false;
}

void HandleLine(std::string_view raw, State& st) {
  const std::string_view line = StripPrefixes(raw);
  if (HandleProfile(line, st)) return;
  if (HandleTimings(line, st) || HandleStats(line, st) || HandleMemory(line, st)) return;
  if (HandleLiteRt(line, st) || st.delegate.Handle(line) || HandleFailure(line, st)) return;
  if (HandleFlag(line, st)) return;
  if (StartsWith(line, "Loaded model ") && st.log.graph.empty()) {
    st.log.graph = std::string(Trim(line.substr(13)));
  }
}

// The metrics from what the lines gave: the timings line wins for the
// means, the stat lines give the spread and the counts.
void Finish(State& st) {
  BenchmarkLog& log = st.log;
  if (log.format.empty()) log.format = "tflite";
  if (st.stats.size() >= 2) log.warmup = st.stats.front();
  if (!st.stats.empty()) log.inference = st.stats.back();
  if (!log.inference && st.profile_timings && st.profile_timings->count > 1) {
    log.inference = st.profile_timings;  // older versions: the profiled runs are the measured ones
  }
  runner::Metrics& m = log.metrics;
  if (log.inference) {
    m.num_runs = log.inference->count;
    m.min_us = log.inference->min_us;
    m.max_us = log.inference->max_us;
    m.std_us = log.inference->std_us;
    m.mean_us = log.inference->avg_us;
  }
  if (log.warmup) {
    if (m.first_us == 0) m.first_us = log.warmup->first_us;
    if (m.warmup_mean_us == 0) m.warmup_mean_us = log.warmup->avg_us;
  }
  if (st.timings_mean_us) m.mean_us = *st.timings_mean_us;
  if (log.peak_memory_mb) {
    m.peak_rss_bytes = static_cast<int64_t>(std::llround(*log.peak_memory_mb * 1024 * 1024));
  }
  log.delegations = st.delegate.delegations;
  FinishDelegate(st.delegate, log.delegate, log.delegate_options, log.delegate_execution);
}

}  // namespace

Result<BenchmarkLog> ParseBenchmarkModelLog(std::string_view text) {
  State st;
  for (std::string_view line : Lines(text)) HandleLine(line, st);
  Finish(st);
  const bool timed = st.have_timings_line || !st.stats.empty() || st.litert_inference;
  if (!timed && st.log.failure.empty()) {
    return MakeError(ErrorKind::kInvalidInput,
                     "no inference timing: none of benchmark_model's 'Inference timings in "
                     "us' or 'Average inference timings in us' lines, a 'count=... avg=...' "
                     "line of the measured runs, LiteRT's 'Inference (avg)', nor a failure "
                     "line ('Failed to ...', 'Benchmarking failed.')");
  }
  return std::move(st.log);
}

std::string BenchmarkLogStatus(const BenchmarkLog& log) {
  if (log.failure.empty()) return JobStatusName(JobStatus::kOk);
  const std::string f = Lower(log.failure);
  if (Contains(f, "delegate")) return JobStatusName(JobStatus::kDelegateError);
  for (std::string_view word : {"model", "allocate", "tensor", "mmap", "interpreter", "graph"}) {
    if (Contains(f, word)) return JobStatusName(JobStatus::kModelError);
  }
  return JobStatusName(JobStatus::kCrashed);
}

namespace {

std::optional<InferenceDiffLatency> DiffLatency(std::string_view line) {
  static const std::regex kLatency(R"(avg=([0-9.eE+-]+)\s*\(us\),\s*std_dev=([0-9.eE+-]+))");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, kLatency)) return std::nullopt;
  return InferenceDiffLatency{Number(m[1].str()).value_or(0), Number(m[2].str()).value_or(0)};
}

}  // namespace

Result<InferenceDiffLog> ParseInferenceDiffLog(std::string_view text) {
  static const std::regex kOutput(
      R"(^OutputDiff\[(\d+)\]: avg_error=([0-9.eE+-]+|nan|inf), std_dev=([0-9.eE+-]+|nan|inf))");
  InferenceDiffLog log;
  DelegateLines delegate;
  bool have_test = false;
  for (std::string_view raw : Lines(text)) {
    const std::string_view line = StripPrefixes(raw);
    std::match_results<std::string_view::const_iterator> m;
    if (StartsWith(line, "Num evaluation runs:")) {
      log.num_runs = static_cast<int64_t>(Number(line.substr(20)).value_or(0));
    } else if (StartsWith(line, "Reference run latency:")) {
      log.reference = DiffLatency(line).value_or(InferenceDiffLatency{});
    } else if (StartsWith(line, "Test run latency:")) {
      auto l = DiffLatency(line);
      have_test = l.has_value();
      log.test = l.value_or(InferenceDiffLatency{});
    } else if (delegate.Handle(line)) {
      continue;
    } else if (std::regex_search(line.begin(), line.end(), m, kOutput)) {
      runner::OutputAccuracy out;
      out.index = std::atoll(m[1].str().c_str());
      out.mean_abs_error = std::strtod(m[2].str().c_str(), nullptr);
      out.std_abs_error = std::strtod(m[3].str().c_str(), nullptr);
      log.outputs.push_back(std::move(out));
    }
  }
  if (!have_test) {
    return MakeError(ErrorKind::kInvalidInput,
                     "no 'Test run latency: avg=...(us), std_dev=...(us)' line: not "
                     "inference_diff output");
  }
  if (log.outputs.empty()) {
    return MakeError(ErrorKind::kInvalidInput,
                     "no 'OutputDiff[i]: avg_error=..., std_dev=...' line: not inference_diff "
                     "output");
  }
  std::string execution;
  FinishDelegate(delegate, log.delegate, log.delegate_options, execution);
  return log;
}

namespace {

// The threads the log says the CPU ran with ("#threads used for CPU
// inference", else "Num threads"); 0 when it says neither.
int64_t ThreadsUsed(const BenchmarkLog& log) {
  int64_t threads = 0;
  for (const auto& [name, value] : log.flags) {
    if (name != "#threads used for CPU inference" && !(name == "Num threads" && threads == 0)) {
      continue;
    }
    if (auto v = Number(value); v && *v > 0) threads = static_cast<int64_t>(*v);
  }
  return threads;
}

// The placement the "Replacing N out of M node(s) ..." lines tell: counts,
// not which nodes, so the entries are numbered in order, the N delegated
// first (op unknown, partition unknown), then the M - N left on the CPU. M
// is the first line's (later lines count the graph after an earlier
// delegate); without it only the delegated nodes are listed. A delegate
// that took no node (delegate_execution "not") places every node on the CPU:
// M from the first delegation line, else the regular runs' profiled node
// count, else none listed (the count unknown). Unset when the log tells
// neither.
std::optional<store::JobPlacement> PlacementOf(const BenchmarkLog& log) {
  const bool none = log.delegate_execution == "not";
  if (log.delegations.empty() && !none) return std::nullopt;
  store::JobPlacement p;
  int64_t delegated = 0;
  for (const BenchmarkDelegation& d : log.delegations) {
    if (none) break;
    p.partitions += d.partitions;
    delegated += d.delegated_nodes;
  }
  int64_t total = log.delegations.empty() ? 0 : log.delegations.front().total_nodes;
  if (none && total == 0) total = log.nodes_executed;
  total = std::max(total, delegated);
  const std::string delegate =
      log.delegate.empty() ? OurDelegate(log.delegations.front().kernel).name : log.delegate;
  for (int64_t i = 0; i < total || (total == 0 && i < delegated); ++i) {
    store::PlacementNode n;
    n.index = i;
    n.delegate = i < delegated ? delegate : "cpu";
    p.nodes.push_back(std::move(n));
  }
  return p;
}

}  // namespace

RunnerOutput BenchmarkRunnerOutput(const BenchmarkLog& log) {
  RunnerOutput out;
  out.status = BenchmarkLogStatus(log);
  out.error = log.failure;
  if (log.failure.empty()) out.metrics = store::JobMetrics{log.metrics, ThreadsUsed(log)};
  out.placement = PlacementOf(log);
  return out;
}

RunnerOutput InferenceDiffRunnerOutput(const InferenceDiffLog& log) {
  RunnerOutput out;
  out.status = JobStatusName(JobStatus::kOk);
  store::JobMetrics m;
  m.mean_us = log.test.avg_us;
  m.std_us = log.test.std_us;
  m.num_runs = log.num_runs;
  out.metrics = m;
  store::Accuracy accuracy;
  accuracy.reference = "cpu";  // the tool's reference run: the CPU, one thread
  for (runner::OutputAccuracy o : log.outputs) {
    // Figures the tool does not compute: NaN, which the store keeps as NULL.
    o.max_abs_error = std::numeric_limits<double>::quiet_NaN();
    o.rmse = std::numeric_limits<double>::quiet_NaN();
    accuracy.outputs.push_back(std::move(o));
  }
  std::sort(accuracy.outputs.begin(), accuracy.outputs.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  out.accuracy = std::move(accuracy);
  return out;
}

Result<RunnerOutput> ToolRunnerOutput(std::string_view kind, std::string_view text) {
  if (kind == agent::kRunnerKindBenchmarkModel) {
    auto log = ParseBenchmarkModelLog(text);
    if (!log) return MakeError(log.error().kind, "benchmark_model log: " + log.message());
    return BenchmarkRunnerOutput(*log);
  }
  if (kind == agent::kRunnerKindInferenceDiff) {
    auto log = ParseInferenceDiffLog(text);
    if (!log) return MakeError(log.error().kind, "inference_diff log: " + log.message());
    return InferenceDiffRunnerOutput(*log);
  }
  return MakeError(ErrorKind::kInvalidInput,
                   "runner kind '" + std::string(kind) + "' prints no tool log (only '" +
                       std::string(agent::kRunnerKindBenchmarkModel) + "' and '" +
                       std::string(agent::kRunnerKindInferenceDiff) + "' do)");
}

}  // namespace dfarm::harness
