// The x86-64 system call table, as data (syscalls_x86_64.def). Every consumer of syscall facts
// (probes, decoders, printers, recorders) reads them from here so nothing is written down twice.
#pragma once

#include <span>
#include <string_view>

namespace fay {

struct SyscallInfo {
  int nr;
  std::string_view name;
  // Stem of the kernel's syscalls/sys_enter_* tracepoint; differs from name for a few calls
  // (stat -> newstat, uname -> newuname, sendfile -> sendfile64, umount2 -> umount).
  std::string_view tracefs_event;
};

// All known syscalls, ordered by number.
std::span<const SyscallInfo> Syscalls();
size_t SyscallCount();

// -1 when unknown.
int SyscallNumber(std::string_view name);
// Empty when unknown.
std::string_view SyscallName(int nr);
// nullptr when unknown.
const SyscallInfo* FindSyscall(std::string_view name);
// Looks a syscall up by its tracefs event stem ("newstat" -> stat); nullptr when unknown.
const SyscallInfo* FindSyscallByEvent(std::string_view tracefs_event);

}  // namespace fay
