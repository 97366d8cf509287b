// `dfarm gate` and `dfarm compare` through cli::Main over a store of synthetic runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cli/cli.h"
#include "harness/cli/cli_test_util.h"
#include "harness/test_util.h"
#include "reports/store/store.h"

namespace dfarm::cli {
namespace {

using ::testing::HasSubstr;

using test_util::Call;
using test_util::Outcome;

class GateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.path() / "gate.db";
    auto s = store::OpenSqliteStore(db_.string());
    ASSERT_TRUE(s) << s.message();
    store_ = std::move(*s);
    // Run 1: the baseline (cpu and xnnpack fp32); run 2 the same again; run 3
    // adds xnnpack fp16 with an fp16-sized error on output 'scores'.
    baseline_ = AddRun({{"cpu", "", 0}, {"xnnpack", "", 4e-5}}, 1);
    same_ = AddRun({{"cpu", "", 0}, {"xnnpack", "", 4e-5}}, 2);
    fp16_ = AddRun({{"cpu", "", 0}, {"xnnpack", "", 4e-5}, {"xnnpack", "fp16:true", 5e-3}}, 3);
  }

  struct Config {
    std::string delegate, options;
    double max_abs_error;  // 0: no accuracy
  };

  int64_t AddRun(const std::vector<Config>& configs, uint32_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(1.0, 0.01);
    auto run = store_->CreateRun("r", "{}");
    EXPECT_TRUE(run) << run.message();
    for (const auto& c : configs) {
      for (int trial = 0; trial < 5; ++trial) {
        store::JobRow row;
        row.model = "net.tflite";
        row.model_sha256 = "abc";
        row.delegate = c.delegate;
        row.delegate_options = c.options;
        row.device = "local";
        row.num_threads = 1;
        row.trial = trial;
        row.job_key = c.delegate + c.options + std::to_string(trial);
        auto id = store_->AddJob(*run, row);
        EXPECT_TRUE(id) << id.message();
        store::JobOutcome out;
        out.status = "ok";
        out.metrics = store::JobMetrics{};
        for (int s = 0; s < 20; ++s) out.samples_us.push_back(1000 * noise(rng));
        if (c.max_abs_error > 0) {
          store::OutputAccuracy o;
          o.name = "scores";
          o.compared = 10;
          o.max_abs_error = c.max_abs_error;
          o.mean_abs_error = c.max_abs_error / 10;
          o.rmse = c.max_abs_error / 5;
          out.accuracy = store::Accuracy{"cpu", {o}};
        }
        EXPECT_TRUE(store_->RecordJobResult(*id, out));
      }
    }
    EXPECT_TRUE(store_->FinishRun(*run, store::kRunFinished));
    return *run;
  }

  // A paired run (spec "pairing", runners "base" and "cand") of `pairs` pairs,
  // the candidate `slowdown` times the baseline.
  int64_t AddPairedRun(int pairs, double slowdown) {
    std::mt19937_64 rng(9);
    std::normal_distribution<double> noise(1.0, 0.01);
    auto run = store_->CreateRun(
        "paired",
        R"({"runners":[{"name":"base"},{"name":"cand"}],"pairing":{"baseline_runner":"base"}})");
    EXPECT_TRUE(run) << run.message();
    for (int pair = 1; pair <= pairs; ++pair) {
      for (const char* runner : {"base", "cand"}) {
        store::JobRow row;
        row.model = "net.tflite";
        row.model_sha256 = "abc";
        row.delegate = "cpu";
        row.device = "local";
        row.num_threads = 1;
        row.trial = pair - 1;
        row.pair = pair;
        row.runner = runner;
        row.job_key = std::string(runner) + std::to_string(pair);
        auto id = store_->AddJob(*run, row);
        EXPECT_TRUE(id) << id.message();
        store::JobOutcome out;
        out.status = "ok";
        out.metrics = store::JobMetrics{};
        const double level = 1000 * (row.runner == "cand" ? slowdown : 1.0);
        for (int s = 0; s < 20; ++s) out.samples_us.push_back(level * noise(rng));
        EXPECT_TRUE(store_->RecordJobResult(*id, out));
      }
    }
    EXPECT_TRUE(store_->FinishRun(*run, store::kRunFinished));
    return *run;
  }

  std::string Db() const { return db_.string(); }

  harness::TempDir dir_;
  std::filesystem::path db_;
  std::unique_ptr<store::Store> store_;
  int64_t baseline_ = 0, same_ = 0, fp16_ = 0;
};

