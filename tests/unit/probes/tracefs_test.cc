#include "probes/tracefs.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace fay {
namespace {

// Copied from /sys/kernel/tracing/events/syscalls/sys_enter_openat/format (Linux 6.18).
constexpr const char* kOpenatFormat = R"(name: sys_enter_openat
ID: 782
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:int __syscall_nr;	offset:8;	size:4;	signed:1;
	field:int dfd;	offset:16;	size:8;	signed:0;
	field:const char * filename;	offset:24;	size:8;	signed:0;
	field:int flags;	offset:32;	size:8;	signed:0;
	field:umode_t mode;	offset:40;	size:8;	signed:0;

print fmt: "dfd: 0x%08lx, filename: 0x%08lx, flags: 0x%08lx, mode: 0x%08lx", ((unsigned long)(REC->dfd)), ((unsigned long)(REC->filename)), ((unsigned long)(REC->flags)), ((unsigned long)(REC->mode))
)";

// events/sched/sched_switch/format.
constexpr const char* kSchedSwitchFormat = R"(name: sched_switch
ID: 372
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:char prev_comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t prev_pid;	offset:24;	size:4;	signed:1;
	field:int prev_prio;	offset:28;	size:4;	signed:1;
	field:long prev_state;	offset:32;	size:8;	signed:1;
	field:char next_comm[16];	offset:40;	size:16;	signed:0;
	field:pid_t next_pid;	offset:56;	size:4;	signed:1;
	field:int next_prio;	offset:60;	size:4;	signed:1;

print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio
)";

// events/sched/sched_process_fork/format: __data_loc strings.
constexpr const char* kForkFormat = R"(name: sched_process_fork
ID: 366
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] parent_comm;	offset:8;	size:4;	signed:0;
	field:pid_t parent_pid;	offset:12;	size:4;	signed:1;
	field:__data_loc char[] child_comm;	offset:16;	size:4;	signed:0;
	field:pid_t child_pid;	offset:20;	size:4;	signed:1;

print fmt: "comm=%s pid=%d child_comm=%s child_pid=%d", __get_str(parent_comm), REC->parent_pid, __get_str(child_comm), REC->child_pid
)";

TEST(EventFormat, ParsesSyscallEnter) {
  auto ev = ParseEventFormat(kOpenatFormat);
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  EXPECT_EQ(ev->name, "sys_enter_openat");
  EXPECT_EQ(ev->id, 782);
  ASSERT_EQ(ev->fields.size(), 9u);
  EXPECT_EQ(ev->fields[0].name, "common_type");
  EXPECT_EQ(ev->fields[0].c_type, "unsigned short");
  EXPECT_EQ(ev->fields[0].size, 2);
  EXPECT_TRUE(ev->fields[0].is_common());
  EXPECT_EQ(ev->fields[3].name, "common_pid");
  EXPECT_TRUE(ev->fields[3].is_signed);

  const FormatField& filename = ev->fields[6];
  EXPECT_EQ(filename.name, "filename");
  EXPECT_EQ(filename.c_type, "const char *");
  EXPECT_EQ(filename.offset, 24);
  EXPECT_EQ(filename.size, 8);
  EXPECT_FALSE(filename.is_signed);
  EXPECT_FALSE(filename.is_data_loc);
  EXPECT_EQ(filename.array_len, -1);
  EXPECT_FALSE(filename.is_common());

  EXPECT_EQ(ev->fields[8].name, "mode");
  EXPECT_EQ(ev->fields[8].c_type, "umode_t");
  EXPECT_EQ(ev->fields[8].offset, 40);
}

TEST(EventFormat, ParsesCharArrays) {
  auto ev = ParseEventFormat(kSchedSwitchFormat);
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  EXPECT_EQ(ev->id, 372);
  ASSERT_EQ(ev->fields.size(), 11u);
  const FormatField& prev_comm = ev->fields[4];
  EXPECT_EQ(prev_comm.name, "prev_comm");
  EXPECT_EQ(prev_comm.c_type, "char");
  EXPECT_EQ(prev_comm.array_len, 16);
  EXPECT_EQ(prev_comm.offset, 8);
  EXPECT_EQ(prev_comm.size, 16);
  EXPECT_EQ(ev->fields[7].name, "prev_state");
  EXPECT_EQ(ev->fields[7].c_type, "long");
  EXPECT_EQ(ev->fields[7].size, 8);
  EXPECT_TRUE(ev->fields[7].is_signed);
  EXPECT_EQ(ev->fields[10].name, "next_prio");
  EXPECT_EQ(ev->fields[10].offset, 60);
}

