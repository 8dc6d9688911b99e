// The x86-64 system call table, as data (syscalls_x86_64.def for numbers, names and classes;
// syscall_signatures.def for argument types, directions and length sources). Every consumer of
// syscall facts (probes, decoders, printers, recorders, the replayer) reads them from here so
// nothing is written down twice.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace fay {

// Bumped whenever a signature changes in a way that changes what is captured or how a recorded
// event decodes. Stored in every trace header.
inline constexpr uint32_t kSyscallTableVersion = 1;

// Syscall numbers by name, from the same .def rows (`sysno::execve`), for the few places that
// must single out a call; a number never appears in code on its own.
namespace sysno {
enum : int {
#define FAY_SYSCALL(nr, name, event, classes) name = nr,
#include "schema/syscalls_x86_64.def"
#undef FAY_SYSCALL
};
}  // namespace sysno

// strace's trace classes (`man strace`, -e trace=%CLASS). A call may be in several.
enum SyscallClass : uint32_t {
  kClassFile = 1u << 0,         // %file: takes a file name
  kClassDesc = 1u << 1,         // %desc: takes or returns a file descriptor
  kClassNet = 1u << 2,          // %net, %network
  kClassProcess = 1u << 3,      // %process: process lifecycle
  kClassMemory = 1u << 4,       // %memory: memory mapping
  kClassSignal = 1u << 5,       // %signal
  kClassIpc = 1u << 6,          // %ipc: SysV IPC
  kClassCreds = 1u << 7,        // %creds: user/group ids and capabilities
  kClassClock = 1u << 8,        // %clock: read or set the system clocks
  kClassStat = 1u << 9,         // %stat: stat variants
  kClassLstat = 1u << 10,       // %lstat
  kClassFstat = 1u << 11,       // %fstat
  kClassStatLike = 1u << 12,    // %%stat: any stat variant
  kClassStatfs = 1u << 13,      // %statfs
  kClassFstatfs = 1u << 14,     // %fstatfs
  kClassStatfsLike = 1u << 15,  // %%statfs
  kClassPure = 1u << 16,        // %pure: always succeed, no arguments
};

struct SyscallInfo {
  int nr;
  std::string_view name;
  // Stem of the kernel's syscalls/sys_enter_* tracepoint; differs from name for a few calls
  // (stat -> newstat, uname -> newuname, sendfile -> sendfile64, umount2 -> umount).
  std::string_view tracefs_event;
  uint32_t classes = 0;  // SyscallClass bits
};

// What an argument is. Scalar types are decoded from the raw register; the rest name user
// memory that the recorders capture and the printer renders.
enum class ArgType : uint8_t {
  kNone = 0,  // no such argument
  // Scalars.
  kInt,        // signed 32-bit decimal
  kLong,       // signed 64-bit decimal (offsets)
  kUint,       // unsigned 32-bit decimal
  kUlong,      // unsigned 64-bit decimal (sizes, counts)
  kHex,        // 0x... (addresses the kernel does not dereference, cookies)
  kPtr,        // a user pointer the table does not decode: NULL or 0x...
  kFd,         // file descriptor, plain number (strace default, no -y)
  kDirfd,      // AT_FDCWD or a descriptor
  kFlags,      // bit flags of ArgSpec::set
  kEnum,       // one value of ArgSpec::set
  kMode,       // file mode: [S_IFxxx|]0644
  kOpenMode,   // open/openat mode: printed only when the flags ask for one (O_CREAT, O_TMPFILE)
  kOctalMode,  // chmod-family mode: plain octal with any type bits (strace prints 0100644)
  kSignal,     // SIGxxx
  kUid,        // uid/gid: -1 stays -1
  // User memory.
  kPath,        // NUL-terminated path (not cut by -s)
  kString,      // NUL-terminated string (cut by -s)
  kBuf,         // bytes, printed as a quoted string
  kHexBuf,      // bytes, printed as a \x.. string (getrandom)
  kStrArray,    // NULL-terminated char*[] (execve argv)
  kEnvArray,    // NULL-terminated char*[] printed as address /* N vars */ (execve envp)
  kIovec,       // struct iovec[] with a count argument; elements captured as data
  kMsghdr,      // struct msghdr with its name, iovecs and control data
  kSockaddr,    // struct sockaddr, length from another argument
  kSocklen,     // socklen_t* in/out: [16]
  kStat,        // struct stat
  kStatx,       // struct statx
  kStatfs,      // struct statfs
  kTimespec,    // struct timespec
  kTimespec2,   // struct timespec[2] (utimensat)
  kTimeval,     // struct timeval
  kTimezone,    // struct timezone
  kItimerspec,  // struct itimerspec
  kItimerval,   // struct itimerval
  kPollfd,      // struct pollfd[] with a count argument
  kEpollEvent,  // struct epoll_event (one, or an array sized by the return value)
  kRlimit,      // struct rlimit (64-bit fields)
  kRusage,      // struct rusage
  kUtsname,     // struct utsname
  kSysinfo,     // struct sysinfo
  kSigaction,   // struct kernel_sigaction
  kSigset,      // kernel sigset (length argument)
  kFdPair,      // int[2] (pipe, pipe2, socketpair)
  kIntPtr,      // int* printed as [N]
  kUlongPtr,    // 64-bit integer in memory printed as [N] (off_t* of sendfile)
  kWaitStatus,  // int* wait status printed as [{WIFEXITED(s) && ...}]
  kDirents,     // struct linux_dirent64[] sized by the return value
  kFdSet,       // fd_set (select), length from nfds
  kCloneArgs,   // struct clone_args
  kOpenHow,     // struct open_how
  kStackT,      // stack_t (sigaltstack)
  kSiginfo,     // siginfo_t (128 bytes)
  kSigmaskArg,  // pselect6's { const sigset_t *ss; size_t ss_len; }, and the set it points to
  kCount_,
};

