#include "harness/cli/cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cli/cli_test_util.h"
#include "harness/cli/commands.h"
#include "harness/test_util.h"
#include "reports/store/store.h"

namespace dfarm::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using test_util::Call;
using test_util::Outcome;

TEST(CliTest, UsageErrorsExit2) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"sweep"},
           {"sweep", "a.json", "--bogus"},
           {"show"},
           {"report", "1", "--format", "md"},
           {"runs", "extra"},
       }) {
    Outcome o = Call(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(o.code, kExitUsage) << joined << o.err;
    EXPECT_THAT(o.err, StartsWith("dfarm: error: ")) << joined;
  }
}

TEST(CliTest, HelpExits0) {
  for (const char* cmd : {"devices", "sweep", "runs", "show", "report"}) {
    Outcome o = Call({cmd, "--help"});
    EXPECT_EQ(o.code, 0) << cmd;
    EXPECT_THAT(o.out, HasSubstr(cmd));
  }
  Outcome o = Call({"--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, HasSubstr("sweep"));
}

TEST(CliTest, VersionExits0) {
  Outcome o = Call({"--version"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, ::testing::MatchesRegex("dfarm [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

// Every command's --help lists the exit codes it can end with
// (harness/README.md).
TEST(CliTest, HelpListsTheExitCodes) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"devices", "Exit codes: 0 some device is usable"},
      {"sweep", "Exit codes: 0 every job of the run ended ok, 1 the sweep ran"},
      {"runs", "Exit codes: 0 ok, 2 usage error, 3 no database"},
      {"show", "Exit codes: 0 ok, 2 usage error"},
      {"report", "Exit codes: 0 ok, 2 usage error"},
      {"cancel", "Exit codes: 0 cancelled, 2 no such run"},
  };
  for (const auto& [cmd, codes] : expected) {
    Outcome o = Call({cmd, "--help"});
    EXPECT_EQ(o.code, 0) << cmd;
    EXPECT_THAT(o.out, HasSubstr(codes)) << cmd;
    EXPECT_THAT(o.out, HasSubstr(" 3 ")) << cmd;
  }
  EXPECT_THAT(Call({"sweep", "--help"}).out, HasSubstr("130 interrupted"));
  EXPECT_THAT(Call({"--help"}).out, HasSubstr("Exit codes: 0 ok, 1 some job failed, 2 usage or "
                                              "spec error, 3 device or database error, 130"));
}

TEST(CliTest, SpecErrorsExit2) {
  harness::TempDir dir;
  std::string spec = dir.Write("q.json", R"({"modles":[]})");
  Outcome o = Call({"sweep", spec, "--db", (dir.path() / "x.db").string()});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_EQ(o.err, "dfarm: error: spec '" + spec +
                       "': unknown key 'modles' at top level (expected name, models, delegates, "
                       "devices, device_tags, device_classes, runners, pairing, benchmark, "
                       "scheduler, cooldown, farm)\n");
  o = Call({"sweep", (dir.path() / "missing.json").string()});
  EXPECT_EQ(o.code, kExitUsage);
}

// docs/CONTRACTS.md: a device selector that matches nothing is exit 2 (the
// spec's fault), not 3 (the error carries ErrorKind::kInvalidInput).
TEST(CliTest, SelectorMatchingNothingExits2) {
  harness::TempDir dir;
  dir.Write("m.tflite", "model");
  std::string spec = dir.Write(
      "q.json",
      R"({"models":["m.tflite"],"delegates":[{"name":"cpu"}],"devices":[{"abi":"mips"}]})");
  Outcome o = Call({"sweep", spec, "--db", (dir.path() / "x.db").string()});
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("device selector {\"abi\":\"mips\"} matches no device"));
}

// Before a sweep: repeats that cannot reach the gate's alpha are named.
TEST(CliTest, TooFewRepeatsForTheGateAreNoted) {
  harness::TempDir dir;
  dir.Write("m.tflite", "model");
  for (int repeats : {3, 4}) {
    std::string spec = dir.Write(
        "q.json",
        R"({"models":["m.tflite"],"delegates":[{"name":"cpu"}],"devices":[{"abi":"mips"}],)"
        R"("benchmark":{"repeats":)" +
            std::to_string(repeats) + "}}");
    Outcome o = Call({"sweep", spec, "--db", (dir.path() / "x.db").string()});
    EXPECT_EQ(o.code, kExitUsage) << o.err;
    if (repeats == 3) {
      EXPECT_THAT(o.err, HasSubstr("with benchmark.repeats 3 the gate's smallest p per cell is "
                                   "0.1, above its default alpha 0.05"));
      EXPECT_THAT(o.err, HasSubstr("4 or more repeats"));
    } else {
      EXPECT_THAT(o.err, Not(HasSubstr("smallest p")));
    }
  }
}

// A paired spec: the signed-rank test over its pairs needs 6 (2/2^5 = 0.0625).
TEST(CliTest, TooFewPairsForTheGateAreNoted) {
  harness::TempDir dir;
  dir.Write("m.tflite", "model");
  dir.Write("a", "runner a");
  for (int repeats : {5, 6}) {
    std::string spec = dir.Write(
        "q.json",
        R"({"models":["m.tflite"],"delegates":[{"name":"cpu"}],"devices":[{"abi":"mips"}],)"
        R"("runners":[{"name":"a","builds":{"x86_64":"a"}},{"name":"b","builds":{"x86_64":"a"}}],)"
        R"("pairing":{"baseline_runner":"a"},"benchmark":{"repeats":)" +
            std::to_string(repeats) + "}}");
    Outcome o = Call({"sweep", spec, "--db", (dir.path() / "x.db").string()});
    EXPECT_EQ(o.code, kExitUsage) << o.err;
    if (repeats == 5) {
      EXPECT_THAT(o.err, HasSubstr("with benchmark.repeats 5 the gate's smallest p per paired "
                                   "cell (Wilcoxon signed-rank over its pairs) is 0.0625, above "
                                   "its default alpha 0.05"));
      EXPECT_THAT(o.err, HasSubstr("6 or more repeats"));
    } else {
      EXPECT_THAT(o.err, Not(HasSubstr("smallest p")));
    }
  }
}

TEST(CliTest, ErrorKindsMapToExitCodes) {
  EXPECT_EQ(ExitCodeFor(ErrorKind::kInvalidInput), kExitUsage);
  EXPECT_EQ(ExitCodeFor(ErrorKind::kNotFound), kExitUsage);
  EXPECT_EQ(ExitCodeFor(ErrorKind::kFailed), kExitInfra);
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  ASSERT_TRUE(store::OpenSqliteStore(db).ok());
  Outcome o = Call({"show", "7", "--db", db});  // a run that does not exist: kNotFound
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("no run 7"));
  o = Call({"report", "1", "--db", db, "--format", "pdf", "-o", "-"});  // kInvalidInput
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("unknown report format 'pdf'"));
}

