#include "bpf/map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include <bpf/bpf.h>

#include "bpf/stack_map.h"
#include "bpf_test_util.h"

namespace fay::bpf {
namespace {

TEST(Map, PossibleCpusMatchesSysfs) {
  // /sys/devices/system/cpu/possible is "0-N" on this class of machine.
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string s;
  in >> s;
  int expect = s.find('-') == std::string::npos ? 1 : std::stoi(s.substr(s.find('-') + 1)) + 1;
  EXPECT_EQ(PossibleCpus(), expect);
}

TEST(Map, HashUpdateLookupDelete) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_HASH, "t_hash", 8, 16, 64);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_GE(m->fd(), 0);
  EXPECT_EQ(m->type(), BPF_MAP_TYPE_HASH);
  EXPECT_EQ(m->key_size(), 8u);
  EXPECT_EQ(m->value_size(), 16u);
  EXPECT_EQ(m->max_entries(), 64u);
  EXPECT_FALSE(m->per_cpu());
  EXPECT_EQ(m->lookup_size(), 16u);

  uint64_t key = 42;
  uint64_t val[2] = {7, 9};
  ASSERT_TRUE(m->Update(&key, val).ok());
  uint64_t got[2] = {};
  ASSERT_TRUE(m->Lookup(&key, got).ok());
  EXPECT_EQ(got[0], 7u);
  EXPECT_EQ(got[1], 9u);

  uint64_t missing = 43;
  EXPECT_EQ(m->Lookup(&missing, got).code(), Code::kNotFound);
  EXPECT_EQ(m->Delete(&missing).code(), Code::kNotFound);
  // BPF_NOEXIST on an existing key is refused.
  EXPECT_FALSE(m->Update(&key, val, BPF_NOEXIST).ok());
  ASSERT_TRUE(m->Delete(&key).ok());
  EXPECT_EQ(m->Lookup(&key, got).code(), Code::kNotFound);
}

TEST(Map, UpdateBatchWritesEveryEntry) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_ARRAY, "t_batch", 4, 12, 8);
  ASSERT_TRUE(m.ok()) << m.status().message();
  uint32_t keys[3] = {1, 4, 7};
  uint32_t vals[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  ASSERT_TRUE(m->UpdateBatch(keys, vals, 3).ok());
  for (int i = 0; i < 3; ++i) {
    uint32_t got[3] = {};
    ASSERT_TRUE(m->Lookup(&keys[i], got).ok());
    EXPECT_EQ(got[0], vals[i][0]);
    EXPECT_EQ(got[2], vals[i][2]);
  }
  uint32_t untouched = 2, got[3] = {9, 9, 9};
  ASSERT_TRUE(m->Lookup(&untouched, got).ok());
  EXPECT_EQ(got[1], 0u);
  // A key past max_entries fails the whole call, with the map's name.
  uint32_t bad = 8;
  Status st = m->UpdateBatch(&bad, vals[0], 1);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("t_batch"), std::string::npos) << st.message();
}

TEST(Map, KeysAndClearOnHash) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_HASH, "t_keys", 4, 8, 256);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (uint32_t k = 0; k < 100; ++k) {
    uint64_t v = k * 10;
    ASSERT_TRUE(m->Update(&k, &v).ok());
  }
  auto keys = m->Keys();
  ASSERT_EQ(keys.size(), 100u);
  std::vector<uint32_t> ks;
  for (const auto& k : keys) {
    ASSERT_EQ(k.size(), 4u);
    uint32_t v;
    std::memcpy(&v, k.data(), 4);
    ks.push_back(v);
  }
  std::sort(ks.begin(), ks.end());
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(ks[i], i);

  for (uint32_t k = 0; k < 100; k += 2) ASSERT_TRUE(m->Delete(&k).ok());
  EXPECT_EQ(m->Keys().size(), 50u);

  ASSERT_TRUE(m->Clear().ok());
  EXPECT_EQ(m->Keys().size(), 0u);
}

TEST(Map, KeysAfterADeleteAreExact) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_HASH, "t_churn", 4, 8, 64);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (uint32_t k = 0; k < 32; ++k) {
    uint64_t v = 0;
    ASSERT_TRUE(m->Update(&k, &v).ok());
  }
  auto keys = m->Keys();
  ASSERT_EQ(keys.size(), 32u);
  std::vector<uint8_t> cursor = keys[5];
  ASSERT_TRUE(m->Delete(cursor.data()).ok());
  auto after = m->Keys();
  EXPECT_EQ(after.size(), 31u);
  std::sort(after.begin(), after.end());
  EXPECT_EQ(std::adjacent_find(after.begin(), after.end()), after.end());
}

