// Rendering of syscall arguments that live in user memory (strings, buffers, structs, arrays),
// from the buffers a recorder captured. Internal to the strace-style printer.
#pragma once

#include <optional>
#include <string>

#include "schema/syscall_event.h"
#include "schema/syscall_format.h"
#include "schema/syscall_table.h"

namespace fay::decode {

struct ArgContext {
  const SyscallEvent& ev;
  const SyscallSignature& sig;
  const FormatOptions& opts;

  bool Failed() const { return ev.ret < 0 && ev.ret >= -4095; }
  // The captured buffer for (arg, sub) in direction dir; nullptr when there is none.
  const CapturedBuffer* Find(int arg, int sub, BufferDir dir) const;
  // The kernel's view after the call when there is one, else what went in.
  const CapturedBuffer* Latest(int arg, int sub) const;
};

// "0644", "000", "S_IFREG|0644", "04755".
std::string FormatMode(uint32_t mode);

// A device number as strace prints it: makedev(0x8, 0x1).
std::string Makedev(uint64_t dev);

// Argument i of a memory ArgType; nullopt to leave the argument out.
std::optional<std::string> FormatMemoryArg(const ArgContext& ctx, int i);

// rt_sigreturn's one printed argument, the mask it restores from the signal frame on the stack:
// "{mask=[...]}", or empty when the trace did not keep it.
std::string SigreturnMask(const ArgContext& ctx);

// What strace adds after a successful return value in parentheses: poll's revents,
// "Timeout". Empty when nothing.
std::string ReturnSuffix(const ArgContext& ctx);

}  // namespace fay::decode
