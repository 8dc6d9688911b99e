#include "inproc/inject.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "common/clock.h"
#include "probes/elf_symbols.h"

namespace fay::inproc {
namespace {

std::vector<pid_t> Tasks(pid_t pid) {
  std::vector<pid_t> out;
  if (DIR* d = opendir(fmt::format("/proc/{}/task", pid).c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(static_cast<pid_t>(atoi(e->d_name)));
    closedir(d);
  }
  return out;
}

// Every thread of a process, seized and stopped; let go (with any signal a stop caught) when
// destroyed.
class Stopped {
 public:
  explicit Stopped(pid_t pid) : pid_(pid) {}
  Stopped(const Stopped&) = delete;
  Stopped& operator=(const Stopped&) = delete;
  ~Stopped() { Release(); }

  Status StopAll() {
    // Threads started meanwhile: listed again until no new one appears.
    for (bool more = true; more;) {
      more = false;
      for (pid_t tid : Tasks(pid_)) {
        if (held_.count(tid)) continue;
        more = true;
        if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
          if (errno == ESRCH) continue;  // gone meanwhile
          return ErrnoError(fmt::format(
              "cannot ptrace {} (in-process probes with -p load their runtime through ptrace; "
              "kernel.yama.ptrace_scope or a seccomp profile may forbid it)",
              pid_));
        }
        held_[tid] = 0;
        if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) continue;
        // A thread that exits meanwhile is simply gone.
        if (!WaitStop(tid).ok()) Forget(tid);
      }
    }
    return Status::Ok();
  }

  // Waits for `tid`'s next stop; a signal it stopped for is kept, to be delivered at the end.
  Status WaitStop(pid_t tid, int* stop_signal = nullptr) {
    int status = 0;
    if (waitpid(tid, &status, __WALL) != tid) return ErrnoError("waiting for a stopped thread");
    if (!WIFSTOPPED(status))
      return Error(Code::kIo, fmt::format("thread {} ended while fay held it", tid));
    const int sig = WSTOPSIG(status);
    const bool event = (status >> 16) != 0;
    if (stop_signal) *stop_signal = event ? 0 : sig;
    // A signal the thread stopped for goes to it when it is let go, not lost.
    if (!event && held_.count(tid)) held_[tid] = sig;
    return Status::Ok();
  }

  void Forget(pid_t tid) { held_.erase(tid); }
  void ReleaseAllBut(pid_t keep) {
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->first == keep) {
        ++it;
        continue;
      }
      ptrace(PTRACE_DETACH, it->first, 0, it->second);
      it = held_.erase(it);
    }
  }
  void Release() { ReleaseAllBut(-1); }
  const std::map<pid_t, int>& held() const { return held_; }

 private:
  pid_t pid_;
  std::map<pid_t, int> held_;  // thread -> signal to deliver when let go
};

struct Mapping {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms, path;
};

