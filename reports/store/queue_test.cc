// The distributed queue of the store on both backends: claims,
// targets, leases and the reaper, nodes, blobs; and the text and numbers the
// two backends must keep alike.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <thread>

#include "agent/base/sha256.h"
#include "reports/store/sql.h"
#include "reports/store/store_test_fixture.h"

namespace dfarm::store {
namespace {

class QueueTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  // A queue run (mode "queue", running) with `jobs`; returns the job ids.
  std::vector<int64_t> QueueRun(const std::vector<JobRow>& jobs, int64_t* run_id = nullptr) {
    auto run = store_->CreateRun("q", "{}");
    EXPECT_TRUE(run.ok()) << run.message();
    EXPECT_TRUE(store_->SetRunMode(*run, kRunModeQueue).ok());
    auto ids = store_->AddJobs(*run, jobs);
    EXPECT_TRUE(ids.ok()) << ids.message();
    if (run_id != nullptr) *run_id = *run;
    return ids.ok() ? *ids : std::vector<int64_t>{};
  }

  static JobRow Targeted(const std::string& target, const std::string& device = "local") {
    JobRow j = MakeJob("m.tflite");
    j.target = target;
    j.device = device;
    j.payload = R"({"x":1})";
    return j;
  }

  // The id claimed by `node` for `device`; 0 when none.
  int64_t Claim(const std::string& node, const DeviceTraits& device, int64_t lease_s = 60) {
    auto got = store_->ClaimJob(node, device, lease_s);
    EXPECT_TRUE(got.ok()) << got.message();
    return got.ok() && got->has_value() ? (*got)->id : 0;
  }

  static JobOutcome Ok(int64_t claim_id) {
    JobOutcome o;
    o.status = kJobOk;
    o.exit_code = 0;
    o.claim_id = claim_id;
    return o;
  }

  std::unique_ptr<Store> store_;
};

DeviceTraits Phone() {
  return {"phone",          "arm64-v8a",          "Android 14", "Qualcomm SM8550",
          int64_t{8} << 30, {"fast", "lab", "x"}, /*model=*/""};
}
// A run's queueing with no device classes.
RunQueueing Queueing(int64_t priority, int64_t unserved_timeout_s) {
  RunQueueing q;
  q.priority = priority;
  q.unserved_timeout_s = unserved_timeout_s;
  return q;
}
DeviceTraits Pc() {
  return {"pc", "x86_64", "linux", "Intel i7", int64_t{32} << 30, {"lab"}, /*model=*/""};
}

TEST(TargetTest, ParseStringAndMatch) {
  TargetSelector s{"arm64-v8a", "android", "sm8550", {"lab", "fast"}, 4096};
  const std::string t = TargetString(s);
  EXPECT_EQ(t, "select:abi=arm64-v8a;os=android;soc=sm8550;tags=lab,fast;min_memory_mb=4096");
  auto back = ParseTarget(t);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->abi, "arm64-v8a");
  EXPECT_EQ(back->tags, (std::vector<std::string>{"lab", "fast"}));
  EXPECT_EQ(back->min_memory_mb, 4096);
  EXPECT_EQ(ParseTarget("select:color=red").error().kind, ErrorKind::kInvalidInput);
  EXPECT_EQ(ParseTarget("select:min_memory_mb=lots").error().kind, ErrorKind::kInvalidInput);
  EXPECT_FALSE(ParseTarget("phone").ok());

  EXPECT_TRUE(TargetMatches(t, "other", Phone()));  // soc and os: a part, any case
  EXPECT_FALSE(TargetMatches(t, "other", Pc()));
  EXPECT_TRUE(TargetMatches("", "phone", Phone()));
  EXPECT_FALSE(TargetMatches("", "phone", Pc()));
  EXPECT_TRUE(TargetMatches(kTargetAny, "phone", Pc()));
  DeviceTraits small = Phone();
  small.memory_bytes = int64_t{4095} << 20;
  EXPECT_FALSE(TargetMatches(t, "", small));
  DeviceTraits untagged = Phone();
  untagged.tags = {"lab"};
  EXPECT_FALSE(TargetMatches(t, "", untagged));
  EXPECT_TRUE(TargetMatches("select:soc=SM85", "", Phone()));
  EXPECT_FALSE(TargetMatches("select:abi=ARM64-V8A", "", Phone()));  // abi: exact
  EXPECT_FALSE(TargetMatches("select:bogus=1", "", Phone()));
}

TEST_P(QueueTest, ClaimJobHonoursModeStatusTargetAndAge) {
  // Not claimable: a run its sweep runs itself, and a finished queue run.
  auto own = store_->CreateRun("own", "{}");
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE(store_->AddJob(*own, Targeted(kTargetAny)).ok());
  int64_t done_run = 0;
  QueueRun({Targeted(kTargetAny)}, &done_run);
  ASSERT_TRUE(store_->FinishRun(done_run, kRunCancelled).ok());
  const std::string sel = TargetString({"arm64-v8a", "android", "SM8550", {"lab"}, 4096});
  auto ids = QueueRun({Targeted("", "phone"), Targeted(kTargetAny), Targeted(sel)});
  ASSERT_EQ(ids.size(), 3u);

  EXPECT_EQ(Claim("n2", Pc()), ids[1]);  // not phone's own job, not the selector's
  EXPECT_EQ(Claim("n2", Pc()), 0);
  EXPECT_EQ(Claim("n1", Phone()), ids[0]);  // oldest first
  EXPECT_EQ(Claim("n1", Phone()), ids[2]);
  EXPECT_EQ(Claim("n1", Phone()), 0);
  auto job = store_->GetJob(ids[2]);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, kJobRunning);
  EXPECT_EQ(job->claimed_by, "n1");
  EXPECT_EQ(job->claim_id, 1);
  EXPECT_EQ(job->device, "phone");
  EXPECT_EQ(job->target, sel);
  EXPECT_EQ(job->payload, R"({"x":1})");
  auto claims = store_->ListJobClaims(ids[1]);
  ASSERT_TRUE(claims.ok());
  ASSERT_EQ(claims->size(), 1u);
  EXPECT_EQ((*claims)[0].node, "n2");
  EXPECT_EQ((*claims)[0].device, "pc");
  EXPECT_EQ((*claims)[0].outcome, "");

  // After a reap the job is claimed again, under claim 2.
  auto expired = store_->ClaimJob("n3", Pc(), -1);  // nothing left for it
  ASSERT_TRUE(expired.ok());
  EXPECT_FALSE(expired->has_value());
  auto more = QueueRun({Targeted(kTargetAny)});
  ASSERT_NE(Claim("n3", Pc(), -1), 0);  // a lease already over
  auto reaped = store_->ReapExpiredClaims(3);
  ASSERT_TRUE(reaped.ok()) << reaped.message();
  EXPECT_EQ(*reaped, std::vector<int64_t>{more[0]});
  EXPECT_EQ(Claim("n4", Phone()), more[0]);
  EXPECT_EQ(store_->GetJob(more[0])->claim_id, 2);
  EXPECT_EQ(store_->GetJob(more[0])->claimed_by, "n4");
}

