#include "trace/export/event_fields.h"

#include <fmt/format.h>

#include "schema/syscall_format.h"
#include "schema/syscall_table.h"

namespace fay::trace {

std::string SyscallEventName(int nr) {
  std::string_view name = SyscallName(nr);
  return name.empty() ? fmt::format("syscall_{}", nr) : std::string(name);
}

int ArgCount(int nr) {
  const SyscallSignature& sig = Signature(nr);
  return sig.decoded ? sig.nargs : 6;
}

std::string ArgName(int nr, int i) {
  const SyscallSignature& sig = Signature(nr);
  if (sig.decoded && i < sig.nargs && !sig.args[i].name.empty())
    return std::string(sig.args[i].name);
  return fmt::format("arg{}", i);
}

bool ArgSigned(int nr, int i) {
  const SyscallSignature& sig = Signature(nr);
  if (!sig.decoded || i >= sig.nargs) return false;
  switch (sig.args[i].type) {
    case ArgType::kInt:
    case ArgType::kLong:
    case ArgType::kFd:
    case ArgType::kDirfd:
    case ArgType::kSignal:
      return true;
    default:
      return false;
  }
}

int64_t ArgInt(int nr, int i, uint64_t raw) {
  const SyscallSignature& sig = Signature(nr);
  if (sig.decoded && i < sig.nargs) {
    switch (sig.args[i].type) {
      case ArgType::kInt:
      case ArgType::kFd:
      case ArgType::kDirfd:
      case ArgType::kSignal:
        return static_cast<int32_t>(static_cast<uint32_t>(raw));
      case ArgType::kUint:
        return static_cast<uint32_t>(raw);
      default:
        break;
    }
  }
  return static_cast<int64_t>(raw);
}

std::string CallText(const SyscallEvent& ev) {
  static const FormatOptions kOptions;
  return FormatSyscall(ev, kOptions);
}

std::string Hex(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace fay::trace
