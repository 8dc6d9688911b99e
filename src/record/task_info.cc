#include "record/task_info.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace fay::record {
namespace {

// Small /proc files fit one read.
std::string Slurp(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// A /proc .../stat file past "pid (comm)" (comm may hold spaces and ')'): "state ppid ...", or
// "" when it cannot be read.
std::string StatAfterComm(const std::string& path) {
  std::string s = Slurp(path);
  size_t close = s.rfind(')');
  return close == std::string::npos ? std::string() : s.substr(close + 1);
}

}  // namespace

bool ReadTaskComm(pid_t tid, std::array<char, 16>* out) {
  std::string s = Slurp("/proc/" + std::to_string(tid) + "/comm");
  if (s.empty()) return false;
  if (s.back() == '\n') s.pop_back();
  out->fill(0);
  std::memcpy(out->data(), s.data(), std::min<size_t>(s.size(), 15));
  return true;
}

bool ReadTaskInfo(pid_t tid, TaskInfo* out) {
  std::string s = Slurp("/proc/" + std::to_string(tid) + "/status");
  if (s.empty()) return false;
  auto field = [&](const char* name) -> long {
    size_t at = s.find(std::string("\n") + name + ":");
    if (at == std::string::npos) return 0;
    return std::strtol(s.c_str() + at + std::strlen(name) + 2, nullptr, 10);
  };
  out->tgid = static_cast<pid_t>(field("Tgid"));
  out->ppid = static_cast<pid_t>(field("PPid"));
  out->uid = static_cast<uint32_t>(field("Uid"));
  if (!ReadTaskComm(tid, &out->comm)) {
    // "Name:" is the first line of status.
    out->comm.fill(0);
    if (s.rfind("Name:", 0) == 0) {
      size_t b = s.find_first_not_of(" \t", 5), e = s.find('\n');
      if (b != std::string::npos && e != std::string::npos && e > b)
        std::memcpy(out->comm.data(), s.data() + b, std::min<size_t>(e - b, 15));
    }
  }
  return true;
}

bool IsKernelThread(pid_t pid) {
  // state ppid pgrp session tty_nr tpgid flags
  std::string s = StatAfterComm("/proc/" + std::to_string(pid) + "/stat");
  unsigned long flags = 0;
  if (sscanf(s.c_str(), " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1) return false;
  constexpr unsigned long kPfKthread = 0x00200000;
  return (flags & kPfKthread) != 0;
}

bool HasExited(pid_t pid) {
  // Not /proc/PID/stat's state: a leader that called pthread_exit shows Z while its other
  // threads run on. A pidfd turns readable only once the whole thread group has exited.
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    // Without a pidfd (out of descriptors; before 5.3): every thread exited, by its state.
    if (errno == ESRCH) return false;
    const std::vector<pid_t> tids = ListThreads(pid);
    return !tids.empty() &&
           std::all_of(tids.begin(), tids.end(), [pid](pid_t t) { return ThreadExited(pid, t); });
  }
  pollfd p{fd, POLLIN, 0};
  bool exited = poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
  close(fd);
  return exited;
}

bool ThreadExited(pid_t pid, pid_t tid) {
  std::string s =
      StatAfterComm("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  char state = 0;
  if (sscanf(s.c_str(), " %c", &state) != 1) return true;  // gone altogether
  return state == 'Z' || state == 'X';
}

std::string ReadProcLink(pid_t pid, const char* what) {
  char buf[PATH_MAX];
  std::string path = "/proc/" + std::to_string(pid) + "/" + what;
  ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

std::vector<std::string> ReadProcStrings(pid_t pid, const char* what) {
  std::string s = Slurp("/proc/" + std::to_string(pid) + "/" + what);
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\0', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<pid_t> ListThreads(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    pid_t tid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (tid > 0) out.push_back(tid);
  }
  closedir(d);
  return out;
}

uint64_t CountThreads(pid_t pid) {
  const std::vector<pid_t> tids = ListThreads(pid);
  // An exited leader (pthread_exit) is listed until the process ends; it is no thread to trace.
  return static_cast<uint64_t>(
      std::count_if(tids.begin(), tids.end(), [pid](pid_t t) { return !ThreadExited(pid, t); }));
}

}  // namespace fay::record
