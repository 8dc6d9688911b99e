#include "schema/syscall_table.h"

#include <array>
#include <utility>

namespace fay {
namespace {

// The class names the .def rows use, shortened so rows stay one line each.
constexpr uint32_t kFile = kClassFile, kDesc = kClassDesc, kNet = kClassNet,
                   kProcess = kClassProcess, kMemory = kClassMemory, kSignal = kClassSignal,
                   kIpc = kClassIpc, kCreds = kClassCreds, kClock = kClassClock, kStat = kClassStat,
                   kLstat = kClassLstat, kFstat = kClassFstat, kStatLike = kClassStatLike,
                   kStatfs = kClassStatfs, kFstatfs = kClassFstatfs, kStatfsLike = kClassStatfsLike,
                   kPure = kClassPure;

constexpr SyscallInfo kSyscalls[] = {
#define FAY_SYSCALL(nr, name, event, classes) {nr, #name, #event, classes},
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

// A signature row as written in syscall_signatures.def, before the number is attached.
struct SignatureRow {
  std::string_view name;
  RetType ret;
  std::array<ArgSpec, 6> args;
};

// Not finding the name is a build error: constant evaluation cannot reach the throw.
constexpr int NumberOf(std::string_view name) {
  for (const auto& s : kSyscalls)
    if (s.name == name) return s.nr;
  throw "syscall_signatures.def names a syscall missing from syscalls_x86_64.def";
}

#define V(n, t)       \
  ArgSpec {           \
#n, ArgType::k##t \
  }
#define F(n, s)                         \
  ArgSpec {                             \
#n, ArgType::kFlags, ValueSet::k##s \
  }
#define E(n, s)                        \
  ArgSpec {                            \
#n, ArgType::kEnum, ValueSet::k##s \
  }
#define PATH(n)                                                     \
  ArgSpec {                                                         \
#n, ArgType::kPath, ValueSet::kNone, ArgDir::kIn, LenKind::kNul \
  }
#define I(n, t, l, a)                                                 \
  ArgSpec {                                                           \
#n, ArgType::k##t, ValueSet::kNone, ArgDir::kIn, LenKind::k##l, a \
  }
#define O(n, t, l, a)                                                  \
  ArgSpec {                                                            \
#n, ArgType::k##t, ValueSet::kNone, ArgDir::kOut, LenKind::k##l, a \
  }
#define IO(n, t, l, a)                                                   \
  ArgSpec {                                                              \
#n, ArgType::k##t, ValueSet::kNone, ArgDir::kInOut, LenKind::k##l, a \
  }
#define FAY_SIG(name, ret, ...) \
  SignatureRow{#name, RetType::k##ret, std::array<ArgSpec, 6>{__VA_ARGS__}},
constexpr SignatureRow kSignatureRows[] = {
#include "schema/syscall_signatures.def"
};
#undef FAY_SIG
#undef IO
#undef O
#undef I
#undef PATH
#undef E
#undef F
#undef V

constexpr bool RowsNameKnownSyscalls() {
  for (const auto& row : kSignatureRows) NumberOf(row.name);
  return true;
}
static_assert(RowsNameKnownSyscalls());

struct SignatureTable {
  std::array<SyscallSignature, kMaxNr> by_nr{};
  SyscallSignature unknown{};
  size_t decoded = 0;
};

SyscallSignature Generic(int nr, std::string_view name, uint32_t classes) {
  SyscallSignature sig;
  sig.nr = nr;
  sig.name = name;
  sig.classes = classes;
  sig.nargs = 6;
  static constexpr std::string_view kNames[] = {"arg0", "arg1", "arg2", "arg3", "arg4", "arg5"};
  for (int i = 0; i < 6; ++i) sig.args[i] = ArgSpec{kNames[i], ArgType::kHex};
  return sig;
}

const SignatureTable& Table() {
  static const SignatureTable table = [] {
    SignatureTable t;
    for (int nr = 0; nr < kMaxNr; ++nr) t.by_nr[nr] = Generic(nr, SyscallName(nr), 0);
    for (const auto& s : kSyscalls) t.by_nr[s.nr].classes = s.classes;
    t.unknown = Generic(-1, "", 0);
    for (const auto& row : kSignatureRows) {
      int nr = NumberOf(row.name);
      SyscallSignature& sig = t.by_nr[nr];
      sig.ret = row.ret;
      sig.args = row.args;
      sig.nargs = 0;
      while (sig.nargs < 6 && sig.args[sig.nargs].type != ArgType::kNone) ++sig.nargs;
      sig.decoded = true;
      ++t.decoded;
    }
    return t;
  }();
  return table;
}

struct ClassName {
  std::string_view name;
  uint32_t bits;
};
constexpr ClassName kClassNames[] = {
    {"%file", kClassFile},
    {"%desc", kClassDesc},
    {"%net", kClassNet},
    {"%network", kClassNet},
    {"%process", kClassProcess},
    {"%memory", kClassMemory},
    {"%signal", kClassSignal},
    {"%ipc", kClassIpc},
    {"%creds", kClassCreds},
    {"%clock", kClassClock},
    {"%stat", kClassStat},
    {"%lstat", kClassLstat},
    {"%fstat", kClassFstat},
    {"%%stat", kClassStatLike},
    {"%statfs", kClassStatfs},
    {"%fstatfs", kClassFstatfs},
    {"%%statfs", kClassStatfsLike},
    {"%pure", kClassPure},
};
constexpr std::string_view kClassNameList[] = {
    "%file",   "%desc",  "%net",    "%network", "%process", "%memory",
    "%signal", "%ipc",   "%creds",  "%clock",   "%stat",    "%lstat",
    "%fstat",  "%%stat", "%statfs", "%fstatfs", "%%statfs", "%pure"};

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

const SyscallSignature& Signature(int nr) {
  const SignatureTable& t = Table();
  if (nr < 0 || nr >= kMaxNr) return t.unknown;
  return t.by_nr[nr];
}

size_t DecodedSyscallCount() {
  return Table().decoded;
}

uint32_t SyscallClassByName(std::string_view name) {
  // strace still accepts the pre-4.17 spellings without '%' ("trace=file").
  for (const auto& c : kClassNames) {
    if (c.name == name) return c.bits;
    if (c.name.substr(1) == name && name[0] != '%') return c.bits;
  }
  return 0;
}

std::span<const std::string_view> SyscallClassNames() {
  return kClassNameList;
}

}  // namespace fay
