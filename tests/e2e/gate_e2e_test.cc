// The release gate on real runs: real `dfarm sweep`s on the local
// device with `benchmark.repeats` 5, then `dfarm gate` as CI calls it. The
// runner is dfarm-runner-counted, whose latency is counted work (1000 us per
// Invoke(), +-1%), so no verdict depends on how busy the machine is.
// - the same sweep twice passes (no cell regressed);
// - xnnpack fp16 against an fp32 baseline fails on accuracy, naming the output;
// - a plugin that perturbs one op (delegates/external/testing/perturb_plugin.c)
//   fails on accuracy, naming the output;
// - a slowed runner build (dfarm-runner-slow, 3x the work) under the same
//   runner name is `regressed` on latency;
// - the JUnit file is read back by python3-junitparser;
// - docs/examples/ci-gate.sh, the README's CI snippet, works as written.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/e2e_shell.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char kModel[] = "face_detection_short_range.tflite";

using dfarm::e2e::Outcome;
using dfarm::e2e::Slurp;

// The latency verdict of a cell in `dfarm gate --format json`.
std::string LatencyVerdict(const json& cell) {
  return cell.value("latency", json::object()).value("verdict", "");
}

// The failing findings of a cell whose metric starts with `prefix`, as "metric output".
std::vector<std::string> FailingFindings(const json& cell, const std::string& prefix) {
  std::vector<std::string> found;
  for (const json& f : cell.value("findings", json::array())) {
    const std::string metric = f.value("metric", "");
    if (f.value("fails", false) && metric.rfind(prefix, 0) == 0) {
      found.push_back(metric + " " + f.value("output", ""));
    }
  }
  return found;
}

