// What fay replay accepts as --root: never / or a directory the system or the user's files live
// in, however it is spelt; otherwise an empty directory or one fay replay marked, and any other
// only when the user says so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "replay/root_guard.h"
#include "replay/sandbox.h"
#include "replay_test_util.h"

namespace fay::replay {
namespace {

using testing::ScratchDir;
using testing::WriteAll;
namespace fs = std::filesystem;

// The check's message for root, or "" when it is accepted.
std::string Refusal(const std::string& root, bool allow_nonempty = false) {
  auto sb = Sandbox::Open(root);
  if (!sb.ok()) return "open: " + sb.status().message();
  auto v = CheckRoot(*sb, root, allow_nonempty);
  return v.ok() ? "" : v.status().message();
}

TEST(RootGuardTest, TheRealRootIsRefusedHoweverItIsSpelt) {
  ScratchDir dir;
  std::string link = dir.File("to-root");
  ASSERT_EQ(::symlink("/", link.c_str()), 0);
  for (const std::string& root : {std::string("/"), std::string("//"), std::string("/./"),
                                  std::string("/usr/.."), link, link + "/"}) {
    SCOPED_TRACE(root);
    std::string m = Refusal(root, /*allow_nonempty=*/true);
    EXPECT_NE(m.find("--root " + root + ": refused: "), std::string::npos) << m;
    EXPECT_NE(m.find(" / (the machine's own file system)"), std::string::npos) << m;
    EXPECT_NE(m.find("no flag allows that"), std::string::npos) << m;
    EXPECT_NE(m.find("--root \"$(mktemp -d)\""), std::string::npos) << m;
  }
  EXPECT_NE(Refusal("/").find("refused: it is / ("), std::string::npos);
  EXPECT_NE(Refusal(link).find("refused: it resolves to / ("), std::string::npos);
}

TEST(RootGuardTest, SystemAndHomeDirectoriesAreRefusedEvenWhenAllowed) {
  ScratchDir dir;
  std::string link = dir.File("to-etc");
  ASSERT_EQ(::symlink("/etc", link.c_str()), 0);
  EXPECT_NE(Refusal("/usr", true).find("it is /usr (the running system needs it)"),
            std::string::npos);
  EXPECT_NE(Refusal("/etc/", true).find("it resolves to /etc ("), std::string::npos);
  EXPECT_NE(Refusal(link, true).find("it resolves to /etc ("), std::string::npos);
  // The home directory and those above it.
  fs::create_directories(dir.File("home/someone"));
  const char* old = ::getenv("HOME");
  std::string saved = old ? old : "";
  ::setenv("HOME", dir.File("home/someone").c_str(), 1);
  std::string home = Refusal(dir.File("home/someone"), true);
  std::string above = Refusal(dir.File("home"), true);
  if (old) ::setenv("HOME", saved.c_str(), 1);
  EXPECT_NE(home.find("(a home directory or one above it)"), std::string::npos) << home;
  EXPECT_NE(above.find("(a home directory or one above it)"), std::string::npos) << above;
  // Below them is the user's to choose.
  fs::create_directories(dir.File("home/someone/replays/r1"));
  EXPECT_EQ(Refusal(dir.File("home/someone/replays/r1")), "");
}

TEST(RootGuardTest, EmptyOrMarkedDirectoriesAreAcceptedOthersNeedTheFlag) {
  ScratchDir dir;
  std::string root = dir.File("r");
  fs::create_directories(root);
  {
    auto sb = Sandbox::Open(root);
    ASSERT_TRUE(sb.ok());
    auto v = CheckRoot(*sb, root, false);
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_TRUE(v->mark);
    ASSERT_TRUE(MarkRoot(*sb).ok());
    ASSERT_TRUE(MarkRoot(*sb).ok());  // twice: kept
  }
  WriteAll(root + "/left-by-a-replay", "x");
  EXPECT_EQ(Refusal(root), "");  // marked: fay made it
  std::string other = dir.File("o");
  fs::create_directories(other + "/sub");
  WriteAll(other + "/precious", "x");
  std::string m = Refusal(other);
  EXPECT_NE(m.find("--root " + other + ": refused: it is not empty (2 entries, such as '"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("pass --allow-nonempty-root to replay into it anyway"), std::string::npos) << m;
  auto sb = Sandbox::Open(other);
  ASSERT_TRUE(sb.ok());
  auto v = CheckRoot(*sb, other, true);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->mark);  // allowed once, not marked for the next time
  // A marker that is not a regular file is no marker.
  std::string fake = dir.File("f");
  fs::create_directories(fake + "/" + kRootMarker);
  EXPECT_NE(Refusal(fake).find("refused: it is not empty (1 entry"), std::string::npos);
}

}  // namespace
}  // namespace fay::replay