std::vector<Mapping> Maps(pid_t pid) {
  std::vector<Mapping> out;
  std::ifstream in(fmt::format("/proc/{}/maps", pid));
  std::string line;
  while (std::getline(in, line)) {
    Mapping m;
    char perms[8] = {};
    unsigned long start, end, offset;
    int name_at = 0;
    if (sscanf(line.c_str(), "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &offset, &name_at) <
        4)
      continue;
    m.start = start;
    m.end = end;
    m.offset = offset;
    m.perms = perms;
    if (name_at > 0 && static_cast<size_t>(name_at) < line.size()) m.path = line.substr(name_at);
    out.push_back(m);
  }
  return out;
}

// Where `symbol` of the file `matches` picks is in the process: the file's load bias (its
// mapping at offset 0) plus the symbol's value.
Expected<uint64_t> RemoteSymbol(pid_t pid, const std::function<bool(const std::string&)>& matches,
                                const std::string& symbol, const std::string& what) {
  for (const Mapping& m : Maps(pid)) {
    if (m.offset != 0 || !matches(m.path)) continue;
    std::string file = fmt::format("/proc/{}/root{}", pid, m.path);
    FAY_ASSIGN_OR_RETURN(auto syms, ReadFunctionSymbols(file));
    for (const ElfSymbol& s : syms)
      if (s.name == symbol) return m.start + s.address;
    return Error(Code::kNotFound, fmt::format("{} has no {}", m.path, symbol));
  }
  return Error(Code::kNotFound, fmt::format("process {} has no {} mapped", pid, what));
}

bool IsLibc(const std::string& path) {
  auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base == "libc.so.6" || base.rfind("libc-", 0) == 0;
}

// Calls into a stopped process on one of its threads, whose registers are its own again when
// this goes. Strings are put in a scratch area well below its stack pointer; each call's frame
// is below that, with a return address of 0, which ends the call with a fault fay catches.
class Remote {
 public:
  Remote(pid_t tid, Stopped* stopped) : tid_(tid), stopped_(stopped) {}
  ~Remote() {
    if (saved_ok_) ptrace(PTRACE_SETREGS, tid_, 0, &saved_);
  }
  Status Begin() {
    if (ptrace(PTRACE_GETREGS, tid_, 0, &saved_) != 0)
      return ErrnoError("reading a thread's registers");
    saved_ok_ = true;
    top_ = (saved_.rsp - 512) & ~uint64_t{15};  // past the red zone
    next_ = top_;
    return Status::Ok();
  }
  // Copies `bytes` into the scratch area; returns their address there.
  Expected<uint64_t> Put(const std::string& bytes) {
    next_ = (next_ - bytes.size()) & ~uint64_t{15};
    if (top_ - next_ > 8192) return Error(Code::kInternal, "remote scratch area full");
    FAY_RETURN_IF_ERROR(Write(next_, bytes.data(), bytes.size()));
    return next_;
  }
  // func(args): a call that has not returned after 300 ms may wait on a lock another stopped
  // thread holds (the loader's, malloc's): the others are let go then, once.
  // `let_go_after_ns`: how long before the other threads are let go (0: never before the
  // deadlock wait below).
  Expected<uint64_t> Call(uint64_t func, const std::vector<uint64_t>& args,
                          uint64_t let_go_after_ns = 300'000'000) {
    user_regs_struct r = saved_;
    uint64_t sp = ((next_ - 256) & ~uint64_t{15}) - 8;
    const uint64_t zero = 0;
    FAY_RETURN_IF_ERROR(Write(sp, &zero, 8));
    r.rsp = sp;
    r.rip = func;
    r.rax = 0;
    r.orig_rax = ~0ull;  // no system call to restart on the way
    unsigned long long* arg_regs[6] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
    for (size_t i = 0; i < args.size() && i < 6; ++i) *arg_regs[i] = args[i];
    if (ptrace(PTRACE_SETREGS, tid_, 0, &r) != 0) return ErrnoError("setting a thread's registers");
    int deliver = 0;
    const uint64_t start = ClockNs(CLOCK_MONOTONIC);
    for (;;) {
      if (ptrace(PTRACE_CONT, tid_, 0, deliver) != 0) return ErrnoError("running a remote call");
      deliver = 0;
      int status = 0;
      for (;;) {
        pid_t w = waitpid(tid_, &status, __WALL | WNOHANG);
        if (w == tid_) break;
        if (w < 0) return ErrnoError("waiting for a remote call");
        const uint64_t waited = ClockNs(CLOCK_MONOTONIC) - start;
        // A call waiting on a lock a stopped thread holds: the others go (after 2 s even while
        // patching: running threads over a half-written jump are a smaller risk than a
        // process that never runs again).
        const uint64_t limit = let_go_after_ns ? let_go_after_ns : 2'000'000'000ull;
        if (!let_go_ && waited > limit) {
          stopped_->ReleaseAllBut(tid_);
          let_go_ = true;
        }
        // The thread is inside the call: it cannot be given back in the middle of it, so fay
        // waits, and says so.
        if (waited / 10'000'000'000ull > said_) {
          said_ = waited / 10'000'000'000ull;
          fmt::print(stderr, "fay: still waiting for a call in thread {} to return ({} s)\n", tid_,
                     said_ * 10);
        }
        usleep(100);
      }
      if (!WIFSTOPPED(status)) {
        saved_ok_ = false;
        stopped_->Forget(tid_);
        return Error(Code::kIo, "the process ended during fay's call into it");
      }
      user_regs_struct now{};
      if (ptrace(PTRACE_GETREGS, tid_, 0, &now) != 0) return ErrnoError("reading a call's result");
      if (WSTOPSIG(status) == SIGSEGV && now.rip == 0) return static_cast<uint64_t>(now.rax);
      // Anything else the thread stopped for: a signal is delivered, an event passed over.
      if ((status >> 16) == 0) deliver = WSTOPSIG(status);
    }
  }
  bool let_go() const { return let_go_; }

 private:
  Status Write(uint64_t at, const void* p, size_t n) {
    iovec local{const_cast<void*>(p), n}, remote{reinterpret_cast<void*>(at), n};
    if (process_vm_writev(tid_, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n))
      return ErrnoError("writing below a thread's stack");
    return Status::Ok();
  }
  pid_t tid_;
  Stopped* stopped_;
  user_regs_struct saved_{};
  bool saved_ok_ = false;
  uint64_t top_ = 0, next_ = 0;
  bool let_go_ = false;
  uint64_t said_ = 0;
};

// Single-steps every stopped thread out of the first bytes of the functions about to be
// patched: a thread stopped between two instructions the jump replaces would resume inside it.
Status StepOutOfPatchSites(Stopped* stopped,
                           const std::vector<std::pair<uint64_t, uint64_t>>& sites,
                           pid_t skip = -1) {
  std::vector<pid_t> tids;
  for (const auto& [tid, sig] : stopped->held())
    if (tid != skip) tids.push_back(tid);
  for (pid_t tid : tids) {
    for (int step = 0;; ++step) {
      user_regs_struct r{};
      if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) break;
      bool inside = std::any_of(sites.begin(), sites.end(),
                                [&](const auto& s) { return r.rip > s.first && r.rip < s.second; });
      if (!inside) break;
      if (step == 64)
        return Error(Code::kUnsupported,
                     fmt::format("thread {} stays inside the bytes a patch replaces", tid));
      if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) != 0) break;
      // A step that does not come back (a blocking call restarted) is interrupted: the thread
      // is then still inside, and the attach gives up rather than wait.
      bool back = false;
      for (int i = 0; i < 1000 && !back; ++i) {
        int status = 0;
        pid_t w = waitpid(tid, &status, __WALL | WNOHANG);
        if (w == tid) back = true;
        if (w < 0) return ErrnoError("waiting for a single step");
        if (!back) usleep(100);
      }
      if (!back) {
        ptrace(PTRACE_INTERRUPT, tid, 0, 0);
        FAY_RETURN_IF_ERROR(stopped->WaitStop(tid));
        return Error(Code::kUnsupported,
                     fmt::format("thread {} is stopped inside the bytes a patch replaces", tid));
      }
    }
  }
  return Status::Ok();
}