class GateE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fs::path(DFARM_MODELS_DIR) / kModel;
    bin_ = fs::path(DFARM_BINARY_DIR) / "bin";
    for (const char* exe :
         {"dfarm", "dfarm-agent", "dfarm-runner", "dfarm-runner-counted", "dfarm-runner-slow"}) {
      ASSERT_TRUE(fs::exists(bin_ / exe)) << (bin_ / exe) << " is not built";
    }
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent (run scripts/setup.sh)";
    dir_ = fs::temp_directory_path() /
           ("dfarm_gate_e2e_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "farm.db").string();
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // Runs `command` (a shell line) in the test's folder; stdout and stderr to files.
  Outcome Shell(const std::string& command) { return dfarm::e2e::RunShell(dir_, command); }

  // Runs bin/dfarm with `args` (each single-quoted; test paths hold no quotes) on the test's db.
  Outcome Dfarm(const std::vector<std::string>& args) {
    return Shell(dfarm::e2e::QuotedCommand(bin_ / "dfarm", args) + " --db '" + db_ + "'");
  }

  // A spec over the model on `local`, five trials per cell.
  // Runner "main" is dfarm-runner-counted (dfarm-runner whose latency is
  // counted work, agent/runner/CMakeLists.txt): latency verdicts that do not
  // depend on how busy the machine is.
  json Spec(const json& delegates, int num_runs = 15) const {
    return {
        {"name", "gate-e2e"},
        {"models", {model_.string()}},
        {"delegates", delegates},
        {"devices", {"local"}},
        {"runners",
         {{{"name", "main"}, {"builds", {{"x86_64", (bin_ / "dfarm-runner-counted").string()}}}}}},
        {"benchmark",
         {{"warmup_runs", 1}, {"num_runs", num_runs}, {"repeats", 5}, {"timeout_s", 120}}}};
  }

  // Sweeps `spec`; returns the run id, 0 (with a test failure) when the sweep did not end ok.
  int64_t Sweep(const json& spec, const std::string& name) {
    fs::path p = dir_ / (name + ".json");
    std::ofstream(p) << spec.dump(2);
    Outcome o = Dfarm({"sweep", p.string(), "--json", "--agent-store", AgentStore()});
    EXPECT_EQ(o.code, 0) << name << ": " << o.err;
    json summary = json::parse(o.out, nullptr, false);
    if (!summary.is_object() || !summary.contains("run_id")) {
      ADD_FAILURE() << name << ": no run id in " << o.out;
      return 0;
    }
    EXPECT_EQ(summary.value("jobs", 0), summary.value("ok", -1)) << name << ": " << o.err;
    return summary["run_id"].get<int64_t>();
  }

  // `dfarm gate CANDIDATE --baseline BASELINE --format json -o -`.
  json GateJson(const std::string& candidate, const std::string& baseline, int* code) {
    Outcome o = Dfarm({"gate", candidate, "--baseline", baseline, "--format", "json", "-o", "-"});
    *code = o.code;
    json doc = json::parse(o.out, nullptr, false);
    EXPECT_TRUE(doc.is_object() && doc.contains("cells"))
        << "gate exit " << o.code << ", stdout: " << o.out << "\nstderr: " << o.err;
    return doc;
  }

  // The cell of `doc` whose label holds every one of `parts`.
  static const json* FindCell(const json& doc, const std::vector<std::string>& parts) {
    if (!doc.is_object() || !doc.contains("cells") || !doc["cells"].is_array()) return nullptr;
    for (const json& cell : doc["cells"]) {  // by reference: the pointer outlives the loop
      const std::string label = cell.value("label", "");
      bool all = true;
      for (const std::string& p : parts) all = all && label.find(p) != std::string::npos;
      if (all) return &cell;
    }
    return nullptr;
  }

  // A one-cell spec whose runner "main" is the build `runner` in bin/.
  json RunnerSpec(const std::string& runner) const {
    json s = Spec({{{"name", "cpu"}}}, 30);
    s["runners"][0]["builds"]["x86_64"] = (bin_ / runner).string();
    return s;
  }

  // Gates `candidate` against `baseline`; while the latency verdict is
  // `unknown`, up to three rounds of `--rerun-unknown`, each adding 5 trials.
  // No round may say `pass`. Sets *code to the last gate's exit status.
  json GateWithReruns(const std::string& candidate, const std::string& baseline, int* code) {
    json doc = GateJson(candidate, baseline, code);
    if (doc.value("cells", json::array()).size() != 1u) {
      ADD_FAILURE() << doc.dump(2);
      return doc;
    }
    EXPECT_NE(LatencyVerdict(doc["cells"][0]), "pass") << doc.dump(2);
    for (int round = 0; round < 3 && LatencyVerdict(doc["cells"][0]) == "unknown"; ++round) {
      Outcome o = Dfarm({"gate", candidate, "--baseline", baseline, "--rerun-unknown",
                         std::to_string(5 * (round + 1)), "--agent-store", AgentStore(), "--format",
                         "json", "-o", "-"});
      *code = o.code;
      doc = json::parse(o.out, nullptr, false);
      if (!doc.is_object() || !doc.contains("cells") || doc["cells"].size() != 1u) {
        ADD_FAILURE() << o.out << o.err;
        return doc;
      }
      EXPECT_NE(LatencyVerdict(doc["cells"][0]), "pass") << doc.dump(2);
    }
    return doc;
  }

  std::string AgentStore() const { return (dir_ / "agent-store").string(); }
  std::string Id(int64_t run) const { return std::to_string(run); }

  fs::path model_, bin_, dir_;
  std::string db_;
};

