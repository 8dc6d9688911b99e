// --prepare with a trace from someone else: what it says is not all restored. A crafted trace
// whose stat results show a setuid-root file, a setgid directory, a file owned by another user
// and a character device gets a file without set-id bits, no device node, and owners only when
// asked for; --verify does not count those differences as mismatches, only on those files.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "replay/prepare.h"
#include "replay/replayer.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "replay_test_util.h"

namespace fay::replay {
namespace {

using testing::Events;
using testing::ReadAll;
using testing::ScratchDir;
namespace fs = std::filesystem;

// newfstatat(AT_FDCWD, path, buf, 0) = 0, buf holding this mode, owner and size.
void StatOf(Events& e, const std::string& path, uint32_t mode, uint32_t uid, uint64_t size) {
  struct stat st {};
  st.st_mode = mode;
  st.st_uid = uid;
  st.st_gid = uid;
  st.st_size = static_cast<off_t>(size);
  st.st_nlink = 1;
  SyscallEvent& ev = e.Add(sysno::newfstatat, {static_cast<uint64_t>(AT_FDCWD), 0, 0, 0}, 0);
  Events::Str(ev, 1, path);
  Events::Data(ev, 2, std::string(reinterpret_cast<const char*>(&st), sizeof(st)), BufferDir::kOut);
}

Schedule Crafted() {
  Events e;
  StatOf(e, "/bin/su", S_IFREG | 04755, 0, 5);
  e.OpenAt("/bin/su", O_RDONLY, 3);
  e.Read(3, "#!evl", 4096);
  e.Close(3);
  StatOf(e, "/shared", S_IFDIR | 02775, 0, 4096);
  StatOf(e, "/home/x/notes", S_IFREG | 01644, 1234, 3);
  StatOf(e, "/tmp/kmem", S_IFCHR | 0666, 0, 0);
  StatOf(e, "/tmp/blk", S_IFBLK | 0660, 0, 0);
  return BuildSchedule(std::move(e.events()), {});
}

TEST(PrepareSafetyTest, SetIdBitsStrippedDevicesNotMadeOwnersOnlyWhenAsked) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to tell a chown from a refused one";
  ScratchDir dir;
  std::string root = dir.File("r");
  fs::create_directories(root);
  Schedule s = Crafted();
  auto sb = Sandbox::Open(root);
  ASSERT_TRUE(sb.ok());
  PreparedDiffs diffs;
  auto st = Prepare(s, *sb, {}, &diffs);
  ASSERT_TRUE(st.ok()) << st.status().message();
  struct stat su, shared, notes, kmem, blk;
  ASSERT_EQ(::lstat((root + "/bin/su").c_str(), &su), 0);
  EXPECT_EQ(su.st_mode, S_IFREG | 0755u);
  EXPECT_EQ(ReadAll(root + "/bin/su"), "#!evl");
  ASSERT_EQ(::lstat((root + "/shared").c_str(), &shared), 0);
  EXPECT_EQ(shared.st_mode, S_IFDIR | 0775u);
  ASSERT_EQ(::lstat((root + "/home/x/notes").c_str(), &notes), 0);
  EXPECT_EQ(notes.st_mode, S_IFREG | 0644u);  // sticky: only a directory keeps it
  EXPECT_EQ(notes.st_uid, 0u);                // not 1234: --keep-owners was not given
  EXPECT_NE(::lstat((root + "/tmp/kmem").c_str(), &kmem), 0);
  EXPECT_NE(::lstat((root + "/tmp/blk").c_str(), &blk), 0);
  EXPECT_EQ(st->setid_stripped, 3u);
  EXPECT_EQ(st->devices_skipped, 2u);
  EXPECT_EQ(st->owners_not_kept, 1u);
  EXPECT_EQ(st->chown_refused, 0u);
  EXPECT_EQ(diffs.size(), 3u);

  // The stats verify: their differences are the ones --prepare made, on the files it made.
  // The device nodes are not there: those two are mismatches.
  ReplayOptions o;
  o.verify = true;
  o.prepared = &diffs;
  auto r = Replay(s, *sb, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->as_prepared, 3u);
  EXPECT_EQ(r->mismatches, 2u);
  for (const Mismatch& m : r->listed) EXPECT_NE(m.path.find("/tmp/"), std::string::npos);
  // Without what --prepare made, the same differences are mismatches.
  o.prepared = nullptr;
  r = Replay(s, *sb, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->as_prepared, 0u);
  EXPECT_EQ(r->mismatches, 5u);
}

TEST(PrepareSafetyTest, KeepOwnersGivesTheRecordedOwnerButNoSetIdBits) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ScratchDir dir;
  std::string root = dir.File("r");
  fs::create_directories(root);
  Schedule s = Crafted();
  auto sb = Sandbox::Open(root);
  ASSERT_TRUE(sb.ok());
  PrepareOptions po;
  po.keep_owners = true;
  auto st = Prepare(s, *sb, po);
  ASSERT_TRUE(st.ok()) << st.status().message();
  struct stat su, notes;
  ASSERT_EQ(::lstat((root + "/bin/su").c_str(), &su), 0);
  EXPECT_EQ(su.st_mode, S_IFREG | 0755u);
  EXPECT_EQ(su.st_uid, 0u);
  ASSERT_EQ(::lstat((root + "/home/x/notes").c_str(), &notes), 0);
  EXPECT_EQ(notes.st_uid, 1234u);
  EXPECT_EQ(st->owners_not_kept, 0u);
  EXPECT_EQ(st->setid_stripped, 3u);
}

// Not root: --keep-owners's chowns are refused, and --prepare carries on without them.
TEST(PrepareSafetyTest, AnUnprivilegedKeepOwnersCarriesOnWithoutOwners) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  ScratchDir dir;
  std::string root = dir.File("r");
  fs::create_directories(root);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chown(root.c_str(), 65534, 65534), 0);
  Schedule s = Crafted();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(10);
    auto sb = Sandbox::Open(root);
    if (!sb.ok()) ::_exit(11);
    PrepareOptions po;
    po.keep_owners = true;
    auto st = Prepare(s, *sb, po);
    if (!st.ok()) ::_exit(12);
    if (st->chown_refused != 3 ||
        st->chown_error.find("Operation not permitted") == std::string::npos)
      ::_exit(13);
    if (st->owners_not_kept != 3 || st->files != 2) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  struct stat su;
  ASSERT_EQ(::lstat((root + "/bin/su").c_str(), &su), 0);
  EXPECT_EQ(su.st_mode, S_IFREG | 0755u);
  EXPECT_EQ(su.st_uid, 65534u);
}

}  // namespace
}  // namespace fay::replay
