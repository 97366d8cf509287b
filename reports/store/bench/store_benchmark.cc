// What a durable job result costs on SQLite: BM_RecordJob/full:{0,1} is what
// a sweep writes per job (MarkJobRunning, then RecordJobResult with metrics
// and 50 samples, each committed on return) into a store file on disk, with
// PRAGMA synchronous NORMAL (full:0; the WAL synced at checkpoints only) and
// FULL (full:1; an fsync at every commit, the store's default). The time
// per iteration (real time, fsync waits included) is the cost per job.
//
// Usage: dfarm_store_benchmark [--dir=DIR] [benchmark flags]
// DIR (default: the current folder) must be on the disk to measure: a tmpfs
// syncs for free.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "reports/store/store.h"

namespace dfarm::store {
namespace {

std::string g_dir = ".";

JobRow Job(int64_t i) {
  JobRow j;
  j.job_key = "key-" + std::to_string(i);
  j.model = "m.tflite";
  j.model_path = "/models/m.tflite";
  j.model_sha256 = std::string(64, 'a');
  j.delegate = "cpu";
  j.device = "local";
  return j;
}

JobOutcome Outcome() {
  JobOutcome o;
  o.status = kJobOk;
  o.exit_code = 0;
  o.wall_ms = 250;
  JobMetrics m;
  m.mean_us = 1000;
  m.p50_us = 990;
  m.num_runs = 50;
  o.metrics = m;
  for (int k = 0; k < 50; ++k) o.samples_us.push_back(1000 + k);
  o.runner_json = R"({"status":"ok"})";
  return o;
}

void BM_RecordJob(benchmark::State& state) {
  const SqliteSync sync = state.range(0) ? SqliteSync::kFull : SqliteSync::kNormal;
  const std::string path = (std::filesystem::path(g_dir) /
                            ("dfarm_store_benchmark." + std::to_string(::getpid()) + ".db"))
                               .string();
  auto remove = [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  };
  remove();
  {
    auto store = OpenSqliteStore(path, sync);
    if (!store) {
      state.SkipWithError(store.message().c_str());
      return;
    }
    auto run = (*store)->CreateRun("bench", "{}");
    if (!run) {
      state.SkipWithError(run.message().c_str());
      return;
    }
    const JobOutcome outcome = Outcome();
    std::vector<int64_t> ids;
    size_t next = 0;
    int64_t made = 0;
    for (auto _ : state) {
      if (next == ids.size()) {
        state.PauseTiming();
        std::vector<JobRow> rows;
        for (int k = 0; k < 256; ++k) rows.push_back(Job(made++));
        auto added = (*store)->AddJobs(*run, rows);
        if (!added) state.SkipWithError(added.message().c_str());
        ids = added ? *added : std::vector<int64_t>{};
        next = 0;
        state.ResumeTiming();
        if (ids.empty()) break;
      }
      const int64_t id = ids[next++];
      auto running = (*store)->MarkJobRunning(id, 0);
      auto recorded = running ? (*store)->RecordJobResult(id, outcome) : Result<void>(running);
      if (!recorded) {
        state.SkipWithError(recorded.message().c_str());
        break;
      }
    }
    state.SetItemsProcessed(state.iterations());
  }
  remove();
}
BENCHMARK(BM_RecordJob)
    ->ArgName("full")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(2.0);

}  // namespace
}  // namespace dfarm::store

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    constexpr std::string_view kFlag = "--dir=";
    if (std::string_view(argv[i]).starts_with(kFlag)) {
      dfarm::store::g_dir = argv[i] + kFlag.size();
    } else {
      args.push_back(argv[i]);
    }
  }
  int args_size = static_cast<int>(args.size());
  benchmark::Initialize(&args_size, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
