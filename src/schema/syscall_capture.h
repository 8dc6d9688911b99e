// Capture rules: which user buffers a recorder copies for a syscall, at entry (data going into
// the kernel) and at exit (data coming out), and how long each is. The rules are read off the
// syscall table's argument specs, so the ptrace recorder and the eBPF recorder, which mirrors
// them, copy the same bytes.
//
// Sub-buffer numbering (CapturedBuffer::sub), per argument:
//   iovec array    0 = the struct iovec[] itself, 1 + i = the data of element i
//   msghdr         0 = struct msghdr, 1 = msg_name, 2 = msg_control, 3 = the struct iovec[],
//                  4 + i = the data of element i
//   argv/envp      0 = the char*[] up to its NULL, 1 + i = string i
//   pointees       1, 2 = what pointers inside the struct point to (PointeeRules)
// and argument kStackArg (6), sub 0: bytes of the user stack (StackRules)
//   everything else 0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "schema/syscall_event.h"
#include "schema/syscall_table.h"

namespace fay {

class TraceeMemory {
 public:
  virtual ~TraceeMemory() = default;
  // Copies up to len bytes from the tracee at addr; returns bytes copied (0 = unreadable).
  virtual size_t Read(uint64_t addr, void* dst, size_t len) = 0;
};

// Longest path or string captured, NUL excluded (PATH_MAX).
inline constexpr uint64_t kMaxCapturedString = 4096;
// Most pointers read from a NULL-terminated pointer array (execve argv/envp).
inline constexpr uint64_t kMaxCapturedArrayEntries = 4096;
// sizeof(struct flock) on x86-64, for fcntl's lock commands.
inline constexpr uint64_t kFlockSize = 32;
// Most iovec elements followed (UIO_MAXIOV).
inline constexpr uint64_t kMaxCapturedIovecs = 1024;
// Even with max_buffer 0 (unlimited) no single buffer grows past this, so a bogus length in a
// failing call cannot exhaust the recorder's memory.
inline constexpr uint64_t kHardBufferCap = 1ull << 30;

// fcntl's third argument is a struct flock only for the lock commands (F_GETLK, F_SETLK(W) and
// their OFD forms), which no per-argument spec can say; the getters also write it back.
bool FcntlTakesFlock(uint64_t cmd);
bool FcntlReturnsFlock(uint64_t cmd);

// Size in bytes of the fixed-size user struct an ArgType names on x86-64; 0 for variable ones.
uint64_t FixedArgSize(ArgType type);

// A call that reads the user stack rather than an argument: rt_sigreturn restores the signal
// mask from the frame the kernel built there (uc_sigmask, 296 bytes above the stack pointer at
// entry on x86-64). Kept as "argument" kStackArg, with the absolute address.
inline constexpr int kStackArg = 6;
struct StackRule {
  uint32_t offset, len;
};
std::span<const StackRule> StackRules(int nr);

// Buffers going into the kernel (paths, write data, structs passed in, iovec arrays + elements of
// writev, sockaddr of connect/bind/sendto, msghdr of sendmsg, ...). `stack_pointer` is the
// thread's at entry (0: unknown, and StackRules are not followed).
void CaptureAtEntry(int nr, const std::array<uint64_t, 6>& args, TraceeMemory& mem,
                    uint64_t max_buffer, std::vector<CapturedBuffer>* out,
                    uint64_t stack_pointer = 0);

// A buffer a pointer inside a struct argument points to: the u64 at args[arg] + offset, then
// len bytes there, kept as element `sub` of the argument. Both backends follow these.
struct PointeeRule {
  int arg, sub;
  uint32_t offset, len;
};
std::span<const PointeeRule> PointeeRules(int nr, BufferDir dir);

// The sleeps write the time left only when a signal cuts them short (EINTR, or the restart code
// the kernel turns into it): their out buffer is captured then, and only then.
bool OutOnlyWhenInterrupted(int nr);
bool InterruptedSleep(int64_t ret);

// Buffers coming out of the kernel, sized by the return value where the table says so. Nothing
// is captured for a failed call (ret < 0), but for an interrupted sleep's time left.
void CaptureAtExit(int nr, const std::array<uint64_t, 6>& args, int64_t ret, TraceeMemory& mem,
                   uint64_t max_buffer, std::vector<CapturedBuffer>* out);

}  // namespace fay
