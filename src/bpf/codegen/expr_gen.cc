// Integer expressions. Every subexpression lands in R7; the left operand of a binary operator
// waits in a stack temporary while the right one is generated, which keeps register pressure
// (and the verifier's job) trivial.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "bpf/codegen/gen_context.h"

namespace fay::bpf {
namespace {

void LoadConst(Emitter& e, Reg dst, int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX)
    e.MovImm(dst, static_cast<int32_t>(v));
  else
    e.LdImm64(dst, static_cast<uint64_t>(v));
}

bool BothUnsigned(const Expr& expr) {
  return !expr.kids[0]->type.is_signed && !expr.kids[1]->type.is_signed;
}

uint8_t CompareOp(const std::string& op, bool is_unsigned) {
  if (op == "==") return BPF_JEQ;
  if (op == "!=") return BPF_JNE;
  if (op == "<") return is_unsigned ? BPF_JLT : BPF_JSLT;
  if (op == "<=") return is_unsigned ? BPF_JLE : BPF_JSLE;
  if (op == ">") return is_unsigned ? BPF_JGT : BPF_JSGT;
  return is_unsigned ? BPF_JGE : BPF_JSGE;
}

bool IsCompare(const std::string& op) {
  return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
}

// R7 = (R7 != 0)
void Normalize(Emitter& e) {
  Label done = e.NewLabel();
  e.JmpIfImm(BPF_JEQ, R7, 0, done);
  e.MovImm(R7, 1);
  e.Bind(done);
}

void GenLogical(Gen& g, const Expr& expr) {
  Emitter& e = g.e;
  Label done = e.NewLabel();
  GenIntExpr(g, *expr.kids[0]);
  Normalize(e);
  // && stops at a false left side, || at a true one.
  e.JmpIfImm(expr.op == "&&" ? BPF_JEQ : BPF_JNE, R7, 0, done);
  GenIntExpr(g, *expr.kids[1]);
  Normalize(e);
  e.Bind(done);
}

// Jumps to `yes` when R7 equals one of vals[lo, hi) (sorted, signed order), else to `no`. A
// balanced search: the verifier follows one path of log2(n) tests per value, where a chain of n
// tests would leave it n pending branches (it refuses more than 8192).
void GenSearch(Emitter& e, const std::vector<int64_t>& vals, size_t lo, size_t hi, Label yes,
               Label no) {
  auto jump_if = [&](uint8_t op, int64_t v, Label to) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      e.JmpIfImm(op, R7, static_cast<int32_t>(v), to);
    } else {
      e.LdImm64(R1, static_cast<uint64_t>(v));
      e.JmpIf(op, R7, R1, to);
    }
  };
  if (hi - lo <= 4) {
    for (size_t i = lo; i < hi; ++i) jump_if(BPF_JEQ, vals[i], yes);
    e.Jmp(no);
    return;
  }
  size_t mid = lo + (hi - lo) / 2;
  Label right = e.NewLabel();
  jump_if(BPF_JEQ, vals[mid], yes);
  jump_if(BPF_JSGT, vals[mid], right);
  GenSearch(e, vals, lo, mid, yes, no);
  e.Bind(right);
  GenSearch(e, vals, mid + 1, hi, yes, no);
}

void GenIntIn(Gen& g, const Expr& expr) {
  Emitter& e = g.e;
  GenIntExpr(g, *expr.kids[0]);
  std::vector<int64_t> vals;
  for (size_t i = 1; i < expr.kids.size(); ++i) vals.push_back(expr.kids[i]->int_value);
  std::sort(vals.begin(), vals.end());
  vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
  if (vals.empty()) {
    e.MovImm(R7, 0);
    return;
  }
  Label yes = e.NewLabel(), no = e.NewLabel();
  GenSearch(e, vals, 0, vals.size(), yes, no);
  e.Bind(no);
  GenBoolTail(g, yes);
}

