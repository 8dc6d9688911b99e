#include "schema/decode/siginfo.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstring>
#include <string_view>

#include "schema/syscall_table.h"
#include "schema/syscall_values.h"

namespace fay {
namespace {

struct CodeName {
  int code;
  std::string_view name;
};

// include/uapi/asm-generic/siginfo.h. The codes of every signal first, then the signal's own.
constexpr CodeName kAnyCodes[] = {
    {0, "SI_USER"},      {0x80, "SI_KERNEL"}, {-1, "SI_QUEUE"}, {-2, "SI_TIMER"},
    {-3, "SI_MESGQ"},    {-4, "SI_ASYNCIO"},  {-5, "SI_SIGIO"}, {-6, "SI_TKILL"},
    {-7, "SI_DETHREAD"}, {-60, "SI_ASYNCNL"},
};
constexpr CodeName kChldCodes[] = {{1, "CLD_EXITED"},  {2, "CLD_KILLED"},  {3, "CLD_DUMPED"},
                                   {4, "CLD_TRAPPED"}, {5, "CLD_STOPPED"}, {6, "CLD_CONTINUED"}};
constexpr CodeName kSegvCodes[] = {{1, "SEGV_MAPERR"},  {2, "SEGV_ACCERR"},  {3, "SEGV_BNDERR"},
                                   {4, "SEGV_PKUERR"},  {5, "SEGV_ACCADI"},  {6, "SEGV_ADIDERR"},
                                   {7, "SEGV_ADIPERR"}, {8, "SEGV_MTEAERR"}, {9, "SEGV_MTESERR"},
                                   {10, "SEGV_CPERR"}};
constexpr CodeName kBusCodes[] = {{1, "BUS_ADRALN"},
                                  {2, "BUS_ADRERR"},
                                  {3, "BUS_OBJERR"},
                                  {4, "BUS_MCEERR_AR"},
                                  {5, "BUS_MCEERR_AO"}};
constexpr CodeName kIllCodes[] = {{1, "ILL_ILLOPC"}, {2, "ILL_ILLOPN"}, {3, "ILL_ILLADR"},
                                  {4, "ILL_ILLTRP"}, {5, "ILL_PRVOPC"}, {6, "ILL_PRVREG"},
                                  {7, "ILL_COPROC"}, {8, "ILL_BADSTK"}, {9, "ILL_BADIADDR"}};
constexpr CodeName kFpeCodes[] = {{1, "FPE_INTDIV"},   {2, "FPE_INTOVF"}, {3, "FPE_FLTDIV"},
                                  {4, "FPE_FLTOVF"},   {5, "FPE_FLTUND"}, {6, "FPE_FLTRES"},
                                  {7, "FPE_FLTINV"},   {8, "FPE_FLTSUB"}, {14, "FPE_FLTUNK"},
                                  {15, "FPE_CONDTRAP"}};
constexpr CodeName kTrapCodes[] = {{1, "TRAP_BRKPT"},  {2, "TRAP_TRACE"}, {3, "TRAP_BRANCH"},
                                   {4, "TRAP_HWBKPT"}, {5, "TRAP_UNK"},   {6, "TRAP_PERF"}};
constexpr CodeName kPollCodes[] = {{1, "POLL_IN"},  {2, "POLL_OUT"}, {3, "POLL_MSG"},
                                   {4, "POLL_ERR"}, {5, "POLL_PRI"}, {6, "POLL_HUP"}};
constexpr CodeName kProfCodes[] = {{1, "PROF_SIG"}};
constexpr CodeName kSysCodes[] = {{1, "SYS_SECCOMP"}, {2, "SYS_USER_DISPATCH"}};

std::string_view Lookup(std::span<const CodeName> names, int code) {
  for (const CodeName& c : names)
    if (c.code == code) return c.name;
  return {};
}

std::string CodeText(int signo, int code) {
  std::string_view name = Lookup(kAnyCodes, code);
  if (name.empty()) {
    switch (signo) {
      case SIGCHLD:
        name = Lookup(kChldCodes, code);
        break;
      case SIGSEGV:
        name = Lookup(kSegvCodes, code);
        break;
      case SIGBUS:
        name = Lookup(kBusCodes, code);
        break;
      case SIGILL:
        name = Lookup(kIllCodes, code);
        break;
      case SIGFPE:
        name = Lookup(kFpeCodes, code);
        break;
      case SIGTRAP:
        name = Lookup(kTrapCodes, code);
        break;
      case SIGIO:
        name = Lookup(kPollCodes, code);
        break;
      case SIGPROF:
        name = Lookup(kProfCodes, code);
        break;
      case SIGSYS:
        name = Lookup(kSysCodes, code);
        break;
      default:
        break;
    }
  }
  return name.empty() ? std::to_string(code) : std::string(name);
}

// strace's printaddr: NULL, or the address in hex.
std::string Ptr(uint64_t v) {
  return v ? fmt::format("{:#x}", v) : "NULL";
}

// A clock_t in USER_HZ ticks (100 on x86-64), with strace's comment in seconds.
std::string Ticks(int64_t v) {
  constexpr int64_t kHz = 100;
  if (v <= 0) return std::to_string(v);
  return fmt::format("{} /* {}.{:02} s */", v, v / kHz, v % kHz);
}

// The fields of the union, read at their x86-64 offsets; zero past what was captured.
struct Info {
  std::span<const uint8_t> bytes;
  template <typename T>
  T At(size_t off) const {
    T v{};
    if (off + sizeof v <= bytes.size()) std::memcpy(&v, bytes.data() + off, sizeof v);
    return v;
  }
  int32_t signo() const { return At<int32_t>(0); }
  int32_t err() const { return At<int32_t>(4); }
  int32_t code() const { return At<int32_t>(8); }
  int32_t pid() const { return At<int32_t>(16); }
  uint32_t uid() const { return At<uint32_t>(20); }
  int32_t int_value() const { return At<int32_t>(24); }
  uint64_t ptr_value() const { return At<uint64_t>(24); }
  uint64_t addr() const { return At<uint64_t>(16); }
};

void Source(const Info& si, std::string& out) {
  // strace prints an id of -1 (nobody's) as -1.
  out += fmt::format(", si_pid={}, si_uid={}", si.pid(),
                     si.uid() == UINT32_MAX ? std::string("-1") : std::to_string(si.uid()));
}

void Value(const Info& si, std::string& out) {
  out += fmt::format(", si_int={}, si_ptr={}", si.int_value(), Ptr(si.ptr_value()));
}

}  // namespace

std::string FormatSiginfo(int signo, std::span<const uint8_t> bytes) {
  if (bytes.size() < 12) return fmt::format("{{si_signo={}}}", SignalName(signo));
  const Info si{bytes};
  if (si.signo() == 0) return "{}";
  std::string out = fmt::format("{{si_signo={}, si_code={}", SignalName(si.signo()),
                                CodeText(si.signo(), si.code()));
  if (si.err()) {
    std::string_view e = ErrnoName(si.err());
    out += fmt::format(", si_errno={}", e.empty() ? std::to_string(si.err()) : std::string(e));
  }
  const int code = si.code();
  if (code <= 0) {  // sent by a process (SI_FROMUSER)
    switch (code) {
      case SI_USER:
      case SI_TKILL:
        Source(si, out);
        break;
      case SI_TIMER: {
        int32_t timer = si.At<int32_t>(16);
        out += timer ? fmt::format(", si_timerid={:#x}", timer) : ", si_timerid=0";
        out += fmt::format(", si_overrun={}", si.At<int32_t>(20));
        Value(si, out);
        break;
      }
      case SI_SIGIO:
        out += fmt::format(", si_band={}, si_fd={}", si.At<int64_t>(16), si.At<int32_t>(24));
        break;
      default:
        Source(si, out);
        if (si.ptr_value()) Value(si, out);
        break;
    }
  } else {
    switch (si.signo()) {
      case SIGCHLD: {
        Source(si, out);
        int32_t status = si.At<int32_t>(24);
        out += code == CLD_EXITED ? fmt::format(", si_status={}", status)
                                  : fmt::format(", si_status={}", SignalName(status));
        out += fmt::format(", si_utime={}, si_stime={}", Ticks(si.At<int64_t>(32)),
                           Ticks(si.At<int64_t>(40)));
        break;
      }
      case SIGILL:
      case SIGFPE:
      case SIGSEGV:
      case SIGTRAP:
        out += fmt::format(", si_addr={}", Ptr(si.addr()));
        break;
      case SIGBUS:
        out += fmt::format(", si_addr={}", Ptr(si.addr()));
        if (code == BUS_MCEERR_AR || code == BUS_MCEERR_AO) {
          int16_t lsb = si.At<int16_t>(24);
          out += lsb ? fmt::format(", si_addr_lsb={:#x}", lsb) : std::string(", si_addr_lsb=0");
        }
        break;
      case SIGIO:
        if (code == POLL_IN || code == POLL_OUT || code == POLL_MSG)
          out += fmt::format(", si_band={}, si_fd={}", si.At<int64_t>(16), si.At<int32_t>(24));
        break;
      case SIGSYS: {
        int32_t nr = si.At<int32_t>(24);
        uint32_t arch = si.At<uint32_t>(28);
        std::string_view name = SyscallName(nr);
        out += fmt::format(
            ", si_call_addr={}, si_syscall={}, si_arch={}", Ptr(si.addr()),
            name.empty() ? std::to_string(nr) : fmt::format("__NR_{}", name),
            arch == 0xc000003e ? std::string("AUDIT_ARCH_X86_64") : fmt::format("{:#x}", arch));
        break;
      }
      default:
        if (si.pid() || si.uid()) Source(si, out);
        if (si.ptr_value()) Value(si, out);
        break;
    }
  }
  out += '}';
  return out;
}

std::string SignalLine(int signo, std::span<const uint8_t> info) {
  return fmt::format("--- {} {} ---", SignalName(signo), FormatSiginfo(signo, info));
}

}  // namespace fay
