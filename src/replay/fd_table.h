// Per-process replay state: the table mapping recorded fds to live fds, the working directory
// and the umask. A recorded fd absent from the table (stdin/out/err inherited from the
// recorder's shell, sockets, eventfds, files under /proc...) is emulated: calls on it use their
// recorded results.
//
// Two table entries may share one LiveFd: that is what dup and fork do to an open file
// description, so the offset is shared the way it was when recorded. close-on-exec belongs to
// the entry, as in the kernel.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "common/unique_fd.h"

namespace fay::replay {

struct LiveFd {
  UniqueFd fd;
  std::string path;  // root-relative path it was opened by, for *at calls relative to it
  bool is_pipe = false;
  // Status flags the replay added that the recording's open did not have (O_NONBLOCK on
  // pipes, O_NOFOLLOW from resolving the last component without following it): F_GETFL hides
  // them.
  std::atomic<int> hidden_flags{0};
  // The access mode F_GETFL shows when the replay opened it with another (a FIFO, read-write so
  // that it never blocks); -1 when it is the live one.
  int accmode = -1;
};

struct FdEntry {
  std::shared_ptr<LiveFd> live;
  bool cloexec = false;
};

// The fd table proper. A process owns one; clone with CLONE_FILES (without CLONE_THREAD) makes
// two processes share one, as the kernel does, so an fd opened by either is seen by both.
struct FdTable {
  mutable std::shared_mutex mu;
  std::map<int, FdEntry> fds;
};

// One recorded process (thread group). Threads of a process share it; fork copies it.
class ProcessState {
 public:
  // nullptr when recorded fd is not live (emulated).
  std::shared_ptr<LiveFd> Get(int fd) const;
  bool Has(int fd) const;
  // Installs (replacing whatever the recorded fd named).
  void Set(int fd, std::shared_ptr<LiveFd> live, bool cloexec);
  // Forgets the recorded fd; true when it was live.
  bool Erase(int fd);
  // Erases fds in [first, last]; with cloexec_only, only marks them close-on-exec.
  void EraseRange(int first, int last, bool cloexec_only);
  // -1 when not live.
  int GetCloexec(int fd) const;
  bool SetCloexec(int fd, bool on);
  // execve: entries marked close-on-exec go.
  void Exec();
  // exit_group: the process's table goes, closing what no other process holds (a table shared
  // under CLONE_FILES stays with the processes still using it). A reader of a pipe then sees
  // end-of-file once every process that held the write end has exited, as in the recording.
  void Exit();
  // fork: the child starts with a copy of the table (sharing the descriptions), cwd and umask.
  // With share_fds (CLONE_FILES) it uses the parent's table itself instead of a copy.
  void CopyFrom(const ProcessState& parent, bool share_fds = false);

  std::string cwd() const;
  void set_cwd(std::string cwd);
  uint32_t umask() const;
  void set_umask(uint32_t mask);

 private:
  // Guards cwd_, umask_ and which table table_ is; the table's own mutex guards its entries.
  // Always taken before the table's.
  mutable std::shared_mutex mu_;
  std::shared_ptr<FdTable> table_ = std::make_shared<FdTable>();
  std::string cwd_ = "/";
  uint32_t umask_ = 022;
};

}  // namespace fay::replay