// `dfarm report --format`: the names, the error and the help come from the
// format table (reports/formats.inc).
TEST(CliTest, ReportFormatsComeFromTheTable) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  ASSERT_TRUE(store::OpenSqliteStore(db).ok());
  Outcome o = Call({"report", "1", "--db", db, "--format", "text", "-o", "-"});
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("unknown report format 'text' (known: html, md, junit, json, csv)"));
  o = Call({"report", "--help"});
  EXPECT_EQ(o.code, 0);
  for (const char* help :
       {"html (self-contained)", "md (for a PR comment)", "junit (one testcase per cell)",
        "json (docs/CONTRACTS.md)", "csv (one row per job)"}) {
    EXPECT_THAT(o.out, HasSubstr(help));
  }
}

TEST(CliTest, PluginSpecWithAMissingPluginExits2) {
  harness::TempDir dir;
  dir.Write("m.tflite", "model");
  std::string spec = dir.Write(
      "specs/q.json",
      R"({"models":["../m.tflite"],"delegates":[{"name":"external","options":{"path":"../libmy_delegate.so"}}]})");
  std::string db = (dir.path() / "x.db").string();
  Outcome o = Call({"sweep", spec, "--db", db});
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("delegates[0].options.path: delegate plugin '" +
                               (dir.path() / "libmy_delegate.so").string() + "' is not a file"));
  EXPECT_FALSE(std::filesystem::exists(db));  // refused before anything was recorded
}

// What an agent would refuse is a spec error (exit 2) before any job runs,
// not jobs that end infra on a device and quarantine it.
TEST(CliTest, OptionsAnAgentWouldRefuseExit2) {
  harness::TempDir dir;
  dir.Write("m.tflite", "model");
  std::string spec = dir.Write(
      "q.json",
      R"({"models":["m.tflite"],"delegates":["cpu",{"name":"cpu","options":{"k":"\u001b[2J"}}]})");
  std::string db = (dir.path() / "x.db").string();
  Outcome o = Call({"sweep", spec, "--db", db});
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("delegates[1].options.k: option values must not contain control "
                               "characters (byte 0x1b at offset 0)"));
  EXPECT_FALSE(std::filesystem::exists(db));  // refused before anything was recorded
  spec = dir.Write("r.json", R"({"models":["m.tflite"],"delegates":["bad/1"]})");
  db = (dir.path() / "y.db").string();
  o = Call({"sweep", spec, "--db", db});
  EXPECT_EQ(o.code, kExitUsage) << o.err;
  EXPECT_THAT(o.err, HasSubstr("delegates[0]: unknown delegate 'bad/1'"));
  EXPECT_FALSE(std::filesystem::exists(db));
}

