// Executes one recorded call: for real when it is a file call on live state (see IsReplayed),
// emulated otherwise. An emulated call does nothing and takes its recorded result, except for
// what it must do to the replay's own bookkeeping: fork copies the fd table, execve drops the
// close-on-exec fds, chdir moves the working directory, a socket() frees its fd number.
//
// One Executor per replay worker thread: it owns the scratch buffers reads land in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay/fd_table.h"
#include "replay/sandbox.h"
#include "replay/verify.h"
#include "schema/syscall_event.h"

namespace fay::replay {

// How a replayed call's return value is compared with the recorded one.
enum class RetCompare : uint8_t {
  kExact,    // the same value (byte counts, offsets, 0 / -errno)
  kSuccess,  // new fds: both succeeded, or both failed with the same errno
};

struct Outcome {
  bool replayed = false;  // false: emulated
  int64_t ret = 0;        // live result (0..., or -errno)
  RetCompare compare = RetCompare::kExact;
  std::string data_mismatch;  // non-empty: returned data differed (what and where)
  bool as_prepared = false;   // a stat result differed only as --prepare made the file
  bool withheld = false;      // the setuid/setgid bits the call asked for were left out
  bool interrupted = false;   // a signal cut it short in the recording (ERESTARTSYS and kin)
};

// Whether a recorded result is one of the kernel's restart codes (ERESTARTSYS, ERESTARTNOINTR,
// ERESTARTNOHAND, ERESTART_RESTARTBLOCK): the call was cut short by a signal, then made again
// or turned into EINTR. It did not do what it was asked; replay does not run it.
bool IsInterrupted(int64_t ret);

// The calls fay replay executes for real (given live fds and resolvable paths).
bool IsReplayed(int nr);

// Per-process state lookup, provided by the replayer (the processes all exist before replay).
class ProcessDirectory {
 public:
  virtual ~ProcessDirectory() = default;
  virtual ProcessState* Find(int32_t pid) = 0;
};

struct ExecutorOptions {
  bool verify = false;  // compare returned data (reads, stat, getdents, readlink)
  // What --prepare did not restore as recorded; the replay adds the files whose set-id bits it
  // withheld.
  PreparedDiffs* prepared = nullptr;
};

class Executor {
 public:
  Executor(const Sandbox& sandbox, ProcessDirectory& procs, ExecutorOptions options)
      : sandbox_(sandbox), procs_(procs), options_(options), cache_(sandbox.generation()) {}

  Outcome Run(const SyscallEvent& ev, ProcessState& proc);

 private:
  // Each returns false when the call has to be emulated after all (an fd that is not live, a
  // path that was not captured or names /proc, /sys or /dev).
  bool Open(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Close(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Read(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Write(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool FdOp(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  // copy_file_range, sendfile and splice between two live fds (cp and cat use them for file
  // data).
  bool Copy(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  // ioctl(FICLONE) and FICLONERANGE between live fds; a copy where the file system has no
  // reflinks. Every other request is emulated.
  bool Ioctl(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Stat(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool PathOp(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Dup(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Fcntl(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  bool Pipe(const SyscallEvent& ev, ProcessState& proc, Outcome* out);
  void Emulate(const SyscallEvent& ev, ProcessState& proc);

  // The root-relative path argument arg of ev, joined with its base (the dirfd's path, or the
  // cwd for AT_FDCWD / a call without a dirfd: dirfd_arg < 0). False when it cannot be
  // resolved faithfully (path not captured, dirfd not live).
  bool PathArg(const SyscallEvent& ev, ProcessState& proc, int path_arg, int dirfd_arg,
               std::string* out) const;
  // A live fd for "the object named by (dirfd, path, flags)" as the stat/chmod family sees it:
  // the dirfd itself with AT_EMPTY_PATH and an empty path, else an O_PATH open in the sandbox.
  // Returns the fd (owned by *holder) or -errno; *emulate is set when the call cannot be
  // replayed faithfully.
  int Target(const SyscallEvent& ev, ProcessState& proc, int dirfd_arg, int path_arg, bool nofollow,
             bool empty_path, UniqueFd* holder, bool* emulate) const;
  // "/proc/self/fd/N" (or thread-self, or the recorded pid) names recorded fd N: a dup of its
  // live fd, -1 when the path is not of that form, -EBADF when N is not live.
  int ProcFdPath(const SyscallEvent& ev, ProcessState& proc, const std::string& path,
                 UniqueFd* holder) const;
  uint8_t* Scratch(size_t n);
  // A trace from someone else gets no setuid/setgid file: the mode a chmod or a creating open
  // asks for, without those bits (out->withheld says it had them).
  static uint64_t Withhold(uint64_t mode, Outcome* out);
  // After such a call succeeded on fd: --verify expects the bits missing there.
  void Withheld(int fd, uint64_t asked) const;

  // The fast paths: a path without a trailing slash is resolved as (cached parent fd, name) and
  // the last component looked at without following it; only when it is a symlink that must be
  // followed does the call go back to openat2 on the whole path.
  bool FastStat(const std::string& path, bool nofollow, bool is_statx, const SyscallEvent& ev,
                Outcome* out);
  int FastOpen(const std::string& path, uint64_t flags, uint64_t mode, bool* fallback);
  // Whether path (followed, inside the root) is a FIFO, whose open would block.
  bool IsFifo(const std::string& path) const;

  const Sandbox& sandbox_;
  ProcessDirectory& procs_;
  ExecutorOptions options_;
  mutable ParentCache cache_;
  std::vector<uint8_t> scratch_;
};

// Whether a root-relative path lies in the kernel's virtual trees (/proc, /sys, /dev), whose
// files replay never touches.
bool IsVirtualPath(const std::string& path);

// Finds the captured buffer of argument arg (element sub), or nullptr.
const CapturedBuffer* FindBuffer(const SyscallEvent& ev, int arg, int sub = 0,
                                 BufferDir dir = BufferDir::kIn);

// The name (arg 1) and, for a set, the value (arg 2, size arg 3) of an xattr call, as captured.
// False when they were not captured whole, or the name is one replay never sets (security.*,
// trusted.*): the call is emulated.
bool XattrArgs(const SyscallEvent& ev, bool set, std::string* name, const CapturedBuffer** value);

// A captured C string (a path, an xattr name), up to its NUL.
std::string_view CapturedView(const CapturedBuffer* b);
std::string CapturedString(const CapturedBuffer* b);

}  // namespace fay::replay
