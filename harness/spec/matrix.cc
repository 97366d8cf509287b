#include "harness/spec/matrix.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

namespace dfarm::harness {
namespace {

constexpr size_t kJobKeyHexChars = 16;

struct EvpMdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using EvpMdCtx = std::unique_ptr<EVP_MD_CTX, EvpMdCtxDeleter>;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string Hex(const unsigned char* p, unsigned n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (unsigned i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

}  // namespace

std::string Sha256OfBytes(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

Result<std::string> Sha256OfFile(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return MakeError("cannot read '" + path + "'");
  EvpMdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return MakeError("cannot hash '" + path + "': OpenSSL sha256 unavailable");
  }
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    EVP_DigestUpdate(ctx.get(), buf, got);
  }
  if (std::ferror(f.get())) return MakeError("cannot read '" + path + "': I/O error");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  return Hex(md, n);
}

std::string JobKey(const std::string& model_sha256, const DelegateSpec& delegate,
                   const std::string& device, const BenchmarkSpec& b,
                   const std::string& plugin_sha256, const std::string& runner,
                   const std::string& runner_sha256, uint32_t trial) {
  DelegateSpec keyed = delegate;
  if (!plugin_sha256.empty()) keyed.options[kPluginPathOption] = "sha256:" + plugin_sha256;
  // Length-prefixed fields: no two different jobs hash the same text.
  std::string text = "dfarm-job-v1";
  for (const std::string& field :
       {model_sha256, keyed.name, keyed.OptionsString(), device, std::to_string(b.warmup_runs),
        std::to_string(b.num_runs), std::to_string(b.num_threads)}) {
    text += '\n';
    text += std::to_string(field.size());
    text += ':';
    text += field;
  }
  if (!runner.empty() || !runner_sha256.empty()) {
    for (const std::string& field : {runner, runner_sha256}) {
      text += '\n';
      text += std::to_string(field.size());
      text += ':';
      text += field;
    }
  }
  if (trial > 0) {
    const std::string field = "trial=" + std::to_string(trial);
    text += '\n';
    text += std::to_string(field.size());
    text += ':';
    text += field;
  }
  return Sha256OfBytes(text).substr(0, kJobKeyHexChars);
}

std::string JobKeyOf(const SweepJob& job) {
  std::string key = JobKey(job.model_sha256, job.delegate, job.device, job.benchmark,
                           job.plugin_sha256, job.runner, job.runner_sha256, job.trial);
  if (job.input_set_sha256s.empty()) return key;
  std::string text = "dfarm-job-inputs-v1\n" + key;
  for (const std::string& sha : job.input_set_sha256s) text += "\n" + sha;
  return Sha256OfBytes(text).substr(0, kJobKeyHexChars);
}

namespace {

// splitmix64's output function: a well-mixed 64-bit value of `state`.
uint64_t SplitMix(uint64_t state) {
  uint64_t z = state + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

bool PairRunsBaselineFirst(uint32_t seed, size_t cell, uint32_t block) {
  const uint64_t state = (static_cast<uint64_t>(seed) << 32) ^ 0x70616972ull;  // "pair"
  return (SplitMix(SplitMix(state ^ cell) ^ block) & 1) == 0;
}

std::vector<size_t> ShuffledTrialOrder(size_t cells, uint32_t seed, uint32_t round) {
  // splitmix64: tiny, portable and well mixed (std::shuffle's algorithm is
  // the library's own, so orders would differ between libstdc++ and libc++).
  uint64_t state = (static_cast<uint64_t>(seed) << 32) ^ round ^ 0x6466726d5f6f7264ull;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<size_t> order(cells);
  for (size_t i = 0; i < cells; ++i) order[i] = i;
  for (size_t i = cells; i > 1; --i) {
    size_t j = static_cast<size_t>(next() % i);  // Fisher-Yates; the modulo bias is negligible
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

namespace {

// Each cell of `cells` (trial 0, grouped order) repeated `repeats` times:
// round t holds every cell's trial t in ShuffledTrialOrder(seed, t).
std::vector<SweepJob> RepeatCells(const std::vector<SweepJob>& cells, uint32_t repeats,
                                  uint32_t seed) {
  if (repeats <= 1) return cells;
  std::vector<SweepJob> jobs;
  jobs.reserve(cells.size() * repeats);
  for (uint32_t t = 0; t < repeats; ++t) {
    for (size_t i : ShuffledTrialOrder(cells.size(), seed, t)) {
      SweepJob j = cells[i];
      j.trial = t;
      j.job_key = JobKeyOf(j);
      jobs.push_back(std::move(j));
    }
  }
  return jobs;
}

// A paired spec's jobs (ExpandMatrix): `cells` is the grouped order, in
// which each device's baseline jobs and candidate jobs are two blocks of
// the same cells (the runner loop sits outside model, delegate and threads).
std::vector<SweepJob> PairCells(const std::vector<SweepJob>& cells, const PairingSpec& pairing,
                                uint32_t repeats, uint32_t seed) {
  std::vector<std::pair<const SweepJob*, const SweepJob*>> pairs;  // baseline, candidate
  std::vector<const SweepJob*> baseline, candidate;
  auto flush = [&] {
    for (size_t i = 0; i < baseline.size() && i < candidate.size(); ++i) {
      pairs.emplace_back(baseline[i], candidate[i]);
    }
    baseline.clear();
    candidate.clear();
  };
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0 && cells[i].device != cells[i - 1].device) flush();
    (cells[i].runner == pairing.baseline_runner ? baseline : candidate).push_back(&cells[i]);
  }
  flush();
  // Every device runs both runners (a build it lacks is a job recorded infra):
  // anything else is not a paired plan, and runs unpaired.
  if (pairs.size() * 2 != cells.size()) return RepeatCells(cells, repeats, seed);
  std::vector<SweepJob> jobs;
  jobs.reserve(pairs.size() * 2 * std::max<uint32_t>(repeats, 1));
  int64_t pair_number = 0;
  for (uint32_t t = 0; t < std::max<uint32_t>(repeats, 1); ++t) {
    for (size_t i : ShuffledTrialOrder(pairs.size(), seed, t)) {
      const bool baseline_first = PairRunsBaselineFirst(seed, i, t / 2) == (t % 2 == 0);
      ++pair_number;
      for (const SweepJob* cell : {pairs[i].first, pairs[i].second}) {
        SweepJob j = *cell;
        j.trial = t;
        j.pair = pair_number;
        j.job_key = JobKeyOf(j);
        jobs.push_back(std::move(j));
      }
      if (!baseline_first) std::swap(jobs[jobs.size() - 1], jobs[jobs.size() - 2]);
    }
  }
  return jobs;
}

}  // namespace

std::vector<MatrixAxis> MatrixAxes(const SweepSpec& spec, uint64_t devices, uint64_t runners) {
  return {{"devices", devices},
          {"runners", runners},
          {"models", spec.models.size()},
          {"delegates", spec.delegates.size()},
          {"num_threads", spec.num_threads.empty() ? 1 : spec.num_threads.size()},
          {"repeats", std::max<uint64_t>(spec.benchmark.repeats, 1)}};
}

std::string MatrixAxesText(const std::vector<MatrixAxis>& axes) {
  std::string text;
  for (const MatrixAxis& a : axes) {
    text += (text.empty() ? "" : " x ") + std::string(a.name) + " " + std::to_string(a.size);
  }
  return text;
}

Result<uint64_t> CountMatrixJobs(const std::vector<MatrixAxis>& axes, uint64_t max_jobs) {
  uint64_t jobs = 1;
  bool overflow = false;
  for (const MatrixAxis& a : axes) {
    if (a.size == 0) return uint64_t{0};
    overflow = overflow || __builtin_mul_overflow(jobs, a.size, &jobs);
  }
  if (!overflow && jobs <= max_jobs) return jobs;
  return MakeError(ErrorKind::kInvalidInput,
                   "the matrix has " + (overflow ? "at least 2^64" : std::to_string(jobs)) +
                       " jobs (" + MatrixAxesText(axes) + "), more than " +
                       std::to_string(max_jobs) + " per sweep; shorten an axis or split the sweep");
}

std::vector<SweepJob> ExpandMatrix(const SweepSpec& spec,
                                   const std::vector<std::string>& model_sha256s,
                                   const PluginHashes& plugin_sha256s,
                                   const DeviceRunnerBuilds& runner_builds,
                                   const std::vector<std::string>& devices) {
  std::vector<SweepJob> jobs;
  std::vector<uint32_t> threads = spec.num_threads;
  if (threads.empty()) threads = {spec.benchmark.num_threads};
  const std::vector<std::string>& device_list = devices.empty() ? spec.devices : devices;
  static const std::vector<RunnerBuild> kNoRunner = {RunnerBuild{}};
  for (const std::string& device : device_list) {
    auto found = runner_builds.find(device);
    const std::vector<RunnerBuild>& builds =
        found == runner_builds.end() || found->second.empty() ? kNoRunner : found->second;
    for (const RunnerBuild& rb : builds) {
      for (size_t m = 0; m < spec.models.size(); ++m) {
        for (const DelegateSpec& d : spec.delegates) {
          for (uint32_t n : threads) {
            SweepJob j;
            j.model = spec.models[m];
            j.model_sha256 = model_sha256s.at(m);
            j.delegate = d;
            j.device = device;
            j.benchmark = spec.benchmark;
            j.benchmark.num_threads = n;
            if (auto it = plugin_sha256s.find(d.PluginPath()); it != plugin_sha256s.end()) {
              j.plugin_sha256 = it->second;
            }
            j.runner = rb.runner;
            j.runner_path = rb.path;
            j.runner_sha256 = rb.sha256;
            j.runner_kind = rb.kind;
            j.job_key = JobKeyOf(j);
            jobs.push_back(std::move(j));
          }
        }
      }
    }
  }
  if (spec.pairing.enabled()) {
    return PairCells(jobs, spec.pairing, spec.benchmark.repeats, spec.benchmark.order_seed);
  }
  return RepeatCells(jobs, spec.benchmark.repeats, spec.benchmark.order_seed);
}

Result<std::vector<std::string>> HashModels(const SweepSpec& spec) {
  std::vector<std::string> out;
  for (const ModelSpec& m : spec.models) {
    auto h = Sha256OfFile(m.path);
    if (!h) return h.error();
    out.push_back(std::move(*h));
  }
  return out;
}

Result<PluginHashes> HashPlugins(const SweepSpec& spec) {
  PluginHashes out;
  for (const std::string& path : PluginPaths(spec)) {
    auto h = Sha256OfFile(path);
    if (!h) return MakeError("delegate plugin: " + h.message());
    out[path] = std::move(*h);
  }
  return out;
}

}  // namespace dfarm::harness
