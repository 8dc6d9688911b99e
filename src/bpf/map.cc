#include "bpf/map.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <unistd.h>

#include "common/privileges.h"

namespace fay::bpf {

Status BpfError(const std::string& what, int err) {
  Status st = ErrnoError(what, err);
  if (err == EPERM || err == EACCES) {
    st = Status(Code::kPermission, st.message());
    st.Append(PrivilegeFix());
  }
  return st;
}

int PossibleCpus() {
  static const int n = [] {
    int r = libbpf_num_possible_cpus();
    return r > 0 ? r : 1;
  }();
  return n;
}

namespace {

size_t RoundUp8(size_t n) {
  return (n + 7) & ~size_t{7};
}

bool IsArray(bpf_map_type t) {
  return t == BPF_MAP_TYPE_ARRAY || t == BPF_MAP_TYPE_PERCPU_ARRAY;
}

// The kernel accepts at most 15 characters from [A-Za-z0-9_.] in object names.
std::string KernelName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (out.size() == BPF_OBJ_NAME_LEN - 1) break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    out += ok ? c : '_';
  }
  return out;
}

}  // namespace

Expected<Map> Map::Create(bpf_map_type type, const std::string& name, uint32_t key_size,
                          uint32_t value_size, uint32_t max_entries, uint32_t flags) {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);
  std::string kname = KernelName(name);
  int fd = bpf_map_create(type, kname.c_str(), key_size, value_size, max_entries, &opts);
  if (fd < 0) {
    int err = errno;
    return BpfError(
        fmt::format("cannot create BPF map {} (type {}, key {} B, value {} B, {} entries)", name,
                    static_cast<int>(type), key_size, value_size, max_entries),
        err);
  }
  Map m;
  m.fd_.reset(fd);
  m.type_ = type;
  m.name_ = name;
  m.key_size_ = key_size;
  m.value_size_ = value_size;
  m.max_entries_ = max_entries;
  return m;
}