TEST(Map, KeysUnderConcurrentChurnAreDistinctAndReal) {
  FAY_SKIP_WITHOUT_BPF();
  // Keys 0..63 are stable; keys 1000..1063 are deleted and re-inserted by another thread
  // while we iterate. Iteration must end, and never report a key twice or one never inserted.
  auto m = Map::Create(BPF_MAP_TYPE_HASH, "t_race", 4, 8, 256);
  ASSERT_TRUE(m.ok()) << m.status().message();
  uint64_t v = 0;
  for (uint32_t k = 0; k < 64; ++k) ASSERT_TRUE(m->Update(&k, &v).ok());
  std::atomic<bool> stop{false};
  int fd = m->fd();
  std::thread churn([&] {
    while (!stop.load()) {
      for (uint32_t k = 1000; k < 1064; ++k) bpf_map_update_elem(fd, &k, &v, BPF_ANY);
      for (uint32_t k = 1000; k < 1064; ++k) bpf_map_delete_elem(fd, &k);
    }
  });
  for (int round = 0; round < 200; ++round) {
    auto keys = m->Keys();
    std::set<std::vector<uint8_t>> uniq(keys.begin(), keys.end());
    ASSERT_EQ(uniq.size(), keys.size());
    for (const auto& k : keys) {
      uint32_t x;
      std::memcpy(&x, k.data(), 4);
      ASSERT_TRUE(x < 64 || (x >= 1000 && x < 1064)) << x;
    }
  }
  stop = true;
  churn.join();
}

TEST(Map, DumpHashReturnsEveryEntry) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_HASH, "t_dump", 4, 8, 8192);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto empty = m->Dump();
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->size(), 0u);
  for (uint32_t k = 0; k < 5000; ++k) {
    uint64_t v = k * 3 + 1;
    ASSERT_TRUE(m->Update(&k, &v).ok());
  }
  auto d = m->Dump();
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 5000u);
  std::set<uint32_t> seen;
  for (const auto& e : *d) {
    ASSERT_EQ(e.key.size(), 4u);
    ASSERT_EQ(e.value.size(), 8u);
    uint32_t k;
    uint64_t v;
    std::memcpy(&k, e.key.data(), 4);
    std::memcpy(&v, e.value.data(), 8);
    EXPECT_EQ(v, k * 3 + 1);
    seen.insert(k);
  }
  EXPECT_EQ(seen.size(), 5000u);
}

TEST(Map, DumpPerCpuAndArrayAndStackMaps) {
  FAY_SKIP_WITHOUT_BPF();
  const int ncpu = PossibleCpus();
  auto pc = Map::Create(BPF_MAP_TYPE_PERCPU_HASH, "t_dumppc", 8, 4, 16);
  ASSERT_TRUE(pc.ok()) << pc.status().message();
  std::vector<uint8_t> val(pc->lookup_size(), 0);
  for (int c = 0; c < ncpu; ++c) val[c * 8] = static_cast<uint8_t>(c + 1);
  uint64_t key = 9;
  ASSERT_TRUE(pc->Update(&key, val.data()).ok());
  auto d = pc->Dump();
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].value, val);

  auto arr = Map::Create(BPF_MAP_TYPE_ARRAY, "t_dumparr", 4, 8, 5);
  ASSERT_TRUE(arr.ok());
  uint32_t k = 4;
  uint64_t v = 44;
  ASSERT_TRUE(arr->Update(&k, &v).ok());
  auto da = arr->Dump();
  ASSERT_TRUE(da.ok()) << da.status().message();
  ASSERT_EQ(da->size(), 5u);
  std::memcpy(&v, (*da)[4].value.data(), 8);
  EXPECT_EQ(v, 44u);

  // Stack maps have no batch interface: the fallback path answers.
  auto st = CreateStackMap("t_dumpst", 16);
  ASSERT_TRUE(st.ok());
  auto ds = st->Dump();
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->size(), 0u);
}

TEST(Map, ArrayClearZeroes) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_ARRAY, "t_array", 4, 8, 4);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (uint32_t k = 0; k < 4; ++k) {
    uint64_t v = 100 + k;
    ASSERT_TRUE(m->Update(&k, &v).ok());
  }
  uint32_t k = 3;
  uint64_t v = 0;
  ASSERT_TRUE(m->Lookup(&k, &v).ok());
  EXPECT_EQ(v, 103u);
  EXPECT_EQ(m->Keys().size(), 4u);
  ASSERT_TRUE(m->Clear().ok());
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(m->Lookup(&i, &v).ok());
    EXPECT_EQ(v, 0u);
  }
}

