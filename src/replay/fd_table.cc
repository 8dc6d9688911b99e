#include "replay/fd_table.h"

namespace fay::replay {

std::shared_ptr<LiveFd> ProcessState::Get(int fd) const {
  std::shared_lock lock(mu_);
  auto it = fds_.find(fd);
  return it == fds_.end() ? nullptr : it->second.live;
}

bool ProcessState::Has(int fd) const {
  std::shared_lock lock(mu_);
  return fds_.count(fd) != 0;
}

void ProcessState::Set(int fd, std::shared_ptr<LiveFd> live, bool cloexec) {
  std::unique_lock lock(mu_);
  fds_[fd] = FdEntry{std::move(live), cloexec};
}

bool ProcessState::Erase(int fd) {
  std::unique_lock lock(mu_);
  return fds_.erase(fd) != 0;
}

void ProcessState::EraseRange(int first, int last, bool cloexec_only) {
  std::unique_lock lock(mu_);
  for (auto it = fds_.lower_bound(first); it != fds_.end() && it->first <= last;) {
    if (cloexec_only) {
      it->second.cloexec = true;
      ++it;
    } else {
      it = fds_.erase(it);
    }
  }
}

int ProcessState::GetCloexec(int fd) const {
  std::shared_lock lock(mu_);
  auto it = fds_.find(fd);
  return it == fds_.end() ? -1 : it->second.cloexec;
}

bool ProcessState::SetCloexec(int fd, bool on) {
  std::unique_lock lock(mu_);
  auto it = fds_.find(fd);
  if (it == fds_.end()) return false;
  it->second.cloexec = on;
  return true;
}

void ProcessState::Exec() {
  std::unique_lock lock(mu_);
  std::erase_if(fds_, [](const auto& kv) { return kv.second.cloexec; });
}

void ProcessState::CopyFrom(const ProcessState& parent) {
  std::map<int, FdEntry> fds;
  std::string cwd;
  uint32_t mask;
  {
    std::shared_lock lock(parent.mu_);
    fds = parent.fds_;
    cwd = parent.cwd_;
    mask = parent.umask_;
  }
  std::unique_lock lock(mu_);
  fds_ = std::move(fds);
  cwd_ = std::move(cwd);
  umask_ = mask;
}

std::string ProcessState::cwd() const {
  std::shared_lock lock(mu_);
  return cwd_;
}

void ProcessState::set_cwd(std::string cwd) {
  std::unique_lock lock(mu_);
  cwd_ = std::move(cwd);
}

uint32_t ProcessState::umask() const {
  std::shared_lock lock(mu_);
  return umask_;
}

void ProcessState::set_umask(uint32_t mask) {
  std::unique_lock lock(mu_);
  umask_ = mask;
}

}  // namespace fay::replay