// What an agent said (device info, job errors, state notes) is printed
// without escape sequences, on one line, bounded; the
// store keeps it as it arrived and --json carries it whole.
TEST(CliTest, AgentTextIsPrintedSafely) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  const std::string hostile = "\x1b[2J\x1b]0;pwned\x07line\nnext" + std::string(100 * 1024, 'c');
  const std::string device = "tcp://127.0.0.1:1";  // refuses: shown as last seen
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    store::DeviceRow row;
    row.name = device;
    row.abi = "x86_64\x1b[31m";
    row.os = hostile;
    row.cpu = hostile;
    row.hostname = hostile;
    row.agent_version = "0.1\x1b[0m";
    ASSERT_TRUE((*store)->UpsertDevice(row).ok());
    auto run = (*store)->CreateRun("r", R"({"name":"r"})");
    ASSERT_TRUE(run.ok());
    store::JobRow j;
    j.model = "m.tflite";
    j.delegate = "cpu";
    j.device = device;
    auto id = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id.ok());
    store::JobOutcome r;
    r.status = "crashed";
    r.error = hostile;
    r.started_hot = true;
    r.state_note = hostile;
    ASSERT_TRUE((*store)->RecordJobResult(*id, r).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
  }
  auto expect_safe = [](const Outcome& o, size_t max_bytes, const std::string& what) {
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << what;
    EXPECT_EQ(o.out.find('\x07'), std::string::npos) << what;
    EXPECT_LT(o.out.size(), max_bytes) << what;
    EXPECT_THAT(o.out, HasSubstr("\\x1b[2J\\x1b]0;pwned\\x07line\\x0anext")) << what;
  };
  Outcome o = Call({"devices", "--db", db, "--device", device});
  expect_safe(o, 4096, "devices");
  EXPECT_THAT(o.out, HasSubstr("x86_64\\x1b[31m"));
  EXPECT_THAT(o.out, HasSubstr("...(102423 bytes)"));
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 1) << o.out.substr(0, 300);
  o = Call({"show", "1", "--db", db});
  expect_safe(o, 4096, "show");
  o = Call({"show", "1", "--job", "1", "--db", db});
  expect_safe(o, 4096, "show --job");
  // --json is for programs: the text as stored, escaped as JSON.
  o = Call({"show", "1", "--db", db, "--json"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(o.out)["jobs"][0]["error"].get<std::string>(), hostile);
}

// A run's name is the user's (spec "name", --run-name) and a model's file
// name may hold anything: `runs` and `show` print them escaped, one line each.
TEST(CliTest, RunAndModelNamesArePrintedSafely) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    auto run = (*store)->CreateRun("clear\x1b[2J\nme", R"({"name":"r"})");
    ASSERT_TRUE(run.ok());
    store::JobRow j;
    j.model = "m\x1b]0;pwned\x07.tflite";
    j.delegate = "cpu";
    j.device = "local";
    ASSERT_TRUE((*store)->AddJob(*run, j).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"runs", "--db", db}, {"show", "1", "--db", db}}) {
    Outcome o = Call(args);
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find('\x07'), std::string::npos) << o.out;
    EXPECT_THAT(o.out, HasSubstr("clear\\x1b[2J\\x0ame")) << o.out;
  }
  EXPECT_THAT(Call({"show", "1", "--db", db}).out, HasSubstr("m\\x1b]0;pwned\\x07.tflite"));
}

// `devices --db` with a database it cannot open or read says so, naming the
// database without its password, and exits 3 (database trouble), before
// trying any device.
TEST(CliTest, DevicesFailsOnADatabaseItCannotRead) {
  harness::TempDir dir;
  const std::string unreachable =
      "postgresql://dfarm:s3cr3tA@127.0.0.1:1/farm?password=s3cr3tB&connect_timeout=5";
  const std::string device = "tcp://127.0.0.1:1";
  Outcome o = Call({"devices", "--db", unreachable, "--device", device});
  EXPECT_EQ(o.code, kExitInfra) << o.err;
  EXPECT_THAT(o.err, HasSubstr("dfarm: error: cannot open store "
                               "'postgresql://dfarm:***@127.0.0.1:1/farm?password=***&"));
  EXPECT_THAT(o.err + o.out, Not(HasSubstr("s3cr3t")));
  EXPECT_THAT(o.err, Not(HasSubstr("no device is online")));
  EXPECT_EQ(o.out, "");

  const std::string garbage = (dir.path() / "garbage.db").string();
  std::ofstream(garbage) << std::string(8192, 'x');
  o = Call({"devices", "--db", garbage, "--device", device, "--json"});
  EXPECT_EQ(o.code, kExitInfra) << o.err;
  EXPECT_THAT(o.err, HasSubstr("cannot open store '" + garbage + "'"));
  EXPECT_EQ(o.out, "");

  // No database yet (the default dfarm.db before any sweep): no error.
  o = Call({"devices", "--db", (dir.path() / "none.db").string(), "--device", device});
  EXPECT_EQ(o.code, kExitInfra) << o.err;
  EXPECT_THAT(o.err, HasSubstr("no device is online"));
}

