// Moving a function's first instructions elsewhere, so that a jump can take their place: the
// core of patching a function in place (Fay's in-process probes, docs/INPROCESS.md). The jump
// is 5 bytes (jmp rel32); the whole instructions it covers are decoded with Zydis and rewritten
// to run at a trampoline: RIP-relative operands get their displacement fixed up, relative
// branches and calls become absolute ones. The trampoline ends with a jump back to the first
// byte after them.
//
// Pure functions over bytes and addresses: nothing here touches a process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace fay::inproc {

inline constexpr size_t kJumpBytes = 5;  // jmp rel32

struct Prologue {
  size_t length = 0;                // bytes of whole instructions the jump displaces
  std::vector<size_t> starts;       // where each of them starts, from the function's first byte
  std::vector<uint8_t> trampoline;  // them, rewritten to run at the trampoline, then the way back
};

// The first instructions of the function at `address`, whose bytes are `function` (the whole
// function when its size is known, else as many bytes as can be read), rewritten to run at
// `trampoline`. Fails, saying why in words a user can act on, when they cannot move:
//  - the function is shorter than the jump, or leaves (ret, jmp) before the jump's end;
//  - an instruction cannot be decoded, or cannot run elsewhere (loop, jrcxz);
//  - a RIP-relative operand would be out of the trampoline's reach (±2 GiB);
//  - a branch in the function jumps into the displaced bytes (after their first);
// Jumps through registers or tables are not followed: they are assumed to enter the function at
// its start only, as compilers emit them.
Expected<Prologue> RelocatePrologue(std::span<const uint8_t> function, uint64_t address,
                                    uint64_t trampoline);

// The 5 bytes that replace the function's first: jmp rel32 from `address` to `to`, which must be
// within reach (RelocatePrologue's caller places trampolines so).
Expected<std::vector<uint8_t>> JumpTo(uint64_t address, uint64_t to);

}  // namespace fay::inproc
