// Strings: reading them into scratch buffers, comparing them with literals (exact or glob) and
// with each other. The probe name and the uprobe function name are known per probe, so their
// comparisons fold to a set of probe indices at compile time.
#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "bpf/codegen/gen_context.h"

namespace fay::bpf {
namespace {

bool Glob(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi, ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

bool HasGlob(const std::string& s) {
  return s.find_first_of("*?") != std::string::npos;
}

bool IsNameField(const Expr& e) {
  return e.kind == ExprKind::kField && (e.name == "probe" || e.name == "func");
}

std::string NameOf(const Gen& g, const Expr& field, int probe) {
  const ProbeInfo& p = g.plan.probes[probe];
  return field.name == "func" ? p.symbol : p.name;
}

// R7 = 1 when the probe index is one of `matches`, else 0.
void GenProbeSet(Gen& g, const std::vector<int>& matches) {
  Emitter& e = g.e;
  if (g.static_probe() >= 0) {
    bool hit = false;
    for (int m : matches) hit = hit || m == g.static_probe();
    e.MovImm(R7, hit ? 1 : 0);
    return;
  }
  // Only the probes this program serves can be there; none or all of them is a constant (and
  // a test with no jump to `yes` would leave its code unreachable).
  std::vector<int> mine = ProgramProbes(g), hits;
  for (int p : mine)
    if (std::find(matches.begin(), matches.end(), p) != matches.end()) hits.push_back(p);
  if (hits.empty() || hits.size() == mine.size()) {
    e.MovImm(R7, hits.empty() ? 0 : 1);
    return;
  }
  Label yes = e.NewLabel();
  e.Load(8, R1, R10, kFpProbe);
  for (int m : hits) e.JmpIfImm(BPF_JEQ, R1, m, yes);
  GenBoolTail(g, yes);
}

std::vector<int> MatchingProbes(const Gen& g, const Expr& field, const std::string& lit,
                                bool glob) {
  std::vector<int> out;
  for (size_t i = 0; i < g.plan.probes.size(); ++i) {
    std::string name = NameOf(g, field, static_cast<int>(i));
    if (glob ? Glob(lit, name) : name == lit) out.push_back(static_cast<int>(i));
  }
  return out;
}

// What a literal match can be decided to before the probe runs.
enum class Match { kTest, kAlways, kNever };

// kAlways for the all-matching glob "*"; kNever for a pattern longer than a buffer of `cap`
// bytes (NUL included) can hold; otherwise kTest, and GenMatchLiteral then emits at least one
// jump to `fail`. Deciding the other two here keeps every emitted instruction reachable, which
// the verifier demands.
Match ClassifyLiteral(int cap, const std::string& pattern, bool glob) {
  std::string body = pattern;
  bool prefix = glob && !body.empty() && body.back() == '*';
  if (prefix) body.pop_back();
  if (prefix && body.empty()) return Match::kAlways;
  if (static_cast<int>(body.size()) > cap - 1) return Match::kNever;
  return Match::kTest;
}

// Jumps to `fail` unless the NUL-terminated string at R9+off matches `pattern`. Supports exact
// text, '?' anywhere and one trailing '*'; other globs need a loop the probe cannot afford.
// Only for patterns ClassifyLiteral calls kTest.
void GenMatchLiteral(Gen& g, int off, const std::string& pattern, bool glob, Label fail) {
  Emitter& e = g.e;
  std::string body = pattern;
  bool prefix = false;
  if (glob) {
    if (!body.empty() && body.back() == '*') {
      prefix = true;
      body.pop_back();
    }
    if (body.find('*') != std::string::npos) {
      g.Fail(
          fmt::format("glob '{}': inside the probe only '?' and one trailing '*' are "
                      "supported",
                      pattern));
      return;
    }
  }
  for (size_t i = 0; i < body.size(); ++i) {
    e.Load(1, R1, R9, static_cast<int16_t>(off + i));
    if (glob && body[i] == '?')
      e.JmpIfImm(BPF_JEQ, R1, 0, fail);
    else
      e.JmpIfImm(BPF_JNE, R1, static_cast<unsigned char>(body[i]), fail);
  }
  if (!prefix) {
    e.Load(1, R1, R9, static_cast<int16_t>(off + body.size()));
    e.JmpIfImm(BPF_JNE, R1, 0, fail);
  }
}

int CapOf(const Expr& e) {
  return std::min(e.type.str_len > 0 ? e.type.str_len : 64, kStrBufSize);
}

constexpr int kJoinArgs = 16;  // as bpftrace's join

// join(argv): the strings of a NULL-terminated user array of pointers (execve's argv), each
// followed by a space, the last by the NUL, into R9+off; at most kJoinArgs strings and cap
// bytes. Positions are kept on the stack and bounded before every access, for the verifier.
void GenJoin(Gen& g, const Expr& expr, int off, int cap) {
  Emitter& e = g.e;
  e.Comment(fmt::format("{}: up to {} strings in {} bytes", expr.text, kJoinArgs, cap));
  const int16_t t_argv = g.AllocTemp(), t_ptr = g.AllocTemp(), t_pos = g.AllocTemp();
  GenIntExpr(g, *expr.kids[0]);
  e.Store(8, R10, t_argv, R7);
  e.StoreImm(8, R10, t_pos, 0);
  Label done = e.NewLabel();
  for (int i = 0; i < kJoinArgs; ++i) {
    e.Mov(R1, R10);
    e.AluImm(BPF_ADD, R1, t_ptr);
    e.MovImm(R2, 8);
    e.Load(8, R3, R10, t_argv);
    e.AluImm(BPF_ADD, R3, 8 * i);
    e.Call(BPF_FUNC_probe_read_user);
    e.JmpIfImm(BPF_JNE, R0, 0, done);
    e.Load(8, R3, R10, t_ptr);
    e.JmpIfImm(BPF_JEQ, R3, 0, done);
    e.Load(8, R4, R10, t_pos);
    e.JmpIfImm(BPF_JGE, R4, cap - 1, done);
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, off);
    e.Alu(BPF_ADD, R1, R4);
    e.MovImm(R2, cap);
    e.Alu(BPF_SUB, R2, R4);
    e.Call(BPF_FUNC_probe_read_user_str);
    e.JmpIfImm(BPF_JSLE, R0, 0, done);
    e.Load(8, R4, R10, t_pos);
    e.Alu(BPF_ADD, R4, R0);
    e.Store(8, R10, t_pos, R4);
    // The string's NUL becomes the separator.
    e.AluImm(BPF_SUB, R4, 1);
    e.JmpIfImm(BPF_JGE, R4, cap, done);
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, off);
    e.Alu(BPF_ADD, R1, R4);
    e.StoreImm(1, R1, 0, ' ');
  }
  e.Bind(done);
  // The last separator ends the string (or, with no string at all, the first byte does).
  Label empty = e.NewLabel(), end = e.NewLabel();
  e.Load(8, R4, R10, t_pos);
  e.JmpIfImm(BPF_JEQ, R4, 0, empty);
  e.AluImm(BPF_SUB, R4, 1);
  e.JmpIfImm(BPF_JGE, R4, cap, empty);
  e.Mov(R1, R9);
  e.AluImm(BPF_ADD, R1, off);
  e.Alu(BPF_ADD, R1, R4);
  e.StoreImm(1, R1, 0, 0);
  e.Jmp(end);
  e.Bind(empty);
  e.StoreImm(1, R9, static_cast<int16_t>(off), 0);
  e.Bind(end);
  g.FreeTemp();
  g.FreeTemp();
  g.FreeTemp();
}

}  // namespace

