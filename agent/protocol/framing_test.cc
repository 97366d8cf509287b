#include "agent/protocol/framing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "agent/base/unique_fd.h"
#include "agent/protocol/messages.h"
#include "agent/protocol/testing/misaligned_frames.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using ::testing::HasSubstr;

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) abort();
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

void WriteRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

std::string Prefix(uint32_t n) {
  return std::string{static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 24)};
}

TEST(FramingTest, RoundTripsAJob) {
  SocketPair sp;
  JobSpec job;
  job.runner_sha256 = std::string(64, 'a');
  job.model_sha256 = std::string(64, 'b');
  job.delegate = "xnnpack";
  job.delegate_options = "k1:v1;k2:v2";
  job.num_threads = 4;
  job.warmup_runs = 2;
  job.num_runs = 20;
  job.timeout_ms = 5000;
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 42, BuildRunJob(fbb, job));
  ASSERT_TRUE(WriteFrame(sp.a.get(), fbb).ok());

  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(5000));
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_FALSE(got->eof);
  EXPECT_EQ(got->frame()->request_id(), 42u);
  ASSERT_EQ(got->frame()->body_type(), wire::Body::RunJob);
  JobSpec back = ReadRunJob(*got->frame()->body_as_RunJob());
  EXPECT_EQ(back.runner_sha256, job.runner_sha256);
  EXPECT_EQ(back.model_sha256, job.model_sha256);
  EXPECT_EQ(back.delegate, "xnnpack");
  EXPECT_EQ(back.delegate_options, "k1:v1;k2:v2");
  EXPECT_EQ(back.num_threads, 4u);
  EXPECT_EQ(back.warmup_runs, 2u);
  EXPECT_EQ(back.num_runs, 20u);
  EXPECT_EQ(back.timeout_ms, 5000u);
}

// RunJob.profile (feature "profile"), sustained_ms (feature "sustained") and
// a stepped pair's partner (feature "stepped_pairs") round trip; false, 0
// and "" are the defaults an older host's frame reads as.
TEST(FramingTest, RoundTripsAProfileJob) {
  SocketPair sp;
  JobSpec job;
  job.runner_sha256 = std::string(64, 'a');
  job.model_sha256 = std::string(64, 'b');
  job.profile = true;
  job.sustained_ms = 90000;
  job.task_outputs = "topk:5:1";
  job.partner_runner_sha256 = std::string(64, 'c');
  job.partner_seed = 77;
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 45, BuildRunJob(fbb, job));
  ASSERT_TRUE(WriteFrame(sp.a.get(), fbb).ok());
  job.profile = false;
  job.sustained_ms = 0;
  job.task_outputs.clear();
  job.partner_runner_sha256.clear();
  flatbuffers::FlatBufferBuilder plain;
  FinishFrame(plain, 46, BuildRunJob(plain, job));
  ASSERT_TRUE(WriteFrame(sp.a.get(), plain).ok());

  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(5000));
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->frame()->body_type(), wire::Body::RunJob);
  EXPECT_TRUE(ReadRunJob(*got->frame()->body_as_RunJob()).profile);
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).sustained_ms, 90000u);
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).task_outputs, "topk:5:1");
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).partner_runner_sha256,
            std::string(64, 'c'));
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).partner_seed, 77u);
  got = ReadFrame(sp.b.get(), std::chrono::milliseconds(5000));
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_FALSE(ReadRunJob(*got->frame()->body_as_RunJob()).profile);
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).sustained_ms, 0u);
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).task_outputs, "");
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).partner_runner_sha256, "");
}

TEST(FramingTest, RoundTripsAPluginJob) {
  SocketPair sp;
  JobSpec job;
  job.runner_sha256 = std::string(64, 'a');
  job.model_sha256 = std::string(64, 'b');
  job.delegate = "external";
  job.delegate_options = "max_delegated_partitions:1";
  job.plugin_sha256 = std::string(64, 'c');
  job.accuracy_reference = "cpu";
  job.timeout_ms = 5000;
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 43, BuildRunJob(fbb, job));
  ASSERT_TRUE(WriteFrame(sp.a.get(), fbb).ok());
  // Without a plugin the field is left out altogether (an older agent sees
  // exactly the table it knows).
  job.plugin_sha256.clear();
  job.accuracy_reference.clear();
  flatbuffers::FlatBufferBuilder plain;
  FinishFrame(plain, 44, BuildRunJob(plain, job));
  ASSERT_TRUE(WriteFrame(sp.a.get(), plain).ok());

  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(5000));
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->frame()->body_type(), wire::Body::RunJob);
  JobSpec back = ReadRunJob(*got->frame()->body_as_RunJob());
  EXPECT_EQ(back.plugin_sha256, std::string(64, 'c'));
  EXPECT_EQ(back.delegate, "external");
  EXPECT_EQ(back.delegate_options, "max_delegated_partitions:1");
  EXPECT_EQ(back.model_sha256, std::string(64, 'b'));
  EXPECT_EQ(back.accuracy_reference, "cpu");

  got = ReadFrame(sp.b.get(), std::chrono::milliseconds(5000));
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->frame()->body_type(), wire::Body::RunJob);
  EXPECT_EQ(got->frame()->body_as_RunJob()->plugin_sha256(), nullptr);
  EXPECT_EQ(ReadRunJob(*got->frame()->body_as_RunJob()).plugin_sha256, "");
  EXPECT_EQ(got->frame()->body_as_RunJob()->accuracy_reference(), nullptr);
}

