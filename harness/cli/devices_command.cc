// dfarm devices [--json]
#include <cstdio>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/devices.h"

namespace dfarm::cli {
namespace {

struct DevicesOptions {
  bool json = false;
  std::string agent_store;
};

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

int Run(const DevicesOptions& o, Context& ctx) {
  harness::ProviderOptions po = harness::DefaultProviderOptions();
  po.agent_store = o.agent_store;
  auto provider = harness::MakeDeviceProvider(po);
  nlohmann::json list = nlohmann::json::array();
  size_t online = 0;
  for (const std::string& name : provider->KnownDevices()) {
    auto session = provider->Open(name);
    if (!session) {
      list.push_back({{"name", name}, {"state", "offline"}, {"error", session.message()}});
      if (!o.json) ctx.out << name << "\toffline\t" << session.message() << "\n";
      continue;
    }
    ++online;
    const agent::DeviceInfo& d = (*session)->client().device();
    list.push_back({{"name", name},
                    {"state", "online"},
                    {"abi", d.abi},
                    {"os", d.os},
                    {"cpu", d.cpu},
                    {"cores", d.cores},
                    {"memory_bytes", d.memory_bytes},
                    {"hostname", d.hostname},
                    {"agent_version", d.agent_version},
                    {"protocol_version", d.protocol_version},
                    {"features", d.features}});
    if (!o.json) {
      ctx.out << name << "\tonline\t" << d.abi << "\t" << d.os << "\t" << d.cpu << "\t" << d.cores
              << " cores\t" << GiB(d.memory_bytes) << "\tagent " << d.agent_version << "\n";
    }
  }
  if (o.json) ctx.out << nlohmann::json{{"devices", list}}.dump(2) << "\n";
  if (online == 0) {
    ctx.Fail(kExitInfra, "no device is online");
    return kExitInfra;
  }
  return kExitOk;
}

}  // namespace

void AddDevicesCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand("devices", "List the devices and what their agents report");
  cmd->add_flag("--json", o->json, "print JSON: {\"devices\":[{\"name\",\"state\",...}]}");
  AddAgentStoreOption(*cmd, o->agent_store);
  cmd->callback([o, &ctx] { ctx.exit_code = Run(*o, ctx); });
}

}  // namespace dfarm::cli