void GenStringExpr(Gen& g, const Expr& expr, int off, int cap) {
  Emitter& e = g.e;
  if (expr.kind == ExprKind::kField) {
    GenStringField(g, expr, off, cap);
    return;
  }
  if (expr.kind == ExprKind::kCall && (expr.name == "ksym" || expr.name == "usym")) {
    // The address, and for usym the process whose maps name it: user space names them.
    e.Comment(expr.text + ": the address, named in user space");
    GenIntExpr(g, *expr.kids[0]);
    e.Store(8, R9, static_cast<int16_t>(off), R7);
    if (cap >= 16) {
      if (expr.name == "usym") {
        e.Call(BPF_FUNC_get_current_pid_tgid);
        e.AluImm(BPF_RSH, R0, 32);
        e.Store(8, R9, static_cast<int16_t>(off + 8), R0);
      } else {
        e.StoreImm(8, R9, static_cast<int16_t>(off + 8), 0);
      }
    }
    return;
  }
  if (expr.kind == ExprKind::kCall && (expr.name == "str" || expr.name == "join")) {
    if (const EntryString* saved = g.has_entry ? g.FindEntryString(expr) : nullptr) {
      // Read at entry (Plan::entry_strings); the slot is zero-padded, so whole words copy.
      int len = std::min(cap, saved->len);
      e.Comment(fmt::format("{}: as read at entry", expr.text));
      for (int w = 0; w < (len + 7) / 8; ++w) {
        e.Load(8, R1, R9, static_cast<int16_t>(g.entry_off + saved->off + 8 * w));
        e.Store(8, R9, static_cast<int16_t>(off + 8 * w), R1);
      }
      if (len < saved->len) e.StoreImm(1, R9, static_cast<int16_t>(off + len - 1), 0);
      return;
    }
    if (expr.name == "join") {
      GenJoin(g, expr, off, std::min(cap, CapOf(expr)));
      return;
    }
    GenIntExpr(g, *expr.kids[0]);
    int len = std::min(cap, expr.type.str_len > 0 ? expr.type.str_len : 64);
    e.Comment(fmt::format("{}: bounded read of {} bytes", expr.text, len));
    e.Mov(R1, R9);
    e.AluImm(BPF_ADD, R1, off);
    e.MovImm(R2, len);
    e.Mov(R3, R7);
    e.Call(BPF_FUNC_probe_read_user_str);
    Label ok = e.NewLabel();
    e.JmpIfImm(BPF_JSGE, R0, 0, ok);
    e.StoreImm(1, R9, static_cast<int16_t>(off), 0);
    GenBumpStat(g, kStatReadErrors);
    e.Bind(ok);
    return;
  }
  if (expr.kind == ExprKind::kState) {
    // A string a state pipeline remembered, copied out by GenStateReads.
    const size_t slot = static_cast<size_t>(expr.read_slot);
    if (expr.read_slot < 0 || slot >= g.state_strs.size() || g.state_strs[slot] < 0) {
      g.Fail(fmt::format("internal: state read '{}' was not loaded", expr.text));
      return;
    }
    const int have = g.plan.states[static_cast<size_t>(expr.state)]->value_size - 8;
    const int len = std::min(cap, have);
    e.Comment(fmt::format("{}: as the state read copied it", expr.text));
    for (int w = 0; w < (len + 7) / 8; ++w) {
      e.Load(8, R1, R9, static_cast<int16_t>(g.state_strs[slot] + 8 * w));
      e.Store(8, R9, static_cast<int16_t>(off + 8 * w), R1);
    }
    if (len < have) e.StoreImm(1, R9, static_cast<int16_t>(off + len - 1), 0);
    return;
  }
  if (expr.kind == ExprKind::kString) {
    std::string s = expr.str_value.substr(0, cap - 1);
    for (size_t i = 0; i <= s.size(); ++i)
      e.StoreImm(1, R9, static_cast<int16_t>(off + i), i < s.size() ? (unsigned char)s[i] : 0);
    return;
  }
  g.Fail(fmt::format("'{}' cannot be computed as a string inside the probe", expr.text));
}

