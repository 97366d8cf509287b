#include "harness/cli/cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "harness/store/store.h"
#include "harness/test_util.h"

namespace dfarm::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome Call(std::vector<std::string> args) {
  args.insert(args.begin(), "dfarm");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  int code = Main(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

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

TEST(CliTest, SpecErrorsExit2) {
  harness::TempDir dir;
  std::string spec = dir.Write("q.json", R"({"modles":[]})");
  Outcome o = Call({"sweep", spec, "--db", (dir.path() / "x.db").string()});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_EQ(o.err, "dfarm: error: spec '" + spec +
                       "': unknown key 'modles' at top level (expected name, models, delegates, "
                       "devices, benchmark, scheduler)\n");
  o = Call({"sweep", (dir.path() / "missing.json").string()});
  EXPECT_EQ(o.code, kExitUsage);
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
    auto id = (*store)->AddJob(*run, j);
    ASSERT_TRUE(id.ok());
    store::JobOutcome r;
    r.status = "ok";
    r.metrics = store::Metrics{};
    r.metrics->mean_us = 1000;
    r.metrics->peak_rss_bytes = 123;
    ASSERT_TRUE((*store)->RecordJobResult(*id, r).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, "finished").ok());
  }
  o = Call({"runs", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\"name\": \"nightly\""));
  o = Call({"show", "1", "--db", db, "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("\"mean_us\": 1000.0"));
  EXPECT_THAT(o.out, HasSubstr("\"peak_rss_bytes\": 123"));
  o = Call({"show", "last", "--db", db});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("m.tflite\tcpu\tlocal\tok\t1.00"));
  o = Call({"show", "9", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("no run 9"));
  o = Call({"show", "x", "--db", db});
  EXPECT_EQ(o.code, kExitUsage);
  std::string html = (dir.path() / "r.html").string();
  o = Call({"report", "1", "--db", db, "--format", "html", "-o", html});
  EXPECT_EQ(o.code, 0) << o.err;
  o = Call({"report", "1", "--db", db, "--format", "pdf", "-o", html});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("unknown report format 'pdf'"));
}

}  // namespace
}  // namespace dfarm::cli