TEST_P(QueueTest, HeartbeatKeepsTheLeaseAndTheReaperTakesItBack) {
  NodeRow n{"n1", "host", 42, NowIso8601(), 0, 0, "", {"phone"}};
  ASSERT_TRUE(store_->RegisterNode(n).ok());
  auto ids = QueueRun({Targeted(kTargetAny)});
  ASSERT_EQ(Claim("n1", Phone(), -1), ids[0]);                // its lease is over at once...
  auto held = store_->NodeHeartbeat("n1", kNodeRunning, 60);  // ...until renewed
  ASSERT_TRUE(held.ok()) << held.message();
  EXPECT_EQ(*held, 1);
  EXPECT_TRUE(store_->ReapExpiredClaims(3)->empty());
  EXPECT_EQ(store_->GetJob(ids[0])->claimed_by, "n1");
  ASSERT_TRUE(store_->RecordJobResult(ids[0], Ok(1)).ok());

  // A real one-second lease, without heartbeats.
  auto next = QueueRun({Targeted(kTargetAny)});
  ASSERT_EQ(Claim("n1", Phone(), 1), next[0]);
  EXPECT_TRUE(store_->ReapExpiredClaims(3)->empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  auto reaped = store_->ReapExpiredClaims(3);
  ASSERT_TRUE(reaped.ok()) << reaped.message();
  EXPECT_EQ(*reaped, std::vector<int64_t>{next[0]});
  auto job = store_->GetJob(next[0]);
  EXPECT_EQ(job->status, kJobQueued);
  EXPECT_EQ(job->claimed_by, "");
  auto claims = store_->ListJobClaims(next[0]);
  ASSERT_EQ(claims->size(), 1u);
  EXPECT_EQ((*claims)[0].outcome, kClaimReaped);
  EXPECT_GT((*claims)[0].ended_unix, 0);

  // The old claim's result is refused and records nothing.
  auto late = store_->RecordJobResult(next[0], Ok(1));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().kind, ErrorKind::kConflict) << late.message();
  EXPECT_EQ(store_->GetJob(next[0])->status, kJobQueued);
  EXPECT_FALSE(store_->GetJobDetail(next[0]).ok());
  ASSERT_EQ(Claim("n2", Pc()), next[0]);
  EXPECT_EQ(store_->RecordJobResult(next[0], Ok(1)).error().kind, ErrorKind::kConflict);
  ASSERT_TRUE(store_->RecordJobResult(next[0], Ok(2)).ok());
  EXPECT_EQ(store_->GetJob(next[0])->status, kJobOk);
  EXPECT_EQ(store_->ListJobClaims(next[0])->back().outcome, kClaimFinished);
}

TEST_P(QueueTest, AJobLostMaxClaimsTimesIsRecordedInfra) {
  int64_t run = 0;
  auto ids = QueueRun({Targeted(kTargetAny)}, &run);
  for (int64_t claim = 1; claim <= 2; ++claim) {
    ASSERT_EQ(Claim("n" + std::to_string(claim), Pc(), -1), ids[0]);
    auto reaped = store_->ReapExpiredClaims(2);
    ASSERT_TRUE(reaped.ok()) << reaped.message();
    EXPECT_EQ(*reaped, std::vector<int64_t>{ids[0]});
  }
  auto job = store_->GetJob(ids[0]);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, kJobInfra);
  EXPECT_NE(job->error.find("lost 2 times"), std::string::npos) << job->error;
  EXPECT_NE(job->error.find("'n2'"), std::string::npos) << job->error;
  EXPECT_EQ(job->claimed_by, "");
  EXPECT_TRUE(store_->GetJobDetail(ids[0]).ok());
  auto claims = store_->ListJobClaims(ids[0]);
  ASSERT_EQ(claims->size(), 2u);
  EXPECT_EQ((*claims)[1].outcome, kClaimReaped);
  EXPECT_EQ(Claim("n3", Pc()), 0);
  EXPECT_EQ(store_->GetRun(run)->status, kRunFinished);  // its last job ended
}

// A node paused past its lease wakes up after another node finished its
// job: every state change it tries under its old claim fails with kConflict
// and leaves the finished job (and its run) as they are.
TEST_P(QueueTest, ALostClaimChangesNothing) {
  int64_t run = 0;
  auto ids = QueueRun({Targeted(kTargetAny)}, &run);
  ASSERT_EQ(Claim("n1", Pc(), -1), ids[0]);  // a lease already over
  ASSERT_TRUE(store_->MarkJobRunning(ids[0], 1).ok());
  EXPECT_EQ(store_->MarkJobRunning(ids[0], 2).error().kind, ErrorKind::kConflict);
  EXPECT_EQ(store_->MarkJobRunning(ids[0], 0).error().kind, ErrorKind::kConflict);
  ASSERT_EQ(*store_->ReapExpiredClaims(3), std::vector<int64_t>{ids[0]});
  // Reaped, queued again: the old claim no longer holds it.
  EXPECT_EQ(store_->MarkJobRunning(ids[0], 1).error().kind, ErrorKind::kConflict);
  EXPECT_EQ(store_->GetJob(ids[0])->status, kJobQueued);
  ASSERT_EQ(Claim("n2", Phone()), ids[0]);
  ASSERT_TRUE(store_->MarkJobRunning(ids[0], 2).ok());
  ASSERT_TRUE(store_->RecordJobResult(ids[0], Ok(2)).ok());
  ASSERT_EQ(store_->GetRun(run)->status, kRunFinished);
  const JobRow done = *store_->GetJob(ids[0]);

  auto late = store_->MarkJobRunning(ids[0], 1);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().kind, ErrorKind::kConflict);
  EXPECT_NE(late.message().find("job " + std::to_string(ids[0]) + " is no longer held by claim 1"),
            std::string::npos)
      << late.message();
  EXPECT_NE(late.message().find("it is ok"), std::string::npos) << late.message();
  EXPECT_EQ(store_->MarkJobRunning(ids[0], 2).error().kind, ErrorKind::kConflict);
  EXPECT_EQ(store_->MarkJobRunning(ids[0], 0).error().kind, ErrorKind::kConflict);
  EXPECT_EQ(store_->RecordJobResult(ids[0], Ok(1)).error().kind, ErrorKind::kConflict);
  EXPECT_EQ(store_->RecordJobResult(ids[0], Ok(2)).error().kind, ErrorKind::kConflict);
  auto unclaimed = store_->RecordJobResult(ids[0], Ok(0));
  ASSERT_FALSE(unclaimed.ok());
  EXPECT_EQ(unclaimed.error().kind, ErrorKind::kConflict);
  EXPECT_NE(unclaimed.message().find("is a job of the farm's queue"), std::string::npos)
      << unclaimed.message();
  EXPECT_EQ(store_->MoveJob(ids[0], "elsewhere", "k").error().kind, ErrorKind::kConflict);
  EXPECT_TRUE(store_->RequeueJob(ids[0]).ok());  // nothing to requeue
  EXPECT_FALSE(*store_->ReleaseClaim(ids[0], 1));
  EXPECT_FALSE(*store_->ReleaseClaim(ids[0], 2));
  EXPECT_TRUE(store_->ReapExpiredClaims(1)->empty());

  const JobRow after = *store_->GetJob(ids[0]);
  EXPECT_EQ(after.status, kJobOk);
  EXPECT_EQ(after.attempts, done.attempts);
  EXPECT_EQ(after.device, done.device);
  EXPECT_EQ(after.claimed_by, "");
  EXPECT_EQ(after.claim_id, 2);
  EXPECT_EQ(store_->GetRun(run)->status, kRunFinished);
  auto claims = store_->ListJobClaims(ids[0]);
  ASSERT_EQ(claims->size(), 2u);
  EXPECT_EQ((*claims)[0].outcome, kClaimReaped);
  EXPECT_EQ((*claims)[1].outcome, kClaimFinished);
  EXPECT_EQ(store_->MarkJobRunning(ids[0] + 100, 1).error().kind, ErrorKind::kNotFound);
}

