#include <gtest/gtest.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bpf/attach.h"
#include "bpf/map.h"
#include "bpf_test_util.h"

// Probed by the tests below; noinline and an opaque body keep every call a real call.
extern "C" __attribute__((noinline)) int fay_uprobe_target(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

namespace fay::bpf {
namespace {

struct Location {
  std::string path;
  uint64_t offset = 0;
};

// The file and file offset backing `addr`, from /proc/self/maps.
Location FileOffsetOf(const void* addr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uint64_t>(addr);
  while (std::getline(maps, line)) {
    uint64_t lo = 0, hi = 0, off = 0;
    char perms[8] = {}, path[4096] = {};
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %4095s", &lo,
                    &hi, perms, &off, path) < 4)
      continue;
    if (a >= lo && a < hi && path[0] == '/') return {path, a - lo + off};
  }
  return {};
}

int (*volatile target)(int) = fay_uprobe_target;

void CountCalls(bool retprobe, int pid_filter) {
  auto counter = Map::Create(BPF_MAP_TYPE_PERCPU_ARRAY, "t_up", 4, 8, 1);
  ASSERT_TRUE(counter.ok()) << counter.status().message();
  auto prog = Program::Load(
      testing::CounterProgram(BPF_PROG_TYPE_KPROBE, retprobe ? "uret_count" : "up_count", getpid()),
      {counter->fd()});
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  Location loc = FileOffsetOf(reinterpret_cast<const void*>(&fay_uprobe_target));
  ASSERT_FALSE(loc.path.empty()) << "fay_uprobe_target is not in a file mapping";
  int sum = 0;
  {
    auto link = AttachUprobe(*prog, loc.path, loc.offset, retprobe, pid_filter);
    ASSERT_TRUE(link.ok()) << link.status().message();
    for (int i = 0; i < 321; ++i) sum += target(i);
  }
  EXPECT_EQ(sum, 321 * 322 / 2);
  EXPECT_EQ(testing::SumCounter(*counter), 321u);
  for (int i = 0; i < 10; ++i) target(i);
  EXPECT_EQ(testing::SumCounter(*counter), 321u);
}

TEST(Uprobe, CountsExactCallsOfThisProcess) {
  FAY_SKIP_WITHOUT_BPF();
  CountCalls(false, getpid());
}

TEST(Uprobe, RetprobeCountsExactReturnsSystemWide) {
  FAY_SKIP_WITHOUT_BPF();
  CountCalls(true, -1);
}

}  // namespace
}  // namespace fay::bpf
