// Paired A/B on real runs: a spec with two runner builds and "pairing",
// swept on the local device, then `dfarm gate --paired`. The builds are
// dfarm-runner-counted (latency in counted work: 1000 us per Invoke(), +-1%)
// and dfarm-runner-slow (3x that work), so no verdict depends on how busy the
// machine is.
// - the sweep runs the two runners' jobs interleaved on the one device, in
//   pairs of one trial each, ABBA blocks, and `show --json` keeps each pair;
// - the slowed build is `regressed` paired (and with the automatic pairing of a
//   run gated against itself), the same build against itself passes;
// - `--paired` on a run without "pairing" is a usage error naming the run;
// - each pair runs as one stepped pair (dfarm-runner --partner-runner): the two
//   jobs' samples alternate in time (`show --job --json` "steps"), and a
//   runner that cannot step (a wrapper that drops the stepping flags, as an
//   older dfarm-runner would not know them) makes its pairs run back to back,
//   with a note, the gate unchanged; "pairing.stepped": false never steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/e2e_shell.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char kPairedModel[] = "face_detection_short_range.tflite";
constexpr int kPairs = 6;  // the fewest pairs whose smallest p (2/64) is below alpha 0.05

using dfarm::e2e::Outcome;

class PairedE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fs::path(DFARM_MODELS_DIR) / kPairedModel;
    bin_ = fs::path(DFARM_BINARY_DIR) / "bin";
    for (const char* exe : {"dfarm", "dfarm-agent", "dfarm-runner-counted", "dfarm-runner-slow"}) {
      ASSERT_TRUE(fs::exists(bin_ / exe)) << (bin_ / exe) << " is not built";
    }
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
    dir_ = fs::temp_directory_path() /
           ("dfarm_paired_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "farm.db").string();
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  Outcome Dfarm(const std::vector<std::string>& args) {
    return dfarm::e2e::RunShell(
        dir_, dfarm::e2e::QuotedCommand(bin_ / "dfarm", args) + " --db '" + db_ + "'");
  }

  // One cell (cpu) on `local`, runners "release" (baseline) and "rc", each a
  // build in bin/; paired unless `paired` is false.
  json Spec(const std::string& release, const std::string& rc, bool paired = true) const {
    json spec = {{"name", "paired-e2e"},
                 {"models", {model_.string()}},
                 {"devices", {"local"}},
                 {"runners",
                  {{{"name", "release"}, {"builds", {{"x86_64", (bin_ / release).string()}}}},
                   {{"name", "rc"}, {"builds", {{"x86_64", (bin_ / rc).string()}}}}}},
                 {"benchmark", {{"warmup_runs", 1}, {"num_runs", 10}, {"repeats", kPairs}}}};
    if (paired) spec["pairing"] = {{"baseline_runner", "release"}};
    return spec;
  }

  // Sweeps `spec`; the run id, 0 (with a failure) when the sweep did not end ok.
  int64_t Sweep(const json& spec, const std::string& name) {
    const fs::path p = dir_ / (name + ".json");
    std::ofstream(p) << spec.dump(2);
    Outcome o = Dfarm({"sweep", p.string(), "--json", "--agent-store", AgentStore()});
    EXPECT_EQ(o.code, 0) << name << ": " << o.err;
    json summary = json::parse(o.out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) {
      ADD_FAILURE() << name << ": no run id in " << o.out << o.err;
      return 0;
    }
    return summary["run_id"].get<int64_t>();
  }

  // `dfarm gate RUN ARGS... --format json -o -`; sets *code to its exit status.
  json Gate(int64_t run, std::vector<std::string> args, int* code) {
    std::vector<std::string> all = {"gate", std::to_string(run)};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--format", "json", "-o", "-"});
    Outcome o = Dfarm(all);
    *code = o.code;
    json doc = json::parse(o.out, nullptr, false);
    EXPECT_TRUE(doc.is_object() && doc.contains("cells") && doc["cells"].size() == 1u)
        << "gate exit " << o.code << ", stdout: " << o.out << "\nstderr: " << o.err;
    return doc;
  }

  std::string AgentStore() const { return (dir_ / "agent-store").string(); }

  // The "steps" of job `job` of `run` (`show --job --json`); null when it was not stepped.
  json StepsOf(int64_t run, int64_t job) {
    Outcome o = Dfarm({"show", std::to_string(run), "--job", std::to_string(job), "--json"});
    json doc = json::parse(o.out, nullptr, false);
    if (!doc.is_object() || !doc.contains("jobs") || doc["jobs"].size() != 1u ||
        !doc["jobs"][0].contains("steps")) {
      ADD_FAILURE() << "show --job " << job << ": " << o.all();
      return nullptr;
    }
    return doc["jobs"][0]["steps"];
  }

  // The jobs of `run` by pair, in id order (`show --json`).
  std::map<int64_t, std::vector<json>> JobsByPair(int64_t run) {
    json shown = json::parse(Dfarm({"show", std::to_string(run), "--json"}).out, nullptr, false);
    std::map<int64_t, std::vector<json>> out;
    if (!shown.is_object() || !shown.contains("jobs")) {
      ADD_FAILURE() << shown;
      return out;
    }
    for (const json& job : shown["jobs"]) out[job.value("pair", int64_t{0})].push_back(job);
    return out;
  }

  fs::path model_, bin_, dir_;
  std::string db_;
};

