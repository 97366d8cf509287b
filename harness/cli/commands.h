// Shared by the subcommand files of harness/cli. Internal.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "agent/base/result.h"
#include "harness/cli/cli.h"
#include "reports/store/store.h"

namespace dfarm::cli {

struct Context {
  std::ostream& out;
  std::ostream& err;
  int exit_code = kExitOk;

  // Prints "dfarm: error: MESSAGE" and sets the exit code.
  void Fail(int code, const std::string& message);
  // Same, with the exit code the error's kind means (ExitCodeFor); returns it.
  int Fail(const Error& error);
};

// Each adds one subcommand whose callback sets ctx.exit_code. The context
// must outlive the App's parse.
void AddDevicesCommand(CLI::App& app, Context& ctx);
void AddSweepCommand(CLI::App& app, Context& ctx);
void AddRunsCommand(CLI::App& app, Context& ctx);
void AddShowCommand(CLI::App& app, Context& ctx);
void AddReportCommand(CLI::App& app, Context& ctx);
// `dfarm gate` and `dfarm compare` (gate_command.cc).
void AddGateCommands(CLI::App& app, Context& ctx);
// `dfarm tag RUN NAME [--move]` and `dfarm untag NAME` (tag_command.cc).
void AddTagCommands(CLI::App& app, Context& ctx);
// `dfarm history` and `dfarm regressions` (history_command.cc).
void AddHistoryCommands(CLI::App& app, Context& ctx);
// `dfarm node` (node_command.cc): a host of a farm.
void AddNodeCommand(CLI::App& app, Context& ctx);
// `dfarm import benchmark-log` (import_command.cc): Google's tools' logs into history.
void AddImportCommands(CLI::App& app, Context& ctx);
// `dfarm bundle` (bundle_command.cc): a runner build packed with its libraries and loader.
void AddBundleCommand(CLI::App& app, Context& ctx);
// `dfarm culprit RUN --job ID` (culprit_command.cc): the node a delegate gets wrong.
void AddCulpritCommand(CLI::App& app, Context& ctx);
// `dfarm cancel RUN` (cancel_command.cc): a running run's jobs end cancelled.
void AddCancelCommand(CLI::App& app, Context& ctx);

// "USER@HOST" of this process ($USER, gethostname): who cancelled a run or
// set a device's state by hand.
std::string OperatorName();

// --db FILE, default ./dfarm.db, env DFARM_DB.
void AddDbOption(CLI::App& cmd, std::string& db);
// --agent-store DIR, default from DefaultProviderOptions().
void AddAgentStoreOption(CLI::App& cmd, std::string& dir);
// --token-file FILE, env DFARM_TOKEN_FILE: the token of tcp:// agents that
// ask for one (harness::ProviderOptions::token_file; ignored for local,
// qemu-arm64 and adb devices). For every command that reaches devices.
void AddTokenFileOption(CLI::App& cmd, std::string& file);
// Checks a --token-file with the agent's rules (ReadTokenFile) before any
// device is opened; Ok when `file` is empty. A kInvalidInput error names the
// file and the fix ("chmod 600 FILE").
Result<void> CheckTokenFileOption(const std::string& file);

// Opens a store that must already exist (runs, show, report).
Result<std::unique_ptr<store::Store>> OpenExistingStore(const std::string& path);

// A RUN argument: a run id, "last" for the newest run, or "tag:NAME" for the
// run tagged NAME (`dfarm tag`). An unknown tag is a kInvalidInput error
// naming it and listing the known tags.
Result<int64_t> ResolveRun(store::Store& store, const std::string& arg);
inline constexpr char kTagPrefix[] = "tag:";

}  // namespace dfarm::cli
