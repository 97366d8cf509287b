// A job on a farm's queue (a run of mode "queue" on a shared database, run by
// `dfarm node` processes): what it carries for the node that claims it
// (store::JobRow::payload, JSON), where it may run (store::JobRow::target),
// and how a node turns it back into a SweepJob with its files fetched by
// sha256 from the database (store::Store::GetBlob).
//
// The payload's keys are a contract: docs/CONTRACTS.md, "Queue payload"
// (checked by queue_job_test.cc).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/protocol/types.h"
#include "harness/spec/matrix.h"
#include "harness/spec/spec.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// `sel` as a job target (store::TargetString).
std::string SelectorTarget(const DeviceSelector& sel);

// What a job's target is matched against, from a device's hello: its ABI,
// OS (with the release), CPU name (with ro.soc.model on Android), memory,
// the tags given to it, and its model (ro.product.model on Android), which
// names its derived device class (store::DeviceClassOf).
store::DeviceTraits TraitsOf(const std::string& name, const agent::DeviceInfo& info,
                             const std::vector<std::string>& tags);

// The payload of `job`; runner_builds: the sha256 of each build (by ABI) of
// the job's runner.
std::string EncodePayload(const SweepJob& job,
                          const std::map<std::string, std::string>& runner_builds);

// Fetches a file by sha256 (`name` says what it is, for messages) and
// returns its path on this host.
using FetchFile =
    std::function<Result<std::string>(const std::string& sha256, const std::string& name)>;

// The job a node runs for claimed row `row` on a device of ABI `abi`: its
// payload decoded, every file fetched, the runner build for `abi` chosen
// (kInvalidInput, naming the runner and the ABIs it has, when there is none;
// then the job cannot run on this device). id, claim_id, device, job key and
// trial come from the row.
Result<SweepJob> DecodePayload(const store::JobRow& row, const std::string& abi,
                               const FetchFile& fetch);

}  // namespace dfarm::harness
