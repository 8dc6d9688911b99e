#include "record/ptrace/ptrace_recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "common/child_process.h"
#include "record/copy_capture.h"
#include "record/ptrace/seccomp_filter.h"
#include "record/stop_signals.h"
#include "record/task_info.h"
#include "record/tracee_memory.h"
#include "schema/syscall_capture.h"
#include "schema/syscall_set.h"
#include "schema/syscall_table.h"
#include "trace/writer.h"

extern char** environ;

namespace fay::record {
namespace {

// TRACESECCOMP: without it the kernel fails every SECCOMP_RET_TRACE call with ENOSYS.
constexpr unsigned kOptions = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
                              PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL |
                              PTRACE_O_TRACESECCOMP;

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_count = 0;
volatile pid_t g_root = 0;

void OnStopSignal(int sig) {
  g_stop_signal = sig;
  g_stop_count = g_stop_count + 1;
  // Wakes the tracer's waitpid even when the tracee is idle: the interrupt makes it stop.
  int saved = errno;
  if (g_root > 0) ptrace(PTRACE_INTERRUPT, g_root, 0, 0);
  errno = saved;
}

uint64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Task {
  TaskInfo info;
  bool info_read = false;
  bool in_syscall = false;  // between an entry (or seccomp) stop and its exit stop
  bool record = false;      // the pending call is being recorded
  SyscallEvent pending;
};

// An exec or exit event of task tid.
ProcessEvent TaskEvent(ProcessEventKind kind, const Task& t, pid_t tid, uint64_t now) {
  ProcessEvent pe;
  pe.kind = kind;
  pe.time_ns = now;
  pe.pid = t.info.tgid ? t.info.tgid : tid;
  pe.tid = tid;
  return pe;
}

class PtraceRecorder {
 public:
  explicit PtraceRecorder(const RecordOptions& options) : opt_(options) {}
  Expected<RecordResult> Run();

 private:
  Status Prepare();
  Status Fork();
  Status Go();
  Status AttachAll(pid_t pid);
  void Loop();
  pid_t WaitForStop(int* status);
  static constexpr int kMinSpin = 8, kMaxSpin = 256;
  int spin_budget_ = kMaxSpin;
  void OnSyscallStop(pid_t tid, Task& t);
  void OnEventStop(pid_t tid, Task& t, int event, int status);
  void OnGone(pid_t tid, int status);
  // A task's end: its call in progress never returns ("= ?"), and its exit event.
  void EndTask(pid_t tid, Task& t, int status, uint64_t now);
  void Resume(pid_t tid, int sig = 0);
  void BeginDetach();
  Task& TaskFor(pid_t tid);
  void FillIdentity(pid_t tid, Task& t, SyscallEvent& ev);
  void Emit(SyscallEvent&& ev);
  void AppendProcess(ProcessEvent&& pe);
  // A signal at its signal-delivery-stop, before it reaches the program.
  void NoteSignal(pid_t tid, Task& t, int sig);
  void KillAll();

