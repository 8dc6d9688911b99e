// The in-process helpers answer as the kernel's do for the calling thread, and a bad pointer is
// an error, never a crash.
#include "inproc/helpers.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "inproc/shm_maps.h"

namespace fay::inproc {
namespace {

uint64_t Call(const Helpers& h, int id, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0,
              uint64_t a3 = 0) {
  const uint64_t args[5] = {a0, a1, a2, a3, 0};
  return h.fns[id](h.env, args);
}

TEST(RuntimeHelpers, IdsTimeAndCommOfTheCallingThread) {
  Helpers h = RuntimeHelpers();
  uint64_t pt = Call(h, BPF_FUNC_get_current_pid_tgid);
  EXPECT_EQ(pt >> 32, static_cast<uint64_t>(getpid()));
  EXPECT_EQ(pt & 0xffffffff, static_cast<uint64_t>(gettid()));
  uint64_t other = 0;
  std::thread([&] { other = Call(h, BPF_FUNC_get_current_pid_tgid); }).join();
  EXPECT_EQ(other >> 32, static_cast<uint64_t>(getpid()));
  EXPECT_NE(other & 0xffffffff, pt & 0xffffffff);
  EXPECT_EQ(Call(h, BPF_FUNC_get_current_uid_gid) & 0xffffffff, getuid());

  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec;
  uint64_t t = Call(h, BPF_FUNC_ktime_get_ns);
  EXPECT_GE(t, now);
  EXPECT_LT(t - now, 1000000000u);

  char comm[16] = {}, want[16] = {};
  prctl(PR_GET_NAME, want);
  EXPECT_EQ(Call(h, BPF_FUNC_get_current_comm, reinterpret_cast<uint64_t>(comm), sizeof comm), 0u);
  EXPECT_STREQ(comm, want);
}

TEST(RuntimeHelpers, AForkedChildSeesItsOwnIds) {
  Helpers h = RuntimeHelpers();
  (void)Call(h, BPF_FUNC_get_current_pid_tgid);  // cached in the parent
  pid_t child = fork();
  if (child == 0) {
    uint64_t pt = Call(h, BPF_FUNC_get_current_pid_tgid);
    _exit((pt >> 32) == static_cast<uint64_t>(getpid()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(RuntimeHelpers, UserReadsOfBadAddressesFailWithoutAFault) {
  Helpers h = RuntimeHelpers();
  uint64_t v = 0x1122334455667788, out = 1;
  EXPECT_EQ(Call(h, BPF_FUNC_probe_read_user, reinterpret_cast<uint64_t>(&out), 8,
                 reinterpret_cast<uint64_t>(&v)),
            0u);
  EXPECT_EQ(out, v);
  EXPECT_EQ(static_cast<int64_t>(
                Call(h, BPF_FUNC_probe_read_user, reinterpret_cast<uint64_t>(&out), 8, 16)),
            -EFAULT);
  EXPECT_EQ(out, 0u);  // zeroed, as the kernel's helper leaves it

  const char* s = "hello";
  char buf[8];
  EXPECT_EQ(Call(h, BPF_FUNC_probe_read_user_str, reinterpret_cast<uint64_t>(buf), sizeof buf,
                 reinterpret_cast<uint64_t>(s)),
            6u);
  EXPECT_STREQ(buf, "hello");
  char small[4];
  EXPECT_EQ(Call(h, BPF_FUNC_probe_read_user_str, reinterpret_cast<uint64_t>(small), sizeof small,
                 reinterpret_cast<uint64_t>(s)),
            4u);
  EXPECT_STREQ(small, "hel");
  EXPECT_EQ(static_cast<int64_t>(Call(h, BPF_FUNC_probe_read_user_str,
                                      reinterpret_cast<uint64_t>(buf), sizeof buf, 16)),
            -EFAULT);
}

TEST(RuntimeHelpers, MapHelpersUseTheThreadsSlot) {
  Helpers h = RuntimeHelpers();
  MapShape shape{BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1};
  std::vector<uint8_t> region(*ShmMap::BytesFor(shape, 2));
  ShmMap m = *ShmMap::Place(shape, 2, region);
  uint32_t key = 0;
  const uint64_t map = reinterpret_cast<uint64_t>(&m), k = reinterpret_cast<uint64_t>(&key);
  SetCurrentSlot(1);
  EXPECT_EQ(Call(h, BPF_FUNC_get_smp_processor_id), 1u);
  *reinterpret_cast<uint64_t*>(Call(h, BPF_FUNC_map_lookup_elem, map, k)) = 5;
  SetCurrentSlot(0);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(Call(h, BPF_FUNC_map_lookup_elem, map, k)), 0u);
  uint64_t v = 9;
  EXPECT_EQ(Call(h, BPF_FUNC_map_update_elem, map, k, reinterpret_cast<uint64_t>(&v), BPF_ANY), 0u);
  EXPECT_EQ(*static_cast<uint64_t*>(m.Lookup(&key, 0)), 9u);
  EXPECT_EQ(*static_cast<uint64_t*>(m.Lookup(&key, 1)), 5u);
}

}  // namespace
}  // namespace fay::inproc