// The thread that makes the calls: one blocked in a system call where there is one, since it
// holds no lock of the C library (a thread stopped inside malloc would deadlock on its own
// lock in dlopen); else the main thread.
pid_t CallerThread(const Stopped& stopped, pid_t pid) {
  pid_t any = -1;
  for (const auto& [tid, sig] : stopped.held()) {
    user_regs_struct r{};
    if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) continue;
    if (static_cast<int64_t>(r.orig_rax) >= 0) return tid;
    if (any < 0 || tid == pid) any = tid;
  }
  return any;
}

Expected<std::string> RealPath(const std::string& path) {
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real)) return ErrnoError(path);
  return std::string(real);
}

}  // namespace

// Where each function about to be patched starts in the process, and the bytes a thread must not
// resume strictly inside: the jump's 5 (a boundary past them begins an instruction kept whole).
std::vector<std::pair<uint64_t, uint64_t>> Sites(pid_t pid,
                                                 const std::vector<FunctionAt>& functions) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const auto maps = Maps(pid);
  for (const FunctionAt& f : functions)
    for (const Mapping& m : maps)
      if (m.path == f.path && m.perms.find('x') != std::string::npos && f.file_offset >= m.offset &&
          f.file_offset < m.offset + (m.end - m.start)) {
        uint64_t at = m.start + (f.file_offset - m.offset);
        out.emplace_back(at, at + 5);  // only a stop strictly inside the jump's 5 bytes
      }
  return out;
}