// `devices` lists a device's OpenCL devices (as last seen), and
// `show` names the GPU of the device that ran a job, its cold/warm init and
// the delegate's stats from the runner's document.
TEST(CliTest, DevicesAndShowNameTheGpuAndTheInitSplit) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  const std::string device = "tcp://127.0.0.1:1";  // refuses: shown as last seen
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    store::DeviceRow row;
    row.name = device;
    row.abi = "arm64-v8a";
    row.opencl.push_back(store::OpenClDevice{"QUALCOMM Snapdragon(TM)", "QUALCOMM Adreno(TM) 740",
                                             "QUALCOMM", "0800.22", "OpenCL 3.0 Adreno(TM) 740",
                                             true, true, 6, int64_t{1} << 32});
    ASSERT_TRUE((*store)->UpsertDevice(row).ok());
    auto run = (*store)->CreateRun("r", R"({"name":"r"})");
    ASSERT_TRUE(run.ok());
    store::JobRow j;
    j.model = "m.tflite";
    j.delegate = "gpu";
    j.device = device;
    auto id = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id.ok());
    store::JobOutcome r;
    r.status = "ok";
    r.metrics = store::JobMetrics{};
    r.metrics->init_us = 90000;
    r.metrics->init_cold_us = 90000;
    r.metrics->init_warm_us = 12000;
    r.metrics->first_us = 4000;
    r.runner_json =
        R"({"status":"ok","delegate_stats":{"programs_compiled":3.0,"programs_loaded":0.0}})";
    ASSERT_TRUE((*store)->RecordJobResult(*id, r).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
  }
  Outcome o = Call({"devices", "--db", db, "--device", device});
  EXPECT_THAT(o.out, HasSubstr("  opencl: QUALCOMM Adreno(TM) 740, QUALCOMM, driver 0800.22, "
                               "OpenCL 3.0 Adreno(TM) 740, gpu, fp16, 6 compute units\n"));
  o = Call({"devices", "--db", db, "--device", device, "--json"});
  const nlohmann::json devices = nlohmann::json::parse(o.out)["devices"];
  ASSERT_EQ(devices.size(), 1u) << o.out;
  EXPECT_EQ(devices[0]["opencl"][0]["name"], "QUALCOMM Adreno(TM) 740");
  EXPECT_EQ(devices[0]["opencl"][0]["fp16"], true);
  o = Call({"show", "1", "--job", "1", "--db", db});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("gpu (OpenCL): QUALCOMM Adreno(TM) 740 (driver 0800.22)\n"));
  EXPECT_THAT(o.out, HasSubstr("init 90.00 ms (cold 90.00 ms, warm 12.00 ms), first inference "
                               "4.00 ms"));
  EXPECT_THAT(o.out, HasSubstr("delegate stats: programs_compiled 3 programs_loaded 0\n"));
  o = Call({"show", "1", "--job", "1", "--db", db, "--json"});
  const nlohmann::json job = nlohmann::json::parse(o.out)["jobs"][0];
  EXPECT_EQ(job["gpu_device"], "QUALCOMM Adreno(TM) 740 (driver 0800.22)");
  EXPECT_EQ(job["metrics"]["init_warm_us"], 12000.0);
  EXPECT_EQ(job["delegate_stats"]["programs_compiled"], 3.0);
}

// An error can quote a device (a sweep's "device 'x': ..."): printed safely.
TEST(CliTest, ErrorsArePrintedSafely) {
  std::ostringstream out, err;
  Context ctx{out, err};
  ctx.Fail(kExitInfra, "device 'tcp://h:1': \x1b[2Jagent says\n" + std::string(100 * 1024, 'x'));
  EXPECT_EQ(ctx.exit_code, kExitInfra);
  EXPECT_EQ(err.str().find('\x1b'), std::string::npos);
  EXPECT_THAT(err.str(), StartsWith("dfarm: error: device 'tcp://h:1': \\x1b[2Jagent says\\x0axx"));
  EXPECT_LE(err.str().size(), 4096u + 20);
}