TEST(Map, PerCpuHashSlices) {
  FAY_SKIP_WITHOUT_BPF();
  // value_size 12 exercises the kernel's 8-byte rounding of per-CPU slots.
  auto m = Map::Create(BPF_MAP_TYPE_PERCPU_HASH, "t_pchash", 4, 12, 16);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->per_cpu());
  const int ncpu = PossibleCpus();
  ASSERT_EQ(m->lookup_size(), static_cast<size_t>(ncpu) * 16);
  std::vector<uint8_t> buf(m->lookup_size(), 0);
  for (int c = 0; c < ncpu; ++c) {
    uint32_t a = 1000 + c, b = 2000 + c, z = 3000 + c;
    std::memcpy(&buf[c * 16], &a, 4);
    std::memcpy(&buf[c * 16 + 4], &b, 4);
    std::memcpy(&buf[c * 16 + 8], &z, 4);
  }
  uint32_t key = 1;
  ASSERT_TRUE(m->Update(&key, buf.data()).ok());
  auto slices = m->LookupPerCpu(&key);
  ASSERT_TRUE(slices.ok()) << slices.status().message();
  ASSERT_EQ(slices->size(), static_cast<size_t>(ncpu));
  for (int c = 0; c < ncpu; ++c) {
    ASSERT_EQ((*slices)[c].size(), 12u);
    uint32_t w[3];
    std::memcpy(w, (*slices)[c].data(), 12);
    EXPECT_EQ(w[0], 1000u + c);
    EXPECT_EQ(w[1], 2000u + c);
    EXPECT_EQ(w[2], 3000u + c);
  }
  uint32_t absent = 2;
  EXPECT_EQ(m->LookupPerCpu(&absent).status().code(), Code::kNotFound);
}

TEST(Map, PerCpuArraySlicesAndClear) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_PERCPU_ARRAY, "t_pcarr", 4, 8, 2);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->per_cpu());
  const int ncpu = PossibleCpus();
  std::vector<uint64_t> vals(ncpu);
  for (int c = 0; c < ncpu; ++c) vals[c] = 5 * (c + 1);
  uint32_t key = 1;
  ASSERT_TRUE(m->Update(&key, vals.data()).ok());
  auto slices = m->LookupPerCpu(&key);
  ASSERT_TRUE(slices.ok());
  ASSERT_EQ(slices->size(), static_cast<size_t>(ncpu));
  uint64_t sum = 0;
  for (const auto& s : *slices) {
    uint64_t v;
    std::memcpy(&v, s.data(), 8);
    sum += v;
  }
  EXPECT_EQ(sum, 5u * ncpu * (ncpu + 1) / 2);
  ASSERT_TRUE(m->Clear().ok());
  slices = m->LookupPerCpu(&key);
  ASSERT_TRUE(slices.ok());
  for (const auto& s : *slices) EXPECT_EQ(s, std::vector<uint8_t>(8, 0));
}

TEST(Map, NonPerCpuLookupPerCpuIsOneSlice) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_ARRAY, "t_one", 4, 8, 1);
  ASSERT_TRUE(m.ok());
  uint32_t key = 0;
  uint64_t v = 77;
  ASSERT_TRUE(m->Update(&key, &v).ok());
  auto slices = m->LookupPerCpu(&key);
  ASSERT_TRUE(slices.ok());
  ASSERT_EQ(slices->size(), 1u);
  uint64_t got;
  std::memcpy(&got, (*slices)[0].data(), 8);
  EXPECT_EQ(got, 77u);
}

TEST(Map, RingbufAndStackTraceCreate) {
  FAY_SKIP_WITHOUT_BPF();
  auto rb = Map::Create(BPF_MAP_TYPE_RINGBUF, "t_ring", 0, 0, 1 << 16);
  ASSERT_TRUE(rb.ok()) << rb.status().message();
  EXPECT_GE(rb->fd(), 0);
  auto st = CreateStackMap("t_stacks", 128);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->type(), BPF_MAP_TYPE_STACK_TRACE);
  EXPECT_EQ(st->value_size(), kMaxStackDepth * 8);
  EXPECT_EQ(ReadStack(*st, 3).status().code(), Code::kNotFound);
}

TEST(Map, CreateFailureIsReported) {
  FAY_SKIP_WITHOUT_BPF();
  // A ring buffer size that is not a power-of-two page multiple is invalid.
  auto rb = Map::Create(BPF_MAP_TYPE_RINGBUF, "t_bad", 0, 0, 1000);
  ASSERT_FALSE(rb.ok());
  EXPECT_EQ(rb.status().code(), Code::kInvalidArgument);
  EXPECT_NE(rb.status().message().find("cannot create BPF map t_bad"), std::string::npos)
      << rb.status().message();
}

TEST(Map, MoveLeavesSourceEmptyAndLongNamesAreAccepted) {
  FAY_SKIP_WITHOUT_BPF();
  auto m = Map::Create(BPF_MAP_TYPE_ARRAY, "a name:with-odd chars and far too long", 4, 8, 1);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Map a = std::move(*m);
  EXPECT_EQ(m->fd(), -1);
  int fd = a.fd();
  Map b;
  b = std::move(a);
  EXPECT_EQ(a.fd(), -1);
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(b.name(), "a name:with-odd chars and far too long");
}

}  // namespace
}  // namespace fay::bpf