Expected<InjectResult> InjectRuntime(pid_t pid, const std::string& library, const std::string& spec,
                                     const std::vector<FunctionAt>& functions) {
  FAY_ASSIGN_OR_RETURN(std::string lib, RealPath(library));
  FAY_ASSIGN_OR_RETURN(uint64_t dlopen_at, RemoteSymbol(pid, IsLibc, "dlopen", "libc.so.6"));
  InjectResult out;
  const uint64_t t0 = ClockNs(CLOCK_MONOTONIC);
  Stopped stopped(pid);
  FAY_RETURN_IF_ERROR(stopped.StopAll());
  pid_t caller = CallerThread(stopped, pid);
  if (caller < 0) return Error(Code::kNotFound, fmt::format("process {} has no thread", pid));
  // Every thread, the caller too (where it will resume), out of the bytes to replace.
  const auto sites = Sites(pid, functions);
  FAY_RETURN_IF_ERROR(StepOutOfPatchSites(&stopped, sites));
  {
    Remote remote(caller, &stopped);
    FAY_RETURN_IF_ERROR(remote.Begin());
    FAY_ASSIGN_OR_RETURN(uint64_t path_at, remote.Put(lib + std::string(1, '\0')));
    FAY_ASSIGN_OR_RETURN(uint64_t handle, remote.Call(dlopen_at, {path_at, 2 /* RTLD_NOW */}));
    if (handle == 0)
      return Error(Code::kIo, fmt::format("dlopen of {} failed in process {} (a library it "
                                          "needs is missing there?)",
                                          lib, pid));
    FAY_ASSIGN_OR_RETURN(uint64_t attach_at,
                         RemoteSymbol(
                             pid, [&](const std::string& p) { return p == lib; },
                             "fay_inproc_attach", "the runtime"));
    // Threads let go while the loader waited for a lock are stopped again: the patching
    // happens with every other thread stopped, none inside the bytes it replaces.
    if (remote.let_go()) {
      FAY_RETURN_IF_ERROR(stopped.StopAll());
      FAY_RETURN_IF_ERROR(StepOutOfPatchSites(&stopped, sites, caller));
    }
    FAY_ASSIGN_OR_RETURN(uint64_t spec_at, remote.Put(spec + std::string(1, '\0')));
    FAY_ASSIGN_OR_RETURN(uint64_t patched,
                         remote.Call(attach_at, {spec_at}, /*let_go_after_ns=*/0));
    out.patched = static_cast<long>(patched);
  }
  stopped.Release();
  out.elapsed_ns = ClockNs(CLOCK_MONOTONIC) - t0;
  if (out.patched < 0)
    return Error(Code::kIo,
                 fmt::format("the runtime in process {} could not map fay's region", pid));
  return out;
}

Expected<long> EjectRuntime(pid_t pid, const std::string& library) {
  FAY_ASSIGN_OR_RETURN(std::string lib, RealPath(library));
  auto detach_at = RemoteSymbol(
      pid, [&](const std::string& p) { return p == lib; }, "fay_inproc_detach", "the runtime");
  if (!detach_at.ok()) return 0L;  // never loaded, or the process is gone
  Stopped stopped(pid);
  FAY_RETURN_IF_ERROR(stopped.StopAll());
  pid_t caller = CallerThread(stopped, pid);
  if (caller < 0) return 0L;
  Remote remote(caller, &stopped);
  FAY_RETURN_IF_ERROR(remote.Begin());
  FAY_ASSIGN_OR_RETURN(uint64_t restored, remote.Call(*detach_at, {}));
  return static_cast<long>(restored);
}

}  // namespace fay::inproc
