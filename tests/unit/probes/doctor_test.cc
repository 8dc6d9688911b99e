#include "probes/doctor.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace fay {
namespace {

const DoctorCheck* Find(const DoctorReport& r, const std::string& prefix) {
  for (const auto& c : r.checks)
    if (c.text.rfind(prefix, 0) == 0) return &c;
  return nullptr;
}

TEST(Doctor, ErrnoText) {
  EXPECT_EQ(ErrnoText(EPERM), "EPERM (Operation not permitted)");
  EXPECT_EQ(ErrnoText(ENOENT), "ENOENT (No such file or directory)");
}

// This project's machines: root, kernel with BTF, tracepoints/ringbuf/uprobes/ptrace allowed;
// kprobes, fentry and hardware counters refused.
TEST(Doctor, ReportsThisMachine) {
  DoctorReport r = RunDoctor();
  EXPECT_TRUE(r.ready());
  const DoctorCheck* kernel = Find(r, "kernel ");
  ASSERT_NE(kernel, nullptr);
  EXPECT_TRUE(kernel->ok);
  EXPECT_NE(kernel->text.find("with BTF (/sys/kernel/btf/vmlinux)"), std::string::npos);

  for (const char* required : {"tracefs mounted at ", "bpf(): tracepoint programs load and attach",
                               "ring buffer maps", "uprobes (perf uprobe PMU type "}) {
    const DoctorCheck* c = Find(r, required);
    ASSERT_NE(c, nullptr) << required;
    EXPECT_TRUE(c->ok) << c->text;
    EXPECT_TRUE(c->required) << c->text;
    EXPECT_TRUE(c->fix.empty());
  }
  const DoctorCheck* ptrace = Find(r, "ptrace");
  ASSERT_NE(ptrace, nullptr);
  EXPECT_TRUE(ptrace->ok);

  const DoctorCheck* kprobes = Find(r, "kprobes");
  ASSERT_NE(kprobes, nullptr);
  EXPECT_FALSE(kprobes->ok);
  EXPECT_FALSE(kprobes->required);
  EXPECT_EQ(kprobes->text,
            "kprobes: no kprobe PMU in /sys/bus/event_source/devices (kernel built without "
            "CONFIG_KPROBE_EVENTS)");
  EXPECT_EQ(kprobes->fix, "none needed: fay uses tracepoints and uprobes instead");

  const DoctorCheck* fentry = Find(r, "fentry/fexit");
  ASSERT_NE(fentry, nullptr);
  EXPECT_FALSE(fentry->ok);
  EXPECT_EQ(fentry->text.rfind("fentry/fexit: EPERM (Operation not permitted)", 0), 0u)
      << fentry->text;
  EXPECT_FALSE(fentry->fix.empty());

  const DoctorCheck* hw = Find(r, "hardware counters");
  ASSERT_NE(hw, nullptr);
  EXPECT_FALSE(hw->ok);
  EXPECT_FALSE(hw->fix.empty());
}

}  // namespace
}  // namespace fay