// The same sweep twice: noise alone (the counted runner's +-1%) must not fail
// the gate. Up to three candidate sweeps, one of which must pass cleanly: a gate
// that flags identical sweeps every time still fails this test.
TEST_F(GateE2eTest, SameSweepTwicePasses) {
  json spec = Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}}});
  int64_t baseline = Sweep(spec, "first");
  ASSERT_GT(baseline, 0);
  std::string attempts;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    int64_t candidate = Sweep(spec, "second-" + std::to_string(attempt));
    ASSERT_GT(candidate, 0);
    int code = -1;
    json doc = GateJson(Id(candidate), Id(baseline), &code);
    ASSERT_EQ(doc.value("cells", json::array()).size(), 2u) << doc.dump(2);
    bool clean = code == 0 && doc.value("passed", false);
    for (const json& cell : doc["cells"]) {
      // Never a failing finding: the runs are equal in everything but time.
      EXPECT_NE(cell.value("verdict", ""), "fail") << cell.dump(2);
      const json& latency = cell.value("latency", json::object());
      EXPECT_EQ(latency.value("candidate_trials", 0), 5) << cell.dump(2);
      EXPECT_EQ(latency.value("baseline_trials", 0), 5) << cell.dump(2);
      clean =
          clean && LatencyVerdict(cell) != "regressed" && cell.value("verdict", "") != "regressed";
    }
    if (clean) return;
    attempts += "attempt " + std::to_string(attempt) + " (exit " + std::to_string(code) + "):\n" +
                doc.dump(2) + "\n";
  }
  ADD_FAILURE() << "three sweeps equal to the baseline all failed the gate:\n" << attempts;
}

// fp16 arithmetic on a float model: the candidate fails on accuracy against the
// CPU reference although the baseline has no cell with the same options.
TEST_F(GateE2eTest, Fp16AgainstFp32BaselineFailsOnAccuracy) {
  int64_t baseline = Sweep(Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}}}), "fp32");
  int64_t candidate = Sweep(
      Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}, {"options", {{"fp16", "true"}}}}}), "fp16");
  ASSERT_GT(baseline, 0);
  ASSERT_GT(candidate, 0);
  int code = -1;
  json doc = GateJson(Id(candidate), Id(baseline), &code);
  EXPECT_EQ(code, 1) << doc.dump(2);
  EXPECT_EQ(doc.value("passed", true), false);
  const json* cell = FindCell(doc, {"xnnpack", "fp16"});
  ASSERT_NE(cell, nullptr) << doc.dump(2);
  EXPECT_EQ(cell->value("verdict", ""), "fail") << cell->dump(2);
  std::vector<std::string> accuracy = FailingFindings(*cell, "accuracy");
  ASSERT_FALSE(accuracy.empty()) << cell->dump(2);
  bool names_output = false;
  for (const std::string& f : accuracy) {
    names_output = names_output || f.find(" regressors") != std::string::npos ||
                   f.find(" classificators") != std::string::npos;
  }
  EXPECT_TRUE(names_output) << cell->dump(2);

  // The text a person reads names the output too.
  Outcome text = Dfarm({"gate", Id(candidate), "--baseline", Id(baseline)});
  EXPECT_EQ(text.code, 1) << text.err;
  EXPECT_TRUE(text.out.find("regressors") != std::string::npos ||
              text.out.find("classificators") != std::string::npos)
      << text.out;
}

// A vendor delegate's new build drifts: the same plugin file name (so the same
// cell) first holds the correct example plugin, then the perturbing one.
TEST_F(GateE2eTest, PerturbingPluginFailsNamingTheOutput) {
  fs::create_directories(dir_ / "good");
  fs::create_directories(dir_ / "bad");
  fs::copy_file(DFARM_EXAMPLE_PLUGIN, dir_ / "good" / "libvendor_delegate.so");
  fs::copy_file(DFARM_PERTURB_PLUGIN, dir_ / "bad" / "libvendor_delegate.so");
  auto spec = [&](const std::string& folder) {
    return Spec({{{"name", "external"},
                  {"options", {{"path", (dir_ / folder / "libvendor_delegate.so").string()}}}}});
  };
  int64_t baseline = Sweep(spec("good"), "good");
  int64_t candidate = Sweep(spec("bad"), "bad");
  ASSERT_GT(baseline, 0);
  ASSERT_GT(candidate, 0);
  int code = -1;
  json doc = GateJson(Id(candidate), Id(baseline), &code);
  EXPECT_EQ(code, 1) << doc.dump(2);
  const json* cell = FindCell(doc, {"external"});
  ASSERT_NE(cell, nullptr) << doc.dump(2);
  EXPECT_EQ(cell->value("verdict", ""), "fail") << cell->dump(2);
  std::vector<std::string> accuracy = FailingFindings(*cell, "accuracy");
  ASSERT_FALSE(accuracy.empty()) << cell->dump(2);
  bool names_output = false;
  for (const std::string& f : accuracy) {
    names_output = names_output || f.find(" regressors") != std::string::npos ||
                   f.find(" classificators") != std::string::npos;
  }
  EXPECT_TRUE(names_output) << cell->dump(2);
}

