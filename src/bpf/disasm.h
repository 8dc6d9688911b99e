// A bpftool-like annotated listing of eBPF bytecode for `fay explain`.
#pragma once

#include <linux/bpf.h>

#include <string>
#include <utility>
#include <vector>

namespace fay::bpf {

// Name of a helper ("map_lookup_elem"), or "" when unknown.
std::string HelperName(int32_t id);

// One instruction (and, for ld_imm64, its second half `next`), without index or comment.
std::string DisassembleInsn(const bpf_insn& insn, const bpf_insn* next, size_t index);

// Each line: "  12: r1 = *(u64 *)(r6 +16)      ; args.filename". Comments are keyed by
// instruction index, several per index are joined with "; ". Jump targets get labels "<L3>".
std::string Disassemble(const std::vector<bpf_insn>& insns,
                        const std::vector<std::pair<size_t, std::string>>& comments);

}  // namespace fay::bpf
