#include "common/child_process.h"

#include <linux/sched.h>
#include <sys/syscall.h>

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <utility>

namespace fay {

Expected<std::vector<std::string>> SplitCommand(const std::string& cmd) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < cmd.size(); ++i) {
    char c = cmd[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < cmd.size()) {
        cur += cmd[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < cmd.size()) {
      cur += cmd[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return Error(Code::kInvalidArgument, "unterminated quote in command: " + cmd);
  if (in_word) out.push_back(cur);
  if (out.empty()) return Error(Code::kInvalidArgument, "empty command");
  return out;
}

namespace {

// Empty until NoteInheritedFds: then nothing is closed.
std::optional<std::vector<int>>& InheritedFds() {
  static std::optional<std::vector<int>> fds;
  return fds;
}

}  // namespace

namespace {

struct InheritedSignals {
  bool noted = false;
  sigset_t ignored;
  sigset_t mask;
};

InheritedSignals& Signals() {
  static InheritedSignals s;
  return s;
}

}  // namespace

void NoteInheritedSignals() {
  InheritedSignals& s = Signals();
  sigemptyset(&s.ignored);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler == SIG_IGN) sigaddset(&s.ignored, sig);
  }
  sigprocmask(SIG_SETMASK, nullptr, &s.mask);
  s.noted = true;
}

void RestoreInheritedSignals() {
  const InheritedSignals& s = Signals();
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction sa {};
    sa.sa_handler = s.noted && sigismember(&s.ignored, sig) == 1 ? SIG_IGN : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);  // fails harmlessly for the C library's own signals
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, s.noted ? &s.mask : &none, nullptr);
}

void NoteInheritedFds() {
  std::vector<int> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      int fd = atoi(e->d_name);
      if (e->d_name[0] != '.' && fd >= 3 && fd != dirfd(d)) fds.push_back(fd);
    }
    closedir(d);
  }
  InheritedFds() = std::move(fds);
}

StrayFds::StrayFds(std::vector<int> keep) {
  const std::optional<std::vector<int>>& inherited = InheritedFds();
  if (!inherited) return;
  keep.insert(keep.end(), inherited->begin(), inherited->end());
  std::sort(keep.begin(), keep.end());
  unsigned next = 3;
  for (int fd : keep) {
    if (fd < static_cast<int>(next)) continue;
    if (static_cast<unsigned>(fd) > next) ranges_.emplace_back(next, static_cast<unsigned>(fd) - 1);
    next = static_cast<unsigned>(fd) + 1;
  }
  ranges_.emplace_back(next, UINT_MAX);
}

void StrayFds::CloseInChild() const {
  for (const auto& [lo, hi] : ranges_) syscall(SYS_close_range, lo, hi, 0);
}

HeldChild::HeldChild(HeldChild&& o) noexcept {
  *this = std::move(o);
}

HeldChild& HeldChild::operator=(HeldChild&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(go_fd_, o.go_fd_);
  std::swap(err_fd_, o.err_fd_);
  std::swap(released_, o.released_);
  std::swap(reaped_, o.reaped_);
  std::swap(program_, o.program_);
  return *this;
}

HeldChild::~HeldChild() {
  if (go_fd_ >= 0) close(go_fd_);
  if (err_fd_ >= 0) close(err_fd_);
  if (pid_ > 0 && !reaped_) {
    if (!released_) kill(pid_, SIGKILL);
    if (!released_) waitpid(pid_, nullptr, 0);
  }
}

Expected<HeldChild> HeldChild::Spawn(const std::vector<std::string>& argv,
                                     const SpawnOptions& options) {
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) < 0) return ErrnoError("pipe");
  if (pipe2(err, O_CLOEXEC) < 0) {
    close(go[0]);
    close(go[1]);
    return ErrnoError("pipe");
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment is built here: the child of a threaded fay may not allocate.
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    bool replaced = std::any_of(options.env.begin(), options.env.end(), [&](const std::string& o) {
      const size_t eq = o.find('=');
      return eq != std::string::npos && entry.compare(0, eq + 1, o, 0, eq + 1) == 0;
    });
    if (!replaced) env_store.push_back(std::move(entry));
  }
  env_store.insert(env_store.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Without changes, fay's own environment as it is: the exec's arguments (which a recording
  // shows) are then what they always were.
  char** env_or_environ = options.env.empty() ? environ : envp.data();
  // fay's other threads open files (and the kernel's BPF objects) while this one forks; one
  // caught open without close-on-exec at that moment would be the command's descriptor 3.
  std::vector<int> keep = {go[0], err[1]};
  if (options.inherit_fd >= 0) keep.push_back(options.inherit_fd);
  const StrayFds stray(keep);
  pid_t pid = -1;
  if (options.cgroup_fd >= 0) {
    clone_args ca{};
    ca.flags = CLONE_INTO_CGROUP;
    ca.exit_signal = SIGCHLD;
    ca.cgroup = static_cast<uint64_t>(options.cgroup_fd);
    pid = static_cast<pid_t>(syscall(SYS_clone3, &ca, sizeof ca));
  } else {
    pid = fork();
  }
  if (pid < 0) {
    int e = errno;
    for (int fd : {go[0], go[1], err[0], err[1]}) close(fd);
    errno = e;
    return ErrnoError(options.cgroup_fd >= 0 ? "clone3 into the recording's cgroup" : "fork");
  }
  if (pid == 0) {
    // If fay dies before releasing us, die too rather than run untraced.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(go[1]);
    close(err[0]);
    stray.CloseInChild();
    char c;
    if (read(go[0], &c, 1) != 1) _exit(127);
    prctl(PR_SET_PDEATHSIG, options.die_with_parent ? options.death_signal : 0);
    // fay blocks the signals it handles through a signalfd; the command gets what fay had.
    RestoreInheritedSignals();
    if (options.inherit_fd >= 0) fcntl(options.inherit_fd, F_SETFD, 0);
    if (options.exe.empty())
      execvpe(args[0], args.data(), env_or_environ);
    else
      execve(options.exe.c_str(), args.data(), env_or_environ);
    int e = errno;
    (void)!write(err[1], &e, sizeof(e));
    _exit(127);
  }
  close(go[0]);
  close(err[1]);
  HeldChild child;
  child.pid_ = pid;
  child.go_fd_ = go[1];
  child.err_fd_ = err[0];
  child.program_ = argv[0];
  return child;
}

Status HeldChild::Release() {
  char c = 1;
  if (write(go_fd_, &c, 1) != 1) return ErrnoError("releasing the traced command");
  released_ = true;
  close(go_fd_);
  go_fd_ = -1;
  int e = 0;
  ssize_t n = read(err_fd_, &e, sizeof(e));
  close(err_fd_);
  err_fd_ = -1;
  if (n == sizeof(e)) {
    int st;
    waitpid(pid_, &st, 0);
    reaped_ = true;
    return Status(e == ENOENT ? Code::kNotFound : Code::kIo,
                  fmt::format("cannot run '{}': {}", program_, std::strerror(e)));
  }
  return Status::Ok();
}

bool HeldChild::TryWait(int* status) {
  if (pid_ <= 0 || reaped_) return false;
  int st;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r != pid_) return false;
  reaped_ = true;
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

}  // namespace fay
