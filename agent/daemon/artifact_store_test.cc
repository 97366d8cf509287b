#include "agent/daemon/artifact_store.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "agent/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dfarm::agent {
namespace {

using testing::HashOf;
using ::testing::HasSubstr;
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
  for (std::string name : {std::string("../../etc/passwd"), std::string(""), std::string(64, 'A'),
                           std::string(63, 'a'), std::string(65, 'a'), std::string(62, 'a') + "/x",
                           std::string(63, 'a') + '\0'}) {
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
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // executable by the agent's user only
}

}  // namespace
}  // namespace dfarm::agent

namespace dfarm::agent {
namespace {

using testing::HashOf;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + (i >> 8));
  return s;
}

const uint8_t* U8(const std::string& s, size_t offset = 0) {
  return reinterpret_cast<const uint8_t*>(s.data()) + offset;
}

TEST(ArtifactStoreResumeTest, InterruptedUploadResumesAcrossReopen) {
  TempDir dir;
  std::string bytes = Pattern(10000);
  std::string sha = HashOf(bytes);
  {
    auto store = ArtifactStore::Open(dir.path());
    ASSERT_TRUE(store.ok());
    auto up = (*store)->ResumeUpload(sha, bytes.size());
    ASSERT_TRUE(up.ok()) << up.message();
    EXPECT_EQ((*up)->bytes_received(), 0u);
    ASSERT_TRUE((*up)->Write(0, U8(bytes), 4000).ok());
  }                                              // dropped without Commit: the 4000 bytes stay
  auto store = ArtifactStore::Open(dir.path());  // as after an agent restart
  ASSERT_TRUE(store.ok());
  auto up = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(up.ok()) << up.message();
  EXPECT_EQ((*up)->bytes_received(), 4000u);
  EXPECT_FALSE((*up)->Write(0, U8(bytes), 10).ok());  // must continue at 4000
  ASSERT_TRUE((*up)->Write(4000, U8(bytes, 4000), 6000).ok());
  ASSERT_TRUE((*up)->Commit().ok());
  EXPECT_EQ(ReadFile(*(*store)->PathOf(sha)), bytes);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/partial/" + sha));

  // Already stored: offered at the end, Commit succeeds without data.
  auto again = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->bytes_received(), bytes.size());
  EXPECT_TRUE((*again)->Commit().ok());
}

TEST(ArtifactStoreResumeTest, CorruptPartialFailsTheHashAndIsDropped) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes = Pattern(3000);
  std::string sha = HashOf(bytes);
  std::string corrupt = bytes.substr(0, 1000);
  corrupt[10] ^= 1;
  testing::WriteFile(dir.path() + "/partial/" + sha, corrupt);
  auto up = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(up.ok());
  ASSERT_EQ((*up)->bytes_received(), 1000u);
  ASSERT_TRUE((*up)->Write(1000, U8(bytes, 1000), 2000).ok());
  auto r = (*up)->Commit();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("sha256 mismatch"));
  EXPECT_FALSE((*store)->Has(sha));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/partial/" + sha));
  up->reset();
  auto fresh = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->bytes_received(), 0u);
}

TEST(ArtifactStoreResumeTest, NewerUploadTakesOver) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes = Pattern(2000);
  std::string sha = HashOf(bytes);
  auto old_up = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(old_up.ok());
  ASSERT_TRUE((*old_up)->Write(0, U8(bytes), 500).ok());
  auto new_up = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(new_up.ok());
  EXPECT_EQ((*new_up)->bytes_received(), 500u);
  auto r = (*old_up)->Write(500, U8(bytes, 500), 10);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("taken over by a newer upload"));
  old_up->reset();  // must not delete the partial the new upload owns
  ASSERT_TRUE((*new_up)->Write(500, U8(bytes, 500), 1500).ok());
  ASSERT_TRUE((*new_up)->Commit().ok());
  EXPECT_EQ(ReadFile(*(*store)->PathOf(sha)), bytes);
}

// An older upload stalled on a half-open connection while a newer one of the
// same runner finished: the installed runner must be executable at once, not
// refused with ETXTBSY because the older upload still holds it open for writing.
TEST(ArtifactStoreResumeTest, TakenOverUploadHoldsNoWritableFdOnTheArtifact) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes = "#!/bin/sh\nexit 0\n";
  while (bytes.size() < 4000) bytes += "# " + std::string(60, 'x') + "\n";
  std::string sha = HashOf(bytes);
  auto stalled = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(stalled.ok());
  ASSERT_TRUE((*stalled)->Write(0, U8(bytes), 1000).ok());
  auto newer = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(newer.ok());
  ASSERT_EQ((*newer)->bytes_received(), 1000u);
  ASSERT_TRUE((*newer)->Write(1000, U8(bytes, 1000), bytes.size() - 1000).ok());
  ASSERT_TRUE((*newer)->Commit().ok());
  ASSERT_TRUE((*store)->MakeExecutable(sha).ok());
  std::string path = *(*store)->PathOf(sha);
  // The stalled upload is still alive (its connection has not timed out).
  char* argv[] = {path.data(), nullptr};
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, environ);
  ASSERT_EQ(err, 0) << "cannot execute the stored runner: " << strerror(err);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto late = (*stalled)->Write(1000, U8(bytes, 1000), 10);
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.message(), HasSubstr("taken over by a newer upload"));
}