void GenStringCompare(Gen& g, const Expr& expr) {
  Emitter& e = g.e;
  const Expr* a = expr.kids[0].get();
  const Expr* b = expr.kids[1].get();
  if (a->kind == ExprKind::kString) std::swap(a, b);
  bool negate = expr.op == "!=";

  if (IsNameField(*a) && b->kind == ExprKind::kString) {
    GenProbeSet(g, MatchingProbes(g, *a, b->str_value, expr.is_glob));
  } else if (b->kind == ExprKind::kString) {
    int cap = CapOf(*a);
    int buf = g.AllocStr();
    GenStringExpr(g, *a, buf, cap);
    Match m = ClassifyLiteral(cap, b->str_value, expr.is_glob);
    if (m != Match::kTest) {
      e.MovImm(R7, m == Match::kAlways ? 1 : 0);
    } else {
      Label fail = e.NewLabel(), done = e.NewLabel();
      GenMatchLiteral(g, buf, b->str_value, expr.is_glob, fail);
      e.MovImm(R7, 1);
      e.Jmp(done);
      e.Bind(fail);
      e.MovImm(R7, 0);
      e.Bind(done);
    }
    g.FreeStr();
  } else {
    // Two computed strings: compare bytes up to the first NUL or the shorter capacity.
    int cap = std::min(CapOf(*a), CapOf(*b));
    int ba = g.AllocStr(), bb = g.AllocStr();
    GenStringExpr(g, *a, ba, CapOf(*a));
    GenStringExpr(g, *b, bb, CapOf(*b));
    Label fail = e.NewLabel(), yes = e.NewLabel(), done = e.NewLabel();
    for (int i = 0; i < cap; ++i) {
      e.Load(1, R1, R9, static_cast<int16_t>(ba + i));
      e.Load(1, R2, R9, static_cast<int16_t>(bb + i));
      e.JmpIf(BPF_JNE, R1, R2, fail);
      e.JmpIfImm(BPF_JEQ, R1, 0, yes);
    }
    e.Bind(yes);
    e.MovImm(R7, 1);
    e.Jmp(done);
    e.Bind(fail);
    e.MovImm(R7, 0);
    e.Bind(done);
    g.FreeStr();
    g.FreeStr();
  }
  if (negate) e.AluImm(BPF_XOR, R7, 1);
}