// The jobs of a run its sweep runs itself (claim 0) change only while
// pending: a finished job is never set running, requeued or moved (its
// result may be recorded again: it replaces the old one).
TEST_P(QueueTest, AFinishedJobOfASweepStaysFinished) {
  auto run = store_->CreateRun("own", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store_->AddJobs(*run, {MakeJob("a.tflite"), MakeJob("b.tflite")});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(store_->MarkJobRunning((*ids)[0], 0).ok());
  EXPECT_EQ(store_->MarkJobRunning((*ids)[0], 1).error().kind, ErrorKind::kConflict);
  ASSERT_TRUE(store_->MarkJobRunning((*ids)[0], 0).ok());  // a retry
  ASSERT_TRUE(store_->RecordJobResult((*ids)[0], Ok(0)).ok());
  ASSERT_TRUE(store_->RecordJobResult((*ids)[1], Ok(0)).ok());  // never started
  for (int64_t id : *ids) {
    auto again = store_->MarkJobRunning(id, 0);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().kind, ErrorKind::kConflict);
    EXPECT_NE(again.message().find("is not pending (it is ok)"), std::string::npos)
        << again.message();
    EXPECT_EQ(store_->MoveJob(id, "elsewhere", "k").error().kind, ErrorKind::kConflict);
    EXPECT_TRUE(store_->RequeueJob(id).ok());
    const JobRow j = *store_->GetJob(id);
    EXPECT_EQ(j.status, kJobOk);
    EXPECT_EQ(j.device, "local");
    EXPECT_EQ(j.moved_from, "");
  }
  EXPECT_EQ(store_->GetJob((*ids)[0])->attempts, 2);
  EXPECT_EQ(store_->GetJob((*ids)[1])->attempts, 0);
}

TEST_P(QueueTest, ReleaseClaimPutsItBack) {
  auto ids = QueueRun({Targeted(kTargetAny)});
  ASSERT_EQ(Claim("n1", Pc()), ids[0]);
  auto released = store_->ReleaseClaim(ids[0], 1);
  ASSERT_TRUE(released.ok()) << released.message();
  EXPECT_TRUE(*released);
  EXPECT_EQ(store_->GetJob(ids[0])->status, kJobQueued);
  EXPECT_EQ(store_->GetJob(ids[0])->claimed_by, "");
  EXPECT_EQ(store_->ListJobClaims(ids[0])->at(0).outcome, kClaimReleased);
  EXPECT_FALSE(*store_->ReleaseClaim(ids[0], 1));  // no longer held
  ASSERT_EQ(Claim("n2", Pc()), ids[0]);
  EXPECT_EQ(store_->GetJob(ids[0])->claim_id, 2);
  EXPECT_FALSE(*store_->ReleaseClaim(ids[0], 1));
}

TEST_P(QueueTest, NodesRegisterHeartbeatAndList) {
  NodeRow a{"b-node", "host-b", 7, "2024-05-01T00:00:00Z", 0, 0, "", {"d1", "tcp://x:7000"}};
  NodeRow b{"a-node", "host-a", 8, "2024-05-01T00:00:01Z", 0, 0, "", {}};
  ASSERT_TRUE(store_->RegisterNode(a).ok());
  ASSERT_TRUE(store_->RegisterNode(b).ok());
  auto held = store_->NodeHeartbeat("b-node", kNodeDraining, 30);
  ASSERT_TRUE(held.ok()) << held.message();
  EXPECT_EQ(*held, 0);
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.message();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "a-node");
  EXPECT_EQ((*nodes)[0].state, kNodeRunning);
  EXPECT_TRUE((*nodes)[0].devices.empty());
  const NodeRow& got = (*nodes)[1];
  EXPECT_EQ(got.host, "host-b");
  EXPECT_EQ(got.pid, 7);
  EXPECT_EQ(got.started_at, "2024-05-01T00:00:00Z");
  EXPECT_EQ(got.state, kNodeDraining);
  EXPECT_EQ(got.devices, (std::vector<std::string>{"d1", "tcp://x:7000"}));
  EXPECT_GE(got.heartbeat_age_s, 0);
  EXPECT_LE(got.heartbeat_age_s, 2);
  EXPECT_GT(got.heartbeat_unix, ::time(nullptr) - 60);
  auto ghost = store_->NodeHeartbeat("ghost", kNodeRunning, 30);
  ASSERT_FALSE(ghost.ok());
  EXPECT_NE(ghost.message().find("ghost"), std::string::npos) << ghost.message();
  a.devices = {"d2"};
  ASSERT_TRUE(store_->RegisterNode(a).ok());  // again: replaced, running
  nodes = store_->ListNodes();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].devices, std::vector<std::string>{"d2"});
  EXPECT_EQ((*nodes)[1].state, kNodeRunning);
}

// A node registering again under a name (its predecessor died) holds no
// claim: the predecessor's jobs go back to the queue at the next reap (the
// new node reaps before its first heartbeat), not when their leases would
// have ended.
TEST_P(QueueTest, RegisteringEndsThePredecessorsLeases) {
  NodeRow n{"n1", "host", 42, NowIso8601(), 0, 0, "", {"pc"}};
  ASSERT_TRUE(store_->RegisterNode(n).ok());
  auto ids = QueueRun({Targeted(kTargetAny), Targeted(kTargetAny)});
  ASSERT_EQ(Claim("n1", Pc(), 600), ids[0]);
  ASSERT_EQ(Claim("n2", Pc(), 600), ids[1]);  // another node's: kept
  EXPECT_TRUE(store_->ReapExpiredClaims(3)->empty());
  n.pid = 43;
  ASSERT_TRUE(store_->RegisterNode(n).ok());
  EXPECT_EQ(*store_->ReapExpiredClaims(3), std::vector<int64_t>{ids[0]});
  EXPECT_EQ(*store_->NodeHeartbeat("n1", kNodeRunning, 600), 0);
  EXPECT_EQ(store_->GetJob(ids[0])->status, kJobQueued);
  EXPECT_EQ(store_->ListJobClaims(ids[0])->at(0).outcome, kClaimReaped);
  EXPECT_EQ(store_->GetJob(ids[1])->claimed_by, "n2");
}

std::string WriteRandomFile(const std::filesystem::path& path, size_t size) {
  std::mt19937_64 rng(size);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << bytes;
  return bytes;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_P(QueueTest, BlobsRoundTripInChunks) {
  const auto src = dir_ / "model.bin";
  const std::string bytes = WriteRandomFile(src, (9 << 20) + 12345);  // three 4 MiB chunks
  agent::Sha256 h;
  h.Update(bytes.data(), bytes.size());
  const std::string sha = h.FinishHex();
  const std::string wrong(64, 'f');

  auto bad = store_->PutBlob(wrong, src.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(sha), std::string::npos) << bad.message();
  EXPECT_FALSE(*store_->HasBlob(wrong));
  EXPECT_EQ(QueryValue("SELECT count(*) FROM blob_chunks"), "0");
  EXPECT_EQ(QueryValue("SELECT count(*) FROM blobs"), "0");

  EXPECT_FALSE(*store_->HasBlob(sha));
  auto put = store_->PutBlob(sha, src.string());
  ASSERT_TRUE(put.ok()) << put.message();
  EXPECT_TRUE(*store_->HasBlob(sha));
  EXPECT_EQ(QueryValue("SELECT count(*) FROM blob_chunks"), "3");
  // Again: nothing to do (the file is not even read).
  ASSERT_TRUE(store_->PutBlob(sha, (dir_ / "gone.bin").string()).ok());
  EXPECT_EQ(QueryValue("SELECT count(*) FROM blob_chunks"), "3");

  auto reader = Open();  // another connection, as a node elsewhere
  ASSERT_NE(reader, nullptr);
  const auto dst = dir_ / "copy.bin";
  auto got = reader->GetBlob(sha, dst.string());
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_TRUE(ReadFile(dst) == bytes);
  auto missing = reader->GetBlob(wrong, (dir_ / "none.bin").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "none.bin"));
}