TEST(CliTest, ReadCommands) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  Outcome o = Call({"runs", "--db", db});
  EXPECT_EQ(o.code, kExitInfra);
  EXPECT_THAT(o.err, HasSubstr("no database"));

  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    auto run = (*store)->CreateRun("nightly", R"({"name":"nightly"})");
    ASSERT_TRUE(run.ok());
    store::JobRow j;
    j.model = "m.tflite";
    j.delegate = "cpu";
    j.device = "local";
    j.num_threads = 2;  // asked for; the cpu delegate runs on one (threads_used)
    auto id = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id.ok());
    store::JobOutcome r;
    r.status = "ok";
    r.metrics = store::JobMetrics{};
    r.metrics->mean_us = 1000;
    r.metrics->peak_rss_bytes = 123;
    r.metrics->threads_used = 1;
    ASSERT_TRUE((*store)->RecordJobResult(*id, r).ok());
    auto id2 = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id2.ok());
    store::JobOutcome placed = r;
    store::JobPlacement p;
    p.partitions = 1;
    p.nodes.push_back({0, "CONV_2D", "cpu", std::nullopt, false, "example: CONV_2D unsupported"});
    p.nodes.push_back({1, "ADD", "example", 0, false, ""});
    placed.placement = p;
    placed.state_before_json = R"({"unix_ms":5,"load_avg_1m":0.75})";
    placed.started_hot = true;
    placed.state_note = "thermal zone 1 at 88 C";
    store::OutputAccuracy acc;
    acc.name = "out";
    acc.compared = 8;
    acc.max_abs_error = 0.0005;
    placed.accuracy = store::Accuracy{"cpu", {acc}};
    ASSERT_TRUE((*store)->RecordJobResult(*id2, placed).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
  }
  o = Call({"runs", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\"name\": \"nightly\""));
  o = Call({"show", "1", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\"mean_us\": 1000.0"));
  EXPECT_THAT(o.out, HasSubstr("\"peak_rss_bytes\": 123"));
  {
    auto doc = nlohmann::json::parse(o.out);
    ASSERT_EQ(doc["jobs"].size(), 2u);
    EXPECT_TRUE(doc["jobs"][0]["placement"].is_null());
    EXPECT_EQ(doc["jobs"][0]["started_hot"], false);
    EXPECT_EQ(doc["jobs"][0]["state_note"], "");
    EXPECT_EQ(doc["jobs"][0]["num_threads"], 2);
    EXPECT_EQ(doc["jobs"][0]["threads_used"], 1);
    const auto& placed = doc["jobs"][1];
    EXPECT_EQ(placed["placement"]["partitions"], 1);
    EXPECT_EQ(placed["placement"]["delegated_nodes"], 1);
    EXPECT_EQ(placed["placement"]["cpu_nodes"], 1);
    EXPECT_FALSE(placed["placement"].contains("nodes"));  // only in the drill-down
    EXPECT_EQ(placed["started_hot"], true);
    EXPECT_EQ(placed["throttled"], false);
    EXPECT_EQ(placed["state_note"], "thermal zone 1 at 88 C");
  }
  o = Call({"show", "1", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("cpu x2 (ran on 1)"));
  o = Call({"show", "1", "--job", "2", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  {
    auto doc = nlohmann::json::parse(o.out);
    ASSERT_EQ(doc["jobs"].size(), 1u);
    const auto& nodes = doc["jobs"][0]["placement"]["nodes"];
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_EQ(nodes[0]["reason"], "example: CONV_2D unsupported");
    EXPECT_FALSE(nodes[0].contains("partition"));
    EXPECT_EQ(nodes[1]["partition"], 0);
    EXPECT_FALSE(nodes[1].contains("reason"));
    EXPECT_DOUBLE_EQ(doc["jobs"][0]["state_before"]["load_avg_1m"].get<double>(), 0.75);
    EXPECT_TRUE(doc["jobs"][0]["state_after"].is_null());
  }
  o = Call({"show", "1", "--job", "2", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("WARNING device hot: thermal zone 1 at 88 C"));
  EXPECT_THAT(o.out, HasSubstr("0\tCONV_2D\tcpu\t-\texample: CONV_2D unsupported"));
  EXPECT_THAT(o.out, HasSubstr("1\tADD\texample\t0\t-"));
  o = Call({"show", "1", "--job", "7", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("run 1 has no job 7"));
  o = Call({"show", "last", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("m.tflite\tcpu x2 (ran on 1)\tlocal\tok\t1.00"));
  EXPECT_THAT(o.out, HasSubstr("\t1/2 on example\tWARNING hot\t0.0005\n"));
  EXPECT_THAT(o.out, HasSubstr("\t-\t-\t-\n"));
  // The first column is the job id that `show RUN --job ID` takes.
  EXPECT_THAT(o.out, HasSubstr("\n\nJOB\tMODEL\tDELEGATE\tDEVICE\tSTATUS\tMEAN_MS\t"));
  EXPECT_THAT(o.out, HasSubstr("\n1\tm.tflite\tcpu x2 (ran on 1)\tlocal\tok\t1.00"));
  EXPECT_THAT(o.out, HasSubstr("\n2\tm.tflite\tcpu x2 (ran on 1)\tlocal\tok\t1.00"));
  o = Call({"show", "9", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("no run 9"));
  o = Call({"show", "x", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  std::string html = (dir.path() / "r.html").string();
  o = Call({"report", "1", "--db", db, "--format", "html", "-o", html});
  EXPECT_EQ(o.code, 0) << o.err;
  // "-o -" is stdout, not a file named "-".
  std::filesystem::remove("-");
  o = Call({"report", "1", "--db", db, "--format", "md", "-o", "-"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("nightly"));
  EXPECT_THAT(o.out, HasSubstr("m.tflite"));
  EXPECT_FALSE(std::filesystem::exists("-"));
  o = Call({"report", "1", "--db", db, "--format", "html", "--output", "-"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, StartsWith("<!DOCTYPE html>"));
  o = Call({"report", "1", "--db", db, "--format", "pdf", "-o", html});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("unknown report format 'pdf'"));
}

// Nodes folded at load (a DEQUANTIZE of constant fp16 weights) ran once, not
// at Invoke(): the placement counts them apart, not as fallbacks to the CPU.
TEST(CliTest, ShowCountsConstantsFoldedAtLoadApart) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    auto run = (*store)->CreateRun("fp16", R"({"name":"fp16"})");
    ASSERT_TRUE(run.ok());
    store::JobRow j;
    j.model = "m.tflite";
    j.delegate = "xnnpack";
    j.device = "local";
    store::JobOutcome r;
    r.status = "ok";
    r.metrics = store::JobMetrics{};
    store::JobPlacement p;
    p.partitions = 1;
    p.nodes.push_back({0, "DEQUANTIZE", "cpu", std::nullopt, true, ""});
    p.nodes.push_back({1, "DEQUANTIZE", "cpu", std::nullopt, true, ""});
    p.nodes.push_back({2, "CONV_2D", "xnnpack", 0, false, ""});
    p.nodes.push_back({3, "ADD", "xnnpack", 0, false, ""});
    r.placement = p;
    auto id = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*store)->RecordJobResult(*id, r).ok());
    j.delegate = "cpu";
    for (store::PlacementNode& n : r.placement->nodes) {
      if (!n.folded) n = {n.index, n.op, "cpu", std::nullopt, false, ""};
    }
    r.placement->partitions = 0;
    auto cpu = (*store)->AddJob(*run, j);
    ASSERT_TRUE(cpu.ok());
    ASSERT_TRUE((*store)->RecordJobResult(*cpu, r).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
  }
  Outcome o = Call({"show", "1", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\t2/2 on xnnpack (+2 constants folded at load)\t"));
  EXPECT_THAT(o.out, HasSubstr("\tall 2 on cpu (+2 constants folded at load)\t"));
  o = Call({"show", "1", "--job", "1", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("placement: 2/2 on xnnpack (+2 constants folded at load), 1 "
                               "partition(s)\n"));
  EXPECT_THAT(o.out, HasSubstr("0\tDEQUANTIZE\tcpu\t-\tfolded at load\n"));
  o = Call({"show", "1", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto doc = nlohmann::json::parse(o.out);
  ASSERT_EQ(doc["jobs"].size(), 2u);
  EXPECT_EQ(doc["jobs"][0]["placement"]["delegated_nodes"], 2);
  EXPECT_EQ(doc["jobs"][0]["placement"]["cpu_nodes"], 2);  // folded ones included, as before
  EXPECT_EQ(doc["jobs"][0]["placement"]["folded_nodes"], 2);
  EXPECT_EQ(doc["jobs"][1]["placement"]["folded_nodes"], 2);
}

// A profiled job (spec benchmark.profile): `show --job` prints its top op
// types, `show --job --json` has its "profile" object in the runner's keys;
// a job without one has neither.
TEST(CliTest, ShowPrintsAJobsProfile) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    auto run = (*store)->CreateRun("p", R"({"name":"p"})");
    ASSERT_TRUE(run.ok());
    store::JobRow j;
    j.model = "m.tflite";
    j.delegate = "xnnpack";
    j.device = "local";
    store::JobOutcome r;
    r.status = "ok";
    r.metrics = store::JobMetrics{};
    store::JobProfile p;
    p.runs = 4;
    p.nodes.push_back({0, "CONV_2D", "cpu", std::nullopt, {}, 1500});
    p.nodes.push_back({1, "DELEGATE", "xnnpack", 0, {1, 2}, 500});
    p.by_op = {{"CONV_2D", 1, 1500, 75}, {"DELEGATE", 1, 500, 25}};
    r.profile = p;
    auto id = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*store)->RecordJobResult(*id, r).ok());
    r.profile.reset();
    auto plain = (*store)->AddJob(*run, j);
    ASSERT_TRUE(plain.ok());
    ASSERT_TRUE((*store)->RecordJobResult(*plain, r).ok());
  }
  Outcome o = Call({"show", "1", "--job", "1", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("profile over 4 run(s), 2 step(s); top op types:\n"
                               "OP\tCOUNT\tTOTAL_MS\tPCT\nCONV_2D\t1\t1.50\t75.0%\n"
                               "DELEGATE\t1\t0.50\t25.0%\n"));
  o = Call({"show", "1", "--job", "1", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto doc = nlohmann::json::parse(o.out);
  const auto& profile = doc["jobs"][0]["profile"];
  EXPECT_EQ(doc["jobs"][0]["id"], 1);
  EXPECT_EQ(profile["runs"], 4);
  ASSERT_EQ(profile["by_op"].size(), 2u);
  EXPECT_EQ(profile["by_op"][0]["op"], "CONV_2D");
  EXPECT_EQ(profile["by_op"][0]["count"], 1);
  EXPECT_EQ(profile["by_op"][0]["total_us"], 1500.0);
  EXPECT_EQ(profile["by_op"][0]["pct"], 75.0);
  ASSERT_EQ(profile["nodes"].size(), 2u);
  EXPECT_FALSE(profile["nodes"][0].contains("partition"));
  EXPECT_FALSE(profile["nodes"][0].contains("nodes"));
  EXPECT_EQ(profile["nodes"][1]["partition"], 0);
  EXPECT_EQ(profile["nodes"][1]["nodes"], nlohmann::json::parse("[1,2]"));
  EXPECT_EQ(profile["nodes"][1]["mean_us"], 500.0);
  o = Call({"show", "1", "--job", "2", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_FALSE(nlohmann::json::parse(o.out)["jobs"][0].contains("profile"));
  o = Call({"show", "1", "--job", "2", "--db", db});
  EXPECT_THAT(o.out, Not(HasSubstr("profile")));
}

// A run of two runtime builds (an A/B sweep) names each job's build in a
// RUNNER column; a run of one build has none.
TEST(CliTest, ShowNamesTheRunnerWhenARunHasSeveral) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    for (const char* name : {"ab", "one"}) {
      auto run = (*store)->CreateRun(name, "{}");
      ASSERT_TRUE(run.ok());
      store::JobRow j;
      j.model = "m.tflite";
      j.delegate = "cpu";
      j.device = "local";
      j.runner = "main";
      j.runner_sha256 = std::string(64, 'a');
      ASSERT_TRUE((*store)->AddJob(*run, j).ok());
      if (std::string(name) == "ab") {
        j.runner = "candidate";
        j.runner_sha256 = std::string(64, 'b');
      }
      ASSERT_TRUE((*store)->AddJob(*run, j).ok());
    }
  }
  Outcome o = Call({"show", "1", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("JOB\tRUNNER\tMODEL"));
  EXPECT_THAT(o.out, HasSubstr("\tmain@aaaaaaaaaaaa\tm.tflite"));
  EXPECT_THAT(o.out, HasSubstr("\tcandidate@bbbbbbbbbbbb\tm.tflite"));
  o = Call({"show", "2", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("JOB\tMODEL"));
  EXPECT_THAT(o.out, Not(HasSubstr("RUNNER")));
}

// dfarm tag / untag, runs --tag, and tag:NAME wherever a RUN is taken.
TEST(CliTest, TagsNameRuns) {
  harness::TempDir dir;
  std::string db = (dir.path() / "x.db").string();
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    for (const char* name : {"first", "second"}) {
      auto run = (*store)->CreateRun(name, R"({"benchmark":{"repeats":2}})");
      ASSERT_TRUE(run.ok());
      store::JobRow j;
      j.model = "m.tflite";
      j.delegate = "cpu";
      j.device = "local";
      j.runner = "main";
      j.runner_sha256 = std::string(64, 'c');
      for (int64_t t : {0, 1}) {
        j.trial = t;
        ASSERT_TRUE((*store)->AddJob(*run, j).ok());
      }
      ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
    }
  }
  Outcome o = Call({"tag", "1", "base", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("tagged run 1 base"));
  // A name in use on another run: refused naming that run, then moved.
  o = Call({"tag", "2", "base", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("already on run 1"));
  EXPECT_THAT(o.err, HasSubstr("--move"));
  o = Call({"tag", "last", "base", "--move", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("moved tag base from run 1 to run 2"));
  ASSERT_EQ(Call({"tag", "tag:base", "also", "--db", db}).code, 0);
  EXPECT_EQ(Call({"tag", "1", "bad name", "--db", db}).code, kExitUsage);
  EXPECT_EQ(Call({"tag", "9", "x", "--db", db}).code, kExitUsage);

  // runs --tag filters; runs shows the tags.
  o = Call({"runs", "--db", db, "--tag", "base", "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto doc = nlohmann::json::parse(o.out);
  ASSERT_EQ(doc["runs"].size(), 1u);
  EXPECT_EQ(doc["runs"][0]["id"], 2);
  EXPECT_EQ(doc["runs"][0]["tags"], nlohmann::json({"also", "base"}));
  o = Call({"runs", "--db", db, "--json"});
  doc = nlohmann::json::parse(o.out);
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["tags"], nlohmann::json::array());
  o = Call({"runs", "--db", db});
  EXPECT_THAT(o.out, HasSubstr("second [also, base]"));
  o = Call({"runs", "--db", db, "--tag", "nothing"});
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, Not(HasSubstr("first")));

  // tag:NAME as a RUN; an unknown tag is a usage error listing the known ones.
  o = Call({"show", "tag:base", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["run"]["id"], 2);
  EXPECT_EQ(doc["run"]["tags"], nlohmann::json({"also", "base"}));
  ASSERT_EQ(doc["jobs"].size(), 2u);
  EXPECT_EQ(doc["jobs"][1]["trial"], 1);
  EXPECT_EQ(doc["jobs"][1]["runner"]["name"], "main");
  EXPECT_EQ(doc["jobs"][1]["runner"]["kind"], "dfarm");  // a job before schema 13
  EXPECT_EQ(doc["jobs"][1]["runner"]["sha256"], std::string(64, 'c'));
  EXPECT_EQ(doc["jobs"][1]["runner_sha256"], std::string(64, 'c'));
  o = Call({"show", "tag:base", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("JOB\tTRIAL\tMODEL"));
  EXPECT_THAT(o.out, HasSubstr("\t1\tm.tflite"));
  o = Call({"show", "tag:nope", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("no run is tagged 'nope'"));
  EXPECT_THAT(o.err, HasSubstr("known tags: also (run 2), base (run 2)"));

  // untag; an unknown tag is exit 2.
  o = Call({"untag", "base", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("removed tag base from run 2"));
  o = Call({"untag", "base", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("'base'"));
  EXPECT_EQ(Call({"show", "tag:base", "--db", db}).code, kExitUsage);
  EXPECT_EQ(Call({"tag", "--help"}).code, 0);
  EXPECT_THAT(Call({"untag", "--help"}).out, HasSubstr("Exit codes: 0 ok, 2"));
}

// A farm's device quarantined by hand: `dfarm devices` names its node, the
// reason and who set it; --auto hands it back; an unknown device is exit 2.
TEST(CliTest, DevicesShowsWhoSetAHandQuarantine) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "farm.db").string();
  const std::string device = "tcp://127.0.0.1:1";
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.message();
    store::NodeRow n{"lab-a", "host-a", 7, store::NowIso8601(), 0, 0, "", {device}};
    ASSERT_TRUE((*store)->RegisterNode(n).ok());
    store::DeviceRow d;
    d.name = device;
    d.abi = "x86_64";
    d.node = "lab-a";
    ASSERT_TRUE((*store)->UpsertDevice(d).ok());
  }
  Outcome o = Call({"devices", "--db", db, "--quarantine", device, "--reason", "battery swollen"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("quarantined by hand"));
  o = Call({"devices", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  // The entry of `device` in a `devices --json` document (null when absent).
  auto entry_of = [&device](const nlohmann::json& doc) {
    for (const auto& e : doc["devices"]) {
      if (e["name"] == device) return e;
    }
    return nlohmann::json();
  };
  auto doc = nlohmann::json::parse(o.out);
  const nlohmann::json e = entry_of(doc);
  ASSERT_TRUE(e.is_object()) << o.out;
  EXPECT_EQ(e["node"], "lab-a");
  EXPECT_EQ(e["state"], "quarantined");
  EXPECT_EQ(e["reason"], "battery swollen");
  EXPECT_EQ(e["set_by"], "operator");
  EXPECT_EQ(e["set_by_user"], OperatorName());
  o = Call({"devices", "--db", db});
  EXPECT_THAT(o.out, HasSubstr("quarantined\tx86_64"));
  EXPECT_THAT(o.out, HasSubstr("\tnode lab-a\tbattery swollen\tset by operator " + OperatorName()));
  o = Call({"devices", "--db", db, "--history", "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  doc = nlohmann::json::parse(o.out);
  ASSERT_EQ(entry_of(doc)["history"].size(), 1u) << o.out;
  EXPECT_EQ(entry_of(doc)["history"][0]["set_by"], "operator");

  ASSERT_EQ(Call({"devices", "--db", db, "--auto", device}).code, 0);
  doc = nlohmann::json::parse(Call({"devices", "--db", db, "--json"}).out);
  EXPECT_FALSE(entry_of(doc).contains("set_by")) << doc.dump();
  EXPECT_EQ(entry_of(doc)["state"], "quarantined");  // the state stays

  o = Call({"devices", "--db", db, "--release", "ghost"});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("no device 'ghost'"));
  o = Call({"devices", "--db", db, "--release", device, "--auto", device});
  EXPECT_EQ(o.code, kExitUsage);
}

// `dfarm cancel` on SQLite: a running run ends cancelled (--json), a second
// cancel and an unknown run are exit 2 and change nothing.
TEST(CliTest, CancelARunOnce) {
  harness::TempDir dir;
  const std::string db = (dir.path() / "c.db").string();
  int64_t run = 0;
  {
    auto store = store::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok()) << store.message();
    run = *(*store)->CreateRun("r", "{}");
    store::JobRow j;
    j.model = "m.tflite";
    j.delegate = "cpu";
    j.device = "local";
    ASSERT_TRUE((*store)->AddJobs(run, {j, j}).ok());
  }
  Outcome o = Call({"cancel", "last", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  auto doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc["run_id"], run);
  EXPECT_EQ(doc["status"], "cancelled");
  EXPECT_EQ(doc["queued"], 2);
  EXPECT_EQ(doc["running"], 0);
  o = Call({"cancel", std::to_string(run), "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("run " + std::to_string(run) + " is cancelled (since "));
  o = Call({"cancel", "42", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("no run 42"));
  o = Call({"cancel", "last", "--db", (dir.path() / "none.db").string()});
  EXPECT_EQ(o.code, kExitInfra);
}

}  // namespace
}  // namespace dfarm::cli