// A folder planted under an artifact's name is removed (with what it holds)
// and the artifact stored, however it is uploaded.
TEST(ArtifactStoreIntegrityTest, PlantedFolderIsRemovedAndTheArtifactStored) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes = Pattern(3000);
  std::string sha = HashOf(bytes);
  const std::string path = (*store)->root() + "/artifacts/" + sha;
  for (bool resumable : {false, true}) {
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
    testing::WriteFile(path + "/inside", "planted");
    EXPECT_FALSE((*store)->Has(sha));
    EXPECT_FALSE(std::filesystem::exists(path)) << "the planted folder is still there";
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);  // planted again, now in the upload's way
    auto up = resumable ? (*store)->ResumeUpload(sha, bytes.size())
                        : (*store)->BeginUpload(sha, bytes.size());
    ASSERT_TRUE(up.ok()) << up.message();
    ASSERT_TRUE((*up)->Write(0, U8(bytes), bytes.size()).ok());
    auto committed = (*up)->Commit();
    ASSERT_TRUE(committed.ok()) << committed.message();
    EXPECT_TRUE((*store)->Has(sha));
    EXPECT_EQ(ReadFile(path), bytes);
    ASSERT_EQ(::unlink(path.c_str()), 0);
  }
  // A folder under a partial upload's name is replaced by a fresh partial file.
  ASSERT_EQ(::mkdir(((*store)->root() + "/partial/" + sha).c_str(), 0700), 0);
  auto up = (*store)->ResumeUpload(sha, bytes.size());
  ASSERT_TRUE(up.ok()) << up.message();
  EXPECT_EQ((*up)->bytes_received(), 0u);
}

// The store hashes what it holds before it says it has it.
TEST(ArtifactStoreIntegrityTest, CorruptOrTruncatedArtifactIsDeletedAndMissing) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.message();
  std::vector<std::string> logged;
  (*store)->SetLog([&](const std::string& line) { logged.push_back(line); });
  std::string a(5000, 'a'), b(5000, 'b');
  ASSERT_TRUE((*store)->Put(HashOf(a), a).ok());
  ASSERT_TRUE((*store)->Put(HashOf(b), b).ok());
  const std::string path_a = (*store)->root() + "/artifacts/" + HashOf(a);
  testing::WriteFile(path_a, std::string(5000, 'A'));  // same size, other bytes
  ASSERT_EQ(::truncate(((*store)->root() + "/artifacts/" + HashOf(b)).c_str(), 10), 0);

  EXPECT_FALSE((*store)->Has(HashOf(a)));
  auto path = (*store)->PathOf(HashOf(b));
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(path.message(), HasSubstr("is not in the store"));
  EXPECT_FALSE(std::filesystem::exists(path_a));
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_THAT(logged[0], HasSubstr(HashOf(a).substr(0, 12) + " in store '" + (*store)->root() +
                                   "' is corrupt: its 5000 bytes hash to "));
  EXPECT_THAT(logged[1], HasSubstr("is corrupt: its 10 bytes hash to "));
  // Reported once: the file is gone, later checks just find it missing.
  EXPECT_FALSE((*store)->Has(HashOf(a)));
  EXPECT_EQ(logged.size(), 2u);
  // And it can be stored again.
  ASSERT_TRUE((*store)->Put(HashOf(a), a).ok());
  EXPECT_TRUE((*store)->Has(HashOf(a)));
}

// The check is remembered by (inode, size, mtime, ctime): an unchanged
// artifact is hashed once, also across a restart of the agent (a new store
// object on the same folder); a changed one is hashed again.
TEST(ArtifactStoreIntegrityTest, VerificationIsCachedUntilTheFileChanges) {
  TempDir dir;
  std::string bytes(100'000, 'm');
  std::string sha = HashOf(bytes);
  {
    auto store = ArtifactStore::Open(dir.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Put(sha, bytes).ok());  // hashed while written
    EXPECT_TRUE((*store)->Has(sha));
    (*store)->Touch(sha);
    ASSERT_TRUE((*store)->MakeExecutable(sha).ok());
    EXPECT_TRUE((*store)->PathOf(sha).ok());
    EXPECT_EQ((*store)->verify_hashes(), 0u);
  }
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Has(sha));
  EXPECT_TRUE((*store)->Has(sha));
  EXPECT_EQ((*store)->verify_hashes(), 0u);
  // Rewritten in place with the same bytes: hashed again (once), still good.
  testing::WriteFile((*store)->root() + "/artifacts/" + sha, bytes);
  EXPECT_TRUE((*store)->Has(sha));
  EXPECT_TRUE((*store)->Has(sha));
  EXPECT_EQ((*store)->verify_hashes(), 1u);
}

