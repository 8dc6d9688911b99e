// Whether a function in an ELF file can take an in-process probe, from the file alone: what
// `fay explain` says of every uprobe, and what `--uprobes auto` will decide by.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace fay::inproc {

// The bytes the jump would displace, or why the function cannot be patched (RelocatePrologue's
// reasons). `address` is the symbol's value: what RIP-relative operands are reckoned from.
Expected<size_t> CheckPatchable(const std::string& path, uint64_t file_offset, uint64_t size,
                                uint64_t address);

}  // namespace fay::inproc
