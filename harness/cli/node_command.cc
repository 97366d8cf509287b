// dfarm node --db URL --device URI [--device URI]... [--name NAME] [--tag URI=TAG,...]...
//            [--connections N]
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include "harness/cli/commands.h"
#include "harness/devices/devices.h"
#include "harness/farm/node.h"
#include "harness/spec/spec.h"

namespace dfarm::cli {
namespace {

std::atomic<bool> g_drain{false};
std::atomic<bool> g_cancel{false};

// First SIGINT/SIGTERM: drain (finish the jobs in hand, claim no more);
// second: give the jobs in flight back to the queue; third: end at once.
void OnNodeSignal(int sig) {
  if (!g_drain.exchange(true)) return;
  if (!g_cancel.exchange(true)) return;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

struct NodeArgs {
  std::string db;
  std::vector<std::string> devices;
  std::vector<std::string> tags;
  std::string name;
  int64_t lease_s = 30;
  double heartbeat_s = 5;
  std::string cache_dir;
  std::string agent_store;
  std::string token_file;
  uint32_t retries = 2;
  uint32_t quarantine_after = 3;
  std::string health_model;
  int64_t health_every_s = 3600;
  int64_t health_retry_s = 60;
  int connections = store::kNodeStoreConnections;
};

// The health check's settings: the runner builds as a sweep finds them
// ($DFARM_RUNNER, else dfarm-runner beside dfarm; $DFARM_ARM64_RUNNER, else
// the arm64 build beside that runner when it exists).
Result<harness::HealthOptions> MakeHealthOptions(const NodeArgs& a) {
  harness::HealthOptions h;
  if (a.health_every_s < 1 || a.health_retry_s < 1) {
    return MakeError(ErrorKind::kInvalidInput,
                     "--health-every-s and --health-retry-s must be >= 1");
  }
  h.every = std::chrono::seconds(a.health_every_s);
  h.retry = std::chrono::seconds(a.health_retry_s);
  if (a.health_model.empty()) return h;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(a.health_model, ec)) {
    return MakeError(ErrorKind::kInvalidInput,
                     "--health-model '" + a.health_model + "': no such file");
  }
  h.model_path = std::filesystem::absolute(a.health_model, ec).string();
  const char* runner = std::getenv("DFARM_RUNNER");
  h.runner_path = runner && *runner ? runner : harness::BesideSelf("dfarm-runner");
  const char* arm = std::getenv("DFARM_ARM64_RUNNER");
  if (arm && *arm) {
    h.arm64_runner_path = arm;
  } else if (std::string b = harness::Arm64BuildOf(h.runner_path);
             std::filesystem::is_regular_file(b, ec)) {
    h.arm64_runner_path = b;
  }
  return h;
}

// --tag URI=TAG[,TAG...] into device -> tags; an error names the bad one.
Result<std::map<std::string, std::vector<std::string>>> ParseTags(const NodeArgs& a) {
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& t : a.tags) {
    const size_t eq = t.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == t.size()) {
      return MakeError(ErrorKind::kInvalidInput, "--tag '" + t + "': expected URI=TAG[,TAG...]");
    }
    const std::string device = t.substr(0, eq);
    if (std::find(a.devices.begin(), a.devices.end(), device) == a.devices.end()) {
      return MakeError(ErrorKind::kInvalidInput,
                       "--tag '" + t + "': '" + device + "' is not one of this node's --device");
    }
    std::string rest = t.substr(eq + 1);
    for (size_t start = 0; start < rest.size();) {
      size_t end = rest.find(',', start);
      if (end == std::string::npos) end = rest.size();
      const std::string tag = rest.substr(start, end - start);
      if (!store::IsValidTagName(tag)) {
        return MakeError(ErrorKind::kInvalidInput,
                         "--tag '" + t + "': tag '" + tag + "' must be [A-Za-z0-9_.-]{1,64}");
      }
      out[device].push_back(tag);
      start = end + 1;
    }
  }
  return out;
}

