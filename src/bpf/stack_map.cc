#include "bpf/stack_map.h"

#include <linux/bpf.h>

namespace fay::bpf {

Expected<Map> CreateStackMap(const std::string& name, uint32_t max_entries) {
  return Map::Create(BPF_MAP_TYPE_STACK_TRACE, name, sizeof(uint32_t),
                     kMaxStackDepth * sizeof(uint64_t), max_entries);
}

Expected<std::vector<uint64_t>> ReadStack(const Map& stacks, uint32_t stack_id) {
  std::vector<uint64_t> ips(stacks.value_size() / sizeof(uint64_t));
  FAY_RETURN_IF_ERROR(stacks.Lookup(&stack_id, ips.data()));
  // The kernel zero-fills frames past the stack's depth.
  size_t n = 0;
  while (n < ips.size() && ips[n] != 0) ++n;
  ips.resize(n);
  return ips;
}

}  // namespace fay::bpf