void GenBinary(Gen& g, const Expr& expr) {
  Emitter& e = g.e;
  const std::string& op = expr.op;
  if (op == "&&" || op == "||") return GenLogical(g, expr);
  if (expr.kids[0]->type.kind == TypeKind::kString) return GenStringCompare(g, expr);

  GenIntExpr(g, *expr.kids[0]);
  int16_t tmp = g.AllocTemp();
  e.Store(8, R10, tmp, R7);
  GenIntExpr(g, *expr.kids[1]);
  e.Mov(R1, R7);
  e.Load(8, R7, R10, tmp);
  g.FreeTemp();

  bool is_unsigned = BothUnsigned(expr);
  if (IsCompare(op)) {
    Label yes = e.NewLabel();
    e.JmpIf(CompareOp(op, is_unsigned), R7, R1, yes);
    GenBoolTail(g, yes);
    return;
  }
  if (op == "+")
    e.Alu(BPF_ADD, R7, R1);
  else if (op == "-")
    e.Alu(BPF_SUB, R7, R1);
  else if (op == "*")
    e.Alu(BPF_MUL, R7, R1);
  else if (op == "/")
    e.Alu(BPF_DIV, R7, R1, !is_unsigned);
  else if (op == "%")
    e.Alu(BPF_MOD, R7, R1, !is_unsigned);
  else if (op == "&")
    e.Alu(BPF_AND, R7, R1);
  else if (op == "|")
    e.Alu(BPF_OR, R7, R1);
  else if (op == "^")
    e.Alu(BPF_XOR, R7, R1);
  else if (op == "<<")
    e.Alu(BPF_LSH, R7, R1);
  else if (op == ">>")
    e.Alu(expr.kids[0]->type.is_signed ? BPF_ARSH : BPF_RSH, R7, R1);
  else
    g.Fail(fmt::format("internal: unknown operator '{}'", op));
}

}  // namespace

void GenIntExpr(Gen& g, const Expr& expr) {
  Emitter& e = g.e;
  switch (expr.kind) {
    case ExprKind::kInt:
      LoadConst(e, R7, expr.int_value);
      return;
    case ExprKind::kField:
      GenField(g, expr);
      return;
    case ExprKind::kUnary:
      GenIntExpr(g, *expr.kids[0]);
      if (expr.op == "-") {
        e.AluImm(BPF_NEG, R7, 0);
      } else if (expr.op == "~") {
        e.AluImm(BPF_XOR, R7, -1);
      } else {  // "!"
        Label zero = e.NewLabel(), done = e.NewLabel();
        e.JmpIfImm(BPF_JNE, R7, 0, zero);
        e.MovImm(R7, 1);
        e.Jmp(done);
        e.Bind(zero);
        e.MovImm(R7, 0);
        e.Bind(done);
      }
      return;
    case ExprKind::kBinary:
      GenBinary(g, expr);
      return;
    case ExprKind::kIn:
      if (expr.kids[0]->type.kind == TypeKind::kString)
        GenStringIn(g, expr);
      else
        GenIntIn(g, expr);
      return;
    case ExprKind::kState:
      if (expr.read_slot < 0 || static_cast<size_t>(expr.read_slot) >= g.state_slots.size()) {
        g.Fail(fmt::format("internal: state read '{}' was not loaded", expr.text));
        return;
      }
      e.Load(8, R7, R10, g.state_slots[static_cast<size_t>(expr.read_slot)]);
      return;
    case ExprKind::kString:
    case ExprKind::kCall:
      g.Fail(fmt::format("internal: '{}' is not an integer expression", expr.text));
      return;
  }
}

void GenLookupFpKey(Gen& g, int map) {
  Emitter& e = g.e;
  e.LdMap(R1, map);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, kFpKey);
  e.Call(BPF_FUNC_map_lookup_elem);
}

void GenLog2(Gen& g, Reg v, Reg out) {
  // Binary search over the bit position: six shifts instead of a 64-step loop.
  Emitter& e = g.e;
  e.MovImm(out, 0);
  for (int s : {32, 16, 8, 4, 2, 1}) {
    Label skip = e.NewLabel();
    e.Mov(R5, v);
    e.AluImm(BPF_RSH, R5, s);
    e.JmpIfImm(BPF_JEQ, R5, 0, skip);
    e.Mov(v, R5);
    e.AluImm(BPF_ADD, out, s);
    e.Bind(skip);
  }
}

void GenBoolTail(Gen& g, Label yes) {
  Emitter& e = g.e;
  Label done = e.NewLabel();
  e.MovImm(R7, 0);
  e.Jmp(done);
  e.Bind(yes);
  e.MovImm(R7, 1);
  e.Bind(done);
}

}  // namespace fay::bpf