void GenStringIn(Gen& g, const Expr& expr) {
  Emitter& e = g.e;
  const Expr& lhs = *expr.kids[0];
  if (IsNameField(lhs)) {
    std::vector<int> all;
    for (size_t i = 1; i < expr.kids.size(); ++i)
      for (int m :
           MatchingProbes(g, lhs, expr.kids[i]->str_value, HasGlob(expr.kids[i]->str_value)))
        all.push_back(m);
    GenProbeSet(g, all);
    return;
  }
  int cap = CapOf(lhs);
  int buf = g.AllocStr();
  GenStringExpr(g, lhs, buf, cap);
  // Items decided at compile time drop out; one that always matches decides the whole list.
  std::vector<const Expr*> tests;
  bool always = false;
  for (size_t i = 1; i < expr.kids.size(); ++i) {
    const std::string& lit = expr.kids[i]->str_value;
    Match m = ClassifyLiteral(cap, lit, HasGlob(lit));
    always = always || m == Match::kAlways;
    if (m == Match::kTest) tests.push_back(expr.kids[i].get());
  }
  if (always || tests.empty()) {
    e.MovImm(R7, always ? 1 : 0);
  } else {
    Label yes = e.NewLabel();
    for (const Expr* item : tests) {
      Label next = e.NewLabel();
      GenMatchLiteral(g, buf, item->str_value, HasGlob(item->str_value), next);
      e.Jmp(yes);
      e.Bind(next);
    }
    GenBoolTail(g, yes);
  }
  g.FreeStr();
}

}  // namespace fay::bpf