// Runner "main" is dfarm-runner-counted in the baseline and dfarm-runner-slow
// (3x the counted work per invocation) in the candidate: one cell (matched by runner name,
// though the builds' sha256 differ), latency regressed. On a loaded machine
// the gate may first say `unknown` (never pass); then `--rerun-unknown` adds
// candidate trials, as CI would, and the verdict must be `regressed`.
TEST_F(GateE2eTest, SlowedRunnerIsRegressedOnLatency) {
  int64_t baseline = Sweep(RunnerSpec("dfarm-runner-counted"), "fast");
  int64_t candidate = Sweep(RunnerSpec("dfarm-runner-slow"), "slow");
  ASSERT_GT(baseline, 0);
  ASSERT_GT(candidate, 0);
  // The two runs ran different builds under one runner name.
  std::set<std::string> builds;
  for (int64_t run : {baseline, candidate}) {
    json shown = json::parse(Dfarm({"show", Id(run), "--json"}).out, nullptr, false);
    ASSERT_TRUE(shown.is_object() && shown.contains("jobs")) << shown;
    for (const json& job : shown["jobs"]) {
      ASSERT_TRUE(job["runner"].is_object()) << job;  // {name, kind, sha256, version}
      EXPECT_EQ(job["runner"].value("name", ""), "main");
      EXPECT_EQ(job["runner"].value("kind", ""), "dfarm");
      EXPECT_EQ(job["runner"].value("sha256", ""), job.value("runner_sha256", ""));
      builds.insert(std::to_string(run) + " " + job.value("runner_sha256", ""));
    }
  }
  EXPECT_EQ(builds.size(), 2u) << "each run has one build, and they differ";
  Outcome tag = Dfarm({"tag", Id(baseline), "release"});
  ASSERT_EQ(tag.code, 0) << tag.err;

  int code = -1;
  json doc = GateWithReruns("last", "tag:release", &code);
  ASSERT_FALSE(HasFailure());
  // Reruns add candidate trials only: a baseline whose 5 trials a burst of
  // load slowed (seen on CI: 1.44 ms against a usual 0.9 ms) can leave the
  // verdict unknown. Then a fresh pair of sweeps, up to twice more; a gate
  // that never sees the slowdown still fails.
  std::string history;
  for (int pair = 2; pair <= 3 && LatencyVerdict(doc["cells"][0]) == "unknown"; ++pair) {
    const std::string n = std::to_string(pair);
    history.append("before pair ").append(n).append(": ").append(doc["cells"][0].dump(2));
    baseline = Sweep(RunnerSpec("dfarm-runner-counted"), std::string("fast-").append(n));
    candidate = Sweep(RunnerSpec("dfarm-runner-slow"), std::string("slow-").append(n));
    ASSERT_GT(baseline, 0);
    ASSERT_GT(candidate, 0);
    doc = GateWithReruns(Id(candidate), Id(baseline), &code);
    ASSERT_FALSE(HasFailure());
  }
  EXPECT_EQ(code, 1) << history << "\n" << doc.dump(2);
  const json& cell = doc["cells"][0];
  EXPECT_EQ(cell.value("runner", ""), "main") << cell.dump(2);
  EXPECT_EQ(LatencyVerdict(cell), "regressed") << history << cell.dump(2);
  EXPECT_EQ(cell.value("verdict", ""), "regressed") << cell.dump(2);
  EXPECT_GT(cell.value("latency", json::object()).value("ratio", 0.0), 1.1) << cell.dump(2);
}