TEST_F(GateCommandTest, EqualRunsPassWithExit0) {
  Outcome o =
      Call({"gate", std::to_string(same_), "--baseline", std::to_string(baseline_), "--db", Db()});
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("PASSED"));
  Outcome j = Call({"gate", "last", "--baseline", "1", "--db", Db(), "--format", "json"});
  EXPECT_EQ(j.code, 1) << j.out << j.err;  // "last" is the fp16 run
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["passed"], false);
  EXPECT_EQ(doc["candidate_run"], fp16_);
}

TEST_F(GateCommandTest, Fp16DriftFailsWithExit1NamingTheOutput) {
  const std::string xml = (dir_.path() / "gate.xml").string();
  Outcome o = Call({"gate", std::to_string(fp16_), "--baseline", std::to_string(baseline_), "--db",
                    Db(), "--format", "junit", "-o", xml});
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  std::ifstream in(xml);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("<failure message=\"accuracy.max_abs_error: output "
                                    "&apos;scores&apos;"));
  EXPECT_THAT(text.str(), HasSubstr("<property name=\"baseline_run\" value=\"1\"/>"));
  // Read back by a real JUnit consumer when Debian's python3-junitparser is here.
  // Debian's package is for Debian's python (a pyenv python3 may come first in PATH).
  std::string python;
  for (const char* p : {"/usr/bin/python3", "python3"}) {
    if (python.empty() &&
        std::system((std::string(p) + " -c 'import junitparser' >/dev/null 2>&1").c_str()) == 0) {
      python = p;
    }
  }
  if (python.empty()) {
    GTEST_SKIP() << "python3-junitparser is not installed (scripts/setup.sh)";
  }
  const std::string check =
      python +
      " -c 'import sys, junitparser as j\n"
      "x = j.JUnitXml.fromfile(sys.argv[1])\n"
      "cases = [c for s in x for c in s]\n"
      "assert len(cases) == 3, len(cases)\n"
      "bad = [c for c in cases if c.result and isinstance(c.result[0], j.Failure)]\n"
      "assert len(bad) == 1 and \"fp16\" in bad[0].name, [c.name for c in bad]\n"
      "assert \"scores\" in bad[0].result[0].message\n' " +
      xml;
  EXPECT_EQ(std::system(check.c_str()), 0) << text.str();
}

TEST_F(GateCommandTest, UsageAndDataErrorsExit2) {
  const std::string bad_policy = dir_.Write("bad.json", R"({"latency": {"min_efect": 0.1}})");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"gate", "2", "--db", Db()},
           {"gate", "2", "--baseline", "99", "--db", Db()},
           {"gate", "2", "--baseline", "tag:nope", "--db", Db()},
           {"gate", "2", "--baseline", "1", "--db", Db(), "--format", "pdf"},
           {"gate", "2", "--baseline", "1", "--db", Db(), "--policy", bad_policy},
           {"gate", "2", "--baseline", "1", "--db", Db(), "--policy", "/nonexistent.json"},
           {"compare", "1", "--db", Db()},
       }) {
    Outcome o = Call(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(o.code, kExitUsage) << joined << o.err;
  }
  Outcome p = Call({"gate", "2", "--baseline", "1", "--db", Db(), "--policy", bad_policy});
  EXPECT_THAT(p.err, HasSubstr("'min_efect'"));
  EXPECT_THAT(p.err, HasSubstr(bad_policy));
}

// Every name of the format table that the gate renders works, and a bad one
// is a usage error that lists them (reports/formats.inc).
TEST_F(GateCommandTest, FormatsComeFromTheTable) {
  for (const char* format : {"text", "md", "markdown", "junit", "json"}) {
    Outcome o = Call({"gate", std::to_string(same_), "--baseline", std::to_string(baseline_),
                      "--db", Db(), "--format", format});
    EXPECT_EQ(o.code, 0) << format << o.err;
    EXPECT_FALSE(o.out.empty()) << format;
  }
  Outcome md = Call({"gate", std::to_string(same_), "--baseline", std::to_string(baseline_), "--db",
                     Db(), "--format", "markdown"});
  Outcome md2 = Call({"gate", std::to_string(same_), "--baseline", std::to_string(baseline_),
                      "--db", Db(), "--format", "md"});
  EXPECT_EQ(md.out, md2.out);
  Outcome bad = Call({"gate", "2", "--baseline", "1", "--db", Db(), "--format", "csv"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("unknown report format 'csv' (known: text, md, junit, json)"));
  Outcome help = Call({"gate", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_THAT(help.out, HasSubstr("junit (one testcase per cell)"));
}

// A deeply nested policy is a short usage error (100,000 levels overflowed
// the stack; 5,000 printed the document as one 60 KB line).
TEST_F(GateCommandTest, DeeplyNestedPolicyIsAShortUsageError) {
  for (size_t depth : {100000u, 5000u}) {
    const std::string policy =
        dir_.Write("deep.json", std::string(depth, '[') + std::string(depth, ']'));
    Outcome o = Call({"gate", "2", "--baseline", "1", "--db", Db(), "--policy", policy});
    EXPECT_EQ(o.code, kExitUsage) << depth;
    EXPECT_THAT(o.err, HasSubstr("nested deeper than 64 levels"));
    EXPECT_LT(o.err.size(), 300u) << o.err.substr(0, 300);
  }
}

TEST_F(GateCommandTest, UnreadableDatabaseExits3) {
  const std::string junk = dir_.Write("junk.db", "this is not a database, not at all......");
  Outcome o = Call({"gate", "2", "--baseline", "1", "--db", junk});
  EXPECT_EQ(o.code, kExitInfra) << o.err;
  Outcome missing = Call({"gate", "2", "--baseline", "1", "--db", Db() + ".none"});
  EXPECT_NE(missing.code, 0);
}

TEST_F(GateCommandTest, CompareShowsDeltas) {
  Outcome o = Call({"compare", "1", "3", "--db", Db()});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("net.tflite (abc) xnnpack[fp16:true] x1 @local"));
  EXPECT_THAT(o.out, HasSubstr("B/A [CI]"));
  Outcome j = Call({"compare", "1", "2", "--db", Db(), "--json"});
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)["cells"].size(), 2u);
}