TEST_F(PairedE2eTest, InterleavedPairsAndASlowedBuildIsRegressed) {
  const int64_t run = Sweep(Spec("dfarm-runner-counted", "dfarm-runner-slow"), "slowed");
  ASSERT_GT(run, 0);
  json shown = json::parse(Dfarm({"show", std::to_string(run), "--json"}).out, nullptr, false);
  ASSERT_TRUE(shown.is_object() && shown.contains("jobs")) << shown;
  ASSERT_EQ(shown["jobs"].size(), 2u * kPairs);
  // Jobs in id order, the order the device ran them: pair 1's two jobs, pair 2's, ...
  std::map<int64_t, std::vector<std::string>> runners_by_pair;  // in id order
  int64_t last_pair = 0;
  for (const json& job : shown["jobs"]) {
    EXPECT_EQ(job.value("status", ""), "ok") << job.dump();
    EXPECT_EQ(job.value("device", ""), "local");
    const int64_t pair = job.value("pair", int64_t{0});
    ASSERT_GT(pair, 0) << job.dump();
    EXPECT_GE(pair, last_pair) << "pairs run one after the other";
    last_pair = pair;
    EXPECT_EQ(job.value("trial", -1), pair - 1) << "one cell: pair t+1 is trial t";
    runners_by_pair[pair].push_back(job["runner"].value("name", ""));
  }
  ASSERT_EQ(runners_by_pair.size(), static_cast<size_t>(kPairs));
  for (const auto& [pair, runners] : runners_by_pair) {
    ASSERT_EQ(runners.size(), 2u) << pair;
    EXPECT_NE(runners[0], runners[1]) << "pair " << pair << ": one job of each runner";
    if (pair % 2 == 0) {  // ABBA: trials 2k and 2k+1 run in opposite orders
      EXPECT_NE(runners[0], runners_by_pair[pair - 1][0]) << "block of pairs " << pair - 1;
    }
  }

  // Each pair ran as one stepped pair: its first job drove, its second was the
  // partner, and their measured runs alternated as the driver's order says.
  for (const auto& [pair, jobs] : JobsByPair(run)) {
    ASSERT_EQ(jobs.size(), 2u) << pair;
    const json driver = StepsOf(run, jobs[0]["id"].get<int64_t>());
    const json partner = StepsOf(run, jobs[1]["id"].get<int64_t>());
    ASSERT_TRUE(driver.is_object() && partner.is_object()) << "pair " << pair;
    EXPECT_EQ(driver.value("role", ""), "driver");
    EXPECT_EQ(partner.value("role", ""), "partner");
    EXPECT_FALSE(driver.contains("partner_error")) << driver.dump();
    std::vector<std::pair<double, char>> starts;
    for (const json& t : driver["starts_us"]) starts.emplace_back(t.get<double>(), 'A');
    for (const json& t : partner["starts_us"]) starts.emplace_back(t.get<double>(), 'B');
    std::sort(starts.begin(), starts.end());
    std::string merged;
    for (const auto& st : starts) merged += st.second;
    EXPECT_EQ(merged.size(), 20u) << "10 runs of each";
    EXPECT_EQ(merged, driver.value("order", "")) << "pair " << pair;
  }

  int code = -1;
  json doc = Gate(run, {"--paired"}, &code);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(code, 1) << doc.dump(2);
  const json& cell = doc["cells"][0];
  EXPECT_EQ(cell.value("runner", ""), "rc vs release") << cell.dump(2);
  EXPECT_EQ(cell["latency"].value("paired", false), true) << cell.dump(2);
  EXPECT_EQ(cell["latency"].value("pairs", 0), kPairs) << cell.dump(2);
  EXPECT_NEAR(cell["latency"].value("p_value", 1.0), 2.0 / 64, 1e-9) << cell.dump(2);
  EXPECT_GT(cell["latency"].value("ratio", 0.0), 2.5) << cell.dump(2);
  EXPECT_EQ(cell.value("verdict", ""), "regressed") << cell.dump(2);
  EXPECT_EQ(doc["paired"].value("baseline_runner", ""), "release");
  // Gated against itself, the run is paired without asking.
  json automatic = Gate(run, {"--baseline", std::to_string(run)}, &code);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(code, 1);
  EXPECT_EQ(automatic["cells"][0]["latency"].value("paired", false), true) << automatic.dump(2);
  EXPECT_EQ(automatic["cells"][0].value("verdict", ""), "regressed");
  // --unpaired: the same trials as two samples (each runner its own cell unless named).
  json apart = Gate(run,
                    {"--baseline", std::to_string(run), "--unpaired", "--candidate-runner", "rc",
                     "--baseline-runner", "release"},
                    &code);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(apart["cells"][0]["latency"].value("paired", true), false) << apart.dump(2);
  EXPECT_TRUE(apart["paired"].is_null());
}

