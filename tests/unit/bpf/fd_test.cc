#include "bpf/fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace fay::bpf {
namespace {

bool IsOpen(int fd) {
  return fcntl(fd, F_GETFD) != -1;
}

TEST(UniqueFd, ClosesOnDestruction) {
  int raw = dup(0);
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_TRUE(fd);
    EXPECT_EQ(fd.get(), raw);
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, MoveLeavesSourceEmpty) {
  int raw = dup(0);
  UniqueFd a(raw);
  UniqueFd b(std::move(a));
  EXPECT_EQ(a.get(), -1);
  EXPECT_FALSE(a);
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(b.get(), -1);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
}

TEST(UniqueFd, ReleaseAndReset) {
  int raw = dup(0);
  UniqueFd fd(raw);
  EXPECT_EQ(fd.release(), raw);
  EXPECT_EQ(fd.get(), -1);
  EXPECT_TRUE(IsOpen(raw));
  fd.reset(raw);
  int other = dup(0);
  fd.reset(other);
  EXPECT_FALSE(IsOpen(raw));
  EXPECT_EQ(fd.get(), other);
  fd.reset();
  EXPECT_FALSE(IsOpen(other));
}

}  // namespace
}  // namespace fay::bpf