bool Map::per_cpu() const {
  return type_ == BPF_MAP_TYPE_PERCPU_HASH || type_ == BPF_MAP_TYPE_PERCPU_ARRAY ||
         type_ == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

size_t Map::lookup_size() const {
  return per_cpu() ? PossibleCpus() * RoundUp8(value_size_) : value_size_;
}

Status Map::Update(const void* key, const void* value, uint64_t flags) {
  if (bpf_map_update_elem(fd(), key, value, flags) != 0)
    return BpfError(fmt::format("cannot update BPF map {}", name_), errno);
  return Status::Ok();
}

Status Map::UpdateBatch(const void* keys, const void* values, uint32_t count) {
  uint32_t n = count;
  if (bpf_map_update_batch(fd(), keys, values, &n, nullptr) == 0 && n == count) return Status::Ok();
  for (uint32_t i = 0; i < count; ++i) {
    FAY_RETURN_IF_ERROR(Update(static_cast<const uint8_t*>(keys) + size_t{i} * key_size_,
                               static_cast<const uint8_t*>(values) + size_t{i} * value_size_));
  }
  return Status::Ok();
}

Status Map::Delete(const void* key) {
  if (bpf_map_delete_elem(fd(), key) != 0) {
    int err = errno;
    if (err == ENOENT) return Error(Code::kNotFound, fmt::format("key not in BPF map {}", name_));
    return BpfError(fmt::format("cannot delete from BPF map {}", name_), err);
  }
  return Status::Ok();
}

Status Map::Lookup(const void* key, void* value) const {
  if (bpf_map_lookup_elem(fd(), key, value) != 0) {
    int err = errno;
    if (err == ENOENT) return Error(Code::kNotFound, fmt::format("key not in BPF map {}", name_));
    return BpfError(fmt::format("cannot look up BPF map {}", name_), err);
  }
  return Status::Ok();
}

std::vector<std::vector<uint8_t>> Map::Keys() const {
  std::vector<std::vector<uint8_t>> keys;
  if (key_size_ == 0) return keys;
  // When the key we continue from is deleted concurrently, a hash map restarts iteration from
  // its first bucket. Remembering what we have seen keeps the result duplicate-free, and the
  // step bound guarantees termination under any amount of churn.
  std::set<std::vector<uint8_t>> seen;
  std::vector<uint8_t> cur(key_size_), next(key_size_);
  const void* prev = nullptr;
  size_t budget = 4 * static_cast<size_t>(max_entries_) + 64;
  while (budget-- > 0) {
    if (bpf_map_get_next_key(fd(), prev, next.data()) != 0) break;
    if (seen.insert(next).second) keys.push_back(next);
    cur.swap(next);
    prev = cur.data();
  }
  return keys;
}

Expected<std::vector<std::vector<uint8_t>>> Map::LookupPerCpu(const void* key) const {
  std::vector<uint8_t> buf(lookup_size());
  FAY_RETURN_IF_ERROR(Lookup(key, buf.data()));
  std::vector<std::vector<uint8_t>> slices;
  if (!per_cpu()) {
    slices.push_back(std::move(buf));
    return slices;
  }
  size_t stride = RoundUp8(value_size_);
  slices.reserve(PossibleCpus());
  for (int cpu = 0; cpu < PossibleCpus(); ++cpu) {
    const uint8_t* p = buf.data() + cpu * stride;
    slices.emplace_back(p, p + value_size_);
  }
  return slices;
}

Expected<std::vector<Map::Entry>> Map::Dump() const {
  std::vector<Entry> out;
  const size_t vsize = lookup_size();
  if (key_size_ == 0) return out;
  // The batch cursor is a bucket index for hash maps and a key for arrays.
  const size_t token = std::max<size_t>(key_size_, 8);
  std::vector<uint8_t> in(token), next(token);
  uint32_t chunk = std::clamp<uint32_t>(max_entries_, 1, 4096);
  std::vector<uint8_t> keys, vals;
  bool first = true;
  for (;;) {
    uint32_t n = chunk;
    keys.resize(static_cast<size_t>(n) * key_size_);
    vals.resize(static_cast<size_t>(n) * vsize);
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    int r = bpf_map_lookup_batch(fd(), first ? nullptr : in.data(), next.data(), keys.data(),
                                 vals.data(), &n, &opts);
    int err = r != 0 ? errno : 0;
    if (err == ENOSPC && chunk < max_entries_) {
      // One hash bucket holds more entries than fit in the chunk.
      chunk = std::min<uint32_t>(chunk * 2, max_entries_);
      continue;
    }
    if (err != 0 && err != ENOENT) {
      if (first) break;  // no batch support for this map type or kernel
      return BpfError(fmt::format("cannot read BPF map {}", name_), err);
    }
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* k = keys.data() + static_cast<size_t>(i) * key_size_;
      const uint8_t* v = vals.data() + static_cast<size_t>(i) * vsize;
      out.push_back({{k, k + key_size_}, {v, v + vsize}});
    }
    if (err == ENOENT) return out;
    in.swap(next);
    first = false;
  }
  out.clear();
  for (auto& k : Keys()) {
    std::vector<uint8_t> v(vsize);
    Status st = Lookup(k.data(), v.data());
    if (st.code() == Code::kNotFound) continue;  // deleted since Keys()
    FAY_RETURN_IF_ERROR(st);
    out.push_back({std::move(k), std::move(v)});
  }
  return out;
}

Status Map::Clear() {
  if (IsArray(type_)) {
    std::vector<uint8_t> zero(lookup_size(), 0);
    for (uint32_t i = 0; i < max_entries_; ++i) FAY_RETURN_IF_ERROR(Update(&i, zero.data()));
    return Status::Ok();
  }
  for (const auto& k : Keys()) {
    if (bpf_map_delete_elem(fd(), k.data()) != 0 && errno != ENOENT)
      return BpfError(fmt::format("cannot delete from BPF map {}", name_), errno);
  }
  return Status::Ok();
}

}  // namespace fay::bpf
