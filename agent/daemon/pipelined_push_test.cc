// End to end, with the real dfarm-agent binary: pipelined pushes
// (AgentClient::PutArtifacts), where the agent syncs one upload while the
// next arrives and answers each PutEnd in order once the file is durable.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "agent/client/client.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using testing::FilesIn;
using ::testing::HasSubstr;
using testing::kTimeout;

// Deterministic bytes that differ from file to file.
std::string Bytes(size_t size, uint64_t seed) {
  std::string bytes(size, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bytes[i] = static_cast<char>(x);
  }
  return bytes;
}

class PipelinedPushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_ = std::make_unique<testing::TestAgent>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--insecure", "--store", store()},
        dir_.path() + "/agent.log");
    port_ = agent_->ReadPort();
    ASSERT_GT(port_, 0) << testing::ReadFile(dir_.path() + "/agent.log");
    auto client = AgentClient::Connect("127.0.0.1", port_, kTimeout);
    ASSERT_TRUE(client.ok()) << client.message();
    client_ = std::move(*client);
  }

  std::string store() const { return dir_.path() + "/store"; }
  std::string Stored(const std::string& sha) const {
    return testing::ReadFile(store() + "/artifacts/" + sha);
  }
  std::string WriteTemp(const std::string& name, const std::string& bytes) {
    std::string path = dir_.path() + "/" + name;
    testing::WriteFile(path, bytes);
    return path;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestAgent> agent_;
  uint16_t port_ = 0;
  std::unique_ptr<AgentClient> client_;
};

// Files of several sizes (empty, one chunk, many chunks), some under a known
// sha256 and some hashed by the client, one listed twice and one the agent
// already has: every file arrives intact and each is sent once.
TEST_F(PipelinedPushTest, FilesArriveIntactAndEachIsSentOnce) {
  const std::vector<std::string> contents = {Bytes(3 * (1 << 20) + 17, 1), "", Bytes(1000, 2),
                                             Bytes((1 << 20), 3), Bytes(5 * (1 << 20) + 3, 4)};
  std::vector<ArtifactPush> files;
  for (size_t i = 0; i < contents.size(); ++i) {
    std::string path = WriteTemp("f" + std::to_string(i), contents[i]);
    files.push_back({path, i % 2 == 0 ? testing::HashOf(contents[i]) : ""});
  }
  auto already = client_->PutArtifact(files[2].path, nullptr);
  ASSERT_TRUE(already.ok()) << already.message();
  files.push_back(files[0]);  // listed twice

  std::vector<std::string> shas;
  auto results = client_->PutArtifacts(files, &shas);
  ASSERT_EQ(results.size(), files.size());
  ASSERT_EQ(shas.size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << files[i].path << ": " << results[i].message();
    const std::string& bytes = contents[i % contents.size()];
    EXPECT_EQ(shas[i], testing::HashOf(bytes)) << i;
    EXPECT_EQ(Stored(shas[i]), bytes) << i;
    const bool sent = i != 2 && i != contents.size();  // already there; listed twice
    EXPECT_EQ(*results[i], sent ? bytes.size() : 0u) << i;
  }
  EXPECT_TRUE(FilesIn(store() + "/partial").empty());
  EXPECT_TRUE(FilesIn(store() + "/tmp").empty());

  // Pushed again: the agent has them all, nothing is sent.
  results = client_->PutArtifacts(files, nullptr);
  for (size_t i = 0; i < files.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].message();
    EXPECT_EQ(*results[i], 0u);
  }
}

