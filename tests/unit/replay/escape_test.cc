// A hostile trace -- one that could never be recorded safely -- replayed into a root: whatever it
// names ("..", absolute paths, symlinks it plants pointing outside), every file outside the root
// stays exactly as it was, and the calls happen inside the root instead.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "replay/executor.h"
#include "replay/replayer.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "replay_test_util.h"
#include "trace/writer.h"

namespace fay::replay {
namespace {

using testing::Events;
using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;
namespace fs = std::filesystem;

class EscapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    outside_ = dir_.File("outside");
    root_ = dir_.File("deep/down/root");
    fs::create_directories(outside_);
    fs::create_directories(root_ + "/a/b");
    // The outside directory's path exists inside the root too, so calls have somewhere to go.
    fs::create_directories(root_ + outside_);
    for (const char* name : {"victim", "keepme", "canary"}) {
      WriteAll(outside_ + "/" + name, "keep");
      ::chmod((outside_ + "/" + name).c_str(), 0644);
    }
  }

  // Every outside file still reads "keep" with mode 0644, and nothing new appeared there.
  void ExpectOutsideUntouched() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(outside_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"canary", "keepme", "victim"}));
    for (const std::string& n : names) {
      EXPECT_EQ(ReadAll(outside_ + "/" + n), "keep") << n;
      struct stat st;
      ASSERT_EQ(::stat((outside_ + "/" + n).c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 07777, 0644u) << n;
      EXPECT_EQ(st.st_nlink, 1u) << n;
    }
  }

  ReplayReport Run(std::vector<SyscallEvent> events) {
    Schedule s = BuildSchedule(std::move(events), {});
    s.info.cwd = "/a/b";
    auto sb = Sandbox::Open(root_);
    EXPECT_TRUE(sb.ok()) << sb.status().message();
    ReplayOptions o;
    o.verify = true;
    auto r = Replay(s, *sb, o);
    EXPECT_TRUE(r.ok());
    return *r;
  }

  ScratchDir dir_;
  std::string outside_, root_;
};

TEST_F(EscapeTest, DotDotAbsoluteAndSymlinksStayInside) {
  Events e;
  std::string up = "../../../../../../../../../..";
  e.OpenAt(up + outside_ + "/victim", O_WRONLY | O_CREAT | O_TRUNC, 3);
  e.Write(3, "pwned");
  e.Close(3);
  // An absolute symlink to the outside directory, then a write through it.
  e.Path2(sysno::symlink, outside_, "evil", 0);
  e.OpenAt("evil/victim2", O_WRONLY | O_CREAT | O_TRUNC, 3);
  e.Write(3, "pwned2");
  e.Close(3);
  // A relative symlink climbing out, and a symlink straight at a file outside.
  e.Path2(sysno::symlink, up + outside_, "rel", 0);
  e.Path2(sysno::symlink, outside_ + "/canary", "pw", 0);
  e.Path1(sysno::truncate, "pw", -ENOENT, {0});
  e.Path1(sysno::chmod, "pw", -ENOENT, {0});
  e.Path1(sysno::chmod, "rel/keepme", -ENOENT, {0});
  e.Path1(sysno::unlink, outside_ + "/keepme", -ENOENT);
  e.Path1(sysno::unlink, "rel/keepme", -ENOENT);
  e.Path1(sysno::mkdir, "/../../.." + outside_ + "/newdir", 0, {0755});
  e.Path2(sysno::rename, up + outside_ + "/victim", "/" + up + outside_ + "/moved", 0);
  e.Path2(sysno::link, "rel/canary", "hard", -ENOENT);
  // The magic links of /proc would be the classic way out; they are refused.
  e.OpenAt("/proc/self/root" + outside_ + "/canary", O_WRONLY | O_TRUNC, -ENOENT);
  e.OpenAt(up + "/etc/passwd", O_RDONLY, -ENOENT);
  ReplayReport r = Run(std::move(e.events()));
  ExpectOutsideUntouched();
  for (const Mismatch& m : r.listed)
    ADD_FAILURE() << m.index << ": " << m.expected << " / " << m.actual;
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_EQ(r.emulated, 1u);  // the /proc open: never replayed
  std::string in = root_ + outside_;
  EXPECT_EQ(ReadAll(in + "/moved"), "pwned");
  EXPECT_EQ(ReadAll(in + "/victim2"), "pwned2");
  EXPECT_TRUE(fs::is_directory(in + "/newdir"));
  EXPECT_FALSE(fs::exists(in + "/victim"));
  EXPECT_EQ(fs::read_symlink(root_ + "/a/b/evil").string(), outside_);
}

