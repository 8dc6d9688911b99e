// Names of flag bits and enumerated values in syscall arguments (O_*, MAP_*, SEEK_*, AF_*, ...),
// and of signals and errnos, rendered the way strace renders them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "schema/syscall_table.h"

namespace fay {

// One name in a value set. For bit flags an entry matches when (v & mask) == value and none of
// its mask bits were consumed by an earlier entry; value 0 with a non-zero mask names a field
// value (O_RDONLY in O_ACCMODE), and value 0 with mask 0 names the all-zero value (PROT_NONE).
struct ValueName {
  uint64_t value;
  uint64_t mask;
  std::string_view name;
};

std::span<const ValueName> ValueNames(ValueSet set);
// True for sets printed as NAME|NAME, false for one enumerated value.
bool IsFlagSet(ValueSet set);

// "O_RDONLY|O_CLOEXEC", unknown bits as "|0x..."; a zero value without a name prints "0".
std::string FormatFlags(ValueSet set, uint64_t value);
// "SEEK_SET"; an unknown value prints as "0x... /* SEEK_??? */" like strace.
std::string FormatEnum(ValueSet set, uint64_t value);
// Exact name or empty.
std::string_view EnumName(ValueSet set, uint64_t value);

// "SIGINT"; 0 and unknown numbers print as decimal.
std::string SignalName(int sig);
// "INT" (for sigset lists); "RTMIN", "RT_1", ... for real-time signals.
std::string SignalShortName(int sig);

// The kernel's own codes a call may return to the kernel, never to the program
// (include/linux/errno.h): the kernel makes the call again, or turns the code into EINTR for a
// signal handler. ENOIOCTLCMD, between them, is not one.
inline constexpr int kERestartSys = 512, kERestartNoIntr = 513, kERestartNoHand = 514,
                     kENoIoctlCmd = 515, kERestartRestartBlock = 516;

// ioctl requests fay acts on (linux/fs.h, asm-generic/ioctls.h): the reflinks, which replace a
// destination's data in the kernel (a dedupe changes no bytes), and the close-on-exec pair,
// which takes no argument.
inline constexpr uint64_t kFiClone = 0x40049409, kFiCloneRange = 0x4020940d,
                          kFiDedupeRange = 0xc0189436, kFionclex = 0x5450, kFioclex = 0x5451;

// "ENOENT", and the restart codes strace shows (ERESTARTSYS, ...); empty when unknown.
std::string_view ErrnoName(int err);
// "No such file or directory"; strace's wording for the restart codes.
std::string ErrnoMessage(int err);

}  // namespace fay
