#include "harness/sweep.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/matrix.h"

namespace dfarm::harness {
namespace {

using nlohmann::json;

std::string LastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::string Stem(const std::string& file) {
  size_t dot = file.rfind('.');
  return dot == std::string::npos || dot == 0 ? file : file.substr(0, dot);
}

// Turns what the agent returned into what the store keeps.
store::JobOutcome Classify(const agent::JobResult& r) {
  store::JobOutcome o;
  o.status = r.status;
  o.error = OneLine(r.error);
  o.exit_code = r.exit_code;
  o.signal = r.signal;
  o.wall_ms = r.wall_ms;
  o.runner_json = r.runner_json;
  o.stderr_tail = r.stderr_tail;
  auto parsed = ParseRunnerJson(r.runner_json);
  if (parsed) {
    o.metrics = parsed->metrics;
    o.samples_us = parsed->samples_us;
    if (o.error.empty()) o.error = OneLine(parsed->error);
  }
  if (!store::IsFinalJobStatus(o.status)) {
    o.error = "agent reported unknown job status '" + o.status + "'" +
              (o.error.empty() ? "" : ": " + o.error);
    o.status = "infra";
  } else if (o.status == store::kJobOk && !o.metrics) {
    o.status = "crashed";
    o.error = parsed ? "runner reported ok without metrics"
                     : "runner reported ok but its JSON is unreadable: " + parsed.message();
  }
  if (o.status != store::kJobOk && o.error.empty()) {
    o.error = OneLine(LastLine(r.stderr_tail));
    if (o.error.empty()) {
      o.error = r.signal ? "runner killed by signal " + std::to_string(r.signal)
                         : "runner exited with code " + std::to_string(r.exit_code);
    }
  }
  return o;
}

class Sweeper {
 public:
  Sweeper(store::Store& store, DeviceProvider& devices, const SweepOptions& options, size_t total)
      : store_(store), devices_(devices), options_(options), total_(total) {}

  bool cancelled() const { return options_.cancel && options_.cancel->load(); }

  // Runs one device's jobs. Returns whether the device was reached at all.
  Result<bool> RunDevice(const std::string& device, const std::vector<MatrixJob>& jobs,
                         const std::vector<int64_t>& ids) {
    bool reached = false;
    std::unique_ptr<DeviceSession> session;
    std::string runner_sha;
    std::set<std::string> pushed;  // model sha256s pushed over this session
    std::string down;              // why the device is given up on, once it is
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (cancelled()) break;
      const MatrixJob& job = jobs[i];
      if (!session && down.empty()) {
        auto opened = Connect(device, &runner_sha);
        if (opened) {
          session = std::move(*opened);
          reached = true;
          pushed.clear();
        } else {
          down = opened.message();
        }
      }
      if (!session) {
        if (auto r = RecordInfra(job, ids[i], down); !r) return r.error();
        continue;
      }
      if (!pushed.count(job.model_sha256)) {
        std::string sha;
        auto sent = session->client().PutArtifact(job.model.path, &sha);
        if (!sent) {
          session.reset();  // the connection's state is unknown now
          if (auto r = RecordInfra(job, ids[i],
                                   "cannot push model '" + job.model.file + "' to device '" +
                                       device + "': " + sent.message());
              !r) {
            return r.error();
          }
          continue;
        }
        bytes_pushed_ += *sent;
        pushed.insert(job.model_sha256);
      }
      if (auto r = store_.MarkJobRunning(ids[i]); !r) return r.error();
      agent::JobSpec spec;
      spec.runner_sha256 = runner_sha;
      spec.model_sha256 = job.model_sha256;
      spec.delegate = job.delegate.name;
      spec.delegate_options = job.delegate.OptionsString();
      spec.num_threads = job.benchmark.num_threads;
      spec.warmup_runs = job.benchmark.warmup_runs;
      spec.num_runs = job.benchmark.num_runs;
      spec.timeout_ms = job.benchmark.timeout_s * 1000;
      auto result = session->client().RunJob(spec);
      if (!result) {
        session.reset();  // reconnect (and restart a local agent) for the next job
        if (auto r = RecordInfra(job, ids[i], "device '" + device + "': " + result.message()); !r) {
          return r.error();
        }
        continue;
      }
      if (auto r = Record(job, ids[i], Classify(*result)); !r) return r.error();
    }
    return reached;
  }

  size_t ok() const { return ok_; }
  size_t failed() const { return failed_; }
  size_t done() const { return done_; }
  uint64_t bytes_pushed() const { return bytes_pushed_; }

