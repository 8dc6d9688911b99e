#include "record/ebpf/capture_spec.h"

#include <algorithm>

#include "schema/syscall_capture.h"
#include "schema/syscall_table.h"

namespace fay::record::ebpf {
namespace {

bool IsMemory(ArgType t) {
  return t >= ArgType::kPath && t < ArgType::kCount_;
}

bool Uncaptured(ArgType t) {
  (void)t;
  return false;  // every memory argument has a rule
}

// The rule for argument i captured in one direction; mirrors CaptureArg in syscall_capture.cc.
Rule RuleFor(int i, const ArgSpec& a, bool at_exit) {
  Rule r;
  r.arg = static_cast<uint8_t>(i);
  if (a.type == ArgType::kPath || a.type == ArgType::kString) {
    r.kind = kRuleString;
    return r;
  }
  if (a.type == ArgType::kStrArray || a.type == ArgType::kEnvArray) {
    r.kind = kRuleStrArray;
    return r;
  }
  if (a.type == ArgType::kIovec) {
    if (a.len_arg < 0) return Rule{};
    r.kind = kRuleIovec;
    r.len_arg = static_cast<uint8_t>(a.len_arg);
    // What comes out (readv) is as long as the return value says, spread over the elements.
    r.src = at_exit ? kSrcRet : kSrcFixed;
    return r;
  }
  if (a.type == ArgType::kMsghdr) {
    r.kind = kRuleMsghdr;
    r.src = at_exit ? kSrcRet : kSrcFixed;
    return r;
  }
  if (Uncaptured(a.type)) return Rule{};
  r.kind = kRuleBytes;
  r.flags = kRuleSkipZero;
  switch (a.len) {
    case LenKind::kRet:
      // At entry there is no return value yet; no table row asks for one.
      if (!at_exit) return Rule{};
      r.src = kSrcRet;
      r.flags = 0;
      if (a.type == ArgType::kEpollEvent) r.mul = static_cast<uint8_t>(FixedArgSize(a.type));
      return r;
    case LenKind::kArgPtr:
      if (a.len_arg < 0) return Rule{};
      r.src = kSrcArgPtr;
      r.len_arg = static_cast<uint8_t>(a.len_arg);
      if (a.type == ArgType::kSockaddr) r.max = 128;
      return r;
    default:
      break;
  }
  uint64_t fixed = FixedArgSize(a.type);
  if (a.len != LenKind::kArg || a.len_arg < 0) {
    // kFixed, or an argument-sized type without its argument: the struct size.
    if (a.len == LenKind::kArg) r.flags = 0;
    if (fixed == 0 && r.flags == kRuleSkipZero) return Rule{};
    r.src = kSrcFixed;
    r.fixed = static_cast<uint32_t>(fixed);
    return r;
  }
  r.flags = 0;
  r.src = kSrcArg;
  r.len_arg = static_cast<uint8_t>(a.len_arg);
  switch (a.type) {
    case ArgType::kPollfd:
      r.max = 1u << 16;
      r.mul = 8;
      break;
    case ArgType::kFdSet:
      r.flags = kRuleU32 | kRuleFdSetBits;
      break;
    case ArgType::kSigset:
      r.max = 128;
      break;
    case ArgType::kSockaddr:
      r.flags = kRuleU32;
      r.max = 128;
      break;
    case ArgType::kCloneArgs:
    case ArgType::kOpenHow:
      r.max = 4096;
      break;
    default:
      break;
  }
  return r;
}

}  // namespace

SyscallSpec BuildSyscallSpec(int nr) {
  SyscallSpec s;
  const SyscallSignature& sig = Signature(nr);
  if (!sig.decoded) return s;
  int n_enter = 0, n_exit = 0;
  for (int i = 0; i < sig.nargs && i < 6; ++i) {
    const ArgSpec& a = sig.args[i];
    if (!IsMemory(a.type)) continue;
    if (a.dir != ArgDir::kOut) {
      Rule r = RuleFor(i, a, false);
      if (r.kind != kRuleNone) s.enter[n_enter++] = r;
    }
    if (a.dir != ArgDir::kIn) {
      Rule r = RuleFor(i, a, true);
      if (r.kind != kRuleNone) s.exit[n_exit++] = r;
    }
  }
  if (nr == sysno::fcntl) {
    // fcntl's third argument is a struct flock for the lock commands only.
    Rule r;
    r.kind = kRuleBytes;
    r.arg = 2;
    r.src = kSrcFixed;
    r.fixed = static_cast<uint32_t>(kFlockSize);
    r.flags = kRuleFcntlTakesLock;
    s.enter[n_enter++] = r;
    r.flags = kRuleFcntlReturnsLock;
    s.exit[n_exit++] = r;
  }
  // The user stack, from the stack pointer the probes keep as argument kStackArg.
  for (const StackRule& st : StackRules(nr)) {
    Rule r;
    r.kind = kRuleBytes;
    r.arg = kStackArg;
    r.src = kSrcFixed;
    r.fixed = st.len;
    r.addr_offset = static_cast<uint16_t>(st.offset);
    s.enter[n_enter++] = r;
  }
  // Last: a pointee rule leaves its element number set for the rules after it.
  for (BufferDir dir : {BufferDir::kIn, BufferDir::kOut}) {
    for (const PointeeRule& p : PointeeRules(nr, dir)) {
      Rule r;
      r.kind = kRulePointee;
      r.arg = static_cast<uint8_t>(p.arg);
      r.len_arg = static_cast<uint8_t>(p.sub);
      r.fixed = p.offset;
      r.max = p.len;
      if (dir == BufferDir::kIn)
        s.enter[n_enter++] = r;
      else
        s.exit[n_exit++] = r;
    }
  }
  s.enter_rules = static_cast<uint8_t>(n_enter);
  s.exit_rules = static_cast<uint8_t>(n_exit);
  s.exit_when_interrupted = OutOnlyWhenInterrupted(nr) ? 1 : 0;
  s.enter_plain = n_enter == 1 && IsPlainRule(s.enter[0]) ? 1 : 0;
  s.exit_plain = n_exit == 1 && IsPlainRule(s.exit[0]) ? 1 : 0;
  return s;
}

bool IsPlainRule(const Rule& r) {
  if (r.addr_offset != 0) return false;  // the plain path takes the argument as the address
  if (r.kind == kRuleString) return r.flags == 0;
  return r.kind == kRuleBytes && (r.src == kSrcArg || r.src == kSrcRet) && r.flags == 0 &&
         r.mul == 1 && r.max == 0;
}

bool HasUncapturedMemory(int nr) {
  const SyscallSignature& sig = Signature(nr);
  if (!sig.decoded) return false;
  for (int i = 0; i < sig.nargs && i < 6; ++i)
    if (Uncaptured(sig.args[i].type)) return true;
  return false;
}

bool RuleLength(const Rule& r, const uint64_t args[6], int64_t ret, uint32_t argptr_value,
                uint64_t* length) {
  if (r.kind != kRuleBytes) return false;
  uint64_t v = 0;
  switch (r.src) {
    case kSrcFixed:
      v = r.fixed;
      break;
    case kSrcArg:
      v = args[r.len_arg % 6];
      break;
    case kSrcRet:
      v = static_cast<uint64_t>(ret);
      break;
    case kSrcArgPtr:
      if (args[r.len_arg % 6] == 0) return false;
      v = argptr_value;
      break;
    default:
      return false;
  }
  if (r.flags & kRuleU32) v &= 0xffffffffu;
  if (r.flags & kRuleFdSetBits) v = (std::min<uint64_t>(v, 1u << 20) + 63) / 64 * 8;
  if (r.max && v > r.max) v = r.max;
  v *= r.mul;
  if (v == 0 && (r.flags & kRuleSkipZero)) return false;
  *length = v;
  return true;
}

}  // namespace fay::record::ebpf
