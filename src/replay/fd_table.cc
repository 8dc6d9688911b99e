#include "replay/fd_table.h"

#include <utility>

namespace fay::replay {

std::shared_ptr<LiveFd> ProcessState::Get(int fd) const {
  std::shared_lock lock(mu_);
  std::shared_lock table(table_->mu);
  auto it = table_->fds.find(fd);
  return it == table_->fds.end() ? nullptr : it->second.live;
}

bool ProcessState::Has(int fd) const {
  std::shared_lock lock(mu_);
  std::shared_lock table(table_->mu);
  return table_->fds.count(fd) != 0;
}

void ProcessState::Set(int fd, std::shared_ptr<LiveFd> live, bool cloexec) {
  std::shared_lock lock(mu_);
  std::unique_lock table(table_->mu);
  table_->fds[fd] = FdEntry{std::move(live), cloexec};
}

bool ProcessState::Erase(int fd) {
  std::shared_lock lock(mu_);
  std::unique_lock table(table_->mu);
  return table_->fds.erase(fd) != 0;
}

void ProcessState::EraseRange(int first, int last, bool cloexec_only) {
  std::shared_lock lock(mu_);
  std::unique_lock table(table_->mu);
  auto& fds = table_->fds;
  for (auto it = fds.lower_bound(first); it != fds.end() && it->first <= last;) {
    if (cloexec_only) {
      it->second.cloexec = true;
      ++it;
    } else {
      it = fds.erase(it);
    }
  }
}

int ProcessState::GetCloexec(int fd) const {
  std::shared_lock lock(mu_);
  std::shared_lock table(table_->mu);
  auto it = table_->fds.find(fd);
  return it == table_->fds.end() ? -1 : it->second.cloexec;
}

bool ProcessState::SetCloexec(int fd, bool on) {
  std::shared_lock lock(mu_);
  std::unique_lock table(table_->mu);
  auto it = table_->fds.find(fd);
  if (it == table_->fds.end()) return false;
  it->second.cloexec = on;
  return true;
}

void ProcessState::Exec() {
  // execve unshares a table shared through CLONE_FILES before closing the close-on-exec fds,
  // so the process that shared it keeps them.
  auto own = std::make_shared<FdTable>();
  std::unique_lock lock(mu_);
  {
    std::shared_lock table(table_->mu);
    own->fds = table_->fds;
  }
  std::erase_if(own->fds, [](const auto& kv) { return kv.second.cloexec; });
  table_ = std::move(own);
}

void ProcessState::Exit() {
  std::unique_lock lock(mu_);
  table_ = std::make_shared<FdTable>();
}

void ProcessState::CopyFrom(const ProcessState& parent, bool share_fds) {
  std::shared_ptr<FdTable> table;
  std::string cwd;
  uint32_t mask;
  {
    std::shared_lock lock(parent.mu_);
    if (share_fds) {
      table = parent.table_;
    } else {
      table = std::make_shared<FdTable>();
      std::shared_lock fds(parent.table_->mu);
      table->fds = parent.table_->fds;
    }
    cwd = parent.cwd_;
    mask = parent.umask_;
  }
  std::unique_lock lock(mu_);
  table_ = std::move(table);
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