// Among several files one changed since it was hashed (its sha256 is
// stale) and one cannot be read: each error names its file, the changed one
// is refused by the agent and leaves no file, the others are stored, and the
// connection stays usable.
TEST_F(PipelinedPushTest, BadFilesAmongSeveralAreRefusedAndTheOthersStored) {
  const std::string a = Bytes(2 * (1 << 20) + 5, 10), b = Bytes(700'000, 11),
                    c = Bytes(1'500'000, 12);
  const std::string stale_sha = testing::HashOf(b);
  std::string changed = b;
  changed[changed.size() / 2] ^= 1;
  const std::string path_a = WriteTemp("a", a), path_b = WriteTemp("b", changed),
                    path_c = WriteTemp("c", c), missing = dir_.path() + "/missing";
  std::vector<std::string> shas;
  auto results = client_->PutArtifacts({{path_a, testing::HashOf(a)},
                                        {path_b, stale_sha},
                                        {missing, std::string(64, 'e')},
                                        {path_c, ""}},
                                       &shas);
  ASSERT_EQ(results.size(), 4u);
  ASSERT_TRUE(results[0].ok()) << results[0].message();
  ASSERT_FALSE(results[1].ok());
  EXPECT_THAT(results[1].message(), HasSubstr("'" + path_b + "' changed since it was hashed"));
  EXPECT_EQ(shas[1], testing::HashOf(changed));
  ASSERT_FALSE(results[2].ok());
  EXPECT_THAT(results[2].message(), HasSubstr("'" + missing + "'"));
  ASSERT_TRUE(results[3].ok()) << results[3].message();
  EXPECT_EQ(Stored(testing::HashOf(a)), a);
  EXPECT_EQ(Stored(testing::HashOf(c)), c);
  EXPECT_FALSE(std::filesystem::exists(store() + "/artifacts/" + stale_sha));
  EXPECT_FALSE(std::filesystem::exists(store() + "/artifacts/" + testing::HashOf(changed)));
  EXPECT_TRUE(FilesIn(store() + "/partial").empty());
  EXPECT_TRUE(FilesIn(store() + "/tmp").empty());
  // The agent's log names the refused artifact and why.
  EXPECT_THAT(testing::ReadFile(dir_.path() + "/agent.log"),
              HasSubstr("put " + stale_sha.substr(0, 12) + " (700000 bytes): upload of artifact " +
                        stale_sha.substr(0, 12) + ": sha256 mismatch"));
  auto again = client_->Have({testing::HashOf(a), stale_sha});
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(*again, (std::vector<bool>{true, false}));
}

// The agent is gone before the push: every file fails, each error naming
// its file and the connection.
TEST_F(PipelinedPushTest, ALostAgentFailsEveryFileNamingIt) {
  const std::string path_a = WriteTemp("a", Bytes(1000, 30)),
                    path_b = WriteTemp("b", Bytes(2000, 31));
  agent_->Kill();
  auto results = client_->PutArtifacts({{path_a, ""}, {path_b, testing::HashOf("x")}}, nullptr);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& [result, path] : {std::pair{&results[0], path_a}, {&results[1], path_b}}) {
    ASSERT_FALSE(result->ok()) << path;
    EXPECT_THAT(result->message(), HasSubstr("'" + path + "'"));
    EXPECT_THAT(result->message(), HasSubstr("agent at 127.0.0.1:" + std::to_string(port_)));
  }
}

template <typename T>
void SendFrame(int fd, uint64_t id, flatbuffers::FlatBufferBuilder& fbb,
               flatbuffers::Offset<T> body) {
  FinishFrame(fbb, id, body);
  ASSERT_TRUE(WriteFrame(fd, fbb, kTimeout).ok());
}

