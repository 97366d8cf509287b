// dfarm devices [--device URI]... [--db FILE] [--json]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/devices/device_row.h"
#include "harness/devices/devices.h"
#include "harness/run/terminal_text.h"
#include "harness/spec/spec.h"

namespace dfarm::cli {
namespace {

using nlohmann::json;

struct DevicesOptions {
  bool json = false;
  bool history = false;
  std::string release;
  std::string quarantine;
  std::string lift;  // --auto
  std::string reason;
  std::string agent_store;
  std::string db;
  std::string token_file;
  std::vector<std::string> devices;
};

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

// What the store knows: device rows, and which devices a running run is
// using right now (a job in status running).
struct Known {
  std::map<std::string, store::DeviceRow> rows;
  std::set<std::string> busy;
  std::map<std::string, store::NodeRow> nodes;  // a farm's nodes, by name
};

// Device name -> (state, what to do), as its provider says (adb, USB).
using ListedStates = std::map<std::string, std::pair<std::string, std::string>>;

void AddName(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

// What the store at `db` knows; nothing when `db` is a file that does not
// exist (the default dfarm.db before any sweep). An error, naming the
// database (its password hidden): it cannot be opened or read.
Result<Known> ReadStore(const std::string& db) {
  Known k;
  std::error_code ec;
  if (db.empty() || (!store::IsPostgresUrl(db) && !std::filesystem::exists(db, ec))) return k;
  auto store = store::OpenStore(db);
  if (!store) return store.error();
  auto nodes = (*store)->ListNodes();
  if (!nodes) return nodes.error();
  for (store::NodeRow& n : *nodes) k.nodes[n.name] = std::move(n);
  auto rows = (*store)->ListDevices();
  if (!rows) return rows.error();
  for (store::DeviceRow& r : *rows) k.rows[r.name] = std::move(r);
  auto runs = (*store)->ListRuns();
  if (!runs) return runs.error();
  for (const store::RunRow& run : *runs) {
    if (run.status != store::kRunRunning) continue;
    auto jobs = (*store)->ListJobs(run.id);
    if (!jobs) return jobs.error();
    for (const store::JobRow& j : *jobs) {
      if (j.status == store::kJobRunning) k.busy.insert(j.device);
    }
  }
  return k;
}

// The devices to list, in order: --device as given, else those `names`
// already holds (what the providers list: `local`, phones adb lists) and the
// store's. Returns the exit code (kExitOk, or after ctx.Fail on a bad --device).
int DeviceNames(const DevicesOptions& o, const Known& known, std::vector<std::string>& names,
                Context& ctx) {
  if (o.devices.empty()) {
    for (const auto& [name, row] : known.rows) {
      if (harness::CheckDeviceName(name).ok()) AddName(names, name);
    }
    return kExitOk;
  }
  for (const std::string& d : o.devices) {
    if (auto r = harness::CheckDeviceName(d); !r) {
      ctx.Fail(kExitUsage, "--device: " + r.message());
      return kExitUsage;
    }
    AddName(names, d);
  }
  return kExitOk;
}

// What the providers list, by name: a state they know without asking the
// agent (a phone adb cannot reach) and what to do about it. With `add_to`
// set, the listed devices join that list.
ListedStates ReadListed(const harness::DeviceProvider& provider, std::vector<std::string>* add_to) {
  ListedStates states;
  for (const harness::ListedDevice& d : provider.List()) {
    if (!d.state.empty()) states[d.name] = {d.state, d.reason};
    if (add_to) AddName(*add_to, d.name);
  }
  return states;
}

// One device's entry of `devices --json`: its state (as adb says, busy in a
// running sweep, or from a hello to its agent; quarantined as the store
// says), the reason, and what its agent reports (or reported last).
json DeviceEntry(const std::string& name, const Known& known, const ListedStates& listed,
                 harness::DeviceProvider& provider) {
  json entry = {{"name", name}};
  auto known_row = known.rows.find(name);
  const store::DeviceRow* row = known_row != known.rows.end() ? &known_row->second : nullptr;
  std::string state, why;
  std::optional<agent::DeviceInfo> info;
  auto node = row && !row->node.empty() ? known.nodes.find(row->node) : known.nodes.end();
  if (node != known.nodes.end()) {
    // A farm node's device: its node reaches it, not this host.
    entry["node"] = row->node;
    state = store::NodeAlive(node->second) ? "online" : "offline";
    if (state == "online" && row->state == store::kDeviceOffline) {
      state = "offline";  // its live node cannot reach it (SetDeviceReachable)
      why = row->state_reason;
    } else if (state == "offline") {
      why =
          "its node '" + row->node + "' is " +
          (node->second.state == store::kNodeStopped
               ? std::string("stopped")
               : "lost (no heartbeat for " + std::to_string(node->second.heartbeat_age_s) + " s)");
    }
    if (!row->tags.empty()) entry["tags"] = row->tags;
  } else if (auto it = listed.find(name); it != listed.end()) {
    state = it->second.first;  // unauthorized or offline, as adb (or USB) says
    why = it->second.second;   // what to do about it
  } else if (known.busy.count(name)) {
    state = "busy";  // a sweep holds it; do not start a second agent beside it
    why = "a running sweep has a job on it";
  } else {
    auto session = provider.Open(name);
    if (session) {
      info = (*session)->client().device();
      state = "online";
    } else {
      // Another dfarm's agent holds the device (its store's lock): busy, not offline.
      state = session.error().kind == ErrorKind::kConflict ? "busy" : "offline";
      why = session.message();
    }
  }
  if (row && row->state == store::kDeviceQuarantined && state != "offline") {
    state = "quarantined";
    why = row->state_reason;
  }
  if (row && !row->state.empty()) entry["health"] = row->state;
  if (row && !row->state_by.empty()) {
    // Who set the stored state: "operator" (with USER@HOST), "health" or "dfarm".
    entry["set_by"] = row->state_by;
    if (!row->state_user.empty()) entry["set_by_user"] = row->state_user;
  }
  entry["state"] = state;
  if (!why.empty()) entry["reason"] = why;
  // The OpenCL devices its agent sees (or saw last), in the store's one text form.
  const std::vector<store::OpenClDevice> opencl =
      info ? harness::OpenClDevicesOf(*info)
           : (row ? row->opencl : std::vector<store::OpenClDevice>{});
  entry["opencl"] = opencl.empty() ? json::array() : json::parse(store::OpenClDevicesJson(opencl));
  if (info) {
    entry.update({{"abi", info->abi},
                  {"os", info->os},
                  {"cpu", info->cpu},
                  {"cores", info->cores},
                  {"memory_bytes", info->memory_bytes},
                  {"hostname", info->hostname},
                  {"agent_version", info->agent_version},
                  {"protocol_version", info->protocol_version},
                  {"features", info->features}});
  } else if (row && !row->abi.empty()) {  // as last seen
    entry.update({{"abi", row->abi},
                  {"os", row->os},
                  {"cpu", row->cpu},
                  {"cores", row->cores},
                  {"memory_bytes", row->memory_bytes},
                  {"hostname", row->hostname},
                  {"agent_version", row->agent_version}});
  }
  if (row && !row->last_seen.empty()) entry["last_seen"] = row->last_seen;
  return entry;
}

// The human line of one entry: NAME STATE [ABI OS CPU CORES MEMORY AGENT] [REASON].
// What the agent reported is made safe for a terminal (TerminalSafe).
void PrintDeviceLine(const json& entry, Context& ctx) {
  auto text = [&entry](const char* key) {
    return harness::TerminalSafe(entry[key].get_ref<const std::string&>());
  };
  ctx.out << text("name") << "\t" << text("state");
  if (entry.contains("abi")) {
    ctx.out << "\t" << text("abi") << "\t" << text("os") << "\t" << text("cpu") << "\t"
            << entry["cores"].get<int64_t>() << " cores\t"
            << GiB(entry["memory_bytes"].get<uint64_t>()) << "\tagent " << text("agent_version");
  }
  if (entry.contains("node")) ctx.out << "\tnode " << text("node");
  if (entry.contains("reason")) ctx.out << "\t" << text("reason");
  if (entry.contains("set_by") &&
      (entry["set_by"] == store::kSetByOperator || entry["state"] == store::kDeviceQuarantined)) {
    ctx.out << "\tset by " << text("set_by");
    if (entry.contains("set_by_user")) ctx.out << " " << text("set_by_user");
  }
  ctx.out << "\n";
  for (const json& d : entry["opencl"]) {
    // "  opencl: NAME, VENDOR, driver V, OpenCL 3.0 ..., fp16, 6 compute units"
    ctx.out << "  opencl: " << harness::TerminalSafe(d["name"].get<std::string>()) << ", "
            << harness::TerminalSafe(d["vendor"].get<std::string>()) << ", driver "
            << harness::TerminalSafe(d["driver_version"].get<std::string>()) << ", "
            << harness::TerminalSafe(d["opencl_version"].get<std::string>())
            << (d["gpu"].get<bool>() ? ", gpu" : "") << (d["fp16"].get<bool>() ? ", fp16" : "")
            << ", " << d["compute_units"].get<int64_t>() << " compute units\n";
  }
  if (entry.contains("history")) {
    for (const json& e : entry["history"]) {
      ctx.out << "  " << harness::TerminalSafe(e["at"].get<std::string>()) << "\t"
              << harness::TerminalSafe(e["state"].get<std::string>()) << "\t"
              << harness::TerminalSafe(e["reason"].get<std::string>());
      if (!e["set_by"].get_ref<const std::string&>().empty()) {
        ctx.out << "\t(" << harness::TerminalSafe(e["set_by"].get<std::string>())
                << (e["user"].get_ref<const std::string&>().empty()
                        ? std::string()
                        : " " + harness::TerminalSafe(e["user"].get<std::string>()))
                << ")";
      }
      ctx.out << "\n";
    }
  }
}

// The nodes of a farm's database, as `devices` shows them.
json NodesJson(const Known& known) {
  json nodes = json::array();
  for (const auto& [name, n] : known.nodes) {
    nodes.push_back(
        {{"name", name},
         {"host", n.host},
         {"pid", n.pid},
         {"state", store::NodeAlive(n) || n.state == store::kNodeStopped ? n.state : "lost"},
         {"heartbeat_age_s", n.heartbeat_age_s},
         {"started_at", n.started_at},
         {"devices", n.devices}});
  }
  return nodes;
}

// --quarantine DEVICE / --release DEVICE / --auto DEVICE: an operator's
// state in the database (an event in its history, with USER@HOST), which the
// health check and dfarm leave alone until --auto hands the device back.
// Returns the exit code.
int SetState(const DevicesOptions& o, Context& ctx) {
  const int given = !o.release.empty() + !o.quarantine.empty() + !o.lift.empty();
  if (given > 1) {
    ctx.Fail(kExitUsage, "give one of --quarantine, --release and --auto");
    return kExitUsage;
  }
  const std::string& device =
      !o.release.empty() ? o.release : (!o.quarantine.empty() ? o.quarantine : o.lift);
  if (!o.quarantine.empty() && o.reason.empty()) {
    ctx.Fail(kExitUsage, "--quarantine needs --reason TEXT (it is shown with the device)");
    return kExitUsage;
  }
  auto store = OpenExistingStore(o.db);
  if (!store) return ctx.Fail(store.error());
  const std::string user = OperatorName();
  const std::string state = !o.release.empty()      ? store::kDeviceOk
                            : !o.quarantine.empty() ? store::kDeviceQuarantined
                                                    : "";
  const std::string reason =
      !o.release.empty() && o.reason.empty() ? "released by " + user : o.reason;
  if (auto r = (*store)->SetOperatorState(device, state, reason, user); !r) {
    return ctx.Fail(r.error());
  }
  if (state.empty()) {
    ctx.err << "device '" << device
            << "' is back under the health check's and dfarm's control (its state stays as it is)"
            << std::endl;
  } else {
    ctx.err << "device '" << device << "' is "
            << (state == store::kDeviceOk ? "back in service" : "quarantined")
            << " by hand: the health check leaves it so until 'dfarm devices --auto " << device
            << "'" << std::endl;
  }
  return kExitOk;
}

int Run(const DevicesOptions& o, Context& ctx) {
  if (!o.release.empty() || !o.quarantine.empty() || !o.lift.empty()) return SetState(o, ctx);
  if (auto r = CheckTokenFileOption(o.token_file); !r) return ctx.Fail(r.error());
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = o.agent_store;
  po.token_file = o.token_file;
  po.connect_timeout = std::chrono::milliseconds(5000);
  auto provider = harness::MakeDeviceProvider(po);
  auto read = ReadStore(o.db);
  if (!read) return ctx.Fail(read.error());
  const Known& known = *read;
  std::vector<std::string> names;
  const ListedStates listed = ReadListed(*provider, o.devices.empty() ? &names : nullptr);
  if (int code = DeviceNames(o, known, names, ctx); code != kExitOk) return code;

  json list = json::array();
  size_t usable = 0;
  std::unique_ptr<store::Store> history_store;
  if (o.history) {
    auto opened = OpenExistingStore(o.db);
    if (!opened) return ctx.Fail(opened.error());
    history_store = std::move(*opened);
  }
  if (!o.json && !known.nodes.empty()) {
    for (const json& n : NodesJson(known)) {
      ctx.out << "node " << harness::TerminalSafe(n["name"].get<std::string>()) << "\t"
              << n["state"].get<std::string>() << "\t"
              << harness::TerminalSafe(n["host"].get<std::string>()) << "\tpid " << n["pid"]
              << "\theartbeat " << n["heartbeat_age_s"] << " s ago\t" << n["devices"].size()
              << " device(s)\n";
    }
  }
  for (const std::string& name : names) {
    json entry = DeviceEntry(name, known, listed, *provider);
    if (history_store) {
      auto events = history_store->ListDeviceEvents(name);
      if (!events) return ctx.Fail(events.error());
      entry["history"] = json::array();
      for (const store::DeviceEvent& e : *events) {
        entry["history"].push_back({{"at", e.at},
                                    {"state", e.state},
                                    {"reason", e.reason},
                                    {"set_by", e.set_by},
                                    {"user", e.user}});
      }
    }
    const std::string& state = entry["state"].get_ref<const std::string&>();
    if (state != "offline" && state != "unauthorized") ++usable;
    if (!o.json) PrintDeviceLine(entry, ctx);
    list.push_back(std::move(entry));
  }
  if (o.json) {
    json doc = {{"devices", list}};
    if (!known.nodes.empty()) doc["nodes"] = NodesJson(known);
    ctx.out << doc.dump(2) << "\n";
  }
  if (usable == 0) {
    ctx.Fail(kExitInfra, "no device is online");
    return kExitInfra;
  }
  return kExitOk;
}

}  // namespace

void AddDevicesCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the devices (given with --device, else 'local' and those in the database) with "
      "their state (online, offline, busy, quarantined) and what their agents report");
  cmd->add_flag("--json", o->json,
                "print JSON: {\"devices\":[{\"name\",\"state\",\"reason\",\"abi\",...}]}");
  cmd->add_option("--device", o->devices,
                  "list this device (local, local:NAME, tcp://HOST:PORT); repeatable")
      ->allow_extra_args(false);
  cmd->add_flag("--history", o->history,
                "also list each device's states over time (when and why it was quarantined or "
                "put back)");
  cmd->add_option("--release", o->release,
                  "put DEVICE in service by hand (recorded in its history with USER@HOST); the "
                  "health check does not quarantine it until --auto");
  cmd->add_option("--quarantine", o->quarantine,
                  "take DEVICE out of service by hand (a farm's nodes stop claiming jobs for it); "
                  "needs --reason; the health check does not release it until --auto or "
                  "--release");
  cmd->add_option("--auto", o->lift,
                  "lift the hand-set state of DEVICE: the health check and dfarm decide again");
  cmd->add_option("--reason", o->reason, "why, with --quarantine, --release or --auto");
  AddDbOption(*cmd, o->db);
  AddAgentStoreOption(*cmd, o->agent_store);
  AddTokenFileOption(*cmd, o->token_file);
  cmd->footer(
      "With a farm's database (--db postgresql://...) the devices of its nodes are listed as "
      "their nodes report them (not reached from here), after the nodes themselves. "
      "Exit codes: 0 some device is usable (online, busy or quarantined) or the state was set, "
      "2 usage error (a bad --device or --token-file, an unknown device to --release, "
      "--quarantine or --auto), 3 no "
      "device is online, or the database (a PostgreSQL URL, or a file that exists) cannot be "
      "opened or read.");
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
