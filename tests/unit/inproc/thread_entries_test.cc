// The per-thread entry store: the helpers' answers, the oldest record dropped when full, holes
// popped, and one thread's keys invisible to another.
#include "inproc/thread_entries.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>

#include <cerrno>
#include <cstdint>
#include <thread>

namespace fay::inproc {
namespace {

struct Key {
  uint64_t tid, sp;
};
constexpr uint32_t kKey = sizeof(Key), kValue = 24;
const int kMap = 0;  // its address stands for the map

uint64_t* Value(const Key& k) {
  return static_cast<uint64_t*>(ThreadEntries::Lookup(&kMap, &k, kKey, kValue));
}

TEST(ThreadEntries, AnswersAsTheMapHelpersDo) {
  const uint64_t v1[3] = {1, 2, 3}, v2[3] = {4, 5, 6};
  Key a{7, 100}, b{7, 200};
  EXPECT_EQ(Value(a), nullptr);
  EXPECT_EQ(ThreadEntries::Update(&kMap, &a, v1, BPF_EXIST, kKey, kValue), -ENOENT);
  EXPECT_EQ(ThreadEntries::Update(&kMap, &a, v1, BPF_ANY, kKey, kValue), 0);
  EXPECT_EQ(ThreadEntries::Update(&kMap, &a, v2, BPF_NOEXIST, kKey, kValue), -EEXIST);
  EXPECT_EQ(ThreadEntries::Update(&kMap, &b, v2, BPF_NOEXIST, kKey, kValue), 0);
  EXPECT_EQ(ThreadEntries::Update(&kMap, &a, v2, 7, kKey, kValue), -EINVAL);
  ASSERT_NE(Value(a), nullptr);
  EXPECT_EQ(Value(a)[2], 3u);
  EXPECT_EQ(Value(b)[0], 4u);
  // Another map's record under the same key is another record.
  const int other = 0;
  EXPECT_EQ(ThreadEntries::Lookup(&other, &a, kKey, kValue), nullptr);
  // Deleted out of order (a is below b): a hole, then both gone.
  EXPECT_EQ(ThreadEntries::Delete(&kMap, &a, kKey, kValue), 0);
  EXPECT_EQ(ThreadEntries::Delete(&kMap, &a, kKey, kValue), -ENOENT);
  EXPECT_EQ(Value(a), nullptr);
  EXPECT_EQ(Value(b)[0], 4u);
  EXPECT_EQ(ThreadEntries::Delete(&kMap, &b, kKey, kValue), 0);
  EXPECT_EQ(Value(b), nullptr);
}

TEST(ThreadEntries, WhenFullTheOldestGoes) {
  const uint32_t n = ThreadEntries::kCapacity + 10;
  for (uint64_t sp = 1; sp <= n; ++sp) {
    Key k{9, sp};
    const uint64_t v[3] = {sp, 0, 0};
    ASSERT_EQ(ThreadEntries::Update(&kMap, &k, v, BPF_ANY, kKey, kValue), 0);
  }
  for (uint64_t sp = 1; sp <= 10; ++sp) EXPECT_EQ(Value(Key{9, sp}), nullptr) << sp;
  // Returns in reverse order find every record still held.
  for (uint64_t sp = n; sp > 10; --sp) {
    Key k{9, sp};
    ASSERT_NE(Value(k), nullptr) << sp;
    EXPECT_EQ(Value(k)[0], sp);
    ASSERT_EQ(ThreadEntries::Delete(&kMap, &k, kKey, kValue), 0);
  }
}

TEST(ThreadEntries, AThreadSeesOnlyItsOwn) {
  Key k{11, 100};
  const uint64_t v[3] = {42, 0, 0};
  ASSERT_EQ(ThreadEntries::Update(&kMap, &k, v, BPF_ANY, kKey, kValue), 0);
  bool seen = true;
  std::thread([&] { seen = Value(k) != nullptr; }).join();
  EXPECT_FALSE(seen);
  EXPECT_EQ(Value(k)[0], 42u);
  EXPECT_EQ(ThreadEntries::Delete(&kMap, &k, kKey, kValue), 0);
}

}  // namespace
}  // namespace fay::inproc