// Sends PutBegin (put_resume: expects its reply), one PutChunk of bytes and
// PutEnd, ids first..first+2, without reading the PutReply.
void RawPut(int fd, uint64_t first, const std::string& sha, const std::string& bytes,
            std::vector<ReceivedFrame>* early) {
  flatbuffers::FlatBufferBuilder begin;
  SendFrame(fd, first, begin, wire::CreatePutBeginDirect(begin, sha.c_str(), bytes.size()));
  // PutReplies of earlier uploads may come before this PutBeginReply.
  for (;;) {
    auto got = ReadFrame(fd, kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    if (got->frame()->body_type() != wire::Body::PutBeginReply) {
      early->push_back(std::move(*got));
      continue;
    }
    ASSERT_EQ(got->frame()->request_id(), first);
    ASSERT_TRUE(got->frame()->body_as_PutBeginReply()->ok());
    break;
  }
  flatbuffers::FlatBufferBuilder chunk;
  auto data = chunk.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  SendFrame(fd, first + 1, chunk, wire::CreatePutChunk(chunk, 0, data));
  flatbuffers::FlatBufferBuilder end;
  SendFrame(fd, first + 2, end, wire::CreatePutEnd(end));
}

// On the wire: three uploads sent back to back, the middle one corrupted on
// the way, then a HaveRequest at once. The PutReplies come in PutEnd order
// (ok, refused naming the mismatch, ok) and all before the HaveReply, which
// already sees the two stored artifacts.
TEST_F(PipelinedPushTest, RepliesComeInOrderAndHaveSeesWhatWasJustUploaded) {
  UniqueFd raw = testing::RawConnect(port_);
  ASSERT_TRUE(raw);
  flatbuffers::FlatBufferBuilder hello;
  auto features = hello.CreateVectorOfStrings({"artifacts", "put_resume"});
  SendFrame(raw.get(), 1, hello, wire::CreateHello(hello, kProtocolVersion, features));
  auto got = ReadFrame(raw.get(), kTimeout);
  ASSERT_TRUE(got.ok() && !got->eof);
  ASSERT_EQ(got->frame()->body_type(), wire::Body::HelloReply);

  const std::string x = Bytes(900'000, 20), y = Bytes(600'000, 21), z = Bytes(800'000, 22);
  std::string corrupt_y = y;
  corrupt_y[1234] ^= 0x10;
  std::vector<ReceivedFrame> frames;
  RawPut(raw.get(), 10, testing::HashOf(x), x, &frames);
  RawPut(raw.get(), 20, testing::HashOf(y), corrupt_y, &frames);
  RawPut(raw.get(), 30, testing::HashOf(z), z, &frames);
  flatbuffers::FlatBufferBuilder have;
  auto names =
      have.CreateVectorOfStrings({testing::HashOf(x), testing::HashOf(y), testing::HashOf(z)});
  SendFrame(raw.get(), 40, have, wire::CreateHaveRequest(have, names));
  while (frames.size() < 4) {
    got = ReadFrame(raw.get(), kTimeout);
    ASSERT_TRUE(got.ok() && !got->eof);
    frames.push_back(std::move(*got));
  }
  ASSERT_EQ(frames.size(), 4u);
  const uint64_t ids[] = {12, 22, 32};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(frames[i].frame()->body_type(), wire::Body::PutReply) << i;
    EXPECT_EQ(frames[i].frame()->request_id(), ids[i]);
    EXPECT_EQ(frames[i].frame()->body_as_PutReply()->ok(), i != 1) << i;
  }
  EXPECT_THAT(Str(frames[1].frame()->body_as_PutReply()->error()),
              HasSubstr("artifact " + testing::HashOf(y).substr(0, 12) + ": sha256 mismatch"));
  ASSERT_EQ(frames[3].frame()->body_type(), wire::Body::HaveReply);
  const auto* answer = frames[3].frame()->body_as_HaveReply()->have();
  ASSERT_EQ(answer->size(), 3u);
  EXPECT_EQ(answer->Get(0), 1);
  EXPECT_EQ(answer->Get(1), 0);
  EXPECT_EQ(answer->Get(2), 1);
  EXPECT_EQ(Stored(testing::HashOf(x)), x);
  EXPECT_EQ(Stored(testing::HashOf(z)), z);
  EXPECT_TRUE(FilesIn(store() + "/partial").empty());
  EXPECT_TRUE(FilesIn(store() + "/tmp").empty());
}

}  // namespace
}  // namespace dfarm::agent
