// Recorded fd -> live fd: dup shares the open file description, close-on-exec belongs to the
// table entry, fork copies the table, CLONE_FILES shares it until an exec.
#include "replay/fd_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace fay::replay {
namespace {

std::shared_ptr<LiveFd> Live(const char* path = "/x") {
  auto l = std::make_shared<LiveFd>();
  l->fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  l->path = path;
  return l;
}

TEST(FdTableTest, DupSharesTheDescriptionAndCloseKeepsTheOtherAlive) {
  ProcessState p;
  auto l = Live();
  int live_fd = l->fd.get();
  p.Set(3, l, false);
  p.Set(7, p.Get(3), true);
  l.reset();
  EXPECT_EQ(p.Get(3), p.Get(7));
  EXPECT_TRUE(p.Erase(3));
  EXPECT_FALSE(p.Erase(3));
  ASSERT_NE(p.Get(7), nullptr);
  EXPECT_EQ(p.Get(7)->fd.get(), live_fd);
  EXPECT_GE(::fcntl(live_fd, F_GETFD), 0);  // still open
  p.Erase(7);
  EXPECT_EQ(::fcntl(live_fd, F_GETFD), -1);  // the last entry closed it
}

TEST(FdTableTest, ExecDropsOnlyCloseOnExecEntries) {
  ProcessState p;
  p.Set(3, Live(), true);
  p.Set(4, Live(), false);
  EXPECT_EQ(p.GetCloexec(3), 1);
  EXPECT_TRUE(p.SetCloexec(4, false));
  EXPECT_EQ(p.GetCloexec(4), 0);
  EXPECT_EQ(p.GetCloexec(5), -1);
  p.Exec();
  EXPECT_FALSE(p.Has(3));
  EXPECT_TRUE(p.Has(4));
}

TEST(FdTableTest, ForkCopiesTableCwdAndUmask) {
  ProcessState parent, child;
  parent.Set(3, Live(), false);
  parent.set_cwd("/w");
  parent.set_umask(027);
  child.CopyFrom(parent);
  EXPECT_EQ(child.Get(3), parent.Get(3));
  EXPECT_EQ(child.cwd(), "/w");
  EXPECT_EQ(child.umask(), 027u);
  child.Erase(3);
  EXPECT_TRUE(parent.Has(3));  // the tables are separate from then on
}

TEST(FdTableTest, CloneFilesSharesTheTableUntilExec) {
  ProcessState parent, child;
  parent.Set(3, Live(), true);
  parent.set_cwd("/w");
  child.CopyFrom(parent, /*share_fds=*/true);
  EXPECT_EQ(child.cwd(), "/w");
  child.Set(4, Live(), false);  // opened by the child: the parent sees it
  EXPECT_TRUE(parent.Has(4));
  parent.Erase(3);  // closed by the parent: gone for the child
  EXPECT_FALSE(child.Has(3));
  parent.Set(5, Live(), true);
  child.Exec();  // unshares first: the parent keeps its close-on-exec fd
  EXPECT_TRUE(parent.Has(5));
  EXPECT_FALSE(child.Has(5));
  EXPECT_TRUE(child.Has(4));
  child.Erase(4);  // separate tables from then on
  EXPECT_TRUE(parent.Has(4));
}

TEST(FdTableTest, CloseRange) {
  ProcessState p;
  for (int fd = 3; fd < 8; ++fd) p.Set(fd, Live(), false);
  p.EraseRange(5, 6, true);
  EXPECT_EQ(p.GetCloexec(5), 1);
  EXPECT_EQ(p.GetCloexec(7), 0);
  p.EraseRange(4, 6, false);
  EXPECT_TRUE(p.Has(3));
  EXPECT_FALSE(p.Has(4));
  EXPECT_FALSE(p.Has(6));
  EXPECT_TRUE(p.Has(7));
}

}  // namespace
}  // namespace fay::replay
