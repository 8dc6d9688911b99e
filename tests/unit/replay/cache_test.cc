// The parent-directory cache must never let a call see a directory under a name it no longer
// has: renames and removals, by this worker or another, drop what they could have changed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "replay/replayer.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "replay_test_util.h"

namespace fay::replay {
namespace {

using testing::Events;
using testing::ScratchDir;
namespace fs = std::filesystem;

TEST(ParentCacheTest, OwnChangesDropWhatTheyReachOthersDropAll) {
  ScratchDir dir;
  fs::create_directories(dir.File("r/a/b"));
  fs::create_directories(dir.File("r/c"));
  auto sb = Sandbox::Open(dir.File("r"));
  ASSERT_TRUE(sb.ok());
  ParentCache mine(sb->generation()), other(sb->generation());
  ParentAndName pn;
  ASSERT_EQ(sb->Parent("/a/b/f", &pn, &mine), 0);
  ASSERT_EQ(sb->Parent("/c/f", &pn, &mine), 0);
  EXPECT_GE(mine.Find("/a/b"), 0);
  EXPECT_GE(mine.Find("/c"), 0);
  mine.Changed("/c/f");  // a file in /c: neither directory changed
  EXPECT_GE(mine.Find("/a/b"), 0);
  EXPECT_GE(mine.Find("/c"), 0);
  mine.Changed("/a");  // /a renamed or removed: /a/b goes
  EXPECT_EQ(mine.Find("/a/b"), -1);
  EXPECT_GE(mine.Find("/c"), 0);
  other.Changed("/x");  // another worker: everything goes
  EXPECT_EQ(mine.Find("/c"), -1);
}

TEST(ParentCacheTest, ARenamedDirectoryIsNotReachedByItsOldName) {
  ScratchDir dir;
  fs::create_directories(dir.File("r"));
  Events e;
  e.Path1(sysno::mkdir, "/d", 0, {0755});
  e.OpenAt("/d/f", O_WRONLY | O_CREAT | O_EXCL, 3);
  e.Close(3);
  e.Path2(sysno::rename, "/d", "/e", 0);
  e.OpenAt("/d/g", O_WRONLY | O_CREAT | O_EXCL, -ENOENT);
  e.Path1(sysno::unlink, "/d/f", -ENOENT);
  e.Path1(sysno::unlink, "/e/f", 0);
  Schedule s = BuildSchedule(std::move(e.events()), {});
  auto sb = Sandbox::Open(dir.File("r"));
  ASSERT_TRUE(sb.ok());
  ReplayOptions o;
  o.verify = true;
  auto r = Replay(s, *sb, o);
  ASSERT_TRUE(r.ok());
  for (const Mismatch& m : r->listed)
    ADD_FAILURE() << m.index << ": " << m.expected << " / " << m.actual;
  EXPECT_EQ(r->replayed, 7u);
  EXPECT_EQ(r->verified, 7u);
  EXPECT_TRUE(fs::is_directory(dir.File("r/e")));
  EXPECT_FALSE(fs::exists(dir.File("r/d")));
  EXPECT_TRUE(fs::is_empty(dir.File("r/e")));
}

}  // namespace
}  // namespace fay::replay

namespace fay::replay {
namespace {

// F_GETFL shows the flags the program's open asked for, not the ones the replay added
// (O_NOFOLLOW when it resolved the name itself, O_NONBLOCK on pipes).
TEST(FcntlTest, GetflHidesWhatTheReplayAdded) {
  ScratchDir dir;
  fs::create_directories(dir.File("r"));
  // What the kernel says for the same opens made the ordinary way.
  int f = ::open(dir.File("probe").c_str(), O_RDWR | O_CREAT, 0644);
  int p[2];
  ASSERT_GE(f, 0);
  ASSERT_EQ(::pipe2(p, 0), 0);
  int64_t file_fl = ::fcntl(f, F_GETFL), pipe_fl = ::fcntl(p[0], F_GETFL);
  ::close(f);
  ::close(p[0]);
  ::close(p[1]);

  Events e;
  e.OpenAt("/f", O_RDWR | O_CREAT, 3);
  e.Add(sysno::fcntl, {3, F_GETFL}, file_fl);
  SyscallEvent& pipe = e.Add(sysno::pipe2, {0, 0}, 0);
  Events::Data(pipe, 0, std::string("\x04\0\0\0\x05\0\0\0", 8), BufferDir::kOut);
  e.Add(sysno::fcntl, {4, F_GETFL}, pipe_fl);
  e.Add(sysno::fcntl, {4, F_SETFL, O_NONBLOCK}, 0);
  e.Add(sysno::fcntl, {4, F_GETFL}, pipe_fl | O_NONBLOCK);
  Schedule s = BuildSchedule(std::move(e.events()), {});
  auto sb = Sandbox::Open(dir.File("r"));
  ASSERT_TRUE(sb.ok());
  ReplayOptions o;
  o.verify = true;
  auto r = Replay(s, *sb, o);
  ASSERT_TRUE(r.ok());
  for (const Mismatch& m : r->listed)
    ADD_FAILURE() << m.index << ": " << m.expected << " / " << m.actual;
  EXPECT_EQ(r->replayed, 6u);
  EXPECT_EQ(r->verified, 6u);
}

}  // namespace
}  // namespace fay::replay

