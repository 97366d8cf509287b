// Matrix expansion: a sweep spec becomes one job per device x model x delegate
// configuration x num_threads value.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/result.h"
#include "harness/spec.h"

namespace dfarm::harness {

struct MatrixJob {
  ModelSpec model;
  std::string model_sha256;
  DelegateSpec delegate;
  std::string device;
  BenchmarkSpec benchmark;
  std::string job_key;
  std::string plugin_sha256;  // of delegate.PluginPath(); empty when it names none
};

// The job key: a hex prefix of sha256 over everything that decides what a job
// measures (model content, delegate and options, device, warmup/runs/threads;
// not the timeout). Equal keys in two runs mean comparable jobs. With a
// plugin_sha256, the plugin's content stands for its host path (the path
// option is hashed as "sha256:<hex>"), so moving or renaming the plugin file
// keeps the key and rebuilding it changes the key; without one, the key is
// what it always was.
std::string JobKey(const std::string& model_sha256, const DelegateSpec& delegate,
                   const std::string& device, const BenchmarkSpec& benchmark,
                   const std::string& plugin_sha256 = "");

// sha256 of each plugin file (host path -> sha256).
using PluginHashes = std::map<std::string, std::string>;

// Jobs ordered device, then model, then delegate, then num_threads (so one device's jobs run
// together and a model's delegates sit side by side). `model_sha256s[i]`
// belongs to spec.models[i]; `plugin_sha256s` should hold every
// PluginPaths(spec) file (HashPlugins): a job whose plugin it lacks gets no
// plugin_sha256 and is keyed on the host path. Pure and deterministic.
std::vector<MatrixJob> ExpandMatrix(const SweepSpec& spec,
                                    const std::vector<std::string>& model_sha256s,
                                    const PluginHashes& plugin_sha256s = {});

// sha256 of each model file, in spec order; an error names the file.
Result<std::vector<std::string>> HashModels(const SweepSpec& spec);

// sha256 of each PluginPaths(spec) file; an error names the file.
Result<PluginHashes> HashPlugins(const SweepSpec& spec);

// sha256 of a file / of bytes, lowercase hex (OpenSSL).
Result<std::string> Sha256OfFile(const std::string& path);
std::string Sha256OfBytes(const std::string& bytes);

}  // namespace dfarm::harness