TEST(FramingTest, RoundTripsAFullSizeChunk) {
  SocketPair sp;
  std::vector<uint8_t> data(kPutChunkBytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  std::thread writer([&] {
    flatbuffers::FlatBufferBuilder fbb;
    FinishFrame(fbb, 7, wire::CreatePutChunk(fbb, 123, fbb.CreateVector(data)));
    EXPECT_TRUE(WriteFrame(sp.a.get(), fbb).ok());
  });
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(5000));
  writer.join();
  ASSERT_TRUE(got.ok()) << got.message();
  const auto* chunk = got->frame()->body_as_PutChunk();
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(chunk->offset(), 123u);
  ASSERT_EQ(chunk->data()->size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), chunk->data()->begin()));
}

// A peer's [ulong] may start 4 bytes off the 8-byte boundary (the verifier
// checks only the length prefix): the values still read back exactly. Under
// UBSan (the frame fuzzer's build) a plain 8-byte load here is an error.
TEST(FramingTest, ReadsAMisalignedUlongVector) {
  const std::vector<uint64_t> freqs = {1800000, 2400000, 0xfedcba9876543210ull};
  flatbuffers::FlatBufferBuilder fbb;
  testing::BuildMisalignedHelloReply(fbb, freqs);
  // An 8-byte aligned copy, as ReadFrame keeps a frame (VerifyFrame's contract).
  std::vector<uint64_t> storage((fbb.GetSize() + 7) / 8);
  std::memcpy(storage.data(), fbb.GetBufferPointer(), fbb.GetSize());
  const auto* bytes = reinterpret_cast<const uint8_t*>(storage.data());
  auto frame = VerifyFrame(bytes, fbb.GetSize());
  ASSERT_TRUE(frame.ok()) << frame.message();
  const wire::HelloReply* reply = (*frame)->body_as_HelloReply();
  ASSERT_NE(reply, nullptr);
  ASSERT_NE(reply->core_max_freq_khz(), nullptr);
  ASSERT_EQ((reply->core_max_freq_khz()->Data() - bytes) % 8, 4) << "the elements are aligned";
  DeviceInfo info = ReadHelloReply(*reply);
  EXPECT_EQ(info.core_max_freq_khz, freqs);
  EXPECT_EQ(info.memory_bytes, uint64_t{1} << 33);
}

TEST(FramingTest, CleanCloseIsEof) {
  SocketPair sp;
  sp.a.reset();
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(1000));
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_TRUE(got->eof);
}

TEST(FramingTest, TruncatedFrameIsAnError) {
  SocketPair sp;
  flatbuffers::FlatBufferBuilder fbb;
  FinishFrame(fbb, 1, wire::CreateErrorReplyDirect(fbb, "hello there"));
  std::string bytes =
      Prefix(fbb.GetSize()) +
      std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize() - 5);
  WriteRaw(sp.a.get(), bytes);
  sp.a.reset();
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(1000));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.message(), HasSubstr("truncated frame"));
}

TEST(FramingTest, TruncatedLengthIsAnError) {
  SocketPair sp;
  WriteRaw(sp.a.get(), "\x10\x00");
  sp.a.reset();
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(1000));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.message(), HasSubstr("truncated frame"));
}

TEST(FramingTest, OversizeLengthIsRefusedBeforeReading) {
  SocketPair sp;
  WriteRaw(sp.a.get(), Prefix(kMaxFrameBytes + 1));
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(1000));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.message(), HasSubstr("exceeds the limit"));

  WriteRaw(sp.a.get(), "\xff\xff\xff\xff");
  got = ReadFrame(sp.b.get(), std::chrono::milliseconds(1000));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.message(), HasSubstr("exceeds the limit"));
}

TEST(FramingTest, WriteRefusesOversizeFrame) {
  SocketPair sp;
  std::vector<uint8_t> big(kMaxFrameBytes + 1);
  auto r = WriteFrame(sp.a.get(), big.data(), big.size());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("exceeds the limit"));
}

TEST(FramingTest, GarbageIsAnError) {
  SocketPair sp;
  std::string garbage = "this is not a flatbuffer at all, just some bytes....";
  WriteRaw(sp.a.get(), Prefix(garbage.size()) + garbage);
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(1000));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.message(), HasSubstr("bad frame"));
}

TEST(FramingTest, GarbageWithTheRightIdentifierFailsTheVerifier) {
  // Random bytes, but with the file identifier in place so the verifier has to do the work.
  for (uint32_t seed = 1; seed < 200; ++seed) {
    std::vector<uint8_t> bytes(64 + seed % 50);
    uint32_t x = seed;
    for (auto& b : bytes) {
      x = x * 1103515245 + 12345;
      b = static_cast<uint8_t>(x >> 16);
    }
    std::memcpy(bytes.data() + 4, wire::FrameIdentifier(), 4);
    auto v = VerifyFrame(bytes.data(), bytes.size());
    // Nearly always invalid; when it happens to verify, reading it must still be safe.
    if (v.ok()) (void)(*v)->request_id();
  }
  std::vector<uint8_t> tiny = {1, 2, 3};
  EXPECT_FALSE(VerifyFrame(tiny.data(), tiny.size()).ok());
}

TEST(FramingTest, FrameWithoutBodyIsAnError) {
  flatbuffers::FlatBufferBuilder fbb;
  wire::FinishFrameBuffer(fbb, wire::CreateFrame(fbb, 5));
  auto v = VerifyFrame(fbb.GetBufferPointer(), fbb.GetSize());
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.message(), HasSubstr("no message"));
}

TEST(FramingTest, ReadTimesOut) {
  SocketPair sp;
  WriteRaw(sp.a.get(), Prefix(100));
  auto got = ReadFrame(sp.b.get(), std::chrono::milliseconds(100));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.message(), HasSubstr("timed out"));
}

}  // namespace
}  // namespace dfarm::agent