// The JUnit file, read back by a real consumer (Debian's python3-junitparser):
// one testcase per cell, the failing one names the output.
TEST_F(GateE2eTest, JunitReadByJunitparser) {
  const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  if (Shell(python + " -c 'import junitparser'").code != 0) {
    GTEST_SKIP() << "python3-junitparser is not installed (scripts/setup.sh installs it)";
  }
  int64_t baseline = Sweep(Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}}}, 5), "fp32");
  int64_t candidate = Sweep(
      Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}, {"options", {{"fp16", "true"}}}}}, 5), "fp16");
  ASSERT_GT(baseline, 0);
  ASSERT_GT(candidate, 0);
  Outcome gate = Dfarm({"gate", Id(candidate), "--baseline", Id(baseline), "--format", "junit",
                        "-o", (dir_ / "gate.xml").string()});
  EXPECT_EQ(gate.code, 1) << gate.err;
  ASSERT_TRUE(fs::exists(dir_ / "gate.xml")) << gate.err;
  std::ofstream(dir_ / "read.py") << R"(import sys
from junitparser import JUnitXml, Failure, Error
xml = JUnitXml.fromfile(sys.argv[1])
suites = [xml] if xml._tag == "testsuite" else list(xml)
for suite in suites:
    for case in suite:
        failures = [r for r in case.result if isinstance(r, (Failure, Error))]
        text = " | ".join((r.message or "") + " " + (r.text or "") for r in failures)
        print("%s\t%s\t%s" % (case.name, "FAIL" if failures else "ok", text.replace("\n", " ")))
)";
  Outcome read = Shell(python + " read.py gate.xml");
  ASSERT_EQ(read.code, 0) << read.err << "\n" << Slurp(dir_ / "gate.xml");
  std::istringstream lines(read.out);
  std::string line;
  int cases = 0, failed = 0;
  bool fp16_fails_naming_output = false;
  while (std::getline(lines, line)) {
    ++cases;
    if (line.find("\tFAIL\t") == std::string::npos) continue;
    ++failed;
    if (line.find("fp16") != std::string::npos &&
        (line.find("regressors") != std::string::npos ||
         line.find("classificators") != std::string::npos)) {
      fp16_fails_naming_output = true;
    }
  }
  EXPECT_GE(cases, 2) << read.out;
  EXPECT_GE(failed, 1) << read.out;
  EXPECT_TRUE(fp16_fails_naming_output) << read.out;
}

