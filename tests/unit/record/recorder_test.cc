// DefaultOutputName, Record()'s refusals, and one whole recording read back: the header holds
// argv, cwd, environment and the root pid, and the command's exit status comes back.
#include "record/recorder.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "schema/syscall_table.h"
#include "trace/reader.h"

namespace fay::record {
namespace {

std::string Stamp() {
  time_t now = time(nullptr);
  tm t{};
  localtime_r(&now, &t);
  char s[32];
  strftime(s, sizeof s, "%Y%m%d-%H%M%S", &t);
  return s;
}

TEST(DefaultOutputName, CommandBaseNameAndLocalTime) {
  RecordOptions o;
  o.argv = {"/usr/bin/some-tool", "--flag", "x"};
  std::string before = Stamp();
  std::string name = DefaultOutputName(o);
  std::string after = Stamp();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(name, m, std::regex(R"(fay-some-tool-(\d{8}-\d{6})\.fay)"))) << name;
  EXPECT_GE(m[1].str(), before);
  EXPECT_LE(m[1].str(), after);
}

TEST(DefaultOutputName, ACommandWithoutASlashKeepsItsName) {
  RecordOptions o;
  o.argv = {"python3"};
  EXPECT_TRUE(std::regex_match(DefaultOutputName(o), std::regex(R"(fay-python3-\d{8}-\d{6}\.fay)")))
      << DefaultOutputName(o);
}

TEST(DefaultOutputName, AttachUsesThePid) {
  RecordOptions o;
  o.pid = 4321;
  EXPECT_TRUE(std::regex_match(DefaultOutputName(o), std::regex(R"(fay-pid4321-\d{8}-\d{6}\.fay)")))
      << DefaultOutputName(o);
}

// Freezing needs the process in a cgroup of fay's making; a -p process is not moved.
// A failed recording removes the trace file it made, and nothing that took its place.
TEST(RemoveOutput, RemovesTheFileItMadeAndNothingElse) {
  char dir[] = "/tmp/fay-remove-output-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string made = std::string(dir) + "/made.fay";
  const std::string other = std::string(dir) + "/other.fay";
  const std::string link = std::string(dir) + "/link.fay";
  auto touch = [](const std::string& p) {
    FILE* f = fopen(p.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
  };
  touch(made);
  OutputFile id = IdentifyOutput(made);
  EXPECT_TRUE(id.removable);
  RemoveOutput(made, id);
  EXPECT_NE(access(made.c_str(), F_OK), 0);

  // Replaced by another file after it was made: that one stays.
  touch(made);
  id = IdentifyOutput(made);
  touch(other);
  ASSERT_EQ(rename(other.c_str(), made.c_str()), 0);
  RemoveOutput(made, id);
  EXPECT_EQ(access(made.c_str(), F_OK), 0);

  // A symlink, a device and a directory are never removable.
  ASSERT_EQ(symlink(made.c_str(), link.c_str()), 0);
  EXPECT_FALSE(IdentifyOutput(link).removable);
  EXPECT_FALSE(IdentifyOutput("/dev/null").removable);
  EXPECT_FALSE(IdentifyOutput(dir).removable);
  EXPECT_FALSE(IdentifyOutput(std::string(dir) + "/missing").removable);
  RemoveOutput(link, IdentifyOutput(link));
  EXPECT_EQ(access(link.c_str(), F_OK), 0);

  unlink(link.c_str());
  unlink(made.c_str());
  rmdir(dir);
}

TEST(Record, EbpfBackendDoesNotThrottleAPid) {
  RecordOptions o;
  o.backend = "ebpf";
  o.loss = "block";
  o.pid = getpid();
  auto r = Record(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported) << r.status().message();
}

TEST(Record, EbpfBackendRejectsARingThatIsNotAPowerOfTwo) {
  RecordOptions o;
  o.backend = "ebpf";
  o.ring_size = 3 << 20;
  o.argv = {"/bin/true"};
  auto r = Record(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
}

TEST(Record, EbpfBackendRejectsARingLargerThanAMapCanHold) {
  RecordOptions o;
  o.backend = "ebpf";
  o.ring_size = 4ull << 30;
  o.argv = {"/bin/true"};
  auto r = Record(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  EXPECT_NE(r.status().message().find("at most 2G"), std::string::npos) << r.status().message();
}

TEST(Record, NeedsExactlyOneOfPidAndCommand) {
  RecordOptions neither;
  auto a = Record(neither);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
  RecordOptions both;
  both.pid = getpid();
  both.argv = {"/bin/true"};
  auto b = Record(both);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
}

class RecordFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fay-record-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/t.fay";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(RecordFile, NoSuchCommandIsNotFoundAndLeavesNoFile) {
  RecordOptions o;
  o.output = path_;
  o.quiet = true;
  o.argv = {"/nonexistent/fay-no-such-command"};
  auto r = Record(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(access(path_.c_str(), F_OK), 0);
}

TEST_F(RecordFile, HeaderEventsAndExitStatus) {
  if (geteuid() != 0) GTEST_SKIP() << "ptrace of a child works unprivileged, but keep to root";
  setenv("FAY_RECORD_TEST_MARK", "a b=c", 1);
  RecordOptions o;
  o.output = path_;
  o.quiet = true;
  o.argv = {"/bin/sh", "-c", "exit 3"};
  auto r = Record(o);
  unsetenv("FAY_RECORD_TEST_MARK");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_FALSE(r->detached);
  EXPECT_EQ(r->path, path_);
  EXPECT_EQ(r->processes, 1u);
  EXPECT_EQ(r->threads, 1u);

  auto reader = trace::Reader::Open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const RecordingInfo& info = reader->info();
  EXPECT_EQ(info.argv, (std::vector<std::string>{"/bin/sh", "-c", "exit 3"}));
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(info.cwd, cwd);
  EXPECT_EQ(info.backend, "ebpf");  // the default where the kernel permits it
  EXPECT_EQ(info.arch, "x86_64");
  EXPECT_EQ(info.syscall_filter, "");
  EXPECT_EQ(info.max_buffer, 8u << 20);  // a quarter of the default 32 MiB ring
  EXPECT_NE(std::find(info.env.begin(), info.env.end(), "FAY_RECORD_TEST_MARK=a b=c"),
            info.env.end());
  EXPECT_GT(info.anchor_realtime_ns, 0u);

  uint64_t events = 0, other_pids = 0, execs = 0, exit_groups = 0;
  Status st = reader->ForEach([&](const SyscallEvent& ev) {
    ++events;
    other_pids += ev.pid != info.root_pid;
    execs += SyscallName(ev.nr) == "execve";
    if (SyscallName(ev.nr) == "exit_group") {
      ++exit_groups;
      EXPECT_EQ(ev.args[0], 3u);
      EXPECT_NE(ev.flags & kEventNoExit, 0u);
    }
    EXPECT_GE(ev.exit_ns == 0 ? ev.entry_ns : ev.exit_ns, ev.entry_ns);
  });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(events, r->syscalls);
  EXPECT_EQ(other_pids, 0u);
  EXPECT_EQ(execs, 1u);
  EXPECT_EQ(exit_groups, 1u);
  EXPECT_FALSE(reader->truncated());
}

TEST_F(RecordFile, FilteredRecordingRunsTheCommandAndKeepsOnlyTheSet) {
  if (geteuid() != 0) GTEST_SKIP() << "keep to root";
  RecordOptions o;
  o.output = path_;
  o.quiet = true;
  o.syscall_filter = "exit_group";
  o.argv = {"/bin/sh", "-c", "exit 5"};
  auto r = Record(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The command must run under the seccomp filter: 127 or 126 would mean it never got going.
  EXPECT_EQ(r->exit_code, 5);
  auto reader = trace::Reader::Open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ(reader->info().syscall_filter, "exit_group");
  std::vector<std::string> names;
  Status st =
      reader->ForEach([&](const SyscallEvent& ev) { names.emplace_back(SyscallName(ev.nr)); });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(names, std::vector<std::string>{"exit_group"});
}

TEST_F(RecordFile, UnwritableOutputIsAnErrorAndTheCommandNeverRuns) {
  RecordOptions o;
  o.output = dir_ + "/no-such-dir/t.fay";
  o.quiet = true;
  std::string marker = dir_ + "/ran";
  o.argv = {"/usr/bin/touch", marker};
  auto r = Record(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-dir/t.fay"), std::string::npos)
      << r.status().message();
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  unlink(marker.c_str());
}

}  // namespace
}  // namespace fay::record
