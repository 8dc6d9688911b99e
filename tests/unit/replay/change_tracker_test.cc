// ChangeTracker on calls as a recorder hands them over: the symlinks met (lstat'ed when met,
// read once the recording is over, never one the program made), and where an fd stands.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay/prepare.h"
#include "replay_test_util.h"
#include "schema/syscall_table.h"

namespace fay::replay {
namespace {

using testing::Events;
using testing::ScratchDir;

TEST(ChangeTrackerTest, MetSymlinksAreThoseThatWereThereNotTheProgramsOwn) {
  ScratchDir d;
  ASSERT_FALSE(d.path().empty());
  ASSERT_EQ(::mkdir(d.File("real").c_str(), 0755), 0);
  testing::WriteAll(d.File("real/f"), "x");
  ASSERT_EQ(::symlink("real", d.File("lnk").c_str()), 0);
  ChangeTracker t(d.path());
  Events e;
  // A stat through the link met it; the program then makes a link of its own and stats it,
  // which a recorder that looks late (eBPF) meets only after the symlink call.
  t.Observe(e.Path1(sysno::stat, d.File("lnk/f"), 0));
  ASSERT_EQ(::symlink("t", d.File("made").c_str()), 0);
  SyscallEvent made = e.Add(sysno::symlinkat, {0, static_cast<uint64_t>(AT_FDCWD), 0}, 0);
  Events::Str(made, 0, "t");
  Events::Str(made, 2, d.File("made"));
  t.Observe(e.Path1(sysno::lstat, d.File("made"), 0));
  t.Observe(made);
  std::vector<trace::MetSymlink> met = t.MetSymlinks();
  ASSERT_EQ(met.size(), 1u);
  EXPECT_EQ(met[0].path, d.File("lnk"));
  EXPECT_EQ(met[0].target, "real");
  // A budget smaller than the one link keeps none.
  EXPECT_TRUE(t.MetSymlinks(4).empty());
}

TEST(ChangeTrackerTest, FileOfFollowsOpensReadsAndSeeks) {
  ScratchDir d;
  testing::WriteAll(d.File("src"), "0123456789");
  ChangeTracker t(d.path());
  Events e;
  t.Observe(e.OpenAt(d.File("src"), O_RDONLY, 3));
  t.Observe(e.Read(3, "0123", 4));
  std::string path;
  uint64_t offset = 0;
  ASSERT_TRUE(t.FileOf(100, 3, &path, &offset));
  EXPECT_EQ(path, d.File("src"));
  EXPECT_EQ(offset, 4u);
  t.Observe(e.Add(sysno::lseek, {3, 8, SEEK_SET}, 8));
  ASSERT_TRUE(t.FileOf(100, 3, &path, &offset));
  EXPECT_EQ(offset, 8u);
  t.Observe(e.Close(3));
  EXPECT_FALSE(t.FileOf(100, 3, &path, &offset));
}

}  // namespace
}  // namespace fay::replay
