#include "delegates/conformance/conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "delegates/delegate_names.h"
#include "delegates/delegate_options.h"
#include "delegates/registry.h"
#include "runtime/interpreter.h"
#include "runtime/model.h"
#include "runtime/op_resolver.h"

namespace dfarm::conformance {
namespace {

using runtime::Status;

struct Outputs {
  std::vector<std::vector<float>> values;
  runtime::Placement placement;
};

// `delegate` created from the registry.
Status CreateDelegate(const DelegateUnderTest& delegate, std::unique_ptr<runtime::Delegate>* out) {
  const delegates::RegisteredDelegate* entry = nullptr;
  DFARM_RETURN_IF_ERROR(delegates::FindDelegate(delegate.name, &entry));
  DFARM_RETURN_IF_ERROR(delegates::CheckDelegateOptions(*entry, delegate.options));
  if (entry->create == nullptr) {
    return Status::Error("delegate '" + delegate.name + "' only adds kernels");
  }
  return entry->create(delegate.options, out);
}

// The model's outputs as floats (float32 outputs only).
Status CopyOutputs(const runtime::Interpreter& interpreter, Outputs* out) {
  out->values.clear();
  for (const runtime::Tensor* t : interpreter.outputs()) {
    if (t->dtype != runtime::DType::kFloat32) {
      return Status::Error("output " + runtime::DescribeTensor(*t) + " is not float32");
    }
    const float* p = t->data_as<float>();
    out->values.emplace_back(p, p + t->num_elements());
  }
  out->placement = interpreter.placement();
  return Status::Ok();
}

// Fills the float32 inputs with the seeded values every run of a case gets:
// uniform in [lo, hi] from a fixed seed.
Status FillInputs(runtime::Interpreter& interpreter, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(lo, hi);
  for (runtime::Tensor* t : interpreter.inputs()) {
    if (t->dtype != runtime::DType::kFloat32) {
      return Status::Error("input " + runtime::DescribeTensor(*t) + " is not float32");
    }
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data_as<float>()[i] = u(rng);
  }
  return Status::Ok();
}

// Runs `bytes` once with `delegate` (null: reference kernels only) on
// uniform inputs in [lo, hi] from a fixed seed.
Status Run(const std::vector<uint8_t>& bytes, const std::string& name,
           const DelegateUnderTest* delegate, float lo, float hi, Outputs* out) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer(name, bytes, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  std::unique_ptr<runtime::Delegate> d;
  if (delegate != nullptr) DFARM_RETURN_IF_ERROR(CreateDelegate(*delegate, &d));
  runtime::Interpreter interpreter(*model, resolver);
  if (d != nullptr) interpreter.AddDelegate(d.get());
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  DFARM_RETURN_IF_ERROR(FillInputs(interpreter, lo, hi));
  DFARM_RETURN_IF_ERROR(interpreter.Invoke());
  return CopyOutputs(interpreter, out);
}

// Max |a - b|; false (with `why`) when an element is out of tolerance.
bool Compare(const Outputs& ref, const Outputs& got, const Tolerance& tol, double* max_abs,
             std::string* why) {
  *max_abs = 0.0;
  bool ok = true;
  for (size_t o = 0; o < ref.values.size(); ++o) {
    for (size_t i = 0; i < ref.values[o].size(); ++i) {
      const double r = ref.values[o][i], g = got.values[o][i];
      const double err = std::fabs(r - g);
      if (!(err <= tol.abs + tol.rel * std::fabs(r))) {  // NaN fails too
        if (ok) {
          char buf[160];
          std::snprintf(buf, sizeof(buf), "output %zu element %zu: %.9g, reference %.9g", o, i, g,
                        r);
          *why = buf;
        }
        ok = false;
      }
      if (!(err <= *max_abs)) *max_abs = err;
    }
  }
  return ok;
}

}  // namespace

std::string DelegateUnderTest::Label() const {
  std::string label = name;
  for (size_t i = 0; i < options.size(); ++i) {
    label += (i == 0 ? "(" : ",") + options[i].first + "=" + options[i].second;
  }
  return options.empty() ? label : label + ")";
}

Tolerance DelegateUnderTest::DefaultTolerance() const {
  for (const auto& [key, value] : options) {
    const bool on = value == "true" || value == "1";
    if (on && (key == "fp16" || (name == "gpu" && key == "precision_loss_allowed"))) {
      return kFloat16Tolerance;
    }
  }
  return name == "gpu" ? kGpuFloat32Tolerance : kFloat32Tolerance;
}

bool ParseDelegateSpec(const std::string& spec, DelegateUnderTest* out, bool* old_syntax) {
  const size_t colon = spec.find(':');
  out->name = spec.substr(0, colon);
  out->options.clear();
  if (old_syntax) *old_syntax = false;
  if (out->name.empty()) return false;
  if (colon == std::string::npos) return true;
  const std::string rest = spec.substr(colon + 1);
  if (rest.find(':') != std::string::npos || rest.find('=') == std::string::npos) {
    auto options = delegates::ParseDelegateOptions(rest, "delegate option", nullptr);
    if (!options || options->empty()) return false;
    out->options = std::move(*options);
    return true;
  }
  // Deprecated: key=value,key=value.
  if (old_syntax) *old_syntax = true;
  size_t at = 0;
  while (at <= rest.size()) {
    size_t comma = rest.find(',', at);
    if (comma == std::string::npos) comma = rest.size();
    const std::string kv = rest.substr(at, comma - at);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    out->options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    at = comma + 1;
  }
  return true;
}

CaseResult RunCase(const ConformanceCase& c, const DelegateUnderTest& delegate,
                   const Tolerance& tolerance) {
  CaseResult r;
  r.case_name = c.name;
  r.delegate = delegate.Label();
  Outputs ref, got;
  Status s = Run(c.model, c.op + ".tflite", nullptr, c.input_lo, c.input_hi, &ref);
  if (!s.ok()) {
    r.error = "reference: " + s.message();
    return r;
  }
  s = Run(c.model, c.op + ".tflite", &delegate, c.input_lo, c.input_hi, &got);
  if (!s.ok()) {
    r.error = s.message();
    return r;
  }
  // The case's op is its first node of that op (other nodes feed or read it).
  const runtime::NodePlacement* found = &got.placement.nodes.at(0);
  for (const runtime::NodePlacement& n : got.placement.nodes) {
    if (n.op == c.op) {
      found = &n;
      break;
    }
  }
  const runtime::NodePlacement& node = *found;
  r.claimed = node.delegate != "cpu";
  r.reason = node.reason;
  if (!r.claimed) {
    r.pass = true;
    return r;
  }
  std::string why;
  // Quantized: kQuantizedSteps output steps, plus the delegate's float
  // tolerance: a delegate storing the float edges in float16 (gpu's
  // precision_loss_allowed on QUANTIZE's float input) may move a value across
  // a step boundary of the input, which a rescaling op makes more than a step.
  const Tolerance tol =
      c.quantum > 0
          ? Tolerance{kQuantizedSteps * c.quantum * (1 + 1e-6) + tolerance.abs, tolerance.rel}
          : tolerance;
  r.pass = Compare(ref, got, tol, &r.max_abs_error, &why);
  if (c.quantum > 0) r.max_steps = r.max_abs_error / c.quantum;
  if (!r.pass) r.error = why;
  return r;
}

PartitionResult RunPartitionCase(const PartitionCase& c, const DelegateUnderTest& delegate,
                                 const Tolerance& tolerance) {
  PartitionResult r;
  r.case_name = c.name;
  r.delegate = delegate.Label();
  Outputs ref, got;
  Status s = Run(c.model, "partition.tflite", nullptr, -1, 1, &ref);
  if (s.ok()) s = Run(c.model, "partition.tflite", &delegate, -1, 1, &got);
  if (!s.ok()) {
    r.error = s.message();
    return r;
  }
  r.partitions = got.placement.partitions;
  for (const runtime::NodePlacement& n : got.placement.nodes) {
    r.delegated_nodes += n.delegate != "cpu" ? 1 : 0;
  }
  std::string why;
  const bool same = Compare(ref, got, tolerance, &r.max_abs_error, &why);
  r.pass = same && r.partitions == c.expected_partitions &&
           r.delegated_nodes == c.expected_delegated_nodes;
  if (!same) r.error = why;
  if (r.partitions != c.expected_partitions || r.delegated_nodes != c.expected_delegated_nodes) {
    r.error = "expected " + std::to_string(c.expected_partitions) + " partitions of " +
              std::to_string(c.expected_delegated_nodes) + " nodes, got " +
              std::to_string(r.partitions) + " of " + std::to_string(r.delegated_nodes);
  }
  return r;
}

namespace {

using TensorValues = std::map<int, std::vector<float>>;  // by tensor index

// Every float32 tensor a node writes, from a run of the reference kernels
// with nothing folded into a neighbour (so every node's output exists),
// copied right after its step.
Status ReferenceTensors(const runtime::Model& model, TensorValues* out) {
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  runtime::InterpreterOptions options;
  options.fold_activations = false;
  options.fold_pads = false;
  options.fold_adds = false;
  options.fuse_rows = false;
  runtime::Interpreter reference(model, resolver, options);
  DFARM_RETURN_IF_ERROR(reference.AllocateTensors());
  DFARM_RETURN_IF_ERROR(FillInputs(reference));
  for (size_t step = 0; step < reference.invoked_nodes_size(); ++step) {
    DFARM_RETURN_IF_ERROR(reference.InvokeStep(step));
    for (const runtime::Tensor* t : reference.node(reference.step_node(step)).outputs) {
      if (t == nullptr || t->dtype != runtime::DType::kFloat32) continue;
      (*out)[t->index].assign(t->data_as<float>(), t->data_as<float>() + t->num_elements());
    }
  }
  return Status::Ok();
}

// The outputs of every node of partition `p`, right after its profiled run,
// against the reference's.
Status CheckNodeOutputs(const runtime::Interpreter& interpreter, int p,
                        const TensorValues& expected, const Tolerance& tolerance) {
  for (size_t n = 0; n < interpreter.nodes_size(); ++n) {
    if (interpreter.placement().nodes[n].partition != p) continue;
    for (const runtime::Tensor* t : interpreter.node(n).outputs) {
      auto it = t != nullptr ? expected.find(t->index) : expected.end();
      if (it == expected.end()) continue;
      for (size_t i = 0; i < it->second.size(); ++i) {
        const double want = it->second[i], got = t->data_as<float>()[i];
        if (!(std::fabs(got - want) <= tolerance.abs + tolerance.rel * std::fabs(want))) {
          return Status::Error("node " + std::to_string(n) + " " + interpreter.node(n).op_name +
                               ": tensor " + std::to_string(t->index) + " element " +
                               std::to_string(i) + " is " + std::to_string(got) +
                               " after the profiled run, reference " + std::to_string(want));
        }
      }
    }
  }
  return Status::Ok();
}

// One step-by-step run, every partition through InvokeStepProfiled; counts
// the nodes timed into `r`, checks their times and every node's outputs.
Status RunProfiledSteps(runtime::Interpreter& interpreter, const TensorValues& expected,
                        const Tolerance& tolerance, NodeProfileResult* r) {
  const runtime::Placement& placement = interpreter.placement();
  int last_partition = -1;
  std::vector<double> node_us;
  for (size_t step = 0; step < interpreter.invoked_nodes_size(); ++step) {
    const int p = placement.nodes[interpreter.step_node(step)].partition;
    if (p < 0 || p == last_partition) {
      DFARM_RETURN_IF_ERROR(interpreter.InvokeStep(step));
      continue;
    }
    last_partition = p;
    DFARM_RETURN_IF_ERROR(interpreter.InvokeStepProfiled(step, &node_us));
    for (double us : node_us) {
      if (!(us >= 0) || !std::isfinite(us)) {
        return Status::Error("partition " + std::to_string(p) + " gave a node the time " +
                             std::to_string(us) + " us");
      }
    }
    r->timed_nodes += static_cast<int>(node_us.size());
    DFARM_RETURN_IF_ERROR(CheckNodeOutputs(interpreter, p, expected, tolerance));
  }
  return Status::Ok();
}

Status ProfileNodes(const std::vector<uint8_t>& bytes, const std::string& name,
                    const DelegateUnderTest& delegate, const Tolerance& tolerance,
                    NodeProfileResult* r) {
  std::unique_ptr<runtime::Model> model;
  DFARM_RETURN_IF_ERROR(runtime::Model::FromBuffer(name, bytes, &model));
  runtime::OpResolver resolver;
  resolver.AddAllReferenceOps();
  std::unique_ptr<runtime::Delegate> d;
  DFARM_RETURN_IF_ERROR(CreateDelegate(delegate, &d));
  const Status enabled = d->EnableProfiling();
  if (enabled.code() == runtime::StatusCode::kUnsupported) return Status::Ok();
  DFARM_RETURN_IF_ERROR(enabled);
  r->supported = true;
  TensorValues expected;
  DFARM_RETURN_IF_ERROR(ReferenceTensors(*model, &expected));
  runtime::Interpreter interpreter(*model, resolver);
  interpreter.AddDelegate(d.get());
  DFARM_RETURN_IF_ERROR(interpreter.AllocateTensors());
  DFARM_RETURN_IF_ERROR(FillInputs(interpreter));
  DFARM_RETURN_IF_ERROR(interpreter.Invoke());
  Outputs whole, profiled;
  DFARM_RETURN_IF_ERROR(CopyOutputs(interpreter, &whole));
  r->partitions = whole.placement.partitions;
  for (const runtime::NodePlacement& n : whole.placement.nodes) {
    r->delegated_nodes += n.partition >= 0 ? 1 : 0;
  }
  for (runtime::Tensor* t : interpreter.outputs()) {
    std::fill_n(t->data_as<float>(), t->num_elements(), std::nanf(""));
  }
  DFARM_RETURN_IF_ERROR(RunProfiledSteps(interpreter, expected, tolerance, r));
  DFARM_RETURN_IF_ERROR(CopyOutputs(interpreter, &profiled));
  std::string why;
  if (!Compare(whole, profiled, tolerance, &r->max_abs_error, &why)) {
    return Status::Error("the profiled run's outputs differ from Invoke()'s: " + why);
  }
  if (r->timed_nodes != r->delegated_nodes) {
    return Status::Error(std::to_string(r->timed_nodes) + " nodes timed of " +
                         std::to_string(r->delegated_nodes) + " delegated");
  }
  return Status::Ok();
}

}  // namespace

NodeProfileResult RunNodeProfile(const std::vector<uint8_t>& model, const std::string& name,
                                 const DelegateUnderTest& delegate, const Tolerance& tolerance) {
  NodeProfileResult r;
  r.delegate = delegate.Label();
  const Status s = ProfileNodes(model, name, delegate, tolerance, &r);
  r.pass = s.ok();
  if (!s.ok()) r.error = s.message();
  return r;
}

std::string CheckDelegate(const DelegateUnderTest& delegate) {
  const delegates::RegisteredDelegate* entry = nullptr;
  if (!delegates::FindDelegate(delegate.name, &entry).ok()) {
    return "unknown delegate '" + delegate.name +
           "' (known: " + delegates::BuiltinDelegateNamesList() + ")";
  }
  if (entry->create == nullptr) {
    return "delegate '" + delegate.name +
           "' only adds kernels, it claims no node: name one that does (xnnpack, gpu, "
           "external:path:PLUGIN)";
  }
  if (const Status s = delegates::CheckDelegateOptions(*entry, delegate.options); !s.ok()) {
    return "delegate '" + delegate.Label() + "': " + s.message();
  }
  // One that cannot start (a missing plugin) would fail every case; one this
  // machine cannot run (fp16 without the CPU for it) is skipped by RunAll.
  std::unique_ptr<runtime::Delegate> probe;
  const Status s = entry->create(delegate.options, &probe);
  if (!s.ok() && s.code() != runtime::StatusCode::kUnsupported) {
    return "delegate '" + delegate.Label() + "': " + s.message();
  }
  return "";
}

size_t CountCases(const std::string& filter) {
  const auto matches = [&](const std::string& name) {
    return filter.empty() || name.find(filter) != std::string::npos;
  };
  size_t n = 0;
  for (const ConformanceCase& c : Catalog()) n += matches(c.name) ? 1 : 0;
  for (const PartitionCase& c : PartitionCatalog()) n += matches(c.name) ? 1 : 0;
  return n;
}

int RunAll(const std::vector<DelegateUnderTest>& delegates, std::ostream& os,
           const std::string& filter) {
  int failures = 0;
  char line[512];
  std::snprintf(line, sizeof(line), "%-66s %-12s %-8s %-12s %s\n", "case", "delegate", "claimed",
                "max_abs_err", "result");
  os << line;
  const std::vector<ConformanceCase> cases = Catalog();
  for (const DelegateUnderTest& d : delegates) {
    // Skip, not fail, a delegate this machine cannot run (fp16 without the CPU for it).
    const delegates::RegisteredDelegate* entry = nullptr;
    std::unique_ptr<runtime::Delegate> probe;
    if (delegates::FindDelegate(d.name, &entry).ok() && entry->create != nullptr &&
        delegates::CheckDelegateOptions(*entry, d.options).ok()) {
      const Status s = entry->create(d.options, &probe);
      if (s.code() == runtime::StatusCode::kUnsupported) {
        os << d.Label() << ": skipped, unsupported here: " << s.message() << "\n";
        continue;
      }
    }
    probe.reset();
    int claimed = 0;
    for (const ConformanceCase& c : cases) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      const CaseResult r = RunCase(c, d, d.DefaultTolerance());
      claimed += r.claimed ? 1 : 0;
      failures += r.pass ? 0 : 1;
      std::snprintf(line, sizeof(line), "%-66s %-12s %-8s %-12.3g %s", r.case_name.c_str(),
                    d.name.c_str(), r.claimed ? "yes" : "no", r.max_abs_error,
                    r.pass ? (r.claimed ? "pass" : "-") : "FAIL");
      os << line;
      if (r.claimed && r.max_steps > 0) os << "  (" << r.max_steps << " quantization steps)";
      if (!r.error.empty()) os << "  " << r.error;
      os << "\n";
    }
    for (const PartitionCase& c : PartitionCatalog()) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      const PartitionResult r = RunPartitionCase(c, d, d.DefaultTolerance());
      failures += r.pass ? 0 : 1;
      std::snprintf(line, sizeof(line), "%-66s %-12s %-8s %-12.3g %s",
                    ("partitions: " + r.case_name).c_str(), d.name.c_str(),
                    std::to_string(r.partitions).c_str(), r.max_abs_error,
                    r.pass ? "pass" : "FAIL");
      os << line;
      if (!r.error.empty()) os << "  " << r.error;
      os << "\n";
    }
    os << d.Label() << ": claimed " << claimed << " of " << cases.size() << " cases\n";
  }
  os << (failures == 0 ? "all passed" : std::to_string(failures) + " failed") << "\n";
  return failures;
}

}  // namespace dfarm::conformance