TEST(EventFormat, ParsesDataLoc) {
  auto ev = ParseEventFormat(kForkFormat);
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  ASSERT_EQ(ev->fields.size(), 8u);
  const FormatField& parent_comm = ev->fields[4];
  EXPECT_EQ(parent_comm.name, "parent_comm");
  EXPECT_TRUE(parent_comm.is_data_loc);
  EXPECT_EQ(parent_comm.c_type, "__data_loc char[]");
  EXPECT_EQ(parent_comm.array_len, 0);
  EXPECT_EQ(parent_comm.offset, 8);
  EXPECT_EQ(parent_comm.size, 4);
  EXPECT_EQ(ev->fields[7].name, "child_pid");
  EXPECT_EQ(ev->fields[7].c_type, "pid_t");
  EXPECT_FALSE(ev->fields[7].is_data_loc);
}

TEST(EventFormat, ArrayOfNumbers) {
  auto ev = ParseEventFormat(
      "name: sys_enter\nID: 20\nformat:\n"
      "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n"
      "\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n");
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->fields.size(), 2u);
  EXPECT_EQ(ev->fields[1].name, "args");
  EXPECT_EQ(ev->fields[1].c_type, "unsigned long");
  EXPECT_EQ(ev->fields[1].array_len, 6);
  EXPECT_EQ(ev->fields[1].size, 48);
}

TEST(EventFormat, RejectsMalformed) {
  EXPECT_EQ(ParseEventFormat("name: x\nformat:\n").status().code(), Code::kIo);  // no ID
  EXPECT_EQ(ParseEventFormat("name: x\nID: 1\n\tfield:int;\toffset:8;\tsize:4;\n").status().code(),
            Code::kIo);
  EXPECT_EQ(ParseEventFormat("name: x\nID: 1\n\tfield:int a;\tsize:4;\n").status().code(),
            Code::kIo);  // no offset
  EXPECT_EQ(ParseEventFormat("").status().code(), Code::kIo);
}

TEST(Tracefs, EnsureMountsAndLists) {
  // Tests run as root, so this mounts tracefs when it is missing.
  ASSERT_TRUE(EnsureTracefs().ok());
  auto root = FindTracefs();
  ASSERT_TRUE(root.has_value());
  auto categories = ListEventCategories(*root);
  ASSERT_TRUE(categories.ok()) << categories.status().message();
  EXPECT_TRUE(std::binary_search(categories->begin(), categories->end(), "syscalls"));
  EXPECT_TRUE(std::binary_search(categories->begin(), categories->end(), "sched"));
  auto events = ListEvents(*root, "sched");
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(std::binary_search(events->begin(), events->end(), "sched_switch"));
  EXPECT_TRUE(std::is_sorted(events->begin(), events->end()));

  auto live = ReadEventFormat(*root, "sched", "sched_switch");
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_EQ(live->name, "sched_switch");
  EXPECT_GT(live->id, 0);
  EXPECT_EQ(ReadEventFormat(*root, "sched", "no_such_event").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace fay

namespace fay {
namespace {

// Runs fn in a child with a private mount namespace where tracefs is unmounted; returns its exit
// status (0 on success) so the real mount that other tests use is never touched.
int InUnmountedNamespace(int (*fn)()) {
  pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNS) != 0) _exit(100);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(101);
    // debugfs mounts tracefs again at debug/tracing whenever it is looked at: it goes first.
    (void)umount2("/sys/kernel/debug", MNT_DETACH);
    for (int tries = 0; auto root = FindTracefs(); ++tries) {
      if (tries == 16 || umount2(root->c_str(), MNT_DETACH) != 0) _exit(102);
    }
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST(Tracefs, MountsWhenRoot) {
  int rc = InUnmountedNamespace([] {
    if (FindTracefs()) return 1;
    if (!EnsureTracefs().ok()) return 2;
    auto root = FindTracefs();
    if (!root || *root != "/sys/kernel/tracing") return 3;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Tracefs, PrintsTheFixWhenNotRoot) {
  int rc = InUnmountedNamespace([] {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 10;
    Status st = EnsureTracefs();
    if (st.code() != Code::kPermission) return 1;
    if (st.message().find("sudo mount -t tracefs nodev /sys/kernel/tracing") == std::string::npos)
      return 2;
    if (TracefsRoot().status().code() != Code::kPermission) return 3;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace fay