TEST_P(QueueTest, DeviceNodeAndTagsRoundTrip) {
  DeviceRow d;
  d.name = "tcp://10.0.0.7:7000";
  d.abi = "arm64-v8a";
  d.memory_bytes = int64_t{12} << 30;
  d.node = "lab-1";
  d.tags = {"fast", "lab"};
  ASSERT_TRUE(store_->UpsertDevice(d).ok());
  DeviceRow plain;
  plain.name = "local";
  ASSERT_TRUE(store_->UpsertDevice(plain).ok());
  auto devices = store_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.message();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].name, "local");
  EXPECT_EQ((*devices)[0].node, "");
  EXPECT_TRUE((*devices)[0].tags.empty());
  EXPECT_EQ((*devices)[1].node, "lab-1");
  EXPECT_EQ((*devices)[1].tags, (std::vector<std::string>{"fast", "lab"}));
  EXPECT_EQ((*devices)[1].memory_bytes, int64_t{12} << 30);
}

TEST_P(QueueTest, TextThatIsNotUtf8Records) {
  auto run = store_->CreateRun("t", "{}");
  auto id = store_->AddJob(*run, MakeJob("m.tflite"));
  ASSERT_TRUE(id.ok());
  JobOutcome o = Ok(0);
  o.status = "crashed";
  o.stderr_tail = std::string("ab\xff\xfe-c\0d\xc3(e", 11);
  o.error = "bad \xe2\x82";
  auto r = store_->RecordJobResult(*id, o);
  ASSERT_TRUE(r.ok()) << r.message();
  auto detail = store_->GetJobDetail(*id);
  ASSERT_TRUE(detail.ok()) << detail.message();
  const std::string fffd = "\xef\xbf\xbd";
  if (pg()) {  // invalid bytes become U+FFFD, NUL bytes are dropped
    EXPECT_EQ(detail->stderr_tail, "ab" + fffd + fffd + "-cd" + fffd + "(e");
    EXPECT_EQ(store_->GetJob(*id)->error, "bad " + fffd + fffd);  // one a byte
  } else {
    EXPECT_EQ(detail->stderr_tail, o.stderr_tail);
    EXPECT_EQ(store_->GetJob(*id)->error, o.error);
  }
}

TEST_P(QueueTest, DoublesRoundTripExactly) {
  auto run = store_->CreateRun("d", "{}");
  auto id = store_->AddJob(*run, MakeJob("m.tflite"));
  ASSERT_TRUE(id.ok());
  const std::vector<double> values = {0.1,
                                      1e-300,
                                      123456.789012345,
                                      -2.5e-310,
                                      1.0 / 3,
                                      9007199254740993.0,
                                      1.7976931348623157e308};
  JobOutcome o = Ok(0);
  o.wall_ms = 0.1;
  o.samples_us = values;
  JobMetrics m;
  m.mean_us = 123456.789012345;
  m.p99_us = 1e-300;
  m.std_us = std::nan("");  // a figure over nothing
  o.metrics = m;
  o.accuracy = Accuracy{"cpu", {OutputAccuracy{}}};
  o.accuracy->outputs[0].rmse = std::nan("");
  o.accuracy->outputs[0].mean_abs_error = 0.1;
  ASSERT_TRUE(store_->RecordJobResult(*id, o).ok());
  auto samples = store_->GetSamples(*id);
  ASSERT_TRUE(samples.ok()) << samples.message();
  ASSERT_EQ(samples->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*samples)[i], values[i]) << i;
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.ok() && job->metrics.has_value());
  EXPECT_EQ(job->wall_ms, 0.1);
  EXPECT_EQ(job->metrics->mean_us, 123456.789012345);
  EXPECT_EQ(job->metrics->p99_us, 1e-300);
  if (pg()) {
    EXPECT_TRUE(std::isnan(job->metrics->std_us)) << job->metrics->std_us;
  } else {  // SQLite stores a NaN as NULL, which reads back 0
    EXPECT_EQ(job->metrics->std_us, 0) << job->metrics->std_us;
  }
  auto acc = store_->GetAccuracy(*id);
  ASSERT_TRUE(acc.ok() && acc->has_value());
  EXPECT_TRUE(std::isnan((*acc)->outputs[0].rmse));
  EXPECT_EQ((*acc)->outputs[0].mean_abs_error, 0.1);
}

// What one node thread did.
struct NodeTally {
  int claimed = 0;
  int conflicts = 0;
  std::string error;
};

// Claims and records jobs on its own connection until none is left.
void RunNode(const std::string& where, int n, NodeTally* tally) {
  auto store = OpenStore(where);
  if (!store.ok()) {
    tally->error = store.message();
    return;
  }
  const std::string node = "node" + std::to_string(n);
  DeviceTraits device{
      "dev" + std::to_string(n), "x86_64", "linux", "cpu", 1 << 30, {}, /*model=*/""};
  for (;;) {
    auto claimed = (*store)->ClaimJob(node, device, 60);
    if (!claimed.ok()) {
      tally->error = claimed.message();
      return;
    }
    if (!claimed->has_value()) return;
    ++tally->claimed;
    JobOutcome o;
    o.status = kJobOk;
    o.exit_code = 0;
    o.claim_id = (*claimed)->claim_id;
    o.samples_us = {static_cast<double>((*claimed)->id)};
    auto recorded = (*store)->RecordJobResult((*claimed)->id, o);
    if (!recorded.ok()) {
      if (recorded.error().kind == ErrorKind::kConflict) ++tally->conflicts;
      tally->error = recorded.message();
    }
  }
}

// The point of FOR UPDATE SKIP LOCKED: eight nodes on their own connections
// drain one queue, every job recorded exactly once, and the run finishes by
// itself with its last job.
TEST_P(QueueTest, EightNodesDrainTheQueueEachJobOnce) {
  if (!pg()) GTEST_SKIP() << "PostgreSQL only: SQLite has one writer";
  int64_t run = 0;
  auto ids = QueueRun(std::vector<JobRow>(400, Targeted(kTargetAny)), &run);
  ASSERT_EQ(ids.size(), 400u);
  std::vector<NodeTally> tallies(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back(RunNode, where_, i, &tallies[i]);
  for (std::thread& t : threads) t.join();
  int claimed = 0;
  std::string spread;
  for (const NodeTally& t : tallies) {
    EXPECT_EQ(t.error, "");
    EXPECT_EQ(t.conflicts, 0);
    claimed += t.claimed;
    spread += std::to_string(t.claimed) + " ";
  }
  EXPECT_EQ(claimed, 400) << spread;
  EXPECT_EQ(QueryValue("SELECT count(*) FROM job_claims"), "400");
  EXPECT_EQ(QueryValue("SELECT count(DISTINCT job_id) FROM job_claims WHERE outcome = 'finished'"),
            "400");
  EXPECT_EQ(QueryValue("SELECT count(*) FROM jobs WHERE status = 'ok' AND claimed_by = ''"), "400");
  EXPECT_EQ(QueryValue("SELECT count(*) FROM results"), "400");
  EXPECT_EQ(QueryValue("SELECT count(*) FROM samples"), "400");
  auto got = store_->GetRun(run);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, kRunFinished);
  EXPECT_FALSE(got->finished_at.empty());
  std::cout << "claims per node: " << spread << "\n";
}

