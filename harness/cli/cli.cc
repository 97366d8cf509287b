#include "harness/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "agent/protocol/auth.h"
#include "harness/cli/commands.h"
#include "harness/devices/devices.h"
#include "harness/run/terminal_text.h"

namespace dfarm::cli {

void Context::Fail(int code, const std::string& message) {
  // A message may quote what a device said: made safe for a terminal.
  err << "dfarm: error: " << harness::TerminalSafe(message, 4096) << std::endl;
  exit_code = code;
}

int Context::Fail(const Error& error) {
  const int code = ExitCodeFor(error.kind);
  Fail(code, error.message);
  return code;
}

int ExitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
    case ErrorKind::kNotFound:
      return kExitUsage;
    case ErrorKind::kFailed:
    case ErrorKind::kConflict:
    case ErrorKind::kTransient:
      return kExitInfra;
  }
  return kExitInfra;
}

std::string OperatorName() {
  const char* user = std::getenv("USER");
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return std::string(user && *user ? user : "?") + "@" + (host[0] ? host : "?");
}

void AddDbOption(CLI::App& cmd, std::string& db) {
  db = "dfarm.db";
  cmd.add_option("--db", db,
                 "results database: a SQLite file, or a PostgreSQL URL "
                 "(postgresql://USER@HOST:PORT/DB) shared by a farm of hosts")
      ->envname("DFARM_DB")
      ->capture_default_str();
}

void AddAgentStoreOption(CLI::App& cmd, std::string& dir) {
  dir = harness::DefaultProviderOptions().agent_store;
  cmd.add_option("--agent-store", dir, "artifact store folder of the local agent")
      ->capture_default_str();
}

void AddTokenFileOption(CLI::App& cmd, std::string& file) {
  cmd.add_option("--token-file", file,
                 "token file of tcp:// agents that require one (dfarm-agent --token-file; "
                 "mode 600); a spec device's token_file wins over it")
      ->envname("DFARM_TOKEN_FILE");
}

Result<void> CheckTokenFileOption(const std::string& file) {
  if (file.empty()) return Ok();
  auto token = agent::ReadTokenFile(file);
  if (!token) return MakeError(ErrorKind::kInvalidInput, "--token-file: " + token.message());
  return Ok();
}

Result<std::unique_ptr<store::Store>> OpenExistingStore(const std::string& path) {
  if (store::IsPostgresUrl(path)) return store::OpenPostgresStore(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return MakeError("no database '" + path + "' (run a sweep first, or pass --db)");
  }
  return store::OpenSqliteStore(path);
}

// The run tagged NAME (a `tag:NAME` reference); an unknown tag is a usage
// error that lists the tags there are.
Result<int64_t> ResolveTag(store::Store& store, const std::string& name) {
  auto found = store.FindTag(name);
  if (!found) return found.error();
  if (*found) return **found;
  auto runs = store.ListRuns();
  if (!runs) return runs.error();
  std::vector<std::string> known;
  for (const store::RunRow& r : *runs) {
    for (const std::string& t : r.tags) known.push_back(t + " (run " + std::to_string(r.id) + ")");
  }
  std::sort(known.begin(), known.end());
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  return MakeError(
      ErrorKind::kInvalidInput,
      "no run is tagged '" + name + "' (known tags: " +
          (list.empty() ? std::string("none; add one with 'dfarm tag RUN NAME'") : list) + ")");
}

Result<int64_t> ResolveRun(store::Store& store, const std::string& arg) {
  if (arg.rfind(kTagPrefix, 0) == 0) return ResolveTag(store, arg.substr(sizeof kTagPrefix - 1));
  if (arg == "last" || arg == "latest") {
    auto runs = store.ListRuns();
    if (!runs) return runs.error();
    if (runs->empty()) return MakeError(ErrorKind::kNotFound, "the database holds no runs yet");
    return runs->back().id;
  }
  int64_t id = 0;
  size_t used = 0;
  try {
    id = std::stoll(arg, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != arg.size() || arg.empty() || id <= 0) {
    return MakeError(
        ErrorKind::kInvalidInput,
        "RUN must be a run id (see 'dfarm runs'), 'last' or 'tag:NAME', got '" + arg + "'");
  }
  return id;
}

int Main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app(
      "DelegateFarm host controller: sweep TensorFlow Lite models over delegates and "
      "devices, and report the results.",
      "dfarm");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("dfarm ") + DFARM_VERSION);
  app.footer(
      "Exit codes: 0 ok, 1 some job failed, 2 usage or spec error, 3 device or "
      "database error, 130 sweep interrupted. Each command's --help lists its own.");
  Context ctx{out, err};
  AddDevicesCommand(app, ctx);
  AddSweepCommand(app, ctx);
  AddRunsCommand(app, ctx);
  AddShowCommand(app, ctx);
  AddReportCommand(app, ctx);
  AddGateCommands(app, ctx);
  AddTagCommands(app, ctx);
  AddHistoryCommands(app, ctx);
  AddNodeCommand(app, ctx);
  AddImportCommands(app, ctx);
  AddBundleCommand(app, ctx);
  AddCulpritCommand(app, ctx);
  AddCancelCommand(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << "dfarm: error: " << e.what() << "\n"
        << "Run with --help for more information." << std::endl;
    return kExitUsage;
  } catch (const std::exception& e) {
    err << "dfarm: error: internal: " << e.what() << std::endl;
    return kExitInfra;
  }
  return ctx.exit_code;
}

}  // namespace dfarm::cli