  const RecordOptions& opt_;
  RecordResult result_;
  std::unique_ptr<trace::Writer> writer_;
  SyscallSet filter_ = SyscallSet::All();
  bool filtered_ = false;  // -e given
  bool seccomp_ = false;   // the filter runs in the tracee (spawned commands only)
  bool started_ = false;   // the root has reached its execve: record from there on
  bool detaching_ = false;
  // Recording stopped, but the command's -e seccomp filter needs its tracer: every stop is
  // resumed and nothing is written until the command exits (see BeginDetach).
  bool passing_ = false;
  int stops_seen_ = 0;  // stop signals handled so far
  pid_t root_ = 0;
  int go_fd_ = -1;
  bool spawned_ = false;
  int root_status_ = 0;
  bool root_exited_ = false;
  std::unordered_map<pid_t, Task> tasks_;
  std::unordered_map<pid_t, bool> seen_tgids_;
};

Status PtraceRecorder::Prepare() {
  if (!opt_.syscall_filter.empty()) {
    FAY_ASSIGN_OR_RETURN(filter_, ParseSyscallSet(opt_.syscall_filter));
    filtered_ = true;
    // execve is how the recorder sees the command start; it stays traced (not recorded unless
    // the set names it).
  }
  return Status::Ok();
}

// Forks the command, seizes it while it waits on a pipe and stops it; Go() lets it exec. The
// writer is created in between, so the header knows the root pid and an unwritable output path
// never runs the command.
Status PtraceRecorder::Fork() {
  FAY_ASSIGN_OR_RETURN(std::string exe, ResolveCommand(opt_.argv[0]));
  std::vector<sock_filter> filter;
  if (filtered_) {
    SyscallSet stops = filter_;
    stops.Add(sysno::execve);
    stops.Add(sysno::execveat);
    filter = BuildSeccompFilter(stops);
    seccomp_ = true;
  }
  std::vector<char*> argv;
  for (const auto& a : opt_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  const StrayFds stray({go[0]});
  pid_t child = fork();
  if (child < 0) return ErrnoError("fork");
  if (child == 0) {
    // Only async-signal-safe calls from here to exec.
    close(go[1]);
    stray.CloseInChild();
    char c;
    ssize_t n;
    while ((n = read(go[0], &c, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1) _exit(125);  // the recorder gave up before starting us
    if (!filter.empty() && InstallSeccompFilter(filter) != 0) _exit(126);
    // The recorder blocks and handles its stop signals; the command gets what fay inherited.
    RestoreInheritedSignals();
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(go[0]);
  go_fd_ = go[1];
  root_ = child;
  g_root = child;
  spawned_ = true;
  if (ptrace(PTRACE_SEIZE, child, 0, kOptions) != 0) {
    Status st = ErrnoError("ptrace(PTRACE_SEIZE) of the command");
    close(go_fd_);
    go_fd_ = -1;
    waitpid(child, nullptr, 0);
    return st;
  }
  ptrace(PTRACE_INTERRUPT, child, 0, 0);
  int status;
  while (waitpid(child, &status, __WALL) < 0 && errno == EINTR) {
  }
  tasks_[child];
  return Status::Ok();
}

Status PtraceRecorder::Go() {
  Resume(root_);
  bool ok = write(go_fd_, "g", 1) == 1;
  close(go_fd_);
  go_fd_ = -1;
  if (!ok) return ErrnoError("starting the command");
  return Status::Ok();
}

Status PtraceRecorder::AttachAll(pid_t pid) {
  if (kill(pid, 0) != 0)
    return Error(Code::kNotFound, errno == ESRCH
                                      ? fmt::format("no process with pid {}", pid)
                                      : fmt::format("pid {}: {}", pid, std::strerror(errno)));
  root_ = pid;
  g_root = pid;
  started_ = true;
  // Threads created while we attach are caught by TRACECLONE on the ones already seized; the
  // loop re-reads the task list until it stops growing.
  for (bool grew = true; grew;) {
    grew = false;
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = opendir(dir.c_str());
    if (!d) return ErrnoError(fmt::format("pid {}: cannot list threads", pid));
    while (dirent* e = readdir(d)) {
      pid_t tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
      if (tid <= 0 || tasks_.count(tid)) continue;
      if (ptrace(PTRACE_SEIZE, tid, 0, kOptions & ~PTRACE_O_EXITKILL) != 0) {
        int err = errno;
        if (err == ESRCH) continue;  // exited meanwhile
        // A leader that called pthread_exit while the other threads run on: nothing to trace
        // in it, and the process is traced through the others (as strace does).
        if (err == EPERM && ThreadExited(pid, tid)) continue;
        closedir(d);
        return Error(Code::kPermission,
                     fmt::format("cannot trace pid {}: {}{}", pid, std::strerror(err),
                                 err == EPERM ? " (run as root, or check "
                                                "/proc/sys/kernel/yama/ptrace_scope and that no "
                                                "other tracer is attached)"
                                              : ""));
      }
      ptrace(PTRACE_INTERRUPT, tid, 0, 0);
      tasks_[tid];
      grew = true;
    }
    closedir(d);
  }
  // Every thread had exited by the time it was reached: a zombie now, nothing to record.
  if (tasks_.empty()) return ExitedError(pid);
  // The stop signal's wake-up interrupts a tracee: the leader is none when it had exited.
  if (!tasks_.count(pid)) g_root = tasks_.begin()->first;
  return Status::Ok();
}

Task& PtraceRecorder::TaskFor(pid_t tid) {
  return tasks_[tid];
}

void PtraceRecorder::Resume(pid_t tid, int sig) {
  // With the seccomp filter in place, syscall stops come from the filter; PTRACE_CONT runs to
  // the next one. Inside a call (after a seccomp stop) PTRACE_SYSCALL stops at its exit.
  auto it = tasks_.find(tid);
  bool to_exit = it != tasks_.end() && it->second.in_syscall;
  int req = (seccomp_ && !to_exit) ? PTRACE_CONT : PTRACE_SYSCALL;
  ptrace(static_cast<__ptrace_request>(req), tid, 0, sig);
}

void PtraceRecorder::FillIdentity(pid_t tid, Task& t, SyscallEvent& ev) {
  if (!t.info_read) {
    t.info_read = ReadTaskInfo(tid, &t.info);
    if (!t.info_read) t.info.tgid = tid;
  }
  ev.pid = t.info.tgid;
  ev.tid = tid;
  ev.ppid = t.info.ppid;
  ev.uid = t.info.uid;
  ev.comm = t.info.comm;
}

void PtraceRecorder::NoteSignal(pid_t tid, Task& t, int sig) {
  ProcessEvent pe = TaskEvent(ProcessEventKind::kSignal, t, tid, Now(CLOCK_MONOTONIC));
  pe.signo = sig;
  siginfo_t si{};
  if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0) {
    const auto* p = reinterpret_cast<const uint8_t*>(&si);
    pe.siginfo.assign(p, p + kSiginfoBytes);
  }
  AppendProcess(std::move(pe));
}

void PtraceRecorder::AppendProcess(ProcessEvent&& pe) {
  if (!passing_) writer_->Append(std::move(pe));
}

void PtraceRecorder::Emit(SyscallEvent&& ev) {
  if (passing_) return;
  if (opt_.observer && opt_.observer->Wants(ev.nr)) opt_.observer->Observe(ev);
  if (!writer_->Append(std::move(ev))) {
    if (result_.error.empty()) {
      result_.error = "the trace could not be written (disk full or I/O error); recording stopped";
      BeginDetach();
    }
    return;
  }
  ++result_.syscalls;
}

void PtraceRecorder::OnSyscallStop(pid_t tid, Task& t) {
  __ptrace_syscall_info info{};
  long n = ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof info, &info);
  if (n <= 0) {
    Resume(tid);
    return;
  }
  if (info.op == PTRACE_SYSCALL_INFO_ENTRY || info.op == PTRACE_SYSCALL_INFO_SECCOMP) {
    uint64_t now = Now(CLOCK_MONOTONIC);
    int nr =
        static_cast<int>(info.op == PTRACE_SYSCALL_INFO_ENTRY ? info.entry.nr : info.seccomp.nr);
    const uint64_t* args =
        info.op == PTRACE_SYSCALL_INFO_ENTRY ? info.entry.args : info.seccomp.args;
    if (!started_ && tid == root_ && (nr == sysno::execve || nr == sysno::execveat))
      started_ = true;
    t.in_syscall = true;
    t.record = started_ && filter_.Contains(nr);
    if (t.record) {
      SyscallEvent& ev = t.pending;
      ev = SyscallEvent{};
      ev.entry_ns = now;
      ev.nr = nr;
      for (int i = 0; i < 6; ++i) ev.args[i] = args[i];
      FillIdentity(tid, t, ev);
      ProcessVmMemory mem(tid);
      CaptureAtEntry(nr, ev.args, mem, opt_.max_buffer, &ev.buffers, info.stack_pointer);
    }
    Resume(tid);
    return;
  }
  if (info.op == PTRACE_SYSCALL_INFO_EXIT) {
    uint64_t now = Now(CLOCK_MONOTONIC);
    bool was = t.in_syscall;
    t.in_syscall = false;
    if (was && t.record) {
      SyscallEvent ev = std::move(t.pending);
      ev.exit_ns = now;
      ev.ret = info.exit.rval;
      ProcessVmMemory mem(tid);
      CaptureAtExit(ev.nr, ev.args, ev.ret, mem, opt_.max_buffer, &ev.buffers);
      // Stopped at the exit, the fd's offset is the call's own: the copy's source is exact.
      if (CopySourceArg(ev.nr) >= 0) CaptureCopiedData(ev, tid, nullptr, true, opt_.max_buffer);
      int nr = ev.nr;
      int64_t ret = ev.ret;
      // Calls that change what later events carry (read while the thread is still stopped).
      if (ret >= 0 && (nr == sysno::prctl || nr == sysno::execve || nr == sysno::execveat))
        ReadTaskComm(tid, &t.info.comm);
      if (ret >= 0 && (Signature(nr).classes & kClassCreds)) t.info_read = false;
      t.record = false;
      // Everything the stop was needed for is copied: let the program run while the event is
      // queued, so the two overlap on separate CPUs.
      Resume(tid);
      Emit(std::move(ev));
      return;
    }
    t.record = false;
    Resume(tid);
    return;
  }
  Resume(tid);
}

void PtraceRecorder::OnEventStop(pid_t tid, Task& t, int event, int status) {
  uint64_t now = Now(CLOCK_MONOTONIC);
  switch (event) {
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
    case PTRACE_EVENT_CLONE: {
      unsigned long msg = 0;
      ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg);
      pid_t child = static_cast<pid_t>(msg);
      Task& c = TaskFor(child);
      if (!t.info_read) t.info_read = ReadTaskInfo(tid, &t.info);
      c.info = t.info;  // inherited; tgid and ppid fixed below
      // The new task exists (it is stopped, waiting for us), so /proc says whether it joined
      // its parent's thread group; the clone flags may not have been seen (-e without clone).
      TaskInfo child_info;
      bool thread = event == PTRACE_EVENT_CLONE && ReadTaskInfo(child, &child_info) &&
                    child_info.tgid != child;
      if (thread) {
        c.info.tgid = t.info.tgid;
      } else {
        c.info.tgid = child;
        c.info.ppid = t.info.tgid;
      }
      c.info_read = t.info_read;
      if (!passing_) ++(thread ? result_.threads : result_.processes);
      if (started_) {
        ProcessEvent pe;
        pe.kind = ProcessEventKind::kFork;
        pe.time_ns = now;
        pe.pid = c.info.tgid;
        pe.tid = child;
        pe.parent_pid = t.info.tgid;
        pe.is_thread = thread;
        AppendProcess(std::move(pe));
      }
      Resume(tid);
      return;
    }
    case PTRACE_EVENT_EXEC: {
      unsigned long former = 0;
      ptrace(PTRACE_GETEVENTMSG, tid, 0, &former);
      if (static_cast<pid_t>(former) != tid) {
        // A non-leader thread exec'd: the kernel ended the leader without a stop (its pending
        // call never returns, its exit status is 0, as the eBPF backend sees them), and the
        // thread now has the leader's id, and its pending execve with it.
        EndTask(tid, t, 0, now);
        t.in_syscall = false;
        auto it = tasks_.find(static_cast<pid_t>(former));
        if (it != tasks_.end()) {
          t.in_syscall = it->second.in_syscall;
          t.record = it->second.record;
          t.pending = std::move(it->second.pending);
          t.pending.tid = tid;
          tasks_.erase(it);
        }
      }
      ReadTaskComm(tid, &t.info.comm);
      if (started_) {
        ProcessEvent pe = TaskEvent(ProcessEventKind::kExec, t, tid, now);
        pe.path = ReadProcLink(tid, "exe");
        AppendProcess(std::move(pe));
      }
      Resume(tid);
      return;
    }
    case PTRACE_EVENT_STOP: {
      int sig = WSTOPSIG(status);
      if (detaching_) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        tasks_.erase(tid);
        return;
      }
      if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
        // A group-stop: stay stopped the way the program was asked to, until SIGCONT.
        ptrace(PTRACE_LISTEN, tid, 0, 0);
        return;
      }
      Resume(tid);
      return;
    }
    default:
      if (event == PTRACE_EVENT_SECCOMP) {
        OnSyscallStop(tid, t);
        return;
      }
      Resume(tid);
  }
}

void PtraceRecorder::EndTask(pid_t tid, Task& t, int status, uint64_t now) {
  if (t.in_syscall && t.record) {
    // exit, exit_group, or killed inside a call: strace prints "= ?".
    SyscallEvent ev = std::move(t.pending);
    ev.flags |= kEventNoExit;
    Emit(std::move(ev));
  }
  if (started_) {
    ProcessEvent pe = TaskEvent(ProcessEventKind::kExit, t, tid, now);
    pe.exit_status = status;
    AppendProcess(std::move(pe));
  }
}

void PtraceRecorder::OnGone(pid_t tid, int status) {
  auto it = tasks_.find(tid);
  if (it != tasks_.end()) {
    EndTask(tid, it->second, status, Now(CLOCK_MONOTONIC));
    tasks_.erase(it);
  }
  if (tid == root_) {
    root_exited_ = true;
    root_status_ = status;
  }
}

void PtraceRecorder::BeginDetach() {
  if (detaching_ || passing_) return;
  if (seccomp_) {
    // The filter stops each call of the -e set for a tracer, and once no tracer is attached the
    // kernel fails those calls with ENOSYS for the rest of the program's life: detaching would
    // change what the program does. So recording stops here and fay stays its tracer, resuming
    // every stop, until it exits (fay waits for a command it started anyway). A second signal
    // ends it as strace's --seccomp-bpf does: the program is killed, never left half-working.
    passing_ = true;
    fmt::print(stderr,
               "fay: recording stopped; the command runs on under fay until it exits, because "
               "its -e system call filter needs a tracer (signal fay again to kill it)\n");
    return;
  }
  detaching_ = true;
  // Each tracee must be in a ptrace-stop to be detached: interrupt them all, detach each as its
  // stop arrives (OnEventStop / the loop).
  for (auto& [tid, t] : tasks_) ptrace(PTRACE_INTERRUPT, tid, 0, 0);
}

// A syscall-heavy program stops again a few microseconds after it is resumed. Sleeping in
// waitpid for that costs a wakeup (an IPI, and on a virtual machine an exit) per stop, which
// is a large share of a ptrace round trip; so poll for a short while first, and sleep only when
// the program is busy elsewhere.
pid_t PtraceRecorder::WaitForStop(int* status) {
  // Polling only pays while the recorder has a CPU of its own: with as many threads as CPUs
  // it would take time the program's threads need.
  static const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  if (static_cast<long>(tasks_.size()) < cpus && spin_budget_ > 0) {
    for (int i = 0; i < spin_budget_; ++i) {
      pid_t tid = waitpid(-1, status, __WALL | WNOHANG);
      if (tid != 0) {
        spin_budget_ = std::min(spin_budget_ * 2, kMaxSpin);
        return tid;
      }
    }
    // Nothing came: the program is doing real work between calls; spin less next time.
    spin_budget_ = std::max(spin_budget_ / 2, kMinSpin);
  }
  return waitpid(-1, status, __WALL);
}

void PtraceRecorder::KillAll() {
  for (auto& [tid, t] : tasks_) kill(tid, SIGKILL);
}

void PtraceRecorder::Loop() {
  bool killed = false;
  while (!tasks_.empty()) {
    if (g_stop_signal && !detaching_ && !passing_) {
      stops_seen_ = g_stop_count;
      BeginDetach();
    }
    if (passing_ && g_stop_count > stops_seen_ && !killed) {
      KillAll();
      killed = true;
    }
    int status = 0;
    pid_t tid = WaitForStop(&status);
    if (tid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: nothing left to wait for
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      OnGone(tid, status);
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    Task& t = TaskFor(tid);
    if (detaching_) {
      // Any stop will do, except that a pending signal must go back to the program.
      int sig = WSTOPSIG(status);
      bool plain_signal = (status >> 16) == 0 && sig != (SIGTRAP | 0x80);
      if (ptrace(PTRACE_DETACH, tid, 0, plain_signal ? sig : 0) == 0 || errno == ESRCH)
        tasks_.erase(tid);
      continue;
    }
    int event = status >> 16;
    if (event != 0) {
      OnEventStop(tid, t, event, status);
    } else if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
      OnSyscallStop(tid, t);
    } else {
      // A signal on its way to the program: note it as strace shows it, and deliver it.
      if (started_) NoteSignal(tid, t, WSTOPSIG(status));
      Resume(tid, WSTOPSIG(status));
    }
  }
}

Expected<RecordResult> PtraceRecorder::Run() {
  FAY_RETURN_IF_ERROR(Prepare());
  RecordingInfo info = BaseRecordingInfo(opt_, "ptrace");
  result_.path = opt_.output.empty() ? DefaultOutputName(opt_) : opt_.output;

  // The writer thread must not take the stop signals: blocked while it is created.
  StopSignals signals;
  if (opt_.pid && kill(opt_.pid, 0) != 0) {
    return Error(Code::kNotFound, errno == ESRCH
                                      ? fmt::format("no process with pid {}", opt_.pid)
                                      : fmt::format("pid {}: {}", opt_.pid, std::strerror(errno)));
  }
  if (!opt_.pid) {
    Status forked = Fork();
    if (!forked.ok()) {
      return forked;
    }
    info.root_pid = root_;
  }
  info.anchor_monotonic_ns = Now(CLOCK_MONOTONIC);
  info.anchor_realtime_ns = Now(CLOCK_REALTIME);
  trace::WriterOptions wo;
  wo.flight = opt_.flight;
  auto writer = trace::Writer::Create(result_.path, info, wo);
  if (!writer.ok()) {
    if (spawned_) {
      // Closing the pipe makes the child exit without ever running the command.
      close(go_fd_);
      go_fd_ = -1;
      ptrace(PTRACE_DETACH, root_, 0, 0);
      waitpid(root_, nullptr, 0);
    }
    return writer.status();
  }
  writer_ = std::move(writer).value();
  const OutputFile made = IdentifyOutput(result_.path);

  signals.Handle(OnStopSignal);

  uint64_t t0 = Now(CLOCK_MONOTONIC);
  Status started = opt_.pid ? AttachAll(opt_.pid) : Go();
  if (!started.ok()) {
    for (auto& [tid, t] : tasks_) ptrace(PTRACE_DETACH, tid, 0, 0);
    writer_->Close();
    RemoveOutput(result_.path, made);
    return started;
  }
  ++result_.processes;
  ++result_.threads;
  SayAttached(opt_, result_.path, tasks_.size());
  Loop();
  result_.detached = detaching_ || passing_;
  Status closed = writer_->Close();
  if (!closed.ok() && result_.error.empty()) result_.error = closed.message();
  trace::WriterStats st = writer_->stats();
  // After a failed write, what the file holds: calls queued behind the failure never got there.
  if (!closed.ok()) result_.syscalls = st.syscall_events;
  result_.bytes_captured = st.bytes_captured;
  result_.file_bytes = st.file_bytes;
  result_.seconds = (Now(CLOCK_MONOTONIC) - t0) / 1e9;

  signals.Restore();
  g_root = 0;

  if (spawned_ && !root_exited_) {
    // Detached early: the command runs on; its status is still ours to report.
    int status = 0;
    while (waitpid(root_, &status, 0) < 0 && errno == EINTR) {
    }
    root_status_ = status;
    root_exited_ = true;
  }
  if (spawned_ && root_exited_) {
    result_.exit_code = WIFEXITED(root_status_)     ? WEXITSTATUS(root_status_)
                        : WIFSIGNALED(root_status_) ? 128 + WTERMSIG(root_status_)
                                                    : 1;
  }
  if (!result_.error.empty()) result_.exit_code = 1;
  return result_;
}

}  // namespace

Expected<RecordResult> RecordWithPtrace(const RecordOptions& options) {
  PtraceRecorder r(options);
  return r.Run();
}

}  // namespace fay::record