// Schema v12: the first device to record a health model's outputs for a
// runner build defines them; later records return those, changing nothing.
TEST_P(QueueTest, HealthGoldenKeepsTheFirstOutputs) {
  const std::string model(64, 'a'), runner(64, 'b'), other_runner(64, 'c');
  auto none = store_->GetHealthGolden(model, runner);
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_FALSE(none->has_value());
  auto first = store_->RecordHealthGolden(model, runner, "h1,h2", "local");
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(*first, "h1,h2");
  auto second = store_->RecordHealthGolden(model, runner, "x1,x2", "tcp://pc:7000");
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(*second, "h1,h2");
  auto other = store_->RecordHealthGolden(model, other_runner, "y1", "tcp://pc:7000");
  ASSERT_TRUE(other.ok()) << other.message();
  EXPECT_EQ(*other, "y1");
  auto got = store_->GetHealthGolden(model, runner);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->outputs, "h1,h2");
  EXPECT_EQ((*got)->device, "local");
  EXPECT_EQ((*got)->recorded_at.size(), 20u);  // 2024-05-01T12:34:56Z
  EXPECT_EQ(QueryValue("SELECT count(*) FROM health_golden"), "2");
}

// Eight connections record different outputs at once: all get the same.
TEST_P(QueueTest, HealthGoldenIsAtomicAcrossConnections) {
  if (!pg()) GTEST_SKIP() << "PostgreSQL only: SQLite has one writer";
  const std::string model(64, 'd'), runner(64, 'e');
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto store = OpenStore(where_);
      if (!store) {
        got[i] = "open: " + store.message();
        return;
      }
      auto r = (*store)->RecordHealthGolden(model, runner, "out" + std::to_string(i),
                                            "dev" + std::to_string(i));
      got[i] = r ? *r : "error: " + r.message();
    });
  }
  for (std::thread& t : threads) t.join();
  auto golden = store_->GetHealthGolden(model, runner);
  ASSERT_TRUE(golden.ok() && golden->has_value());
  for (const std::string& g : got) EXPECT_EQ(g, (*golden)->outputs);
  EXPECT_EQ("out" + (*golden)->device.substr(3), (*golden)->outputs);
}

// --- operating a farm: cancel, priority, unserved jobs, operator states ------

// Cancelling a run ends every pending job at once, in one terminal state;
// the claim of a job in flight records nothing after it.
TEST_P(QueueTest, CancelRunEndsEveryPendingJobAndRefusesLateResults) {
  NodeRow n{"n1", "host", 42, NowIso8601(), 0, 0, "", {"pc"}};
  ASSERT_TRUE(store_->RegisterNode(n).ok());
  int64_t run = 0;
  auto ids = QueueRun({Targeted(kTargetAny), Targeted(kTargetAny), Targeted(kTargetAny)}, &run);
  ASSERT_EQ(Claim("n1", Pc()), ids[0]);
  ASSERT_TRUE(store_->MarkJobRunning(ids[0], 1).ok());
  ASSERT_EQ(Claim("n1", Pc()), ids[1]);
  ASSERT_TRUE(store_->RecordJobResult(ids[1], Ok(1)).ok());  // ended before the cancel

  auto cancelled = store_->CancelRun(run, "alice@lab");
  ASSERT_TRUE(cancelled.ok()) << cancelled.message();
  EXPECT_EQ(cancelled->run_id, run);
  EXPECT_EQ(cancelled->queued, 1);
  EXPECT_EQ(cancelled->running, 1);
  EXPECT_EQ(store_->GetRun(run)->status, kRunCancelled);
  EXPECT_FALSE(store_->GetRun(run)->finished_at.empty());
  for (int64_t id : {ids[0], ids[2]}) {
    const JobRow j = *store_->GetJob(id);
    EXPECT_EQ(j.status, kJobCancelled);
    EXPECT_NE(j.error.find("cancelled by alice@lab"), std::string::npos) << j.error;
    EXPECT_EQ(j.claimed_by, "");
    EXPECT_FALSE(j.metrics.has_value());
    auto detail = store_->GetJobDetail(id);  // every final job has a results row
    ASSERT_TRUE(detail.ok()) << detail.message();
    EXPECT_EQ(detail->exit_code, -1);
  }
  EXPECT_EQ(store_->GetJob(ids[1])->status, kJobOk);  // a result in before the cancel stays
  EXPECT_EQ(store_->ListJobClaims(ids[0])->at(0).outcome, kClaimCancelled);

  // The node in flight: its result, its retry, its renewal change nothing.
  auto late = store_->RecordJobResult(ids[0], Ok(1));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().kind, ErrorKind::kConflict) << late.message();
  EXPECT_NE(late.message().find("it is cancelled"), std::string::npos) << late.message();
  EXPECT_EQ(store_->MarkJobRunning(ids[0], 1).error().kind, ErrorKind::kConflict);
  EXPECT_FALSE(*store_->ReleaseClaim(ids[0], 1));
  EXPECT_EQ(*store_->NodeHeartbeat("n1", kNodeRunning, 60), 0);
  EXPECT_EQ(Claim("n1", Pc()), 0);
  EXPECT_EQ(store_->GetJob(ids[0])->status, kJobCancelled);
  EXPECT_FALSE(store_->GetJob(ids[0])->metrics.has_value());
  EXPECT_EQ(store_->ListJobClaims(ids[0])->at(0).outcome, kClaimCancelled);

  // Again, or an unknown run: a clear error, nothing changed.
  auto again = store_->CancelRun(run, "bob@lab");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(again.message().find("is cancelled"), std::string::npos) << again.message();
  EXPECT_NE(again.message().find("nothing to cancel"), std::string::npos) << again.message();
  EXPECT_NE(store_->GetJob(ids[2])->error.find("alice"), std::string::npos);
  EXPECT_EQ(store_->CancelRun(run + 100, "bob@lab").error().kind, ErrorKind::kNotFound);
}

