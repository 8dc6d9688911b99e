// Maps in shared memory with the kernel helpers' semantics, per slot where the kernel's are
// per CPU; and read back by fay's side as every slot's value of each key.
#include "inproc/shm_maps.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace fay::inproc {
namespace {

struct Region {
  std::vector<uint8_t> bytes;
  ShmMap map;
};

Region Make(MapShape shape, uint32_t slots) {
  auto n = ShmMap::BytesFor(shape, slots);
  EXPECT_TRUE(n.ok()) << n.status().message();
  Region r{std::vector<uint8_t>(*n), {}};
  auto m = ShmMap::Place(shape, slots, r.bytes);
  EXPECT_TRUE(m.ok()) << m.status().message();
  r.map = *m;
  return r;
}

TEST(ShmMap, HashUpdateLookupDeleteWithTheHelpersErrors) {
  Region r = Make({BPF_MAP_TYPE_HASH, 8, 16, 3}, 1);
  const ShmMap& m = r.map;
  uint64_t k1 = 1, k2 = 2, k3 = 3, k4 = 4;
  uint64_t v[2] = {10, 11};
  EXPECT_EQ(m.Lookup(&k1, 0), nullptr);
  EXPECT_EQ(m.Update(&k1, v, BPF_EXIST, 0), -ENOENT);
  EXPECT_EQ(m.Update(&k1, v, BPF_ANY, 0), 0);
  EXPECT_EQ(m.Update(&k1, v, BPF_NOEXIST, 0), -EEXIST);
  ASSERT_NE(m.Lookup(&k1, 0), nullptr);
  EXPECT_EQ(static_cast<uint64_t*>(m.Lookup(&k1, 0))[1], 11u);
  EXPECT_EQ(m.Update(&k2, v, BPF_ANY, 0), 0);
  EXPECT_EQ(m.Update(&k3, v, BPF_ANY, 0), 0);
  EXPECT_EQ(m.Update(&k4, v, BPF_ANY, 0), -E2BIG);  // max_entries 3, as the kernel counts
  EXPECT_EQ(m.Delete(&k2, 0), 0);
  EXPECT_EQ(m.Delete(&k2, 0), -ENOENT);
  EXPECT_EQ(m.Lookup(&k2, 0), nullptr);
  EXPECT_EQ(m.Update(&k4, v, BPF_ANY, 0), 0);  // room again
  ASSERT_NE(m.Lookup(&k3, 0), nullptr);        // found past the deleted entry
  std::map<uint64_t, int> seen;
  m.ForEach([&](const uint8_t* key, uint32_t, const uint8_t*) {
    uint64_t k;
    std::memcpy(&k, key, 8);
    ++seen[k];
  });
  EXPECT_EQ(seen, (std::map<uint64_t, int>{{1, 1}, {3, 1}, {4, 1}}));
}

TEST(ShmMap, PerSlotCopiesAreSeparateAndReadBackBySlot) {
  Region r = Make({BPF_MAP_TYPE_PERCPU_HASH, 4, 8, 16}, 4);
  const ShmMap& m = r.map;
  uint32_t key = 7;
  for (uint32_t s = 0; s < 4; ++s) {
    uint64_t v = 100 + s;
    EXPECT_EQ(m.Update(&key, &v, BPF_NOEXIST, s), 0);
  }
  EXPECT_EQ(*static_cast<uint64_t*>(m.Lookup(&key, 2)), 102u);
  EXPECT_EQ(m.Lookup(&key, 4), nullptr);  // no such slot
  uint64_t sum = 0;
  m.ForEach([&](const uint8_t*, uint32_t, const uint8_t* value) {
    uint64_t v;
    std::memcpy(&v, value, 8);
    sum += v;
  });
  EXPECT_EQ(sum, 100u + 101 + 102 + 103);

  Region a = Make({BPF_MAP_TYPE_PERCPU_ARRAY, 4, 24, 2}, 3);
  uint32_t i = 1, out_of_range = 2;
  EXPECT_NE(a.map.Lookup(&i, 2), nullptr);
  EXPECT_EQ(a.map.Lookup(&out_of_range, 0), nullptr);
  uint64_t v[3] = {1, 2, 3};
  EXPECT_EQ(a.map.Update(&i, v, BPF_NOEXIST, 0), -EEXIST);
  EXPECT_EQ(a.map.Delete(&i, 0), -EINVAL);
}

TEST(ShmMap, ThreadsAddingTheirOwnKeysAtOnceLoseNone) {
  Region r = Make({BPF_MAP_TYPE_HASH, 4, 8, 4096}, 1);
  const ShmMap& m = r.map;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 1000; ++i) {
        uint32_t key = t * 1000 + i;
        uint64_t v = key;
        EXPECT_EQ(m.Update(&key, &v, BPF_NOEXIST, 0), 0);
      }
    });
  for (auto& th : threads) th.join();
  uint64_t n = 0, sum = 0;
  m.ForEach([&](const uint8_t*, uint32_t, const uint8_t* value) {
    uint64_t v;
    std::memcpy(&v, value, 8);
    ++n;
    sum += v;
  });
  EXPECT_EQ(n, 4000u);
  EXPECT_EQ(sum, 4000u * 3999 / 2);
}

TEST(ShmMap, RefusesWhatItCannotHold) {
  EXPECT_FALSE(ShmMap::BytesFor({BPF_MAP_TYPE_RINGBUF, 0, 0, 4096}, 1).ok());
  EXPECT_FALSE(ShmMap::BytesFor({BPF_MAP_TYPE_ARRAY, 8, 8, 4}, 1).ok());
  std::vector<uint8_t> small(8);
  EXPECT_FALSE(ShmMap::Place({BPF_MAP_TYPE_HASH, 8, 8, 4}, 1, small).ok());
}

}  // namespace
}  // namespace fay::inproc
