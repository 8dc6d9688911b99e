#include "schema/syscall_values.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace fay {
namespace {

// Bit flag: the name covers exactly its bits.
#define B(name, v) \
  ValueName {      \
    v, v, #name    \
  }
// Field value: name for v within mask.
#define M(name, v, m) \
  ValueName {         \
    v, m, #name       \
  }
// Enumerated value.
#define N(name, v)                     \
  ValueName {                          \
    static_cast<uint64_t>(v), 0, #name \
  }
// The name of an all-zero flags value.
#define Z(name) \
  ValueName {   \
    0, 0, #name \
  }

// Numbers are the x86-64 kernel ABI values, spelled out so the tables do not depend on which
// libc headers happen to define what. Order is the order strace prints flags in.
constexpr ValueName kOpenFlags[] = {
    M(O_RDONLY, 0, 3),      M(O_WRONLY, 1, 3),       M(O_RDWR, 2, 3),
    M(O_ACCMODE, 3, 3),     B(O_CREAT, 0100),        B(O_EXCL, 0200),
    B(O_NOCTTY, 0400),      B(O_TRUNC, 01000),       B(O_APPEND, 02000),
    B(O_NONBLOCK, 04000),   B(O_SYNC, 04010000),     B(O_DSYNC, 010000),
    B(O_ASYNC, 020000),     B(O_DIRECT, 040000),     B(O_LARGEFILE, 0100000),
    B(O_NOFOLLOW, 0400000), B(O_NOATIME, 01000000),  B(O_CLOEXEC, 02000000),
    B(O_PATH, 010000000),   B(O_TMPFILE, 020200000), B(O_DIRECTORY, 0200000),
};
constexpr ValueName kFdOpenFlags[] = {
    B(O_NOTIFICATION_PIPE, 040000000),
    B(O_CLOEXEC, 02000000),
    B(O_DIRECT, 040000),
    B(O_NONBLOCK, 04000),
};
constexpr ValueName kAtFlags[] = {
    B(AT_SYMLINK_NOFOLLOW, 0x100), B(AT_REMOVEDIR, 0x200),   B(AT_SYMLINK_FOLLOW, 0x400),
    B(AT_NO_AUTOMOUNT, 0x800),     B(AT_EMPTY_PATH, 0x1000), B(AT_RECURSIVE, 0x8000),
};
constexpr ValueName kStatxFlags[] = {
    M(AT_STATX_SYNC_AS_STAT, 0, 0x6000),
    M(AT_STATX_FORCE_SYNC, 0x2000, 0x6000),
    M(AT_STATX_DONT_SYNC, 0x4000, 0x6000),
    B(AT_SYMLINK_NOFOLLOW, 0x100),
    B(AT_NO_AUTOMOUNT, 0x800),
    B(AT_EMPTY_PATH, 0x1000),
};
constexpr ValueName kFaccessatFlags[] = {
    B(AT_SYMLINK_NOFOLLOW, 0x100),
    B(AT_EACCESS, 0x200),
    B(AT_EMPTY_PATH, 0x1000),
};
constexpr ValueName kAccessMode[] = {Z(F_OK), B(R_OK, 4), B(W_OK, 2), B(X_OK, 1)};
constexpr ValueName kProt[] = {
    Z(PROT_NONE),
    B(PROT_READ, 1),
    B(PROT_WRITE, 2),
    B(PROT_EXEC, 4),
    B(PROT_SEM, 8),
    B(PROT_GROWSDOWN, 0x01000000),
    B(PROT_GROWSUP, 0x02000000),
};
constexpr ValueName kMmapFlags[] = {
    M(MAP_SHARED, 1, 0xf),
    M(MAP_PRIVATE, 2, 0xf),
    M(MAP_SHARED_VALIDATE, 3, 0xf),
    B(MAP_FIXED, 0x10),
    B(MAP_ANONYMOUS, 0x20),
    B(MAP_32BIT, 0x40),
    B(MAP_GROWSDOWN, 0x100),
    B(MAP_DENYWRITE, 0x800),
    B(MAP_EXECUTABLE, 0x1000),
    B(MAP_LOCKED, 0x2000),
    B(MAP_NORESERVE, 0x4000),
    B(MAP_POPULATE, 0x8000),
    B(MAP_NONBLOCK, 0x10000),
    B(MAP_STACK, 0x20000),
    B(MAP_HUGETLB, 0x40000),
    B(MAP_SYNC, 0x80000),
    B(MAP_FIXED_NOREPLACE, 0x100000),
    B(MAP_UNINITIALIZED, 0x4000000),
};
constexpr ValueName kMremapFlags[] = {B(MREMAP_MAYMOVE, 1), B(MREMAP_FIXED, 2),
                                      B(MREMAP_DONTUNMAP, 4)};
constexpr ValueName kMadvise[] = {
    N(MADV_NORMAL, 0),           N(MADV_RANDOM, 1),         N(MADV_SEQUENTIAL, 2),
    N(MADV_WILLNEED, 3),         N(MADV_DONTNEED, 4),       N(MADV_FREE, 8),
    N(MADV_REMOVE, 9),           N(MADV_DONTFORK, 10),      N(MADV_DOFORK, 11),
    N(MADV_MERGEABLE, 12),       N(MADV_UNMERGEABLE, 13),   N(MADV_HUGEPAGE, 14),
    N(MADV_NOHUGEPAGE, 15),      N(MADV_DONTDUMP, 16),      N(MADV_DODUMP, 17),
    N(MADV_WIPEONFORK, 18),      N(MADV_KEEPONFORK, 19),    N(MADV_COLD, 20),
    N(MADV_PAGEOUT, 21),         N(MADV_POPULATE_READ, 22), N(MADV_POPULATE_WRITE, 23),
    N(MADV_DONTNEED_LOCKED, 24), N(MADV_COLLAPSE, 25),      N(MADV_HWPOISON, 100),
};
constexpr ValueName kMsyncFlags[] = {B(MS_ASYNC, 1), B(MS_INVALIDATE, 2), B(MS_SYNC, 4)};
constexpr ValueName kSeekWhence[] = {N(SEEK_SET, 0), N(SEEK_CUR, 1), N(SEEK_END, 2),
                                     N(SEEK_DATA, 3), N(SEEK_HOLE, 4)};
constexpr ValueName kIdType[] = {N(P_ALL, 0), N(P_PID, 1), N(P_PGID, 2), N(P_PIDFD, 3)};
constexpr ValueName kFcntlCmd[] = {
    N(F_DUPFD, 0),          N(F_GETFD, 1),
    N(F_SETFD, 2),          N(F_GETFL, 3),
    N(F_SETFL, 4),          N(F_GETLK, 5),
    N(F_SETLK, 6),          N(F_SETLKW, 7),
    N(F_SETOWN, 8),         N(F_GETOWN, 9),
    N(F_SETSIG, 10),        N(F_GETSIG, 11),
    N(F_SETOWN_EX, 15),     N(F_GETOWN_EX, 16),
    N(F_GETOWNER_UIDS, 17), N(F_OFD_GETLK, 36),
    N(F_OFD_SETLK, 37),     N(F_OFD_SETLKW, 38),
    N(F_SETLEASE, 1024),    N(F_GETLEASE, 1025),
    N(F_NOTIFY, 1026),      N(F_DUPFD_CLOEXEC, 1030),
    N(F_SETPIPE_SZ, 1031),  N(F_GETPIPE_SZ, 1032),
    N(F_ADD_SEALS, 1033),   N(F_GET_SEALS, 1034),
};
constexpr ValueName kFdFlags[] = {B(FD_CLOEXEC, 1)};
constexpr ValueName kAddressFamily[] = {
    N(AF_UNSPEC, 0),    N(AF_UNIX, 1),       N(AF_INET, 2), N(AF_AX25, 3),     N(AF_IPX, 4),
    N(AF_APPLETALK, 5), N(AF_INET6, 10),     N(AF_KEY, 15), N(AF_NETLINK, 16), N(AF_PACKET, 17),
    N(AF_CAN, 29),      N(AF_BLUETOOTH, 31), N(AF_ALG, 38), N(AF_VSOCK, 40),   N(AF_XDP, 44),
};
constexpr ValueName kSockType[] = {
    M(SOCK_STREAM, 1, 0xf),  M(SOCK_DGRAM, 2, 0xf),     M(SOCK_RAW, 3, 0xf),
    M(SOCK_RDM, 4, 0xf),     M(SOCK_SEQPACKET, 5, 0xf), M(SOCK_DCCP, 6, 0xf),
    M(SOCK_PACKET, 10, 0xf), B(SOCK_CLOEXEC, 02000000), B(SOCK_NONBLOCK, 04000),
};
constexpr ValueName kSockProto[] = {
    N(IPPROTO_IP, 0),        N(IPPROTO_ICMP, 1),   N(IPPROTO_IGMP, 2),       N(IPPROTO_IPIP, 4),
    N(IPPROTO_TCP, 6),       N(IPPROTO_EGP, 8),    N(IPPROTO_PUP, 12),       N(IPPROTO_UDP, 17),
    N(IPPROTO_IDP, 22),      N(IPPROTO_TP, 29),    N(IPPROTO_DCCP, 33),      N(IPPROTO_IPV6, 41),
    N(IPPROTO_RSVP, 46),     N(IPPROTO_GRE, 47),   N(IPPROTO_ESP, 50),       N(IPPROTO_AH, 51),
    N(IPPROTO_ICMPV6, 58),   N(IPPROTO_MTP, 92),   N(IPPROTO_BEETPH, 94),    N(IPPROTO_ENCAP, 98),
    N(IPPROTO_PIM, 103),     N(IPPROTO_COMP, 108), N(IPPROTO_L2TP, 115),     N(IPPROTO_SCTP, 132),
    N(IPPROTO_UDPLITE, 136), N(IPPROTO_MPLS, 137), N(IPPROTO_ETHERNET, 143), N(IPPROTO_RAW, 255),
    N(IPPROTO_MPTCP, 262),
};
constexpr ValueName kMsgFlags[] = {
    B(MSG_OOB, 1),
    B(MSG_PEEK, 2),
    B(MSG_DONTROUTE, 4),
    B(MSG_CTRUNC, 8),
    B(MSG_PROXY, 0x10),
    B(MSG_TRUNC, 0x20),
    B(MSG_DONTWAIT, 0x40),
    B(MSG_EOR, 0x80),
    B(MSG_WAITALL, 0x100),
    B(MSG_FIN, 0x200),
    B(MSG_SYN, 0x400),
    B(MSG_CONFIRM, 0x800),
    B(MSG_RST, 0x1000),
    B(MSG_ERRQUEUE, 0x2000),
    B(MSG_NOSIGNAL, 0x4000),
    B(MSG_MORE, 0x8000),
    B(MSG_WAITFORONE, 0x10000),
    B(MSG_BATCH, 0x40000),
    B(MSG_ZEROCOPY, 0x4000000),
    B(MSG_FASTOPEN, 0x20000000),
    B(MSG_CMSG_CLOEXEC, 0x40000000),
};
constexpr ValueName kShutdownHow[] = {N(SHUT_RD, 0), N(SHUT_WR, 1), N(SHUT_RDWR, 2)};
constexpr ValueName kSockLevel[] = {N(SOL_IP, 0),       N(SOL_SOCKET, 1), N(SOL_TCP, 6),
                                    N(SOL_UDP, 17),     N(SOL_IPV6, 41),  N(SOL_RAW, 255),
                                    N(SOL_NETLINK, 270)};
constexpr ValueName kSigprocmaskHow[] = {N(SIG_BLOCK, 0), N(SIG_UNBLOCK, 1), N(SIG_SETMASK, 2)};
constexpr ValueName kCloneFlags[] = {
    B(CLONE_VM, 0x100),
    B(CLONE_FS, 0x200),
    B(CLONE_FILES, 0x400),
    B(CLONE_SIGHAND, 0x800),
    B(CLONE_PIDFD, 0x1000),
    B(CLONE_PTRACE, 0x2000),
    B(CLONE_VFORK, 0x4000),
    B(CLONE_PARENT, 0x8000),
    B(CLONE_THREAD, 0x10000),
    B(CLONE_NEWNS, 0x20000),
    B(CLONE_SYSVSEM, 0x40000),
    B(CLONE_SETTLS, 0x80000),
    B(CLONE_PARENT_SETTID, 0x100000),
    B(CLONE_CHILD_CLEARTID, 0x200000),
    B(CLONE_DETACHED, 0x400000),
    B(CLONE_UNTRACED, 0x800000),
    B(CLONE_CHILD_SETTID, 0x1000000),
    B(CLONE_NEWCGROUP, 0x2000000),
    B(CLONE_NEWUTS, 0x4000000),
    B(CLONE_NEWIPC, 0x8000000),
    B(CLONE_NEWUSER, 0x10000000),
    B(CLONE_NEWPID, 0x20000000),
    B(CLONE_NEWNET, 0x40000000),
    B(CLONE_IO, 0x80000000),
};
constexpr ValueName kWaitOptions[] = {
    B(WNOHANG, 1),         B(WUNTRACED, 2),         B(WEXITED, 4),
    B(WCONTINUED, 8),      B(WNOWAIT, 0x1000000),   B(__WNOTHREAD, 0x20000000),
    B(__WALL, 0x40000000), B(__WCLONE, 0x80000000),
};
constexpr ValueName kRlimitResource[] = {
    N(RLIMIT_CPU, 0),       N(RLIMIT_FSIZE, 1), N(RLIMIT_DATA, 2),    N(RLIMIT_STACK, 3),
    N(RLIMIT_CORE, 4),      N(RLIMIT_RSS, 5),   N(RLIMIT_NPROC, 6),   N(RLIMIT_NOFILE, 7),
    N(RLIMIT_MEMLOCK, 8),   N(RLIMIT_AS, 9),    N(RLIMIT_LOCKS, 10),  N(RLIMIT_SIGPENDING, 11),
    N(RLIMIT_MSGQUEUE, 12), N(RLIMIT_NICE, 13), N(RLIMIT_RTPRIO, 14), N(RLIMIT_RTTIME, 15),
};
constexpr ValueName kClockId[] = {
    N(CLOCK_REALTIME, 0),          N(CLOCK_MONOTONIC, 1),     N(CLOCK_PROCESS_CPUTIME_ID, 2),
    N(CLOCK_THREAD_CPUTIME_ID, 3), N(CLOCK_MONOTONIC_RAW, 4), N(CLOCK_REALTIME_COARSE, 5),
    N(CLOCK_MONOTONIC_COARSE, 6),  N(CLOCK_BOOTTIME, 7),      N(CLOCK_REALTIME_ALARM, 8),
    N(CLOCK_BOOTTIME_ALARM, 9),    N(CLOCK_TAI, 11),
};
constexpr ValueName kTimerFlags[] = {B(TIMER_ABSTIME, 1)};
constexpr ValueName kGrndFlags[] = {B(GRND_NONBLOCK, 1), B(GRND_RANDOM, 2), B(GRND_INSECURE, 4)};
constexpr ValueName kFlockOp[] = {B(LOCK_SH, 1), B(LOCK_EX, 2), B(LOCK_NB, 4), B(LOCK_UN, 8)};
constexpr ValueName kArchPrctl[] = {
    N(ARCH_SET_GS, 0x1001),         N(ARCH_SET_FS, 0x1002),         N(ARCH_GET_FS, 0x1003),
    N(ARCH_GET_GS, 0x1004),         N(ARCH_GET_CPUID, 0x1011),      N(ARCH_SET_CPUID, 0x1012),
    N(ARCH_GET_XCOMP_SUPP, 0x1021), N(ARCH_GET_XCOMP_PERM, 0x1022), N(ARCH_REQ_XCOMP_PERM, 0x1023),
    N(ARCH_SHSTK_ENABLE, 0x5001),   N(ARCH_SHSTK_DISABLE, 0x5002),  N(ARCH_SHSTK_STATUS, 0x5005),
};
// The command part of a futex op; the printer adds _PRIVATE and FUTEX_CLOCK_REALTIME.
constexpr ValueName kFutexOp[] = {
    N(FUTEX_WAIT, 0),
    N(FUTEX_WAKE, 1),
    N(FUTEX_FD, 2),
    N(FUTEX_REQUEUE, 3),
    N(FUTEX_CMP_REQUEUE, 4),
    N(FUTEX_WAKE_OP, 5),
    N(FUTEX_LOCK_PI, 6),
    N(FUTEX_UNLOCK_PI, 7),
    N(FUTEX_TRYLOCK_PI, 8),
    N(FUTEX_WAIT_BITSET, 9),
    N(FUTEX_WAKE_BITSET, 10),
    N(FUTEX_WAIT_REQUEUE_PI, 11),
    N(FUTEX_CMP_REQUEUE_PI, 12),
    N(FUTEX_LOCK_PI2, 13),
};
constexpr ValueName kEpollCtlOp[] = {N(EPOLL_CTL_ADD, 1), N(EPOLL_CTL_DEL, 2), N(EPOLL_CTL_MOD, 3)};
constexpr ValueName kEpollFlags[] = {B(EPOLL_CLOEXEC, 02000000)};
constexpr ValueName kStatxMask[] = {
    B(STATX_ALL, 0xfff),
    B(STATX_BASIC_STATS, 0x7ff),
    B(STATX_TYPE, 1),
    B(STATX_MODE, 2),
    B(STATX_NLINK, 4),
    B(STATX_UID, 8),
    B(STATX_GID, 0x10),
    B(STATX_ATIME, 0x20),
    B(STATX_MTIME, 0x40),
    B(STATX_CTIME, 0x80),
    B(STATX_INO, 0x100),
    B(STATX_SIZE, 0x200),
    B(STATX_BLOCKS, 0x400),
    B(STATX_BTIME, 0x800),
    B(STATX_MNT_ID, 0x1000),
    B(STATX_DIOALIGN, 0x2000),
    B(STATX_MNT_ID_UNIQUE, 0x4000),
    B(STATX_SUBVOL, 0x8000),
    B(STATX_WRITE_ATOMIC, 0x10000),
    B(STATX_DIO_READ_ALIGN, 0x20000),
};
constexpr ValueName kRenameFlags[] = {B(RENAME_NOREPLACE, 1), B(RENAME_EXCHANGE, 2),
                                      B(RENAME_WHITEOUT, 4)};
constexpr ValueName kEventfdFlags[] = {B(EFD_SEMAPHORE, 1), B(EFD_CLOEXEC, 02000000),
                                       B(EFD_NONBLOCK, 04000)};
constexpr ValueName kMemfdFlags[] = {B(MFD_CLOEXEC, 1), B(MFD_ALLOW_SEALING, 2), B(MFD_HUGETLB, 4),
                                     B(MFD_NOEXEC_SEAL, 8), B(MFD_EXEC, 0x10)};
constexpr ValueName kIoctlCmd[] = {
    N(TCGETS, 0x5401),
    N(TCSETS, 0x5402),
    N(TCSETSW, 0x5403),
    N(TCSETSF, 0x5404),
    N(TCGETA, 0x5405),
    N(TCSBRK, 0x5409),
    N(TCXONC, 0x540A),
    N(TCFLSH, 0x540B),
    N(TIOCEXCL, 0x540C),
    N(TIOCNXCL, 0x540D),
    N(TIOCSCTTY, 0x540E),
    N(TIOCGPGRP, 0x540F),
    N(TIOCSPGRP, 0x5410),
    N(TIOCOUTQ, 0x5411),
    N(TIOCSTI, 0x5412),
    N(TIOCGWINSZ, 0x5413),
    N(TIOCSWINSZ, 0x5414),
    N(TIOCMGET, 0x5415),
    N(FIONREAD, 0x541B),
    N(TIOCLINUX, 0x541C),
    N(TIOCCONS, 0x541D),
    N(FIONBIO, 0x5421),
    N(TIOCNOTTY, 0x5422),
    N(TIOCGSID, 0x5429),
    N(TIOCGPTN, 0x80045430),
    N(TIOCSPTLCK, 0x40045431),
    N(TIOCGPTPEER, 0x5441),
    N(FIONCLEX, 0x5450),
    N(FIOCLEX, 0x5451),
    N(FIOASYNC, 0x5452),
    N(FS_IOC_GETFLAGS, 0x80086601),
    N(FS_IOC_SETFLAGS, 0x40086602),
    N(BLKGETSIZE64, 0x80081272),
    N(FICLONE, 0x40049409),
};
constexpr ValueName kPrctlOption[] = {
    N(PR_SET_PDEATHSIG, 1),
    N(PR_GET_PDEATHSIG, 2),
    N(PR_GET_DUMPABLE, 3),
    N(PR_SET_DUMPABLE, 4),
    N(PR_GET_KEEPCAPS, 7),
    N(PR_SET_KEEPCAPS, 8),
    N(PR_SET_NAME, 15),
    N(PR_GET_NAME, 16),
    N(PR_GET_SECCOMP, 21),
    N(PR_SET_SECCOMP, 22),
    N(PR_CAPBSET_READ, 23),
    N(PR_CAPBSET_DROP, 24),
    N(PR_SET_MM, 35),
    N(PR_SET_CHILD_SUBREAPER, 36),
    N(PR_GET_CHILD_SUBREAPER, 37),
    N(PR_SET_NO_NEW_PRIVS, 38),
    N(PR_GET_NO_NEW_PRIVS, 39),
    N(PR_SET_THP_DISABLE, 41),
    N(PR_GET_THP_DISABLE, 42),
    N(PR_CAP_AMBIENT, 47),
    N(PR_SET_VMA, 0x53564d41),
};
constexpr ValueName kSchedPolicy[] = {N(SCHED_OTHER, 0), N(SCHED_FIFO, 1), N(SCHED_RR, 2),
                                      N(SCHED_BATCH, 3), N(SCHED_IDLE, 5), N(SCHED_DEADLINE, 6)};
constexpr ValueName kPriorityWhich[] = {N(PRIO_PROCESS, 0), N(PRIO_PGRP, 1), N(PRIO_USER, 2)};
constexpr ValueName kRusageWho[] = {N(RUSAGE_SELF, 0), N(RUSAGE_CHILDREN, 0xffffffff),
                                    N(RUSAGE_THREAD, 1)};
constexpr ValueName kItimerWhich[] = {N(ITIMER_REAL, 0), N(ITIMER_VIRTUAL, 1), N(ITIMER_PROF, 2)};
constexpr ValueName kFallocateMode[] = {
    B(FALLOC_FL_KEEP_SIZE, 1),        B(FALLOC_FL_PUNCH_HOLE, 2),
    B(FALLOC_FL_NO_HIDE_STALE, 4),    B(FALLOC_FL_COLLAPSE_RANGE, 8),
    B(FALLOC_FL_ZERO_RANGE, 0x10),    B(FALLOC_FL_INSERT_RANGE, 0x20),
    B(FALLOC_FL_UNSHARE_RANGE, 0x40),
};
constexpr ValueName kFadvice[] = {N(POSIX_FADV_NORMAL, 0),     N(POSIX_FADV_RANDOM, 1),
                                  N(POSIX_FADV_SEQUENTIAL, 2), N(POSIX_FADV_WILLNEED, 3),
                                  N(POSIX_FADV_DONTNEED, 4),   N(POSIX_FADV_NOREUSE, 5)};
constexpr ValueName kInotifyFlags[] = {B(IN_CLOEXEC, 02000000), B(IN_NONBLOCK, 04000)};
constexpr ValueName kXattrFlags[] = {B(XATTR_CREATE, 1), B(XATTR_REPLACE, 2)};
constexpr ValueName kCloseRangeFlags[] = {B(CLOSE_RANGE_UNSHARE, 2), B(CLOSE_RANGE_CLOEXEC, 4)};
constexpr ValueName kMlockallFlags[] = {B(MCL_CURRENT, 1), B(MCL_FUTURE, 2), B(MCL_ONFAULT, 4)};
constexpr ValueName kMembarrierCmd[] = {
    N(MEMBARRIER_CMD_QUERY, 0),
    N(MEMBARRIER_CMD_GLOBAL, 1),
    N(MEMBARRIER_CMD_GLOBAL_EXPEDITED, 2),
    N(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 4),
    N(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 8),
    N(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 16),
    N(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 32),
    N(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 64),
};
constexpr ValueName kPidfdFlags[] = {B(PIDFD_THREAD, 0200), B(PIDFD_NONBLOCK, 04000)};
constexpr ValueName kUnshareFlags[] = {
    B(CLONE_FS, 0x200),          B(CLONE_FILES, 0x400),         B(CLONE_NEWNS, 0x20000),
    B(CLONE_SYSVSEM, 0x40000),   B(CLONE_NEWCGROUP, 0x2000000), B(CLONE_NEWUTS, 0x4000000),
    B(CLONE_NEWIPC, 0x8000000),  B(CLONE_NEWUSER, 0x10000000),  B(CLONE_NEWPID, 0x20000000),
    B(CLONE_NEWNET, 0x40000000), B(CLONE_NEWTIME, 0x80),
};
constexpr ValueName kSplice[] = {B(SPLICE_F_MOVE, 1), B(SPLICE_F_NONBLOCK, 2), B(SPLICE_F_MORE, 4),
                                 B(SPLICE_F_GIFT, 8)};
constexpr ValueName kPollEvents[] = {
    B(POLLIN, 1),         B(POLLPRI, 2),        B(POLLOUT, 4),       B(POLLERR, 8),
    B(POLLHUP, 0x10),     B(POLLNVAL, 0x20),    B(POLLRDNORM, 0x40), B(POLLRDBAND, 0x80),
    B(POLLWRNORM, 0x100), B(POLLWRBAND, 0x200), B(POLLMSG, 0x400),   B(POLLREMOVE, 0x1000),
    B(POLLRDHUP, 0x2000),
};
constexpr ValueName kEpollEvents[] = {
    B(EPOLLIN, 1),
    B(EPOLLPRI, 2),
    B(EPOLLOUT, 4),
    B(EPOLLERR, 8),
    B(EPOLLHUP, 0x10),
    B(EPOLLNVAL, 0x20),
    B(EPOLLRDNORM, 0x40),
    B(EPOLLRDBAND, 0x80),
    B(EPOLLWRNORM, 0x100),
    B(EPOLLWRBAND, 0x200),
    B(EPOLLMSG, 0x400),
    B(EPOLLRDHUP, 0x2000),
    B(EPOLLEXCLUSIVE, 1u << 28),
    B(EPOLLWAKEUP, 1u << 29),
    B(EPOLLONESHOT, 1u << 30),
    B(EPOLLET, 1u << 31),
};
constexpr ValueName kSaFlags[] = {
    B(SA_RESTORER, 0x04000000),  B(SA_ONSTACK, 0x08000000),   B(SA_RESTART, 0x10000000),
    B(SA_NODEFER, 0x40000000),   B(SA_RESETHAND, 0x80000000), B(SA_SIGINFO, 4),
    B(SA_NOCLDSTOP, 1),          B(SA_NOCLDWAIT, 2),          B(SA_UNSUPPORTED, 0x400),
    B(SA_EXPOSE_TAGBITS, 0x800),
};

#undef B
#undef M
#undef N
#undef Z

struct SetEntry {
  std::span<const ValueName> names;
  bool flags;
};

SetEntry Lookup(ValueSet set) {
  switch (set) {
    case ValueSet::kOpenFlags:
      return {kOpenFlags, true};
    case ValueSet::kAtFlags:
      return {kAtFlags, true};
    case ValueSet::kStatxFlags:
      return {kStatxFlags, true};
    case ValueSet::kFaccessatFlags:
      return {kFaccessatFlags, true};
    case ValueSet::kFdOpenFlags:
      return {kFdOpenFlags, true};
    case ValueSet::kAccessMode:
      return {kAccessMode, true};
    case ValueSet::kProt:
      return {kProt, true};
    case ValueSet::kMmapFlags:
      return {kMmapFlags, true};
    case ValueSet::kMremapFlags:
      return {kMremapFlags, true};
    case ValueSet::kMadvise:
      return {kMadvise, false};
    case ValueSet::kMsyncFlags:
      return {kMsyncFlags, true};
    case ValueSet::kSeekWhence:
      return {kSeekWhence, false};
    case ValueSet::kIdType:
      return {kIdType, false};
    case ValueSet::kFcntlCmd:
      return {kFcntlCmd, false};
    case ValueSet::kFdFlags:
      return {kFdFlags, true};
    case ValueSet::kAddressFamily:
      return {kAddressFamily, false};
    case ValueSet::kSockType:
      return {kSockType, true};
    case ValueSet::kSockProto:
      return {kSockProto, false};
    case ValueSet::kMsgFlags:
      return {kMsgFlags, true};
    case ValueSet::kShutdownHow:
      return {kShutdownHow, false};
    case ValueSet::kSockLevel:
      return {kSockLevel, false};
    case ValueSet::kSigprocmaskHow:
      return {kSigprocmaskHow, false};
    case ValueSet::kCloneFlags:
      return {kCloneFlags, true};
    case ValueSet::kWaitOptions:
      return {kWaitOptions, true};
    case ValueSet::kRlimitResource:
      return {kRlimitResource, false};
    case ValueSet::kClockId:
      return {kClockId, false};
    case ValueSet::kTimerFlags:
      return {kTimerFlags, true};
    case ValueSet::kGrndFlags:
      return {kGrndFlags, true};
    case ValueSet::kFlockOp:
      return {kFlockOp, true};
    case ValueSet::kArchPrctl:
      return {kArchPrctl, false};
    case ValueSet::kFutexOp:
      return {kFutexOp, false};
    case ValueSet::kEpollCtlOp:
      return {kEpollCtlOp, false};
    case ValueSet::kEpollFlags:
      return {kEpollFlags, true};
    case ValueSet::kStatxMask:
      return {kStatxMask, true};
    case ValueSet::kRenameFlags:
      return {kRenameFlags, true};
    case ValueSet::kEventfdFlags:
      return {kEventfdFlags, true};
    case ValueSet::kMemfdFlags:
      return {kMemfdFlags, true};
    case ValueSet::kIoctlCmd:
      return {kIoctlCmd, false};
    case ValueSet::kPrctlOption:
      return {kPrctlOption, false};
    case ValueSet::kSchedPolicy:
      return {kSchedPolicy, false};
    case ValueSet::kPriorityWhich:
      return {kPriorityWhich, false};
    case ValueSet::kRusageWho:
      return {kRusageWho, false};
    case ValueSet::kItimerWhich:
      return {kItimerWhich, false};
    case ValueSet::kFallocateMode:
      return {kFallocateMode, true};
    case ValueSet::kFadvice:
      return {kFadvice, false};
    case ValueSet::kInotifyFlags:
      return {kInotifyFlags, true};
    case ValueSet::kXattrFlags:
      return {kXattrFlags, true};
    case ValueSet::kCloseRangeFlags:
      return {kCloseRangeFlags, true};
    case ValueSet::kMlockallFlags:
      return {kMlockallFlags, true};
    case ValueSet::kMembarrierCmd:
      return {kMembarrierCmd, false};
    case ValueSet::kPidfdFlags:
      return {kPidfdFlags, true};
    case ValueSet::kUnshareFlags:
      return {kUnshareFlags, true};
    case ValueSet::kSplice:
      return {kSplice, true};
    case ValueSet::kPollEvents:
      return {kPollEvents, true};
    case ValueSet::kEpollEvents:
      return {kEpollEvents, true};
    case ValueSet::kSaFlags:
      return {kSaFlags, true};
    case ValueSet::kNone:
    case ValueSet::kCount_:
      break;
  }
  return {{}, true};
}

// The prefix strace shows in "0x... /* SEEK_??? */" for an unknown value.
std::string_view Prefix(std::span<const ValueName> names) {
  if (names.empty()) return {};
  std::string_view n = names.front().name;
  size_t us = n.find('_', n.starts_with("__") ? 2 : 0);
  return us == std::string_view::npos ? n : n.substr(0, us + 1);
}

struct Restart {
  int err;
  std::string_view name;
  std::string_view message;
};
constexpr Restart kRestartCodes[] = {
    {kERestartSys, "ERESTARTSYS", "To be restarted if SA_RESTART is set"},
    {kERestartNoIntr, "ERESTARTNOINTR", "To be restarted"},
    {kERestartNoHand, "ERESTARTNOHAND", "To be restarted if no handler"},
    {kENoIoctlCmd, "ENOIOCTLCMD", "No ioctl command"},
    {kERestartRestartBlock, "ERESTART_RESTARTBLOCK", "Interrupted by signal"},
    {517, "EPROBE_DEFER", "Driver probe deferred"},
    {518, "EOPENSTALE", "Open stale"},
    {521, "EBADHANDLE", "Illegal NFS file handle"},
    {524, "ENOTSUPP", "Operation not supported"},
};

}  // namespace