// Waits (without a deadline of its own: ctest's timeout is the limit) until
// a backend of the test's database waits for a row lock.
void WaitForALockWaiter(const std::function<std::string(const std::string&)>& query) {
  while (query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
               "datname = current_database()") == "0") {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A result being recorded holds its job's row, then its foreign key check
// takes the run's row FOR KEY SHARE. A cancel that took the run's row FOR
// UPDATE and waits for that job deadlocked with it (a farm test saw the
// node's result refused as "deadlock detected"). The cancel waits instead.
TEST_P(QueueTest, ACancelWaitsForAResultBeingRecordedInsteadOfDeadlocking) {
  if (!pg()) GTEST_SKIP() << "PostgreSQL only: SQLite has one writer";
  int64_t run = 0;
  auto ids = QueueRun({Targeted(kTargetAny)}, &run);
  ASSERT_EQ(Claim("n1", Pc()), ids[0]);
  ASSERT_TRUE(store_->MarkJobRunning(ids[0], 1).ok());
  auto recorder = sql::OpenPostgres(where_);
  ASSERT_TRUE(recorder.ok()) << recorder.message();
  sql::Conn& a = **recorder;
  ASSERT_TRUE(a.Exec("BEGIN").ok());
  ASSERT_TRUE(a.Exec("UPDATE jobs SET wall_ms = 7 WHERE id = " + std::to_string(ids[0])).ok());
  Result<CancelledRun> cancelled = MakeError("not run");
  std::thread cancel([&] {
    auto other = OpenStore(where_);
    if (other) cancelled = (*other)->CancelRun(run, "alice@lab");
  });
  WaitForALockWaiter([this](const std::string& q) { return QueryValue(q); });
  // NOWAIT: refused at once were the cancel's lock on the run too strong.
  auto key_share =
      a.Exec("SELECT 1 FROM runs WHERE id = " + std::to_string(run) + " FOR KEY SHARE NOWAIT");
  EXPECT_TRUE(key_share.ok()) << key_share.message();
  EXPECT_TRUE(a.Exec(key_share.ok() ? "COMMIT" : "ROLLBACK").ok());
  cancel.join();
  ASSERT_TRUE(cancelled.ok()) << cancelled.message();
  EXPECT_EQ(cancelled->running, 1);
  EXPECT_EQ(store_->GetJob(ids[0])->status, kJobCancelled);
}

// A deadlock the server breaks is ErrorKind::kTransient: the store runs
// such a transaction again rather than losing what it was writing.
TEST_P(QueueTest, ADeadlockIsATransientError) {
  if (!pg()) GTEST_SKIP() << "PostgreSQL only: SQLite has one writer";
  auto ids = QueueRun({Targeted(kTargetAny), Targeted(kTargetAny)});
  auto first = sql::OpenPostgres(where_);
  auto second = sql::OpenPostgres(where_);
  ASSERT_TRUE(first.ok() && second.ok());
  auto touch = [&](sql::Conn& c, int64_t id) {
    return c.Exec("UPDATE jobs SET wall_ms = 1 WHERE id = " + std::to_string(id));
  };
  ASSERT_TRUE((*first)->Exec("BEGIN").ok());
  ASSERT_TRUE((*second)->Exec("BEGIN").ok());
  ASSERT_TRUE(touch(**first, ids[0]).ok());
  ASSERT_TRUE(touch(**second, ids[1]).ok());
  Result<void> first_waited = dfarm::Ok();
  std::thread waiter([&] { first_waited = touch(**first, ids[1]); });
  WaitForALockWaiter([this](const std::string& q) { return QueryValue(q); });
  Result<void> second_waited = touch(**second, ids[0]);
  // The loser's transaction holds its locks until it ends: end both.
  (void)(*second)->Exec(second_waited.ok() ? "COMMIT" : "ROLLBACK");
  waiter.join();
  (void)(*first)->Exec("ROLLBACK");
  ASSERT_NE(first_waited.ok(), second_waited.ok()) << "one of the two is rolled back";
  const Error& e = first_waited.ok() ? second_waited.error() : first_waited.error();
  EXPECT_EQ(e.kind, ErrorKind::kTransient) << e.message;
  EXPECT_NE(e.message.find("deadlock"), std::string::npos) << e.message;
}

// A result whose transaction the server breaks as a deadlock is written
// again, not lost: here another client holds the run's row FOR UPDATE while
// the result waits for it, then waits for the result's job.
TEST_P(QueueTest, AResultBrokenByADeadlockIsWrittenAgain) {
  if (!pg()) GTEST_SKIP() << "PostgreSQL only: SQLite has one writer";
  int64_t run = 0;
  auto ids = QueueRun({Targeted(kTargetAny)}, &run);
  ASSERT_EQ(Claim("n1", Pc()), ids[0]);
  ASSERT_TRUE(store_->MarkJobRunning(ids[0], 1).ok());
  auto other = sql::OpenPostgres(where_);
  ASSERT_TRUE(other.ok()) << other.message();
  sql::Conn& a = **other;
  ASSERT_TRUE(a.Exec("BEGIN").ok());
  ASSERT_TRUE(a.Exec("SELECT 1 FROM runs WHERE id = " + std::to_string(run) + " FOR UPDATE").ok());
  Result<void> recorded = MakeError("not run");
  std::thread record([&] {
    auto s = OpenStore(where_);
    if (s) recorded = (*s)->RecordJobResult(ids[0], Ok(1));
  });
  WaitForALockWaiter([this](const std::string& q) { return QueryValue(q); });
  // The cycle: the server rolls one of the two back.
  (void)a.Exec("UPDATE jobs SET wall_ms = 3 WHERE id = " + std::to_string(ids[0]));
  (void)a.Exec("ROLLBACK");
  record.join();
  ASSERT_TRUE(recorded.ok()) << recorded.message();
  EXPECT_EQ(store_->GetJob(ids[0])->status, kJobOk);
}

// A run its sweep runs itself (claim 0) is cancelled the same way: the
// sweep's late result and its closing FinishRun leave the cancel in place.
TEST_P(QueueTest, CancelRunOfASweepsOwnRunStaysCancelled) {
  auto run = store_->CreateRun("own", "{}");
  ASSERT_TRUE(run.ok());
  auto ids = store_->AddJobs(*run, {MakeJob("a.tflite"), MakeJob("b.tflite")});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(store_->MarkJobRunning((*ids)[0], 0).ok());
  auto cancelled = store_->CancelRun(*run, "alice@lab");
  ASSERT_TRUE(cancelled.ok()) << cancelled.message();
  EXPECT_EQ(cancelled->running, 1);
  EXPECT_EQ(cancelled->queued, 1);
  EXPECT_EQ(store_->RecordJobResult((*ids)[0], Ok(0)).error().kind, ErrorKind::kConflict);
  EXPECT_EQ(store_->MarkJobRunning((*ids)[1], 0).error().kind, ErrorKind::kConflict);
  ASSERT_TRUE(store_->FinishRun(*run, kRunFinished).ok());
  EXPECT_EQ(store_->GetRun(*run)->status, kRunCancelled);
  EXPECT_EQ(store_->GetJob((*ids)[0])->status, kJobCancelled);
  EXPECT_EQ(store_->FinishRun(*run + 100, kRunFinished).error().kind, ErrorKind::kNotFound);
}

// Claims take the highest priority first; between runs of equal priority,
// the run with the fewest jobs running, then the oldest.
TEST_P(QueueTest, ClaimsTakeThePriorityThenTheLeastBusyRun) {
  int64_t long_run = 0, other = 0, urgent = 0;
  auto a = QueueRun(
      {Targeted(kTargetAny), Targeted(kTargetAny), Targeted(kTargetAny), Targeted(kTargetAny)},
      &long_run);
  auto b = QueueRun({Targeted(kTargetAny), Targeted(kTargetAny)}, &other);
  auto u = QueueRun({Targeted(kTargetAny)}, &urgent);
  EXPECT_EQ(store_->GetRun(long_run)->priority, kRunPriorityDefault);
  ASSERT_TRUE(store_->SetRunQueueing(urgent, Queueing(9, 60)).ok());
  EXPECT_EQ(store_->GetRun(urgent)->priority, 9);
  EXPECT_EQ(store_->GetRun(urgent)->unserved_timeout_s, 60);

  EXPECT_EQ(Claim("n1", Pc()), u[0]);  // queued last, claimed first
  EXPECT_EQ(Claim("n1", Pc()), a[0]);  // none running in either: the oldest run
  EXPECT_EQ(Claim("n1", Pc()), b[0]);  // the long run has one running
  EXPECT_EQ(Claim("n1", Pc()), a[1]);  // one each: the oldest
  ASSERT_TRUE(store_->RecordJobResult(b[0], Ok(1)).ok());
  EXPECT_EQ(Claim("n1", Pc()), b[1]);  // the long run has two running, the other none
  EXPECT_EQ(Claim("n1", Pc()), a[2]);

  auto bad = store_->SetRunQueueing(other, Queueing(10, 60));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(bad.message().find("priority 10 is out of range [0, 9]"), std::string::npos)
      << bad.message();
  EXPECT_EQ(store_->SetRunQueueing(other, Queueing(5, -1)).error().kind, ErrorKind::kInvalidInput);
  EXPECT_EQ(store_->SetRunQueueing(urgent + 100, Queueing(5, 60)).error().kind,
            ErrorKind::kNotFound);
  EXPECT_EQ(store_->GetRun(other)->priority, kRunPriorityDefault);
}

// Jobs whose device no live node serves end not_run once the run's
// unserved timeout passed; jobs a live node serves, or whose timeout has
// not passed, wait.
TEST_P(QueueTest, EndUnservedJobsEndsWhatNoLiveNodeServes) {
  NodeRow n{"n1", "host", 42, NowIso8601(), 0, 0, "", {"pc"}};
  ASSERT_TRUE(store_->RegisterNode(n).ok());
  DeviceRow pc;
  pc.name = "pc";
  pc.abi = "x86_64";
  pc.node = "n1";
  ASSERT_TRUE(store_->UpsertDevice(pc).ok());
  int64_t run = 0, patient = 0;
  auto ids = QueueRun({Targeted("", "phone"), Targeted(kTargetAny), Targeted("", "pc")}, &run);
  auto waiting = QueueRun({Targeted("", "phone")}, &patient);
  ASSERT_TRUE(store_->SetRunQueueing(run, Queueing(5, 0)).ok());
  ASSERT_TRUE(store_->SetRunQueueing(patient, Queueing(5, 3600)).ok());

  auto ended = store_->EndUnservedJobs();
  ASSERT_TRUE(ended.ok()) << ended.message();
  EXPECT_EQ(*ended, std::vector<int64_t>{ids[0]});
  const JobRow j = *store_->GetJob(ids[0]);
  EXPECT_EQ(j.status, kJobNotRun);
  EXPECT_NE(j.error.find("no live node served device 'phone' for 0 s"), std::string::npos)
      << j.error;
  EXPECT_NE(j.error.find("unserved_timeout_s"), std::string::npos) << j.error;
  EXPECT_TRUE(store_->GetJobDetail(ids[0]).ok());
  EXPECT_EQ(store_->GetJob(ids[1])->status, kJobQueued);
  EXPECT_EQ(store_->GetJob(ids[2])->status, kJobQueued);
  EXPECT_EQ(store_->GetJob(waiting[0])->status, kJobQueued);
  EXPECT_EQ(store_->GetRun(run)->status, kRunRunning);
  EXPECT_TRUE(store_->EndUnservedJobs()->empty());  // again: nothing more

  // Once its other jobs ended the run finishes.
  ASSERT_EQ(Claim("n1", Pc()), ids[1]);
  ASSERT_TRUE(store_->RecordJobResult(ids[1], Ok(1)).ok());
  ASSERT_EQ(Claim("n1", Pc()), ids[2]);
  ASSERT_TRUE(store_->RecordJobResult(ids[2], Ok(1)).ok());
  EXPECT_EQ(store_->GetRun(run)->status, kRunFinished);

  // A stopped node serves nothing.
  ASSERT_TRUE(store_->SetRunQueueing(patient, Queueing(5, 0)).ok());
  ASSERT_TRUE(store_->NodeHeartbeat("n1", kNodeStopped, 60).ok());
  int64_t pc_run_id = 0;
  auto pc_run = QueueRun({Targeted("", "pc")}, &pc_run_id);
  ASSERT_TRUE(store_->SetRunQueueing(pc_run_id, Queueing(5, 0)).ok());
  ended = store_->EndUnservedJobs();
  ASSERT_TRUE(ended.ok()) << ended.message();
  EXPECT_EQ(*ended, (std::vector<int64_t>{waiting[0], pc_run[0]}));
}

// An operator's state wins over the health check and dfarm until an operator lifts it.
TEST_P(QueueTest, AnOperatorsDeviceStateHoldsUntilLifted) {
  ASSERT_TRUE(store_->SetDeviceState("phone", kDeviceOk, "").ok());
  auto hand = store_->SetOperatorState("phone", kDeviceQuarantined, "battery swollen", "al@lab");
  ASSERT_TRUE(hand.ok()) << hand.message();
  for (int i = 0; i < 3; ++i) {
    auto health =
        store_->SetDeviceStateBy("phone", kDeviceOk, "health check passed: x", kSetByHealth);
    ASSERT_TRUE(health.ok()) << health.message();
    EXPECT_FALSE(*health);
    ASSERT_TRUE(store_->SetDeviceState("phone", kDeviceOk, "dfarm").ok());
  }
  DeviceRow d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceQuarantined);
  EXPECT_EQ(d.state_reason, "battery swollen");
  EXPECT_EQ(d.state_by, kSetByOperator);
  EXPECT_EQ(d.state_user, "al@lab");
  auto events = *store_->ListDeviceEvents("phone");
  ASSERT_EQ(events.size(), 2u);  // the refused ones left none
  EXPECT_EQ(events[1].set_by, kSetByOperator);
  EXPECT_EQ(events[1].user, "al@lab");
  EXPECT_EQ(events[0].set_by, kSetByDfarm);

  ASSERT_TRUE(store_->SetOperatorState("phone", "", "", "al@lab").ok());  // lifted
  d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceQuarantined);
  EXPECT_EQ(d.state_by, "");
  auto health =
      store_->SetDeviceStateBy("phone", kDeviceOk, "health check passed: x", kSetByHealth);
  ASSERT_TRUE(health.ok());
  EXPECT_TRUE(*health);
  d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceOk);
  EXPECT_EQ(d.state_by, kSetByHealth);
  EXPECT_EQ(store_->SetOperatorState("ghost", kDeviceOk, "", "al@lab").error().kind,
            ErrorKind::kNotFound);
}