// docs/examples/ci-gate.sh (the README's "Release gate" snippet) as CI runs it:
// the baseline tagged `release` once, then candidate sweeps, tags and gates: the same
// build twice passes; fp16 fails; crashing jobs (sweep exit 1) fail in the gate; no spec
// stops with the sweep's code.
TEST_F(GateE2eTest, CiExampleScriptWorksAsWritten) {
  const fs::path script = fs::path(DFARM_SOURCE_DIR) / "docs" / "examples" / "ci-gate.sh";
  ASSERT_TRUE(fs::exists(script)) << script;
  // The README shows the script's commands verbatim.
  const std::string readme = Slurp(fs::path(DFARM_SOURCE_DIR) / "README.md");
  const size_t section = readme.find("## Release gate");
  ASSERT_NE(section, std::string::npos) << "README.md has no 'Release gate' section";
  const size_t begin = readme.find("```sh\n", section);
  ASSERT_NE(begin, std::string::npos) << "no sh block in README.md's 'Release gate' section";
  const size_t end = readme.find("```", begin + 6);
  ASSERT_NE(end, std::string::npos);
  const std::string snippet = readme.substr(begin + 6, end - begin - 6);
  EXPECT_NE(Slurp(script).find(snippet), std::string::npos)
      << "README.md's snippet is not in " << script << ":\n"
      << snippet;

  // A CI job's world: dfarm on PATH, release.json and farm.db (db_) in the working folder.
  ASSERT_EQ(fs::path(db_).filename(), "farm.db");
  std::ofstream(dir_ / "release.json") << Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}}}).dump(2);
  const std::string env = "PATH='" + bin_.string() + "':\"$PATH\" XDG_CACHE_HOME='" +
                          (dir_ / "cache").string() + "' DFARM_DB=farm.db ";
  // Once: the release's run, tagged `release`.
  Outcome first = Shell(env + "dfarm sweep release.json");
  ASSERT_EQ(first.code, 0) << first.err;
  Outcome tag = Shell(env + "dfarm tag last release");
  ASSERT_EQ(tag.code, 0) << tag.err;
  // Every commit: the script, as written. The same build as the baseline must pass
  // (up to three runs of the script, each a retried CI job, the tag moving to its new
  // run); a gate that fails identical builds every time fails.
  auto same_build_passes = [&](const std::string& sha) {
    std::string attempts;
    for (int attempt = 1; attempt <= 3; ++attempt) {
      Outcome o = Shell(env + "CI_COMMIT_SHA=" + sha + " sh '" + script.string() + "'");
      if (o.code == 0) return o;
      attempts += "attempt " + std::to_string(attempt) + " (exit " + std::to_string(o.code) +
                  "):\n" + o.out + o.err + Slurp(dir_ / "gate.xml") + "\n";
    }
    ADD_FAILURE() << "the script failed three times on the baseline's build:\n" << attempts;
    return Outcome{};
  };
  Outcome gate = same_build_passes("abc123");
  ASSERT_TRUE(fs::exists(dir_ / "gate.xml")) << gate.err;
  EXPECT_NE(Slurp(dir_ / "gate.xml").find("<testcase"), std::string::npos);
  Outcome runs = Shell(env + "dfarm runs --tag candidate-abc123");
  EXPECT_EQ(runs.code, 0) << runs.err;
  EXPECT_NE(runs.out.find("gate-e2e"), std::string::npos) << runs.out;
  // The same commit again (a retried CI job): the tag moves, the gate runs again.
  gate = same_build_passes("abc123");
  // A candidate that fails: fp16 arithmetic in release.json.
  fs::remove(dir_ / "gate.xml");
  std::ofstream(dir_ / "release.json")
      << Spec({{{"name", "cpu"}}, {{"name", "xnnpack"}, {"options", {{"fp16", "true"}}}}}, 5)
             .dump(2);
  gate = Shell(env + "CI_COMMIT_SHA=def456 sh '" + script.string() + "'");
  EXPECT_EQ(gate.code, 1) << gate.out << gate.err;
  EXPECT_NE(Slurp(dir_ / "gate.xml").find("<failure"), std::string::npos);
  // A candidate whose jobs crash: the sweep exits 1, the script goes on, and the gate fails
  // the new cell naming how its jobs ended.
  fs::remove(dir_ / "gate.xml");
  std::ofstream(dir_ / "release.json")
      << Spec({{{"name", "cpu"}},
               {{"name", "external"}, {"options", {{"path", DFARM_CRASH_PLUGIN}}}}})
             .dump(2);
  gate = Shell(env + "CI_COMMIT_SHA=c4a5h6 sh '" + script.string() + "'");
  EXPECT_EQ(gate.code, 1) << gate.out << gate.err;
  EXPECT_NE(gate.err.find("5 failed"), std::string::npos) << gate.err;
  EXPECT_NE(Slurp(dir_ / "gate.xml").find("crashed"), std::string::npos)
      << Slurp(dir_ / "gate.xml");
  // A spec that is not there: the sweep's exit code, no gate.
  fs::remove(dir_ / "release.json");
  gate = Shell(env + "CI_COMMIT_SHA=0a1b2c sh '" + script.string() + "'");
  EXPECT_EQ(gate.code, 2) << gate.out << gate.err;
}

}  // namespace