std::span<const ValueName> ValueNames(ValueSet set) {
  return Lookup(set).names;
}

bool IsFlagSet(ValueSet set) {
  return Lookup(set).flags;
}

std::string FormatFlags(ValueSet set, uint64_t value) {
  std::span<const ValueName> names = Lookup(set).names;
  std::string out;
  uint64_t consumed = 0;
  auto add = [&out](std::string_view s) {
    if (!out.empty()) out += '|';
    out += s;
  };
  for (const ValueName& n : names) {
    if (n.mask == 0) continue;  // zero names only speak for the whole value
    if (n.mask & consumed) continue;
    if ((value & n.mask) != n.value) continue;
    add(n.name);
    consumed |= n.mask;
  }
  uint64_t rest = value & ~consumed;
  if (rest != 0) add(fmt::format("{:#x}", rest));
  if (out.empty()) {
    for (const ValueName& n : names)
      if (n.mask == 0 && n.value == 0) return std::string(n.name);
    return "0";
  }
  return out;
}

std::string_view EnumName(ValueSet set, uint64_t value) {
  // Enumerated arguments are C ints: compare the low 32 bits, so a sign-extended -1 and a
  // zero-extended one name the same value.
  uint32_t v32 = static_cast<uint32_t>(value);
  for (const ValueName& n : Lookup(set).names)
    if (static_cast<uint32_t>(n.value) == v32) return n.name;
  return {};
}

