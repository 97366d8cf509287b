#include "agent/artifact_store.h"

#include <sys/stat.h>

#include <filesystem>

#include "agent/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using ::testing::HasSubstr;
using testing::HashOf;
using testing::ReadFile;
using testing::TempDir;

size_t TempFiles(const std::string& root) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(root + "/tmp")) (void)e, ++n;
  return n;
}

TEST(ArtifactStoreTest, PutThenHas) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path() + "/store");
  ASSERT_TRUE(store.ok()) << store.message();
  std::string bytes = "model bytes";
  std::string sha = HashOf(bytes);
  EXPECT_FALSE((*store)->Has(sha));
  ASSERT_TRUE((*store)->Put(sha, bytes).ok());
  EXPECT_TRUE((*store)->Has(sha));
  auto path = (*store)->PathOf(sha);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, (*store)->root() + "/artifacts/" + sha);
  EXPECT_EQ(ReadFile(*path), bytes);
  EXPECT_EQ(TempFiles((*store)->root()), 0u);
}

TEST(ArtifactStoreTest, ChunkedUpload) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes(3000, 'x');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i);
  std::string sha = HashOf(bytes);
  auto up = (*store)->BeginUpload(sha, bytes.size());
  ASSERT_TRUE(up.ok());
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  ASSERT_TRUE((*up)->Write(0, p, 1000).ok());
  auto bad = (*up)->Write(500, p + 500, 10);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("expected offset 1000"));
  ASSERT_TRUE((*up)->Write(1000, p + 1000, 2000).ok());
  ASSERT_TRUE((*up)->Commit().ok());
  EXPECT_EQ(ReadFile(*(*store)->PathOf(sha)), bytes);
}

TEST(ArtifactStoreTest, HashMismatchIsDiscarded) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string claimed = HashOf("something else");
  auto r = (*store)->Put(claimed, "actual bytes");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("sha256 mismatch"));
  EXPECT_THAT(r.message(), HasSubstr(HashOf("actual bytes")));
  EXPECT_FALSE((*store)->Has(claimed));
  EXPECT_EQ(TempFiles((*store)->root()), 0u);
}

TEST(ArtifactStoreTest, SizeMismatchIsDiscarded) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes = "0123456789";
  std::string sha = HashOf(bytes);

  auto shorter = (*store)->BeginUpload(sha, 20);
  ASSERT_TRUE(shorter.ok());
  ASSERT_TRUE((*shorter)->Write(0, reinterpret_cast<const uint8_t*>(bytes.data()), 10).ok());
  auto r = (*shorter)->Commit();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("size mismatch: announced 20 bytes, received 10"));

  auto longer = (*store)->BeginUpload(sha, 5);
  ASSERT_TRUE(longer.ok());
  r = (*longer)->Write(0, reinterpret_cast<const uint8_t*>(bytes.data()), 10);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("size mismatch"));
  EXPECT_FALSE((*store)->Has(sha));
  EXPECT_EQ(TempFiles((*store)->root()), 0u);
}

TEST(ArtifactStoreTest, AbandonedUploadLeavesNothing) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  {
    auto up = (*store)->BeginUpload(HashOf("x"), 1);
    ASSERT_TRUE(up.ok());
    EXPECT_EQ(TempFiles((*store)->root()), 1u);
  }
  EXPECT_EQ(TempFiles((*store)->root()), 0u);
}

TEST(ArtifactStoreTest, BadNamesAreRefused) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  for (std::string name : {std::string("../../etc/passwd"), std::string(""),
                           std::string(64, 'A'), std::string(63, 'a'), std::string(65, 'a'),
                           std::string(62, 'a') + "/x", std::string(63, 'a') + '\0'}) {
    EXPECT_FALSE((*store)->Has(name)) << name;
    auto up = (*store)->BeginUpload(name, 1);
    ASSERT_FALSE(up.ok()) << name;
    EXPECT_THAT(up.message(), HasSubstr("invalid artifact name"));
    EXPECT_FALSE((*store)->PathOf(name).ok());
  }
  EXPECT_TRUE(IsValidSha256(std::string(64, 'f')));
}

TEST(ArtifactStoreTest, SizeLimit) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path(), 100);
  ASSERT_TRUE(store.ok());
  auto up = (*store)->BeginUpload(std::string(64, 'a'), 101);
  ASSERT_FALSE(up.ok());
  EXPECT_THAT(up.message(), HasSubstr("exceeds the store limit of 100 bytes"));
}

TEST(ArtifactStoreTest, MakeExecutable) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string sha = HashOf("#!/bin/sh\n");
  ASSERT_TRUE((*store)->Put(sha, "#!/bin/sh\n").ok());
  ASSERT_TRUE((*store)->MakeExecutable(sha).ok());
  struct stat st;
  ASSERT_EQ(::stat((*(*store)->PathOf(sha)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

}  // namespace
}  // namespace dfarm::agent