TEST_F(PairedE2eTest, SameBuildPairedWithItselfPasses) {
  const int64_t run = Sweep(Spec("dfarm-runner-counted", "dfarm-runner-counted"), "same");
  ASSERT_GT(run, 0);
  int code = -1;
  json doc = Gate(run, {"--paired"}, &code);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(code, 0) << doc.dump(2);
  EXPECT_EQ(doc["cells"][0]["latency"].value("paired", false), true);
  EXPECT_EQ(doc["cells"][0].value("verdict", ""), "pass") << doc.dump(2);
}

TEST_F(PairedE2eTest, RunnerThatCannotStepRunsItsPairsBackToBack) {
  // "rc" is dfarm-runner-counted behind a script that drops the stepping
  // flags (as a runner that predates them would refuse them): as a driver it
  // runs alone, as a partner it never gets ready.
  const fs::path wrapper = dir_ / "no-stepping-runner";
  std::ofstream(wrapper)
      << "#!/bin/sh\n"
         "n=$#\n"
         "while [ $n -gt 0 ]; do\n"
         "  a=$1; shift; n=$((n - 1))\n"
         "  case $a in\n"
         "    --partner-runner|--partner-seed|--step-fds) shift; n=$((n - 1));;\n"
         "    *) set -- \"$@\" \"$a\";;\n"
         "  esac\n"
         "done\n"
         "exec '"
      << (bin_ / "dfarm-runner-counted").string() << "' \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  json spec = Spec("dfarm-runner-counted", "dfarm-runner-counted");
  spec["runners"][1]["builds"]["x86_64"] = wrapper.string();
  const fs::path p = dir_ / "fallback.json";
  std::ofstream(p) << spec.dump(2);
  Outcome o = Dfarm({"sweep", p.string(), "--json", "--agent-store", AgentStore()});
  ASSERT_EQ(o.code, 0) << o.all();
  EXPECT_NE(o.err.find("did not step beside"), std::string::npos) << o.err;
  const int64_t run = json::parse(o.out)["run_id"].get<int64_t>();
  const auto pairs = JobsByPair(run);
  ASSERT_EQ(pairs.size(), static_cast<size_t>(kPairs));
  for (const auto& [pair, jobs] : pairs) {
    ASSERT_EQ(jobs.size(), 2u) << pair;
    for (const json& job : jobs) {
      EXPECT_EQ(job.value("status", ""), "ok") << job.dump();
      const json steps = StepsOf(run, job["id"].get<int64_t>());
      // Nobody stepped as a partner; a driver says why its partner did not step.
      EXPECT_TRUE(steps.is_null() ||
                  (steps.value("role", "") == "driver" && steps.contains("partner_error")))
          << steps.dump();
    }
  }
  int code = -1;
  json doc = Gate(run, {"--paired"}, &code);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(doc["cells"][0]["latency"].value("paired", false), true) << doc.dump(2);
  EXPECT_EQ(doc["cells"][0]["latency"].value("pairs", 0), kPairs) << doc.dump(2);
}

TEST_F(PairedE2eTest, SteppedFalseRunsWholeJobsBackToBack) {
  json spec = Spec("dfarm-runner-counted", "dfarm-runner-slow");
  spec["pairing"]["stepped"] = false;
  spec["benchmark"]["repeats"] = 2;
  const int64_t run = Sweep(spec, "jobs");
  ASSERT_GT(run, 0);
  const auto pairs = JobsByPair(run);
  ASSERT_EQ(pairs.size(), 2u);
  for (const auto& [pair, jobs] : pairs) {
    ASSERT_EQ(jobs.size(), 2u) << pair;
    for (const json& job : jobs) {
      EXPECT_EQ(job.value("status", ""), "ok") << job.dump();
      EXPECT_TRUE(StepsOf(run, job["id"].get<int64_t>()).is_null());
    }
  }
}

TEST_F(PairedE2eTest, PairedOnAnUnpairedRunIsAUsageError) {
  json spec = Spec("dfarm-runner-counted", "dfarm-runner-counted", false);
  spec["benchmark"]["repeats"] = 1;
  const int64_t run = Sweep(spec, "plain");
  ASSERT_GT(run, 0);
  Outcome o = Dfarm({"gate", std::to_string(run), "--paired"});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("--paired: run " + std::to_string(run) + " is not paired"),
            std::string::npos)
      << o.err;
  o = Dfarm({"gate", std::to_string(run)});
  EXPECT_EQ(o.code, 2) << o.all();
  EXPECT_NE(o.err.find("--baseline is required"), std::string::npos) << o.err;
}

}  // namespace
