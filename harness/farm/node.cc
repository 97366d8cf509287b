#include "harness/farm/node.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "agent/base/regular_file.h"
#include "agent/base/sha256.h"
#include "harness/farm/queue_job.h"
#include "harness/run/scheduler.h"
#include "harness/spec/input_sets.h"

namespace dfarm::harness {
namespace {

namespace fs = std::filesystem;

std::string HostName() {
  char name[256] = "";
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Unix seconds of an ISO-8601 UTC time ("2024-05-01T12:34:56Z"); unset
// when it is not one.
std::optional<int64_t> ParseIsoUtc(const std::string& text) {
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != 0) return std::nullopt;
  return static_cast<int64_t>(::timegm(&tm));
}

// Unix seconds when process `pid` of this host started (Linux /proc); unset
// when unknown.
std::optional<int64_t> ProcessStartUnix(int64_t pid) {
  const std::optional<ProcStat> stat = ReadProcStat(pid);
  const int64_t ticks = stat ? static_cast<int64_t>(stat->start_ticks) : -1;
  std::ifstream boot_file("/proc/stat");
  std::string key;
  int64_t boot = -1;
  while (boot_file >> key) {
    if (key == "btime") {
      boot_file >> boot;
      break;
    }
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (ticks < 0 || boot < 0 || hz <= 0) return std::nullopt;
  return boot + ticks / hz;
}

// Whether node row `n` was left by a process of this host that is gone: its
// pid exists no more, or belongs to a process started after `n` registered
// (the pid was reused; a 2 s margin for the boot time's rounding). Such a
// node is dead however recent its heartbeat: a node restarted after a crash
// takes its name over at once.
bool DeadOnThisHost(const store::NodeRow& n, const std::string& host) {
  if (n.host != host || n.pid <= 0 || n.pid == ::getpid()) return false;
  if (::kill(static_cast<pid_t>(n.pid), 0) != 0 && errno == ESRCH) return true;
  const std::optional<int64_t> registered = ParseIsoUtc(n.started_at);
  const std::optional<int64_t> started = ProcessStartUnix(n.pid);
  return registered && started && *started > *registered + 2;
}

// Whether node row `n` belongs to a process that is still alive: as far as
// its heartbeat tells (two leases without one: gone), unless it ran on this
// host and its process is gone.
bool Alive(const store::NodeRow& n, int64_t lease_s, const std::string& host) {
  return n.state != store::kNodeStopped && n.heartbeat_age_s <= 2 * lease_s &&
         !DeadOnThisHost(n, host);
}

// Fails when `name`, or one of `devices`, belongs to another live node.
Result<void> CheckFree(store::Store& store, const std::string& name,
                       const std::vector<std::string>& devices, int64_t lease_s) {
  auto nodes = store.ListNodes();
  if (!nodes) return nodes.error();
  const std::string host = HostName();
  for (const store::NodeRow& n : *nodes) {
    if (!Alive(n, lease_s, host)) continue;
    if (n.name == name && !(n.host == host && n.pid == ::getpid())) {
      return MakeError(ErrorKind::kInvalidInput,
                       "node name '" + name + "' is in use by pid " + std::to_string(n.pid) +
                           " on " + n.host + " (heartbeat " + std::to_string(n.heartbeat_age_s) +
                           " s ago); pass another --name");
    }
    if (n.name == name) continue;
    for (const std::string& d : devices) {
      for (const std::string& theirs : n.devices) {
        if (theirs != d) continue;
        return MakeError(ErrorKind::kInvalidInput,
                         "device '" + d + "' is served by node '" + n.name + "' (pid " +
                             std::to_string(n.pid) + " on " + n.host +
                             "); a device belongs to one node: stop that node or leave the "
                             "device out");
      }
    }
  }
  return Ok();
}

// "1, 2, 3".
std::string IdList(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

// The node's background work, each on a thread of its own with its own
// store connection: the heartbeat (which also reaps expired claims) and the
// listener that wakes idle workers when jobs are queued.
class Background {
 public:
  Background(const NodeOptions& o, std::string name) : o_(o), name_(std::move(name)) {}
  ~Background() { Stop(); }

  void Start() {
    heartbeat_ = std::thread([this] { HeartbeatMain(); });
    listener_ = std::thread([this] { ListenerMain(); });
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
    if (listener_.joinable()) listener_.join();
  }

  // Waits until jobs may have been queued (a notification) or a while passed.
  void WaitForWork() {
    std::unique_lock lock(mu_);
    const uint64_t seen = generation_;
    cv_.wait_for(lock, std::chrono::seconds(2), [&] {
      return stop_ || generation_ != seen || (o_.drain && o_.drain->load()) ||
             (o_.cancel && o_.cancel->load());
    });
  }

 private:
  void Log(const std::string& line) {
    std::lock_guard lock(log_mu_);
    if (o_.log) *o_.log << "node " << name_ << ": " << line << std::endl;
  }

  bool SleepUnlessStopped(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    return !cv_.wait_for(lock, d, [&] { return stop_; });
  }

  void HeartbeatMain() {
    std::unique_ptr<store::Store> store;
    bool failing = false;
    do {
      if (!store) {
        auto opened = o_.open_store();
        if (opened) store = std::move(*opened);
      }
      if (!store) continue;
      const bool draining = (o_.drain && o_.drain->load()) || (o_.cancel && o_.cancel->load());
      auto beat = store->NodeHeartbeat(name_, draining ? store::kNodeDraining : store::kNodeRunning,
                                       o_.lease_s);
      auto reaped = beat ? store->ReapExpiredClaims(o_.max_claims)
                         : Result<std::vector<int64_t>>(beat.error());
      if (!beat || !reaped) {
        if (!failing)
          Log("cannot reach the database: " + (beat ? reaped.message() : beat.message()));
        failing = true;
        continue;
      }
      if (failing) Log("the database answers again");
      failing = false;
      if (!reaped->empty()) {
        Log("reaped " + std::to_string(reaped->size()) +
            " job(s) whose node stopped renewing its lease: " + IdList(*reaped));
      }
      // Jobs no live node has served for their run's unserved timeout end
      // not_run; a failure here is noted and tried again next beat.
      if (auto unserved = store->EndUnservedJobs(); !unserved) {
        Log("cannot end the jobs no node serves: " + unserved.message());
      } else if (!unserved->empty()) {
        Log("ended " + std::to_string(unserved->size()) +
            " job(s) not_run that no live node served in time: " + IdList(*unserved));
      }
    } while (SleepUnlessStopped(o_.heartbeat));
  }

  void ListenerMain() {
    std::unique_ptr<store::Store> store;
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
      }
      if (!store) {
        auto opened = o_.open_store();
        if (!opened) {
          SleepUnlessStopped(std::chrono::seconds(1));
          continue;
        }
        store = std::move(*opened);
      }
      auto woke = store->WaitForWork(500);
      if (!woke) {
        store.reset();  // reconnect (and listen again)
        SleepUnlessStopped(std::chrono::seconds(1));
        continue;
      }
      if (*woke) {
        std::lock_guard lock(mu_);
        ++generation_;
        cv_.notify_all();
      }
    }
  }

  const NodeOptions& o_;
  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;  // notifications seen
  std::mutex log_mu_;
  std::thread heartbeat_;
  std::thread listener_;
};

// Fetches files by sha256 into the node's cache (one fetch at a time: the
// workers share the cache).
class FileCache {
 public:
  explicit FileCache(std::string dir) : dir_(std::move(dir)) {}

