// `dfarm node`: a host of a farm (a shared database, PostgreSQL). It
// registers itself and its devices, claims the queued jobs its devices may
// run (store::Store::ClaimJob: FOR UPDATE SKIP LOCKED in a short
// transaction, then a lease its heartbeat renews), runs each through the
// scheduler's device workers and agent client exactly as a sweep does, and
// records each result together with the job's completion under its claim
// (exactly once: a claim whose lease expired records nothing). Every node
// also reaps: a job whose lease expired (its node was killed or cut off) goes
// back to the queue. LISTEN/NOTIFY wakes idle nodes when jobs are queued.
//
// Stopping: *drain (SIGTERM) finishes the jobs in hand and claims no more;
// *cancel (a second signal) gives the jobs in flight back to the queue. A
// node killed outright loses nothing: its jobs are reaped when their leases
// expire and run elsewhere.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "harness/devices/devices.h"
#include "harness/devices/health.h"
#include "harness/run/scheduler.h"
#include "harness/spec/spec.h"
#include "reports/store/store_pool.h"

namespace dfarm::harness {

struct NodeOptions {
  std::string name;  // unique in the database; "" = "<hostname>:<pid>"
  std::vector<std::string> devices;
  std::map<std::string, std::vector<std::string>> device_tags;  // device -> its tags
  int64_t lease_s = 30;                       // a claim lives this long without a heartbeat
  std::chrono::milliseconds heartbeat{5000};  // heartbeat (and reaper) period
  int64_t max_claims = 3;                     // a job lost this often is recorded infra
  std::string cache_dir;                      // fetched files; "" = DefaultNodeCacheDir()
  StoreOpener open_store;                     // a connection to the farm's database
  // Connections the device workers share (store::StorePool, each store call
  // borrowing one); the heartbeat and the listener hold one more each.
  int connections = store::kNodeStoreConnections;
  DeviceProvider* provider = nullptr;  // borrowed
  SchedulerSpec policy;                // retries, backoff, quarantine, cooldown
  // Device health (harness/devices/health.h): asked before each claim. A device the
  // store holds quarantined stays out until its health check passes, or,
  // without a health model, until a user releases it.
  HealthOptions health;
  std::ostream* log = nullptr;                // one line per job and notice (borrowed)
  const std::atomic<bool>* drain = nullptr;   // borrowed: stop claiming, finish in-hand jobs
  const std::atomic<bool>* cancel = nullptr;  // borrowed: give jobs in flight back
};

struct NodeSummary {
  std::string name;
  std::vector<std::string> quarantined;
};

// Runs the node until *drain or *cancel. Errors: the database cannot be
// opened, the name or a device is held by another live node, no device.
Result<NodeSummary> RunNode(const NodeOptions& options);

// $DFARM_NODE_CACHE, else $XDG_CACHE_HOME/dfarm/node, else ~/.cache/dfarm/node.
std::string DefaultNodeCacheDir();

}  // namespace dfarm::harness