// The same kind of trace, written to a file and read back: the path replay really takes.
TEST_F(EscapeTest, FromATraceFile) {
  Events e;
  e.OpenAt(outside_ + "/canary", O_WRONLY | O_TRUNC, -ENOENT);
  e.OpenAt("../../../../../../../.." + outside_ + "/victim", O_RDWR | O_CREAT, 3);
  e.Write(3, "inside");
  e.Close(3);
  RecordingInfo info;
  info.cwd = "/a/b";
  std::string trace = dir_.File("hostile.fay");
  {
    auto w = trace::Writer::Create(trace, info);
    ASSERT_TRUE(w.ok()) << w.status().message();
    for (auto& ev : e.events()) (*w)->Append(ev);
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto s = LoadSchedule(trace);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto sb = Sandbox::Open(root_);
  ASSERT_TRUE(sb.ok());
  ReplayOptions o;
  o.verify = true;
  auto r = Replay(*s, *sb, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->replayed, 4u);
  EXPECT_EQ(r->verified, 4u);
  ExpectOutsideUntouched();
  EXPECT_EQ(ReadAll(root_ + outside_ + "/victim"), "inside");
}

TEST(SandboxTest, ResolvesEverythingBelowTheRoot) {
  ScratchDir dir;
  std::string root = dir.File("root");
  fs::create_directories(root + "/d");
  WriteAll(root + "/d/f", "in");
  WriteAll(dir.File("secret"), "out");
  ::symlink(dir.File("secret").c_str(), (root + "/abs").c_str());
  ::symlink("../../../../secret", (root + "/d/rel").c_str());
  auto sb = Sandbox::Open(root);
  ASSERT_TRUE(sb.ok());
  int fd = sb->OpenAt("/../../d/f", O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  char buf[8] = {};
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), 2);
  EXPECT_STREQ(buf, "in");
  ::close(fd);
  EXPECT_EQ(sb->OpenAt(dir.File("secret"), O_RDONLY, 0), -ENOENT);
  EXPECT_EQ(sb->OpenAt("abs", O_RDONLY, 0), -ENOENT);
  EXPECT_EQ(sb->OpenAt("d/rel", O_RDONLY, 0), -ENOENT);
  ParentAndName pn;
  EXPECT_EQ(sb->Parent("/..", &pn), -EINVAL);
  EXPECT_EQ(sb->Parent("/d/..", &pn), -EINVAL);
  ASSERT_EQ(sb->Parent("../../d/f", &pn), 0);
  EXPECT_EQ(pn.name, "f");
  EXPECT_EQ(sb->PathOf(pn.dir()), "/d");
  EXPECT_EQ(ReadAll(dir.File("secret")), "out");
}

TEST(SandboxTest, MissingRootIsAClearError) {
  auto sb = Sandbox::Open("/nonexistent/fay-replay-root");
  ASSERT_FALSE(sb.ok());
  EXPECT_NE(sb.status().message().find("/nonexistent/fay-replay-root"), std::string::npos);
}

TEST(PathTest, VirtualPaths) {
  EXPECT_TRUE(IsVirtualPath("/proc/self/maps"));
  EXPECT_TRUE(IsVirtualPath("/sys"));
  EXPECT_TRUE(IsVirtualPath("/dev/null"));
  EXPECT_TRUE(IsVirtualPath("/tmp/../dev/null"));
  EXPECT_TRUE(IsVirtualPath("/dev/shm/../null"));
  EXPECT_TRUE(IsVirtualPath("/dev//null"));
  EXPECT_FALSE(IsVirtualPath("/dev/shm/w3/files/f.123"));
  EXPECT_FALSE(IsVirtualPath("/dev/shm"));
  EXPECT_FALSE(IsVirtualPath("/device/x"));
  EXPECT_FALSE(IsVirtualPath("/data/proc/x"));
  EXPECT_FALSE(IsVirtualPath("/proc/../etc/passwd"));
}

TEST(PathTest, JoinAndNormalize) {
  EXPECT_EQ(JoinPath("/a/b", "c"), "/a/b/c");
  EXPECT_EQ(JoinPath("/a/b/", "../c"), "/a/b/../c");
  EXPECT_EQ(JoinPath("/a", "/etc/x"), "/etc/x");
  EXPECT_EQ(JoinPath("/", ""), "/");
  EXPECT_EQ(NormalizePath("/a/./b/../c"), "/a/c");
  EXPECT_EQ(NormalizePath("/../../x"), "/x");
  EXPECT_EQ(NormalizePath("//"), "/");
  // Already normal: returned as it is.
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("/dev/shm/files/f.123"), "/dev/shm/files/f.123");
  EXPECT_EQ(NormalizePath("/a/.hidden/..x/b"), "/a/.hidden/..x/b");
  // Each way of not being normal.
  EXPECT_EQ(NormalizePath("a/b"), "/a/b");
  EXPECT_EQ(NormalizePath("/a/b/"), "/a/b");
  EXPECT_EQ(NormalizePath("/a//b"), "/a/b");
  EXPECT_EQ(NormalizePath("/a/."), "/a");
  EXPECT_EQ(NormalizePath("/a/.."), "/");
  EXPECT_EQ(NormalizePath("/a/../b"), "/b");
  EXPECT_EQ(NormalizePath("/./a"), "/a");
}

}  // namespace
}  // namespace fay::replay