  Result<std::string> Fetch(store::StorePool& db, const std::string& sha256,
                            const std::string& what) {
    if (!agent::IsValidSha256(sha256)) {
      return MakeError(ErrorKind::kInvalidInput, what + " has no valid sha256 ('" + sha256 + "')");
    }
    std::lock_guard lock(mu_);
    const std::string path = (fs::path(dir_) / sha256).string();
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path;
    fs::create_directories(dir_, ec);
    if (auto r = db.Call(&store::Store::GetBlob, sha256, path); !r) {
      return MakeError(r.error().kind, "cannot fetch " + what + ": " + r.message());
    }
    return path;
  }

 private:
  std::string dir_;
  std::mutex mu_;
};

}  // namespace

std::string DefaultNodeCacheDir() { return CacheDir("DFARM_NODE_CACHE", "node"); }

Result<NodeSummary> RunNode(const NodeOptions& o) {
  if (o.devices.empty()) {
    return MakeError(ErrorKind::kInvalidInput, "a node needs at least one --device URI");
  }
  const std::string name = o.name.empty() ? HostName() + ":" + std::to_string(::getpid()) : o.name;
  if (o.connections < 1) {
    return MakeError(
        ErrorKind::kInvalidInput,
        "a node needs at least one database connection for its devices (--connections " +
            std::to_string(o.connections) + ")");
  }
  store::StorePool pool(o.open_store, o.connections);
  if (auto r = pool.Call([&](store::Store& s) { return CheckFree(s, name, o.devices, o.lease_s); });
      !r) {
    return r.error();
  }
  store::NodeRow row;
  row.name = name;
  row.host = HostName();
  row.pid = ::getpid();
  row.started_at = store::NowIso8601();
  row.devices = o.devices;
  if (auto r = pool.Call(&store::Store::RegisterNode, row); !r) return r.error();
  // What a dead predecessor of the same name held went back to the queue
  // (RegisterNode ended its leases): claimable at once, here or elsewhere.
  if (auto r = pool.Call(&store::Store::ReapExpiredClaims, o.max_claims); !r) return r.error();
  if (o.log) {
    *o.log << "node " << name << ": serving " << o.devices.size() << " device(s), lease "
           << o.lease_s << " s, " << o.connections << " database connection(s) for them"
           << std::endl;
  }

  Background background(o, name);
  background.Start();
  FileCache cache(o.cache_dir.empty() ? DefaultNodeCacheDir() : o.cache_dir);
  Progress progress(o.log, false, 0, 0);

  SchedulerContext ctx;
  ctx.devices = o.provider;
  ctx.open_store = o.open_store;
  ctx.store_pool = &pool;
  ctx.policy = o.policy;
  ctx.progress = &progress;
  ctx.cancel = o.cancel;
  ctx.node_name = name;
  ctx.device_tags = o.device_tags;
  NodeClaims& node = ctx.node;
  node.drain = o.drain;
  node.max_claims = o.max_claims;
  node.wait_for_work = [&background] { background.WaitForWork(); };
  HealthChecker health(o.health, {}, [&progress](const std::string& line) { progress.Note(line); });
  node.device_ready = [&health](store::StorePool& db, const std::string& device,
                                agent::AgentClient& client) {
    return health.Ready(db, device, client);
  };
  node.claim = [&](store::StorePool& db, const std::string& device,
                   const agent::DeviceInfo& info) -> Result<std::optional<SweepJob>> {
    auto tags = o.device_tags.find(device);
    const store::DeviceTraits traits = TraitsOf(
        device, info, tags == o.device_tags.end() ? std::vector<std::string>() : tags->second);
    for (;;) {
      auto claimed = db.Call(&store::Store::ClaimJob, name, traits, o.lease_s);
      if (!claimed) return claimed.error();
      if (!*claimed) return std::optional<SweepJob>();
      const store::JobRow& r = **claimed;
      auto job = DecodePayload(r, info.abi, [&](const std::string& sha, const std::string& what) {
        return cache.Fetch(db, sha, what);
      });
      if (job) return std::optional<SweepJob>(std::move(*job));
      // It cannot run here (no runner build for the ABI, a file missing from
      // the database): recorded infra, naming why and where.
      store::JobOutcome out;
      out.status = store::kJobInfra;
      out.error = "device '" + device + "' of node '" + name + "': " + job.message();
      out.claim_id = r.claim_id;
      progress.Note("job " + std::to_string(r.id) + ": " + out.error);
      if (auto rec = db.Call(&store::Store::RecordJobResult, r.id, out);
          !rec && rec.error().kind != ErrorKind::kConflict) {
        return rec.error();
      }
    }
  };
  auto stats = RunJobs(ctx, o.devices, {});
  background.Stop();
  (void)pool.Call(&store::Store::NodeHeartbeat, name, store::kNodeStopped, o.lease_s);
  progress.Finish();
  if (!stats) return stats.error();
  if (o.log) *o.log << "node " << name << ": stopped" << std::endl;
  return NodeSummary{name, stats->quarantined};
}

}  // namespace dfarm::harness