enum class ArgDir : uint8_t {
  kIn = 0,     // read by the kernel (captured at entry)
  kOut = 1,    // written by the kernel (captured at exit, only when the call succeeded)
  kInOut = 2,  // both
};

// Where the length of a memory argument comes from.
enum class LenKind : uint8_t {
  kNone = 0,  // scalars
  kFixed,     // the size of the struct the type names
  kNul,       // NUL-terminated (paths, strings) up to PATH_MAX
  kArg,       // the value of argument len_arg (bytes, or elements for arrays)
  kRet,       // the return value (read data, getdents64, readlink)
  kArgPtr,    // the socklen_t that argument len_arg points to (accept, getsockname)
  kNulArray,  // a NULL-terminated pointer array (execve argv/envp)
};

// Named value sets for kFlags/kEnum arguments; the names live in syscall_values.cc.
enum class ValueSet : uint8_t {
  kNone = 0,
  kOpenFlags,
  kAtFlags,
  kStatxFlags,
  kFaccessatFlags,
  kFdOpenFlags,
  kAccessMode,
  kProt,
  kMmapFlags,
  kMremapFlags,
  kMadvise,
  kMsyncFlags,
  kSeekWhence,
  kIdType,
  kFcntlCmd,
  kFdFlags,
  kAddressFamily,
  kSockType,
  kSockProto,
  kMsgFlags,
  kShutdownHow,
  kSockLevel,
  kSigprocmaskHow,
  kCloneFlags,
  kWaitOptions,
  kRlimitResource,
  kClockId,
  kTimerFlags,
  kGrndFlags,
  kFlockOp,
  kArchPrctl,
  kFutexOp,
  kEpollCtlOp,
  kEpollFlags,
  kStatxMask,
  kRenameFlags,
  kEventfdFlags,
  kMemfdFlags,
  kIoctlCmd,
  kPrctlOption,
  kSchedPolicy,
  kPriorityWhich,
  kRusageWho,
  kItimerWhich,
  kFallocateMode,
  kFadvice,
  kInotifyFlags,
  kXattrFlags,
  kCloseRangeFlags,
  kMlockallFlags,
  kMembarrierCmd,
  kPidfdFlags,
  kUnshareFlags,
  kSplice,
  kPollEvents,
  kEpollEvents,
  kSaFlags,
  kCount_,
};

struct ArgSpec {
  std::string_view name;
  ArgType type = ArgType::kNone;
  ValueSet set = ValueSet::kNone;
  ArgDir dir = ArgDir::kIn;
  LenKind len = LenKind::kNone;
  int8_t len_arg = -1;  // for kArg / kArgPtr
};

// How the return value prints.
enum class RetType : uint8_t {
  kInt = 0,   // decimal (also fds, pids, byte counts)
  kHex,       // 0x... (mmap, brk)
  kOctal,     // umask
  kNoReturn,  // exit, exit_group: "= ?"
  kFcntl,     // depends on the fcntl command (F_GETFL prints flags)
};

struct SyscallSignature {
  int nr = -1;
  std::string_view name;
  uint32_t classes = 0;
  RetType ret = RetType::kInt;
  uint8_t nargs = 0;
  bool decoded = false;  // false: no row in syscall_signatures.def, args print as raw hex
  std::array<ArgSpec, 6> args{};
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

// The signature of syscall nr. Unknown numbers and calls without a row in
// syscall_signatures.def get a generic signature: six kHex arguments, decoded = false.
const SyscallSignature& Signature(int nr);
// How many syscalls have a full signature row.
size_t DecodedSyscallCount();

// "%file" -> kClassFile, "file" (strace's legacy spelling) too; 0 when unknown.
uint32_t SyscallClassByName(std::string_view name);
// The class names fay accepts, with their % prefix ("%file", "%%stat", ...).
std::span<const std::string_view> SyscallClassNames();

}  // namespace fay