// A device its node cannot reach is offline with the reason and its node;
// reachable again it is ok. A quarantine or an operator's state stays.
TEST_P(QueueTest, AnUnreachableDeviceIsOfflineUntilReachedAgain) {
  auto set = store_->SetDeviceReachable("phone", "n1", "connection refused");
  ASSERT_TRUE(set.ok()) << set.message();
  EXPECT_TRUE(*set);
  DeviceRow d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceOffline);
  EXPECT_EQ(d.state_reason, "not reachable from node n1: connection refused");
  EXPECT_EQ(d.state_by, kSetByDfarm);
  EXPECT_EQ(d.node, "n1");
  EXPECT_FALSE(*store_->SetDeviceReachable("phone", "n1", "connection refused"));  // no change
  EXPECT_TRUE(*store_->SetDeviceReachable("phone", "n1", "timed out"));
  EXPECT_TRUE(*store_->SetDeviceReachable("phone", "n1", ""));
  d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceOk);
  EXPECT_EQ(d.state_reason, "reachable again from node n1");
  EXPECT_FALSE(*store_->SetDeviceReachable("phone", "n1", ""));  // ok stays ok
  auto events = *store_->ListDeviceEvents("phone");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].state, kDeviceOffline);
  EXPECT_EQ(events[1].reason, "not reachable from node n1: timed out");
  EXPECT_EQ(events[2].state, kDeviceOk);

  // A quarantine (dfarm's or the health check's) is not ended by reachability.
  ASSERT_TRUE(store_->SetDeviceState("phone", kDeviceQuarantined, "3 infra in a row").ok());
  EXPECT_FALSE(*store_->SetDeviceReachable("phone", "n2", "connection refused"));
  EXPECT_FALSE(*store_->SetDeviceReachable("phone", "n2", ""));
  d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceQuarantined);
  EXPECT_EQ(d.node, "n2");

  // An operator's release holds too.
  ASSERT_TRUE(store_->SetOperatorState("phone", kDeviceOk, "fixed", "al@lab").ok());
  EXPECT_FALSE(*store_->SetDeviceReachable("phone", "n2", "connection refused"));
  d = **store_->GetDevice("phone");
  EXPECT_EQ(d.state, kDeviceOk);
  EXPECT_EQ(d.state_by, kSetByOperator);
}