// A symbolic link or a folder under an artifact's name is never handed out.
TEST(ArtifactStoreIntegrityTest, LinkUnderAnArtifactNameIsRefused) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string bytes = "runner";
  testing::WriteFile(dir.path() + "/elsewhere", bytes);
  std::string link = (*store)->root() + "/artifacts/" + HashOf(bytes);
  ASSERT_EQ(::symlink((dir.path() + "/elsewhere").c_str(), link.c_str()), 0);
  EXPECT_FALSE((*store)->PathOf(HashOf(bytes)).ok());
  EXPECT_FALSE(std::filesystem::is_symlink(link));
}

// The store is private, and one others can write is refused.
TEST(ArtifactStorePermissionsTest, CreatedPrivateAndOpenFoldersRefused) {
  TempDir dir;
  auto mode = [](const std::string& path) {
    struct stat st {};
    ::stat(path.c_str(), &st);
    return st.st_mode & 07777;
  };
  auto store = ArtifactStore::Open(dir.path() + "/store");
  ASSERT_TRUE(store.ok()) << store.message();
  std::string bytes = "model";
  ASSERT_TRUE((*store)->Put(HashOf(bytes), bytes).ok());
  EXPECT_EQ(mode(dir.path() + "/store"), 0700u);
  for (const char* sub : {"artifacts", "tmp", "partial", "verified"}) {
    EXPECT_EQ(mode(dir.path() + "/store/" + sub), 0700u) << sub;
  }
  EXPECT_EQ(mode(*(*store)->PathOf(HashOf(bytes))), 0600u);
  ASSERT_TRUE((*store)->MakeExecutable(HashOf(bytes)).ok());
  EXPECT_EQ(mode(*(*store)->PathOf(HashOf(bytes))), 0700u);

  // An older store (0755 folders) is made private; a writable one is refused.
  ASSERT_EQ(::chmod((dir.path() + "/store/artifacts").c_str(), 0755), 0);
  ASSERT_TRUE(ArtifactStore::Open(dir.path() + "/store").ok());
  EXPECT_EQ(mode(dir.path() + "/store/artifacts"), 0700u);
  ASSERT_EQ(::chmod((dir.path() + "/store").c_str(), 01777), 0);
  auto open = ArtifactStore::Open(dir.path() + "/store");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.message(), "artifact store '" + dir.path() +
                                "/store' is writable by others (mode 1777); chmod 700 " +
                                dir.path() + "/store");
  ASSERT_EQ(::chmod((dir.path() + "/store").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((dir.path() + "/store/partial").c_str(), 0770), 0);
  open = ArtifactStore::Open(dir.path() + "/store");
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(open.message(), HasSubstr("/store/partial' is writable by its group (mode 0770)"));
}

TEST(ArtifactStoreQuotaTest, EvictsLeastRecentlyUsedUnpinned) {
  TempDir dir;
  auto store = ArtifactStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  (*store)->SetQuota(1000);
  std::string a(400, 'a'), b(400, 'b'), c(400, 'c'), d(400, 'd');
  ASSERT_TRUE((*store)->Put(HashOf(a), a).ok());
  ASSERT_TRUE((*store)->Put(HashOf(b), b).ok());
  (*store)->Touch(HashOf(a));  // b is now the least recently used
  ASSERT_TRUE((*store)->Put(HashOf(c), c).ok());
  EXPECT_TRUE((*store)->Has(HashOf(a)));
  EXPECT_FALSE((*store)->Has(HashOf(b)));
  EXPECT_TRUE((*store)->Has(HashOf(c)));
  EXPECT_LE((*store)->UsedBytes(), 1000u);

  // a is the oldest now, but pinned (a job needs it): c goes instead.
  ArtifactPin pin(store->get(), HashOf(a));
  ASSERT_TRUE((*store)->Put(HashOf(d), d).ok());
  EXPECT_TRUE((*store)->Has(HashOf(a)));
  EXPECT_FALSE((*store)->Has(HashOf(c)));
  EXPECT_TRUE((*store)->Has(HashOf(d)));

  // Nothing left to evict for 700 bytes but d (unpinned): d goes, then it fits.
  std::string e(600, 'e');
  ASSERT_TRUE((*store)->Put(HashOf(e), e).ok());
  EXPECT_TRUE((*store)->Has(HashOf(a)));
  EXPECT_FALSE((*store)->Has(HashOf(d)));

  auto too_big = (*store)->BeginUpload(HashOf(std::string(1001, 'f')), 1001);
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.message(), HasSubstr("more than the store quota of 1000 bytes"));
  std::string g(700, 'g');  // a (pinned, 400) + g cannot fit: nothing is evicted in vain
  auto full = (*store)->BeginUpload(HashOf(g), g.size());
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.message(), HasSubstr("no room for artifact"));
  EXPECT_THAT(full.message(), HasSubstr("400 bytes are pinned"));
  EXPECT_TRUE((*store)->Has(HashOf(a)));
  EXPECT_TRUE((*store)->Has(HashOf(e)));
}

}  // namespace
}  // namespace dfarm::agent