int Run(const NodeArgs& a, Context& ctx) {
  if (!store::IsPostgresUrl(a.db)) {
    ctx.Fail(kExitUsage, "--db '" + a.db +
                             "' is not a farm's database: a node serves a PostgreSQL database "
                             "(--db postgresql://USER@HOST:PORT/DB); a sweep on a SQLite file runs "
                             "its jobs itself");
    return kExitUsage;
  }
  for (const std::string& d : a.devices) {
    if (auto r = harness::CheckDeviceName(d); !r) {
      ctx.Fail(kExitUsage, "--device: " + r.message());
      return kExitUsage;
    }
  }
  auto tags = ParseTags(a);
  if (!tags) return ctx.Fail(tags.error());
  auto health = MakeHealthOptions(a);
  if (!health) return ctx.Fail(health.error());
  if (auto r = CheckTokenFileOption(a.token_file); !r) return ctx.Fail(r.error());
  if (a.lease_s < 2 || a.heartbeat_s <= 0 || a.heartbeat_s * 2 > static_cast<double>(a.lease_s)) {
    ctx.Fail(kExitUsage, "--lease-s must be >= 2 and at least twice --heartbeat-s");
    return kExitUsage;
  }
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = a.agent_store;
  po.token_file = a.token_file;
  auto provider = harness::MakeDeviceProvider(po);
  harness::NodeOptions o;
  o.name = a.name;
  o.devices = a.devices;
  o.device_tags = *tags;
  o.lease_s = a.lease_s;
  o.heartbeat = std::chrono::milliseconds(static_cast<int64_t>(a.heartbeat_s * 1000));
  o.cache_dir = a.cache_dir;
  const std::string db = a.db;
  o.open_store = [db] { return store::OpenStore(db); };
  o.connections = a.connections;
  o.provider = provider.get();
  o.policy.retries = a.retries;
  o.policy.quarantine_after = a.quarantine_after;
  o.health = *health;
  o.log = &ctx.err;
  o.drain = &g_drain;
  o.cancel = &g_cancel;
  g_drain = false;
  g_cancel = false;
  struct sigaction sa {};
  sa.sa_handler = OnNodeSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  auto summary = harness::RunNode(o);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (!summary) return ctx.Fail(summary.error());
  return kExitOk;
}

}  // namespace

void AddNodeCommand(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<NodeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "node",
      "Serve this host's devices to a farm: claim queued jobs from a shared database and run "
      "them, until SIGTERM");
  AddDbOption(*cmd, a->db);
  cmd->add_option("--device", a->devices,
                  "a device this node serves (local, local:NAME, tcp://HOST:PORT, qemu-arm64, "
                  "adb:SERIAL); repeatable, at least one")
      ->allow_extra_args(false);
  cmd->add_option("--tag", a->tags,
                  "URI=TAG[,TAG...]: tags of one of the devices, for spec selectors "
                  "{\"tags\":[...]}; repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--name", a->name, "the node's name in the database (default HOST:PID)");
  cmd->add_option("--connections", a->connections,
                  "database connections the node's devices share, each claim, result or other "
                  "store call borrowing one (the heartbeat and the listener hold one more each); "
                  "more devices than connections is the point: many backends slow PostgreSQL "
                  "down, and one makes every device wait for it")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--lease-s", a->lease_s,
                  "seconds a claimed job stays this node's without a heartbeat; after that any "
                  "node returns it to the queue")
      ->capture_default_str();
  cmd->add_option("--heartbeat-s", a->heartbeat_s,
                  "seconds between heartbeats (lease renewal and reaping)")
      ->capture_default_str();
  cmd->add_option("--retries", a->retries,
                  "attempts after an infra failure before the job goes back to the queue")
      ->capture_default_str();
  cmd->add_option("--quarantine-after", a->quarantine_after,
                  "quarantine a device after this many jobs in a row ended infra")
      ->capture_default_str();
  cmd->add_option("--health-model", a->health_model,
                  "a model whose outputs every device must reproduce (cpu delegate, 1 thread): "
                  "checked on a schedule and after a quarantine; a device that fails is "
                  "quarantined, one that passes comes back");
  cmd->add_option("--health-every-s", a->health_every_s,
                  "seconds between health checks of a device in service")
      ->capture_default_str();
  cmd->add_option("--health-retry-s", a->health_retry_s,
                  "seconds between health checks of a quarantined device")
      ->capture_default_str();
  cmd->add_option("--cache-dir", a->cache_dir,
                  "where files fetched from the database are kept (default "
                  "$DFARM_NODE_CACHE, else ~/.cache/dfarm/node)");
  AddAgentStoreOption(*cmd, a->agent_store);
  AddTokenFileOption(*cmd, a->token_file);
  cmd->footer(
      "Runs until SIGINT/SIGTERM: the first finishes the jobs in hand and claims no more, the "
      "second gives the jobs in flight back to the queue. A node killed outright loses nothing: "
      "its jobs go back to the queue when their lease expires. A device the database holds "
      "quarantined (by any sweep or node) claims nothing until its health check passes "
      "(--health-model: the first device to pass records the known outputs for that model and "
      "runner build, every later check must match them) or, without one, until `dfarm devices "
      "--release DEVICE`; `dfarm devices` shows why and the history. Exit codes: 0 stopped on a "
      "signal, 2 usage error (bad --device, --tag, lease, --health-model; name or device held by "
      "another live "
      "node), 3 database error.");
  cmd->callback([a, &ctx] { ctx.exit_code = Run(*a, ctx); });
}

}  // namespace dfarm::cli