// A database of schema v19 (before priorities and operator states) opens
// with the defaults: priority 5, unserved timeout 900 s, states set by nobody.
TEST_F(SqliteStoreTest, MigratesVersion19WithFarmDefaults) {
  ASSERT_TRUE(CreateSqliteStoreAtVersionForTesting(path_, 19).ok());
  ExecSql(
      "INSERT INTO runs(id, name, created_at, status, spec_json, mode) VALUES(1, 'old', "
      "'2024-05-01T00:00:00Z', 'running', '{}', 'queue');"
      "INSERT INTO devices(name, state, state_reason) VALUES('phone', 'quarantined', 'old');");
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto run = store->GetRun(1);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->priority, kRunPriorityDefault);
  EXPECT_EQ(run->unserved_timeout_s, kUnservedTimeoutDefaultS);
  auto d = store->GetDevice("phone");
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->state_by, "");
  EXPECT_TRUE(*store->SetDeviceStateBy("phone", kDeviceOk, "health", kSetByHealth));
  auto cancelled = store->CancelRun(1, "al@lab");
  ASSERT_TRUE(cancelled.ok()) << cancelled.message();
}

// Device classes: the trials of one cell of an `any` (or selector) run that
// two devices of one class ran are one cell, named by the class; a job aimed
// at its own device keeps its device; without a matching class the device's
// model/SoC and ABI name one.
TEST_P(QueueTest, TrialsOnTwoDevicesOfOneClassAreOneCell) {
  int64_t run = 0;
  JobRow named = Targeted("", "pixel-b");
  named.trial = 9;
  const std::vector<int64_t> ids =
      QueueRun({Targeted(kTargetAny, kTargetAny), Targeted(kTargetAny, kTargetAny),
                Targeted("select:abi=arm64-v8a", "select:abi=arm64-v8a"), named},
               &run);
  ASSERT_EQ(ids.size(), 4u);
  RunQueueing q;
  q.device_classes = {{"pixel7", {"pixel-a", "pixel-b"}}};
  ASSERT_TRUE(store_->SetRunQueueing(run, q).ok());
  DeviceTraits a = Phone(), b = Phone(), other = Phone();
  a.name = "pixel-a";
  b.name = "pixel-b";
  other.name = "adb:OTHER";
  other.model = "Pixel 8";
  // Oldest first: pixel-a and pixel-b one `any` job each, the selector job
  // a device of no class, then pixel-b its own.
  ASSERT_EQ(Claim("n1", a), ids[0]);
  ASSERT_EQ(Claim("n2", b), ids[1]);
  ASSERT_EQ(Claim("n3", other), ids[2]);
  ASSERT_EQ(Claim("n2", b), ids[3]);
  for (size_t k = 0; k < ids.size(); ++k) {
    JobOutcome o = Ok(1);
    o.metrics = JobMetrics{};
    o.metrics->p50_us = 1000.0 + static_cast<double>(k);
    ASSERT_TRUE(store_->RecordJobResult(ids[k], o).ok());
  }
  auto jobs = store_->ListJobs(run);
  ASSERT_TRUE(jobs.ok()) << jobs.message();
  ASSERT_EQ(jobs->size(), 4u);
  EXPECT_EQ((*jobs)[0].device, "pixel-a");
  EXPECT_EQ((*jobs)[0].device_class, "pixel7");
  EXPECT_EQ((*jobs)[1].device, "pixel-b");
  EXPECT_EQ((*jobs)[1].device_class, "pixel7");
  EXPECT_EQ((*jobs)[2].device_class, "Pixel 8/arm64-v8a");
  EXPECT_EQ((*jobs)[3].device_class, "");  // aimed at pixel-b itself

  auto cells = store_->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  std::vector<std::string> devices;
  for (const Cell& c : *cells) devices.push_back(c.device);
  EXPECT_EQ(devices,
            (std::vector<std::string>{"class:Pixel 8/arm64-v8a", "class:pixel7", "pixel-b"}));
  const Cell cls = CellOf((*jobs)[0]);
  EXPECT_EQ(cls, CellOf((*jobs)[1]));
  EXPECT_EQ(cls.Label(), "m.tflite (aaaaaaaa) cpu[a:1] @class:pixel7");
  auto trials = store_->ListCellJobs(cls);
  ASSERT_TRUE(trials.ok()) << trials.message();
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].id, ids[0]);
  EXPECT_EQ((*trials)[1].id, ids[1]);
  auto light = store_->ListCellTrials(cls);
  ASSERT_TRUE(light.ok()) << light.message();
  ASSERT_EQ(light->size(), 2u);
  EXPECT_EQ(CellOf((*light)[0]), cls);
  CellFilter f;
  f.device = "class:pixel7";
  auto found = store_->ListCells(f);
  ASSERT_TRUE(found.ok()) << found.message();
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ(found->front(), cls);
  auto recent = store_->ListRecentCellValues(5);
  ASSERT_TRUE(recent.ok()) << recent.message();
  ASSERT_EQ(recent->size(), 3u);
  EXPECT_EQ((*recent)[1].cell, cls);
  EXPECT_EQ((*recent)[1].p50_us.size(), 2u);
}

// ClaimJob keeps each run's parsed classes between claims on one
// connection: two runs keep theirs apart, and classes stored anew (a second
// SetRunQueueing) name the next claim's class at once.
TEST_P(QueueTest, EachClaimUsesItsRunsClassesAsStoredNow) {
  int64_t first = 0, second = 0;
  const std::vector<int64_t> a =
      QueueRun({Targeted(kTargetAny, kTargetAny), Targeted(kTargetAny, kTargetAny)}, &first);
  const std::vector<int64_t> b = QueueRun({Targeted(kTargetAny, kTargetAny)}, &second);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 1u);
  RunQueueing q;
  q.device_classes = {{"old", {"pixel-*"}}};
  ASSERT_TRUE(store_->SetRunQueueing(first, q).ok());
  q.device_classes = {{"theirs", {"pixel-a"}}};
  q.priority = kRunPriorityDefault - 1;  // claimed after the first run's jobs
  ASSERT_TRUE(store_->SetRunQueueing(second, q).ok());
  DeviceTraits phone = Phone();
  phone.name = "pixel-a";
  ASSERT_EQ(Claim("n1", phone), a[0]);
  q.device_classes = {{"new", {"pixel-a"}}};
  q.priority = kRunPriorityDefault;
  ASSERT_TRUE(store_->SetRunQueueing(first, q).ok());
  ASSERT_EQ(Claim("n1", phone), a[1]);
  ASSERT_EQ(Claim("n1", phone), b[0]);
  std::vector<std::string> classes;
  for (int64_t run : {first, second}) {
    auto jobs = store_->ListJobs(run);
    ASSERT_TRUE(jobs.ok()) << jobs.message();
    for (const JobRow& j : *jobs) classes.push_back(j.device_class);
  }
  EXPECT_EQ(classes, (std::vector<std::string>{"old", "new", "theirs"}));
}

// A job's cell follows its device however the device is written: a moved
// job is the cell of its new device; a class set later makes it the class's.
TEST_P(QueueTest, ACellsDeviceFollowsEveryWriteOfTheDevice) {
  auto run = store_->CreateRun("own", "{}");
  ASSERT_TRUE(run.ok()) << run.message();
  JobRow j = MakeJob("m.tflite");
  j.device = "phone";
  auto id = store_->AddJob(*run, j);
  ASSERT_TRUE(id.ok()) << id.message();
  ASSERT_TRUE(store_->MoveJob(*id, "pc", "key-moved").ok());
  auto cells = store_->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 1u);
  EXPECT_EQ(cells->front().device, "pc");
  JobRow classed = MakeJob("m.tflite");
  classed.device = "tcp://a:1";
  classed.device_class = "lab";  // as an import would bring it
  ASSERT_TRUE(store_->AddJob(*run, classed).ok());
  cells = store_->ListCells();
  ASSERT_TRUE(cells.ok()) << cells.message();
  ASSERT_EQ(cells->size(), 2u);
  EXPECT_EQ(cells->front().device, "class:lab");
}

INSTANTIATE_TEST_SUITE_P(Backends, QueueTest, DFARM_BOTH_BACKENDS, BackendName);

}  // namespace
}  // namespace dfarm::store
