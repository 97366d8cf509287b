#include "reports/store/cell.h"

#include "agent/base/sha256.h"
#include "reports/store/store.h"

namespace dfarm::store {
namespace {

// The delegate with its options, the threads, then `where` (" @device", or
// nothing), then the runner: the pieces Label() and ConfigLabel() share.
std::string Configuration(const Cell& cell, const std::string& where) {
  std::string s = cell.delegate;
  if (!cell.delegate_options.empty()) s += "[" + cell.delegate_options + "]";
  if (cell.num_threads > 0) s += " x" + std::to_string(cell.num_threads);
  s += where;
  if (!cell.runner.empty()) s += " (runner " + cell.runner + ")";
  if (const std::string inputs = InputsLabel(cell.inputs); !inputs.empty()) s += " on " + inputs;
  return s;
}

}  // namespace

std::string InputsId(const std::vector<std::string>& input_set_sha256s) {
  if (input_set_sha256s.empty()) return kSeededInputs;
  agent::Sha256 hash;
  for (const std::string& sha : input_set_sha256s) {
    hash.Update(sha.data(), sha.size());
    hash.Update("\n", 1);
  }
  return "sets:" + hash.FinishHex().substr(0, 16);
}

std::string InputsLabel(const std::string& inputs) {
  if (inputs.empty() || inputs == kSeededInputs) return "";
  if (inputs.rfind("sets:", 0) == 0) return "inputs " + inputs.substr(5, 8);
  return inputs;
}

std::string Cell::Label() const {
  std::string s = model;
  if (!model_sha256.empty()) s += (s.empty() ? "(" : " (") + model_sha256.substr(0, 8) + ")";
  if (!s.empty()) s += " ";
  return s + Configuration(*this, " @" + device);
}

Cell CellOf(const JobRow& job) {
  Cell cell;
  cell.model_sha256 = job.model_sha256;
  cell.delegate = job.delegate;
  cell.delegate_options = job.delegate_options;
  cell.num_threads = job.num_threads;
  cell.runner = job.runner;
  cell.device = CellDevice(job.device, job.device_class);
  cell.inputs = job.inputs.empty() ? kSeededInputs : job.inputs;
  cell.model = job.model;
  return cell;
}

std::string ConfigLabel(const Cell& cell) { return Configuration(cell, ""); }

std::string ClassCellDevice(const std::string& device_class) {
  return kDeviceClassPrefix + device_class;
}

std::string CellDevice(const std::string& device, const std::string& device_class) {
  return device_class.empty() ? device : ClassCellDevice(device_class);
}

std::string MatchingDeviceClass(const DeviceClasses& classes, const std::string& device) {
  for (const auto& [name, globs] : classes) {
    for (const std::string& g : globs) {
      if (GlobMatch(g, device)) return name;
    }
  }
  return "";
}

std::string DeviceClassOf(const DeviceClasses& classes, const DeviceTraits& d) {
  if (std::string named = MatchingDeviceClass(classes, d.name); !named.empty()) return named;
  const std::string& what = d.model.empty() ? d.cpu : d.model;
  return (what.empty() ? std::string("unknown") : what) + "/" +
         (d.abi.empty() ? std::string("unknown") : d.abi);
}

bool GlobMatch(const std::string& pattern, const std::string& text) {
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace dfarm::store
