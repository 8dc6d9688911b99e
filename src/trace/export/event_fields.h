// What every exporter says about a recorded syscall, named once: the syscall's name, its
// arguments' names from the syscall table, the errno and latency derived as the query
// language derives them, and the strace-style text of the call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/syscall_event.h"

namespace fay::trace {

// "openat", or "syscall_NNN" for a number the table does not know.
std::string SyscallEventName(int nr);
// The name of argument i of syscall nr: the table's ("filename"), else "argN".
std::string ArgName(int nr, int i);
// How many arguments syscall nr takes (6 when the table does not know).
int ArgCount(int nr);
// Whether argument i is a signed integer (fds, ints, offsets); the rest print unsigned.
bool ArgSigned(int nr, int i);
// The argument as the query language sees it: an int-sized argument keeps its low half.
int64_t ArgInt(int nr, int i, uint64_t raw);

inline int64_t Errno(const SyscallEvent& ev) {
  return ev.ret < 0 && ev.ret >= -4095 ? -ev.ret : 0;
}
inline uint64_t Latency(const SyscallEvent& ev) {
  return !(ev.flags & kEventNoExit) && ev.exit_ns >= ev.entry_ns ? ev.exit_ns - ev.entry_ns : 0;
}
inline std::string_view Comm(const SyscallEvent& ev) {
  size_t n = 0;
  while (n < ev.comm.size() && ev.comm[n]) ++n;
  return std::string_view(ev.comm.data(), n);
}

// The call as `fay dump` prints it: "openat(AT_FDCWD, \"/etc/passwd\", O_RDONLY) = 3".
std::string CallText(const SyscallEvent& ev);
// "00ff..." for a buffer's bytes.
std::string Hex(const std::vector<uint8_t>& bytes);

}  // namespace fay::trace
