#include "schema/syscall_table.h"

#include <array>

namespace fay {
namespace {

constexpr SyscallInfo kSyscalls[] = {
#define FAY_SYSCALL(nr, name, event) {nr, #name, #event},
#include "schema/syscalls_x86_64.def"
#undef FAY_SYSCALL
};

// Dense by-number index; numbers are small (< 512) so an array beats a map.
constexpr int kMaxNr = 512;
constexpr std::array<int, kMaxNr> BuildIndex() {
  std::array<int, kMaxNr> index{};
  for (auto& i : index) i = -1;
  for (size_t i = 0; i < std::size(kSyscalls); ++i) index[kSyscalls[i].nr] = static_cast<int>(i);
  return index;
}
constexpr std::array<int, kMaxNr> kByNumber = BuildIndex();

}  // namespace

std::span<const SyscallInfo> Syscalls() {
  return kSyscalls;
}
size_t SyscallCount() {
  return std::size(kSyscalls);
}

const SyscallInfo* FindSyscall(std::string_view name) {
  for (const auto& s : kSyscalls)
    if (s.name == name) return &s;
  return nullptr;
}

const SyscallInfo* FindSyscallByEvent(std::string_view tracefs_event) {
  for (const auto& s : kSyscalls)
    if (s.tracefs_event == tracefs_event) return &s;
  return nullptr;
}

int SyscallNumber(std::string_view name) {
  const SyscallInfo* s = FindSyscall(name);
  return s ? s->nr : -1;
}

std::string_view SyscallName(int nr) {
  if (nr < 0 || nr >= kMaxNr || kByNumber[nr] < 0) return {};
  return kSyscalls[kByNumber[nr]].name;
}

}  // namespace fay
