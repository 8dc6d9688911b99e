// The parent-directory cache must never let a call see a directory under a name it no longer
// has: renames and removals, by this worker or another, drop what they could have changed.
#include <gtest/gtest.h>
#include <sys/stat.h>

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