// compare's VERDICT column is the gate's verdict (default policy) for each cell.
TEST_F(GateCommandTest, CompareAndGateGiveTheSameVerdicts) {
  for (const char* cand : {"2", "3"}) {
    Outcome c = Call({"compare", "1", cand, "--db", Db()});
    ASSERT_EQ(c.code, 0) << c.err;
    EXPECT_THAT(c.out, HasSubstr("VERDICT"));
    Outcome g = Call({"gate", cand, "--baseline", "1", "--format", "json", "--db", Db()});
    ASSERT_NE(g.code, 2) << g.err;
    const auto doc = nlohmann::json::parse(g.out);
    ASSERT_FALSE(doc["cells"].empty());
    for (const auto& cell : doc["cells"]) {
      const std::string label = cell["label"];
      const auto at = c.out.find(label + " ");
      ASSERT_NE(at, std::string::npos) << label << "\n" << c.out;
      std::istringstream row(c.out.substr(at + label.size()));
      std::string verdict;
      row >> verdict;
      EXPECT_EQ(verdict, cell["verdict"].get<std::string>()) << label;
    }
  }
}

TEST_F(GateCommandTest, PairedRunsAreGatedPairByPair) {
  const std::string slowed = std::to_string(AddPairedRun(6, 1.5));
  Outcome o = Call({"gate", slowed, "--paired", "--db", Db(), "--format", "json"});
  EXPECT_EQ(o.code, 1) << o.out << o.err;  // --baseline left out: the run itself
  auto doc = nlohmann::json::parse(o.out);
  ASSERT_EQ(doc["cells"].size(), 1u) << o.out;
  EXPECT_EQ(doc["cells"][0]["verdict"], "regressed");
  EXPECT_EQ(doc["cells"][0]["latency"]["paired"], true);
  EXPECT_EQ(doc["paired"]["candidate_runner"], "cand");
  Outcome text = Call({"gate", slowed, "--paired", "--db", Db()});
  EXPECT_THAT(text.out, HasSubstr("6 pairs"));
  // compare RUN RUN pairs too, with the same verdict.
  Outcome cmp = Call({"compare", slowed, slowed, "--db", Db()});
  EXPECT_EQ(cmp.code, 0) << cmp.err;
  EXPECT_THAT(cmp.out, HasSubstr("regressed"));
  EXPECT_THAT(cmp.out, HasSubstr("note: paired: runner 'cand' against 'base'"));
  // Flags that cannot go together, and reruns of paired cells, are usage errors.
  EXPECT_EQ(Call({"gate", slowed, "--paired", "--unpaired", "--db", Db()}).code, 2);
  const std::string short_run = std::to_string(AddPairedRun(3, 1.2));  // unknown: 3 pairs
  Outcome rerun = Call({"gate", short_run, "--paired", "--rerun-unknown", "2", "--db", Db()});
  EXPECT_EQ(rerun.code, 2) << rerun.out << rerun.err;
  EXPECT_THAT(rerun.err, HasSubstr("--rerun-unknown does not rerun paired cells yet"));
}

TEST_F(GateCommandTest, HelpListsTheExitCodes) {
  Outcome o = Call({"gate", "--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, HasSubstr("Exit codes: 0 the gate passed, 1 the gate failed"));
}

}  // namespace
}  // namespace dfarm::cli