namespace fay::replay {
namespace {

// Lengths and fds no real call would have (a corrupt or crafted trace) are replayed or emulated,
// never trusted for an allocation.
TEST(HostileTraceTest, AbsurdLengthsAndFdsNeverCrash) {
  ScratchDir dir;
  fs::create_directories(dir.File("r"));
  Events e;
  e.OpenAt("/f", O_RDWR | O_CREAT, 3);
  e.Write(3, "abc");
  e.Add(sysno::read, {3, 0x1000, 1ull << 62}, 0);
  Events::Data(e.Add(sysno::write, {3, 0, 1ull << 50}, -EFAULT), 1, "x");
  std::string iov(32, '\0');
  uint64_t huge = 1ull << 40;
  std::memcpy(&iov[8], &huge, 8);
  std::memcpy(&iov[24], &huge, 8);
  Events::Data(e.Add(sysno::readv, {3, 0, 2}, 0), 1, iov, BufferDir::kOut);
  Events::Data(e.Add(sysno::writev, {3, 0, 2}, -EFAULT), 1, iov);
  e.Add(sysno::getdents64, {3, 0x1000, 1ull << 60}, -ENOTDIR);
  e.Path1(sysno::readlink, "/f", -EINVAL, {0x1000, 1ull << 60});
  e.Add(sysno::read, {static_cast<uint64_t>(-1), 0, 10}, -EBADF);
  e.Add(sysno::close, {1ull << 31}, -EBADF);
  e.Add(sysno::lseek, {3, 1ull << 63, 0}, -EINVAL);
  Schedule s = BuildSchedule(std::move(e.events()), {});
  auto sb = Sandbox::Open(dir.File("r"));
  ASSERT_TRUE(sb.ok());
  ReplayOptions o;
  o.verify = true;
  auto r = Replay(s, *sb, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->calls, 11u);
  EXPECT_EQ(r->replayed + r->emulated, 11u);
}

}  // namespace
}  // namespace fay::replay

namespace fay::replay {
namespace {

// An *at call relative to a directory fd follows the directory where it is now.
TEST(DirfdTest, ARenamedDirectoryIsFollowedThroughItsFd) {
  ScratchDir dir;
  fs::create_directories(dir.File("r/d"));
  Events e;
  e.OpenAt("/d", O_RDONLY | O_DIRECTORY, 3);
  e.Path2(sysno::rename, "/d", "/e", 0);
  Events::Str(e.Add(sysno::openat, {3, 0, O_WRONLY | O_CREAT | O_EXCL, 0644}, 4), 1, "f");
  Events::Str(e.Add(sysno::mkdirat, {3, 0, 0755}, 0), 1, "sub");
  Schedule s = BuildSchedule(std::move(e.events()), {});
  auto sb = Sandbox::Open(dir.File("r"));
  ASSERT_TRUE(sb.ok());
  ReplayOptions o;
  o.verify = true;
  auto r = Replay(s, *sb, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verified, 4u);
  EXPECT_TRUE(fs::exists(dir.File("r/e/f")));
  EXPECT_TRUE(fs::is_directory(dir.File("r/e/sub")));
  EXPECT_FALSE(fs::exists(dir.File("r/d")));
}

}  // namespace
}  // namespace fay::replay