 private:
  Result<std::unique_ptr<DeviceSession>> Connect(const std::string& device,
                                                 std::string* runner_sha) {
    auto session = devices_.Open(device);
    if (!session) return session.error();
    const agent::DeviceInfo& info = (*session)->client().device();
    store::DeviceRow row{device,        info.abi,           info.os,
                         info.cpu,      info.cores,         static_cast<int64_t>(info.memory_bytes),
                         info.hostname, info.agent_version, {}};
    if (auto r = store_.UpsertDevice(row); !r) return r.error();
    auto sent = (*session)->client().PutArtifact(options_.runner_path, runner_sha);
    if (!sent) {
      return MakeError("cannot push runner '" + options_.runner_path + "' to device '" + device +
                       "': " + sent.message());
    }
    bytes_pushed_ += *sent;
    return session;
  }

  Result<void> RecordInfra(const MatrixJob& job, int64_t id, const std::string& why) {
    store::JobOutcome o;
    o.status = store::kJobInfra;
    o.error = OneLine(why);
    return Record(job, id, o);
  }

  Result<void> Record(const MatrixJob& job, int64_t id, const store::JobOutcome& o) {
    if (auto r = store_.RecordJobResult(id, o); !r) return r;
    ++done_;
    (o.status == store::kJobOk ? ok_ : failed_)++;
    if (options_.progress) {
      std::string delegate = job.delegate.name;
      if (!job.delegate.options.empty()) delegate += "(" + job.delegate.OptionsString() + ")";
      char figure[64] = "";
      if (o.status == store::kJobOk && o.metrics) {
        std::snprintf(figure, sizeof figure, " mean %.1f ms", o.metrics->mean_us / 1000.0);
      }
      *options_.progress << "[" << done_ << "/" << total_ << "] " << Stem(job.model.file) << " "
                         << delegate << " " << job.device << ": " << o.status << figure
                         << (o.status == store::kJobOk ? "" : ": " + o.error) << std::endl;
    }
    return Ok();
  }

  store::Store& store_;
  DeviceProvider& devices_;
  const SweepOptions& options_;
  size_t total_;
  size_t done_ = 0, ok_ = 0, failed_ = 0;
  uint64_t bytes_pushed_ = 0;
};

}  // namespace

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
      out.metrics = metrics;
    }
    if (doc.contains("samples_us") && doc["samples_us"].is_array()) {
      for (const json& s : doc["samples_us"]) {
        if (s.is_number()) out.samples_us.push_back(s.get<double>());
      }
    }
  } catch (const json::exception& e) {
    return MakeError(std::string("runner JSON: ") + e.what());
  }
  return out;
}

Result<SweepSummary> RunSweep(const SweepSpec& spec, store::Store& store, DeviceProvider& devices,
                              const SweepOptions& options) {
  if (auto runner = Sha256OfFile(options.runner_path); !runner) {
    return MakeError("runner: " + runner.message() + " (build dfarm-runner or set DFARM_RUNNER)");
  }
  auto hashes = HashModels(spec);
  if (!hashes) return hashes.error();
  std::vector<MatrixJob> jobs = ExpandMatrix(spec, *hashes);

  auto run_id = store.CreateRun(spec.name, spec.ToJson());
  if (!run_id) return run_id.error();
  std::vector<store::JobRow> rows;
  for (const MatrixJob& j : jobs) {
    store::JobRow row;
    row.job_key = j.job_key;
    row.model = j.model.file;
    row.model_path = j.model.path;
    row.model_sha256 = j.model_sha256;
    row.delegate = j.delegate.name;
    row.delegate_options = j.delegate.OptionsString();
    row.device = j.device;
    rows.push_back(std::move(row));
  }
  auto ids = store.AddJobs(*run_id, rows);
  if (!ids) return ids.error();

  Sweeper sweeper(store, devices, options, jobs.size());
  bool any_reached = false;
  for (const std::string& device : spec.devices) {
    std::vector<MatrixJob> mine;
    std::vector<int64_t> my_ids;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].device != device) continue;
      mine.push_back(jobs[i]);
      my_ids.push_back((*ids)[i]);
    }
    auto reached = sweeper.RunDevice(device, mine, my_ids);
    if (!reached) {
      (void)store.FinishRun(*run_id, store::kRunFailed);
      return reached.error();
    }
    any_reached = any_reached || *reached;
    if (sweeper.cancelled()) break;
  }

  SweepSummary summary;
  summary.run_id = *run_id;
  summary.jobs = jobs.size();
  summary.ok = sweeper.ok();
  summary.failed = sweeper.failed();
  summary.not_run = jobs.size() - sweeper.done();
  summary.bytes_pushed = sweeper.bytes_pushed();
  summary.status = sweeper.cancelled() ? store::kRunCancelled
                   : any_reached       ? store::kRunFinished
                                       : store::kRunFailed;
  if (auto r = store.FinishRun(*run_id, summary.status); !r) return r.error();
  return summary;
}

}  // namespace dfarm::harness
