// Stepped pairs: two runner processes, a driver and its partner, both loaded
// and warmed up, take turns timed run by timed run, so that each sample of
// one sits next to a sample of the other in time and both see the same
// machine (docs/CONTRACTS.md, "Stepped pairs").
//
// The driver (dfarm-runner --partner-runner PATH) starts PATH with its own
// arguments plus `--step-fds R,W` as a child in its process group, waits
// until the partner is ready, then loads and warms itself up and runs its
// measured runs; before or after each of them (ABBA blocks, seeded by
// --partner-seed) it steps the partner once. The partner (--step-fds R,W),
// after its warm-up, writes one byte to W ("ready"); then, per measured run,
// reads one byte from R (EOF: its driver is done, the measured runs end),
// runs once timed, and writes one byte to W. The driver closes R's other end
// after its last run, reads the partner's --json document from its stdout
// and puts it under "partner" in its own; a partner that does not start,
// dies or prints no readable document costs only the pairing
// ("steps.partner_error"), never the driver's own result. The partner's
// stderr is the driver's.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "agent/base/unique_fd.h"
#include "agent/runner/runner_options.h"
#include "agent/runner/runner_values.h"

namespace dfarm::runner {

// The hooks of MeasureInvokes' measured runs in a stepped pair.
class Stepping {
 public:
  virtual ~Stepping() = default;
  // After the warm-up runs, before the first measured run.
  virtual void Warm() = 0;
  // Before measured run k (from 0): false ends the measured runs.
  virtual bool Before(size_t k) = 0;
  // After measured run k.
  virtual void After(size_t k) = 0;
  // True: the measured runs end only when Before() says so (a partner, not
  // --num-runs or --min-secs).
  virtual bool Driven() const = 0;
  // After the last measured run.
  virtual void Done() = 0;
};

// The partner's side: steps over the descriptors of --step-fds. Keeps them
// open for its lifetime and closes them when it ends.
class StepFds final : public Stepping {
 public:
  StepFds(int read_fd, int write_fd) : read_(read_fd), write_(write_fd) {}
  void Warm() override;
  bool Before(size_t k) override;
  void After(size_t k) override;
  bool Driven() const override { return true; }
  void Done() override;

 private:
  UniqueFd read_, write_;
};

// The driver's side: the partner process and the order of the pair's runs.
// Owns the partner: destroying a PartnerRunner that was not collected kills
// and reaps it.
class PartnerRunner final : public Stepping {
 public:
  explicit PartnerRunner(const RunnerOptions& options);
  ~PartnerRunner() override;
  PartnerRunner(const PartnerRunner&) = delete;
  PartnerRunner& operator=(const PartnerRunner&) = delete;

  // Starts the partner (options.partner_runner with options.partner_args,
  // --step-fds and --json) and waits until it is warm. A failure is kept
  // (Collect reports it); the driver then runs alone.
  void StartAndWait();

  void Warm() override {}
  bool Before(size_t k) override;
  void After(size_t k) override;
  bool Driven() const override { return false; }
  void Done() override;

  // Ends the pairing (closes the partner's step descriptor if still open),
  // reads the partner's document and reaps it: into steps (the driver's
  // order, partner_steps, partner_error) and *partner_json (its document,
  // when readable).
  void Collect(JobSteps* steps, std::optional<std::string>* partner_json);

 private:
  // Whether the partner runs before the driver's measured run k.
  bool PartnerFirst(size_t k);
  // One timed run of the partner; a failure ends the pairing.
  void Step();
  // Ends the pairing; `why` adds to the error ("; " between).
  void Fail(const std::string& why);

  const RunnerOptions& options_;
  std::mt19937 rng_;
  bool block_flipped_ = false;
  pid_t pid_ = -1;
  UniqueFd go_;    // the partner's R: one byte per step; closed at the end
  UniqueFd done_;  // the partner's W: "ready", then one byte per step
  UniqueFd out_;   // the partner's stdout
  bool stepping_ = false;
  std::string order_;
  int64_t steps_ = 0;
  std::string error_;
};

}  // namespace dfarm::runner
