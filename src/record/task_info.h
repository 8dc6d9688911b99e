// Per-thread facts a recorded event carries (tgid, ppid, uid, comm), read from /proc when a
// thread is first seen and again after the calls that change them.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fay::record {

struct TaskInfo {
  pid_t tgid = 0;
  pid_t ppid = 0;
  uint32_t uid = 0;
  std::array<char, 16> comm{};
};

// False when the thread is already gone.
bool ReadTaskInfo(pid_t tid, TaskInfo* out);
// The thread's comm only (after exec or prctl(PR_SET_NAME)).
bool ReadTaskComm(pid_t tid, std::array<char, 16>* out);
// PF_KTHREAD in /proc/PID/stat's flags. Neither backend can record a kernel thread: ptrace
// refuses it, and the probes would wait for a process that never makes a call or exits.
bool IsKernelThread(pid_t pid);
// Every thread of process pid has exited and it waits for its parent to reap it (a zombie). Its
// pid still answers kill(pid, 0), but it makes no more calls and ptrace refuses it (EPERM).
bool HasExited(pid_t pid);
// Thread tid of process pid has exited and waits to be reaped (state Z or X), or is gone: a leader
// that called pthread_exit while the other threads run on. ptrace refuses it (EPERM).
bool ThreadExited(pid_t pid, pid_t tid);
// /proc/PID/exe, cwd; empty when unreadable.
std::string ReadProcLink(pid_t pid, const char* what);
// /proc/PID/environ or cmdline as a list of NUL-separated strings.
std::vector<std::string> ReadProcStrings(pid_t pid, const char* what);
// The thread ids under /proc/PID/task now (empty if the process is gone).
std::vector<pid_t> ListThreads(pid_t pid);
// How many live threads process pid has now: an exited leader (pthread_exit) is not counted;
// 0 if the process is gone.
uint64_t CountThreads(pid_t pid);

}  // namespace fay::record
