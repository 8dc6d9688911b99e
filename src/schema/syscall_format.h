// The strace-compatible printer: renders a recorded SyscallEvent the way `strace -f` (6.1,
// default options) prints the same call, from the raw arguments, the return value and the
// captured buffers, guided by the syscall table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "schema/syscall_event.h"

namespace fay {

struct FormatOptions {
  size_t string_limit = 32;  // strace -s
  bool hex_strings = false;  // strace -x
};

// "openat(AT_FDCWD, \"/etc/passwd\", O_RDONLY|O_CLOEXEC) = 3" or
// "... = -1 ENOENT (No such file or directory)" or "exit_group(0) = ?" for kEventNoExit. Uses
// captured buffers for strings, structs and data; a pointer whose buffer was not captured
// prints as a hex address like strace does for unreadable memory. No pid prefix, no padding
// before " = ", no latency: the caller adds those.
std::string FormatSyscall(const SyscallEvent& ev, const FormatOptions& opts);

// strace -e write=/read= style hex dump lines of every captured data buffer
// (" | 00000  61 62 ...  ab... |"), one per 16 bytes, each ending in '\n'.
std::string FormatHexDump(const SyscallEvent& ev);

// A quoted C string in strace's escaping; limit bytes at most, "..." after the closing quote
// when more_follows or the data is longer than limit.
std::string QuoteString(std::span<const uint8_t> data, size_t limit, bool more_follows,
                        const FormatOptions& opts);

}  // namespace fay
