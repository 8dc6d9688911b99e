#include "record/ebpf/throttle.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace fay::record::ebpf {
namespace {

bool WriteFile(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  close(fd);
  return ok;
}

struct Mount {
  std::string dir, type, options;
};

std::vector<Mount> Mounts() {
  std::vector<Mount> out;
  std::ifstream in("/proc/self/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Mount m;
    std::string dev;
    ls >> dev >> m.dir >> m.type >> m.options;
    out.push_back(m);
  }
  return out;
}

// The path of `pid`'s cgroup in the v2 hierarchy ("0::/x") or in the v1 hierarchy that has
// the freezer controller.
std::string CgroupOf(pid_t pid, bool v2) {
  std::ifstream in(fmt::format("/proc/{}/cgroup", pid));
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    bool match = v2 ? line.compare(0, a, "0") == 0 && controllers.empty()
                    : ("," + controllers + ",").find(",freezer,") != std::string::npos;
    if (match) return line.substr(b + 1);
  }
  return "";
}

// A fay killed with SIGKILL leaves its (empty) cgroup behind; the next one removes those whose
// fay is gone. rmdir refuses a cgroup that still has processes.
void RemoveStale(const std::string& parent) {
  DIR* d = opendir(parent.c_str());
  if (!d) return;
  while (dirent* ent = readdir(d)) {
    int pid = 0;
    if (sscanf(ent->d_name, "fay-record-%d", &pid) != 1 || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    rmdir((parent + "/" + ent->d_name).c_str());
  }
  closedir(d);
}

}  // namespace

Expected<std::unique_ptr<Throttle>> Throttle::Create() {
  const pid_t self = getpid();
  std::string why = "no cgroup v2 or v1 freezer hierarchy is mounted";
  // v2 first: there SIGKILL ends a frozen process; a v1 frozen task waits to be thawed.
  std::vector<Mount> mounts = Mounts();
  std::stable_partition(mounts.begin(), mounts.end(),
                        [](const Mount& m) { return m.type == "cgroup2"; });
  for (const Mount& m : mounts) {
    bool v2 = m.type == "cgroup2";
    bool v1 = m.type == "cgroup" && ("," + m.options + ",").find(",freezer,") != std::string::npos;
    if (!v2 && !v1) continue;
    std::string home = CgroupOf(self, v2);
    if (home.empty()) continue;
    std::string parent = m.dir + (home == "/" ? "" : home);
    RemoveStale(parent);
    std::string dir = fmt::format("{}/fay-record-{}", parent, self);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      why = fmt::format("cannot create {}: {}", dir, std::strerror(errno));
      continue;
    }
    std::string freeze = dir + (v2 ? "/cgroup.freeze" : "/freezer.state");
    if (access(freeze.c_str(), W_OK) != 0) {
      why = fmt::format("{} is not writable: {}", freeze, std::strerror(errno));
      rmdir(dir.c_str());
      continue;
    }
    auto t = std::make_unique<Throttle>(Key(), dir, freeze, v2 ? "1" : "FROZEN",
                                        v2 ? "0" : "THAWED", parent + "/cgroup.procs");
    if (v2) t->fd_ = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return t;
  }
  return Error(Code::kUnsupported, "cannot throttle the traced program (" + why + ")");
}

Status Throttle::Adopt(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cgroup", pid));
  std::string line, want = dir_.substr(dir_.rfind('/'));
  while (std::getline(in, line))
    if (line.size() >= want.size() &&
        line.compare(line.size() - want.size(), want.size(), want) == 0)
      return Status::Ok();  // started inside
  if (!WriteFile(dir_ + "/cgroup.procs", std::to_string(pid)))
    return Error(Code::kUnsupported,
                 fmt::format("cannot move the command into {}: {}", dir_, std::strerror(errno)));
  return Status::Ok();
}

void Throttle::Freeze() {
  std::lock_guard lk(mu_);
  if (frozen_) return;
  if (WriteFile(freeze_file_, frozen_value_)) {
    frozen_ = true;
    ++freezes_;
  }
}

void Throttle::Thaw() {
  std::lock_guard lk(mu_);
  if (!frozen_) return;
  WriteFile(freeze_file_, thawed_value_);
  frozen_ = false;
}

namespace {

// The watchdog's side, after the fork of a multi-threaded fay: system calls only.
bool WriteRaw(const char* path, const char* value, size_t n) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, value, n) == static_cast<ssize_t>(n);
  close(fd);
  return ok;
}

// SIGKILL to every pid listed in a cgroup.procs file; false when it listed none.
bool KillListed(const char* procs) {
  int fd = open(procs, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  bool any = false;
  long pid = 0;
  bool in_number = false;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
        in_number = true;
      } else if (in_number) {
        kill(static_cast<pid_t>(pid), SIGKILL);
        any = true;
        pid = 0;
        in_number = false;
      }
    }
  }
  if (in_number) kill(static_cast<pid_t>(pid), SIGKILL), any = true;
  close(fd);
  return any;
}

}  // namespace

Status Throttle::StartWatchdog() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return ErrnoError("pipe2 for the recording's watchdog");
  // Everything the watchdog needs is made before the fork: after it, only system calls.
  const bool v2 = fd_ >= 0;
  const std::string kill_file = dir_ + "/cgroup.kill", procs = dir_ + "/cgroup.procs";
  const std::string freeze = freeze_file_, thawed = thawed_value_, dir = dir_;
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    errno = e;
    return ErrnoError("fork of the recording's watchdog");
  }
  if (pid == 0) {
    setsid();  // a kill of fay's process group must not take the watchdog along
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    // Nothing of fay's (its BPF objects, its trace) stays open in the watchdog.
    int keep = p[0] > 2 ? p[0] : dup(p[0]);
    syscall(SYS_close_range, 3, keep - 1, 0);
    syscall(SYS_close_range, keep + 1, ~0U, 0);
    prctl(PR_SET_NAME, "fay-watchdog");
    char c;
    ssize_t n;
    while ((n = read(keep, &c, 1)) < 0 && errno == EINTR) {
    }
    if (n == 1) _exit(0);  // the recording ended; fay cleans up itself
    if (!v2 || !WriteRaw(kill_file.c_str(), "1", 1)) {
      WriteRaw(freeze.c_str(), thawed.c_str(), thawed.size());  // v1: a frozen task cannot die
      KillListed(procs.c_str());
    }
    // Until the cgroup is empty, then remove it (at most about 2 s).
    for (int i = 0; i < 200 && rmdir(dir.c_str()) != 0; ++i) {
      KillListed(procs.c_str());
      usleep(10000);
    }
    _exit(0);
  }
  close(p[0]);
  watchdog_fd_ = p[1];
  watchdog_pid_ = pid;
  return Status::Ok();
}

Throttle::~Throttle() {
  if (watchdog_fd_ >= 0) {
    (void)!write(watchdog_fd_, "x", 1);
    close(watchdog_fd_);
    waitpid(watchdog_pid_, nullptr, 0);
  }
  frozen_ = true;  // thaw unconditionally: a failed write must not leave anything frozen
  Thaw();
  std::ifstream in(dir_ + "/cgroup.procs");
  std::string pid;
  while (std::getline(in, pid)) WriteFile(home_, pid);
  if (fd_ >= 0) close(fd_);
  rmdir(dir_.c_str());
}

}  // namespace fay::record::ebpf
