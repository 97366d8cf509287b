// A results database with a history to find steps in, shared by
// history_test.cc and cli/history_command_test.cc.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "agent/base/sha256.h"
#include "harness/test_util.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// What FillHistory planted.
struct PlantedHistory {
  std::string db;
  std::string model_a_path;  // a file whose sha256 is model a's
  std::string sha_a, sha_b;
  std::vector<int64_t> runs;  // oldest first
  static constexpr size_t kRuns = 30;
  static constexpr size_t kLatencyStepAt = 18;  // cell A (xnnpack fp16:false) 10% slower from here
  static constexpr size_t kRssStepAt = 10;      // cell C (b.tflite cpu) 20% less memory from here
};

// 30 runs, each with 3 trials of each cell:
//   A  a.tflite xnnpack fp16:false x1 @local: p50 1000 us, 1100 us from run 18 (1.5% noise)
//   B  a.tflite xnnpack fp16:true  x1 @local: p50 800 us, flat
//   C  b.tflite cpu x2 @local: p50 5000 us flat; peak RSS 50 MB, 40 MB from run 10
// Trial 1 of A crashes in every third run (not ok: left out). Each job has an
// accuracy with max_abs_error 1e-6 (A) or 1e-3 (B, C).
inline PlantedHistory FillHistory(const TempDir& dir) {
  PlantedHistory h;
  h.db = (dir.path() / "history.db").string();
  h.model_a_path = dir.Write("models/a.tflite", "model a bytes");
  h.sha_a = *agent::Sha256File(h.model_a_path);
  h.sha_b = std::string(64, 'b');
  auto store = store::OpenSqliteStore(h.db);
  EXPECT_TRUE(store.ok());
  if (!store.ok()) return h;
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> noise(0, 0.015);
  for (size_t r = 0; r < PlantedHistory::kRuns; ++r) {
    auto run = (*store)->CreateRun("nightly " + std::to_string(r), "{}");
    EXPECT_TRUE(run.ok());
    h.runs.push_back(*run);
    struct Cell {
      std::string model, sha, delegate, options;
      uint32_t threads;
      double p50;
      int64_t rss;
      double error;
    };
    const std::vector<Cell> cells = {
        {"a.tflite", h.sha_a, "xnnpack", "fp16:false", 1,
         r >= PlantedHistory::kLatencyStepAt ? 1100.0 : 1000.0, 30'000'000, 1e-6},
        {"a.tflite", h.sha_a, "xnnpack", "fp16:true", 1, 800.0, 30'000'000, 1e-3},
        {"b.tflite", h.sha_b, "cpu", "", 2, 5000.0,
         r >= PlantedHistory::kRssStepAt ? 40'000'000 : 50'000'000, 1e-3},
    };
    for (size_t c = 0; c < cells.size(); ++c) {
      for (int64_t trial = 0; trial < 3; ++trial) {
        const Cell& cell = cells[c];
        store::JobRow job;
        job.job_key = std::to_string(r) + "-" + std::to_string(c) + "-" + std::to_string(trial);
        job.model = cell.model;
        job.model_path = "/models/" + cell.model;
        job.model_sha256 = cell.sha;
        job.delegate = cell.delegate;
        job.delegate_options = cell.options;
        job.device = "local";
        job.num_threads = cell.threads;
        job.trial = trial;
        auto id = (*store)->AddJob(*run, job);
        EXPECT_TRUE(id.ok());
        store::JobOutcome outcome;
        if (c == 0 && trial == 1 && r % 3 == 0) {
          outcome.status = "crashed";
          outcome.error = "runner crashed";
        } else {
          outcome.status = store::kJobOk;
          store::JobMetrics m;
          const double v = cell.p50 * std::exp(noise(rng));
          m.mean_us = v * 1.02;
          m.p50_us = v;
          m.p90_us = v * 1.1;
          m.peak_rss_bytes = cell.rss + static_cast<int64_t>(trial * 4096);
          outcome.metrics = m;
          outcome.samples_us = {v, v, v};
          store::Accuracy accuracy;
          accuracy.reference = "cpu";
          store::OutputAccuracy out;
          out.name = "logits";
          out.compared = 10;
          out.max_abs_error = cell.error;
          accuracy.outputs.push_back(out);
          outcome.accuracy = accuracy;
        }
        EXPECT_TRUE((*store)->RecordJobResult(*id, outcome).ok());
      }
    }
    EXPECT_TRUE((*store)->FinishRun(*run, store::kRunFinished).ok());
  }
  return h;
}

}  // namespace dfarm::harness
