// A sweep: expand the spec into jobs, record them in the store, run them on
// their devices (scheduler.h: a worker per device, in parallel) and record
// each result the moment it arrives. A sweep that was killed or cancelled is
// finished later with ResumeSweep.
//
// How a job travels (one host type, SweepJob, and one named conversion at
// each edge):
//   SweepSpec --ExpandMatrix--> SweepJob (planned, id 0)
//   SweepJob --ToJobRow--> store::JobRow (the store's row; AddJobs gives the id)
//   store::JobRow --JobFromRow--> SweepJob (resume: the row plus the run's spec,
//     its plugin and runner build found again by the job key)
//   SweepJob --ToJobSpec--> agent::JobSpec (scheduler.cc: the wire form)
//   agent::JobResult --ClassifyJobResult--> store::JobOutcome (what is recorded)
// The store's row cannot be the host's job (it keeps only what a report
// needs: no host paths of plugin or runner, no benchmark settings but
// num_threads), and the wire form is the agent's contract.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/devices/devices.h"
#include "harness/run/runner_output.h"  // ParseRunnerJson
#include "harness/run/scheduler.h"
#include "harness/spec/spec.h"
#include "reports/store/store.h"

namespace dfarm::harness {

struct SweepOptions {
  // The default runtime build (a spec without "runners"): runner_path for
  // this host's ABI, and arm64_runner_path for "arm64-v8a" devices (empty:
  // $DFARM_ARM64_RUNNER, else Arm64BuildOf(runner_path), when that file exists).
  std::string runner_path;
  std::string arm64_runner_path;
  std::ostream* progress = nullptr;           // progress output when set (borrowed)
  bool progress_tty = false;                  // one redrawn line instead of a line per job
  const std::atomic<bool>* cancel = nullptr;  // checked between jobs when set (borrowed)
  // A resumed run refuses a runner build that changed since the run started
  // (its sha256 is recorded with the run) unless this is set.
  bool allow_runner_change = false;
  // Opens one more connection to the store the sweep writes (one per device
  // worker: a Store is not thread-safe). Required.
  StoreOpener open_store;
  // How often the sweep renews its claim on the run (store::RefreshRunClaim)
  // on a connection of its own while jobs run.
  std::chrono::milliseconds claim_refresh{store::kRunClaimRefreshSeconds * 1000};
  // Where the packed input sets of spec models with "inputs" are written
  // before they are pushed; empty: DefaultInputsCacheDir().
  std::string inputs_cache_dir;
  // A farm run's priority (`dfarm sweep --priority`): wins over the spec's
  // farm.priority when set.
  std::optional<uint32_t> priority;
};

struct SweepSummary {
  int64_t run_id = 0;
  std::string status;  // the run's final status (store::kRun*)
  // Over the whole run (a resumed run counts what earlier processes recorded).
  size_t jobs = 0;
  size_t ok = 0;
  size_t failed = 0;  // ended in any status but ok or cancelled
  // Still queued/running (the sweep was cancelled), or ended cancelled (the
  // run was: `dfarm cancel`).
  size_t not_run = 0;
  size_t moved = 0;  // ran (or were recorded) on another device than planned
  // This process only.
  size_t resumed = 0;  // pending jobs a resume found (0 for a new run)
  uint64_t bytes_pushed = 0;
  std::vector<std::string> quarantined;
};

// The runtime builds a sweep of `spec` runs: spec.runners, or the default
// runner "default" (SweepOptions::runner_path for HostAbi(), plus the arm64
// build when there is one).
std::vector<RunnerSpec> EffectiveRunners(const SweepSpec& spec, const SweepOptions& options);

// A device of a sweep and the ABI its agent reports ("" when unknown: the
// device was unreachable and the store has never seen it).
struct ResolvedDevice {
  std::string name;
  std::string abi;
};

// The sweep's devices: spec.devices in order, then every candidate matched by
// a selector (candidates: spec.devices, the keys of spec.device_tags and
// devices.KnownDevices(), in that order, each once). ABIs come from
// DeviceProvider::KnownAbi, else (when `want_abis` or a selector names an
// ABI) from asking the agent (devices probed in parallel, each session closed
// again), else from `known_abis` (the store's devices table). Errors: a
// selector that matches nothing (naming it and the candidates), no device.
Result<std::vector<ResolvedDevice>> ResolveDevices(
    const SweepSpec& spec, DeviceProvider& devices,
    const std::vector<std::pair<std::string, std::string>>& known_abis, bool want_abis);

// Runs `spec` and records it in `store`. Each device runs each runner's
// build for its ABI (a runner without one: the device's jobs of that runner
// are recorded `infra`, naming the runner and the ABI). Device trouble does not fail the
// call: it is recorded as jobs with status infra (and the run as failed when
// no device could be reached at all). Errors are for what stops the sweep
// from being recorded: unreadable models or runner, or a store failure.
// `store` is used only by the calling thread, before and after the workers.
Result<SweepSummary> RunSweep(const SweepSpec& spec, store::Store& store, DeviceProvider& devices,
                              const SweepOptions& options);

// Finishes run `run_id` after its sweep was killed or cancelled: every job
// still queued or running (a job found running had no result committed) runs
// again under its own job id, on its device, with the run's stored spec; jobs
// with a result are left alone. The runner is options.runner_path. A run with
// nothing pending is only summarized. Errors: no such run, a model missing or
// changed since the run was created, a store failure.
Result<SweepSummary> ResumeSweep(int64_t run_id, store::Store& store, DeviceProvider& devices,
                                 const SweepOptions& options);

// A sweep on a farm (a shared PostgreSQL database; docs/farm.md): the spec's
// jobs are queued for `dfarm node` processes instead of run here. Every file a
// job needs (models, plugins, input sets, each runner build) goes into the
// database by sha256 (Store::PutBlob); each
// job carries its payload (queue_job.h) and target: a spec device is that
// device of whichever node serves it, "any" any device, a selector any
// device that matches it when a node claims the job. Returns the run's id
// (mode "queue") with the spec's farm priority (options.priority wins) and
// unserved timeout. Notes on `log` (when set) which targets no live node
// serves now (their jobs wait until one does, up to the timeout).
Result<int64_t> EnqueueSweep(const SweepSpec& spec, store::Store& store,
                             const SweepOptions& options, std::ostream* log);

// Follows queue run `run_id` until every job has ended, printing progress
// like a sweep (options.progress, progress_tty), and returns its summary.
// options.cancel stops the following only: the run goes on on the nodes
// (summary.not_run counts what is left). poll: how often the store is read.
// While following it ends the jobs no live node serves in time
// (Store::EndUnservedJobs, every unserved_check), as the nodes do.
Result<SweepSummary> FollowRun(
    int64_t run_id, store::Store& store, const SweepOptions& options,
    std::chrono::milliseconds poll = std::chrono::milliseconds(500),
    std::chrono::milliseconds unserved_check = std::chrono::milliseconds(5000));

}  // namespace dfarm::harness
