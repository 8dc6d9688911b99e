#include "bpf/emitter.h"

#include <fmt/format.h>

namespace fay::bpf {

Expected<std::vector<bpf_insn>> Emitter::Finish() const {
  std::vector<bpf_insn> out = insns_;
  for (auto [at, label] : fixups_) {
    int target = label_pos_[label];
    if (target < 0) return Error(Code::kInternal, fmt::format("codegen: unbound label {}", label));
    long delta = static_cast<long>(target) - static_cast<long>(at) - 1;
    if (delta < INT16_MIN || delta > INT16_MAX)
      return Error(Code::kInternal, "codegen: jump out of range; the query is too large");
    out[at].off = static_cast<int16_t>(delta);
  }
  for (auto [at, label] : imm_fixups_) {
    int target = label_pos_[label];
    if (target < 0) return Error(Code::kInternal, fmt::format("codegen: unbound label {}", label));
    out[at].imm = target - static_cast<int>(at) - 1;
  }
  return out;
}

}  // namespace fay::bpf
