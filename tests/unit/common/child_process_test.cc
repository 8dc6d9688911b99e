#include "common/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace fay {
namespace {

int ExitOf(HeldChild& child) {
  int status = -1;
  while (!child.TryWait(&status)) usleep(1000);
  return status;
}

// A descriptor fay was started with reaches the command; one that another thread of fay had
// open, without close-on-exec, when the command was forked does not.
TEST(HeldChild, TheCommandInheritsOnlyTheDescriptorsFayStartedWith) {
  int inherited = open("/dev/null", O_RDONLY);
  ASSERT_GE(inherited, 3);
  NoteInheritedFds();
  int stray = open("/dev/null", O_RDONLY);
  ASSERT_GT(stray, inherited);
  auto child = HeldChild::Spawn(
      {"/bin/sh", "-c",
       fmt::format("test -e /proc/self/fd/{} || exit 1; test -e /proc/self/fd/{} && exit 2; "
                   "exit 0",
                   inherited, stray)});
  ASSERT_TRUE(child.ok()) << child.status().message();
  ASSERT_TRUE(child->Release().ok());
  EXPECT_EQ(ExitOf(*child), 0);
  close(stray);
  close(inherited);
  NoteInheritedFds();
}

TEST(HeldChild, AProgramThatCannotRunIsReportedAtRelease) {
  auto child = HeldChild::Spawn({"/nonexistent/fay-test-program"},
                                {"/nonexistent/fay-test-program", false, -1});
  ASSERT_TRUE(child.ok()) << child.status().message();
  Status st = child->Release();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kNotFound);
}

}  // namespace
}  // namespace fay