std::string FormatEnum(ValueSet set, uint64_t value) {
  std::string_view name = EnumName(set, value);
  if (!name.empty()) return std::string(name);
  return fmt::format("{:#x} /* {}??? */", static_cast<uint32_t>(value), Prefix(Lookup(set).names));
}

std::string SignalShortName(int sig) {
  // The kernel's numbering, as strace prints it: 32 is RTMIN (glibc keeps 32 and 33 for itself
  // and calls 34 SIGRTMIN, but the trace shows what the kernel saw).
  if (sig >= 32 && sig <= 64) return sig == 32 ? "RTMIN" : fmt::format("RT_{}", sig - 32);
  if (sig == 29) return "IO";  // SIGPOLL is the same signal; strace names it SIGIO
  const char* abbrev = sig > 0 && sig < 32 ? sigabbrev_np(sig) : nullptr;
  if (abbrev == nullptr) return std::to_string(sig);
  return abbrev;
}

std::string SignalName(int sig) {
  if (sig <= 0 || sig > 64) return std::to_string(sig);
  if (sig >= 29) return "SIG" + SignalShortName(sig);
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return std::to_string(sig);
  return std::string("SIG") + abbrev;
}

std::string_view ErrnoName(int err) {
  for (const Restart& r : kRestartCodes)
    if (r.err == err) return r.name;
  if (err <= 0 || err >= 512) return {};
  const char* name = strerrorname_np(err);
  return name ? std::string_view(name) : std::string_view();
}

std::string ErrnoMessage(int err) {
  for (const Restart& r : kRestartCodes)
    if (r.err == err) return std::string(r.message);
  const char* desc = err > 0 && err < 512 ? strerrordesc_np(err) : nullptr;
  return desc ? desc : fmt::format("Unknown error {}", err);
}

}  // namespace fay
