// Reading stacks recorded by bpf_get_stackid into a BPF_MAP_TYPE_STACK_TRACE map.
#pragma once

#include <cstdint>
#include <vector>

#include "bpf/map.h"
#include "common/status.h"

namespace fay::bpf {

// Max frames per stack fay asks the kernel for (value_size = kMaxStackDepth * 8).
inline constexpr uint32_t kMaxStackDepth = 127;

Expected<Map> CreateStackMap(const std::string& name, uint32_t max_entries);

// Instruction pointers of stack `id`, innermost first, zero frames dropped.
Expected<std::vector<uint64_t>> ReadStack(const Map& stacks, uint32_t stack_id);

}  // namespace fay::bpf
