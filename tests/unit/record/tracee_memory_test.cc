// ProcessVmMemory reads another process's memory: whole ranges, ranges that run into an unmapped
// page (the mapped part comes back), and ranges that start unmapped (nothing comes back).
#include "record/tracee_memory.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace fay::record {
namespace {

// A child with two pages mapped at `base`, the first filled with i * 7 + 1, the second unmapped
// again; it waits until killed.
class TwoPageChild : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      close(p[0]);
      void* m =
          mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) _exit(1);
      auto* b = static_cast<uint8_t*>(m);
      for (size_t i = 0; i < 2 * page_; ++i) b[i] = static_cast<uint8_t>(i * 7 + 1);
      if (munmap(b + page_, page_) != 0) _exit(2);
      uint64_t addr = reinterpret_cast<uintptr_t>(b);
      if (write(p[1], &addr, sizeof addr) != sizeof addr) _exit(3);
      for (;;) pause();
    }
    close(p[1]);
    ASSERT_EQ(read(p[0], &base_, sizeof base_), static_cast<ssize_t>(sizeof base_));
    close(p[0]);
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  static uint8_t Expect(size_t i) { return static_cast<uint8_t>(i * 7 + 1); }

  size_t page_ = 0;
  pid_t pid_ = -1;
  uint64_t base_ = 0;
};

TEST_F(TwoPageChild, ReadsAWholeMappedRange) {
  ProcessVmMemory mem(pid_);
  std::vector<uint8_t> buf(page_, 0);
  ASSERT_EQ(mem.Read(base_, buf.data(), page_), page_);
  for (size_t i = 0; i < page_; ++i) ASSERT_EQ(buf[i], Expect(i)) << i;
  uint8_t mid[10] = {};
  ASSERT_EQ(mem.Read(base_ + 100, mid, sizeof mid), sizeof mid);
  for (size_t i = 0; i < sizeof mid; ++i) EXPECT_EQ(mid[i], Expect(100 + i));
}

TEST_F(TwoPageChild, ARangeRunningIntoAnUnmappedPageStopsThere) {
  ProcessVmMemory mem(pid_);
  std::vector<uint8_t> buf(2 * page_, 0xee);
  ASSERT_EQ(mem.Read(base_, buf.data(), buf.size()), page_);
  for (size_t i = 0; i < page_; ++i) ASSERT_EQ(buf[i], Expect(i)) << i;
  EXPECT_EQ(buf[page_], 0xee) << "nothing written past what was read";
  // 96 bytes before the boundary, 104 after it.
  std::vector<uint8_t> small(200, 0xee);
  ASSERT_EQ(mem.Read(base_ + page_ - 96, small.data(), small.size()), 96u);
  for (size_t i = 0; i < 96; ++i) EXPECT_EQ(small[i], Expect(page_ - 96 + i));
}

TEST_F(TwoPageChild, ARangeStartingUnmappedReadsNothing) {
  ProcessVmMemory mem(pid_);
  uint8_t buf[64];
  EXPECT_EQ(mem.Read(base_ + page_, buf, sizeof buf), 0u);
  EXPECT_EQ(mem.Read(base_ + page_ + 5, buf, 1), 0u);
}

TEST_F(TwoPageChild, NullAddressAndZeroLengthReadNothing) {
  ProcessVmMemory mem(pid_);
  uint8_t buf[8];
  EXPECT_EQ(mem.Read(0, buf, sizeof buf), 0u);
  EXPECT_EQ(mem.Read(base_, buf, 0), 0u);
}

TEST(ProcessVmMemory, AProcessThatIsGoneReadsNothing) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(0);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  static const char text[] = "gone";
  ProcessVmMemory mem(pid);
  char buf[8];
  EXPECT_EQ(mem.Read(reinterpret_cast<uintptr_t>(text), buf, sizeof text), 0u);
}

}  // namespace
}  // namespace fay::record
