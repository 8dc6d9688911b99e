#include "engine/eval.h"

#include <fmt/format.h>

#include <cstring>

#include "common/strings.h"

namespace fay {
namespace {

constexpr int kDefaultStrLen = 64;  // str(p) without a size, as the semantic pass types it

Status EvalError(const Expr& e, const std::string& what) {
  return Error(Code::kInternal, fmt::format("cannot evaluate '{}': {}", e.text, what));
}

Expected<Value> EvalField(const Expr& e, const Event& ev, const ProbeInfo& probe) {
  const Field* f = FieldOf(e, ev.probe_index, probe);
  if (!f) return EvalError(e, "field not resolved for probe " + probe.name);
  // Inside the probe these are small ids; their printed and compared value is the name.
  if (f->source == FieldSource::kProbe) return Value(probe.name);
  if (f->source == FieldSource::kFunc) return Value(probe.symbol);
  size_t idx = static_cast<size_t>(e.field_index[ev.probe_index]);
  if (idx >= ev.values.size()) return EvalError(e, "event has no value for this field");
  const Value& v = ev.values[idx];
  if (f->type.kind == TypeKind::kString) {
    if (const auto* s = std::get_if<std::string>(&v))
      return Value(BoundedString(*s, f->type.str_len));
  }
  return v;
}

Expected<Value> EvalStr(const Expr& e, const Event& ev, const ProbeInfo& probe) {
  if (e.kids.empty() || e.kids[0]->kind != ExprKind::kField) {
    return EvalError(e, "str() takes a pointer field");
  }
  const Expr& arg = *e.kids[0];
  if (!FieldOf(arg, ev.probe_index, probe)) return EvalError(e, "field not resolved");
  int len = e.type.kind == TypeKind::kString && e.type.str_len > 0 ? e.type.str_len : 0;
  if (len == 0 && e.kids.size() > 1 && e.kids[1]->kind == ExprKind::kInt) {
    len = static_cast<int>(e.kids[1]->int_value);
  }
  if (len <= 0) len = kDefaultStrLen;
  size_t idx = static_cast<size_t>(arg.field_index[ev.probe_index]);
  // An unreadable address reads as the empty string, as bpf_probe_read_user_str leaves it.
  if (idx >= ev.user_strings.size()) return Value(std::string());
  return Value(BoundedString(ev.user_strings[idx], len));
}

bool Signed(const Expr& a, const Expr& b) {
  return a.type.is_signed || b.type.is_signed;
}

int64_t Wrap(uint64_t u) {
  return static_cast<int64_t>(u);
}

int64_t Div(int64_t a, int64_t b, bool is_signed) {
  if (b == 0) return 0;
  if (!is_signed) return Wrap(static_cast<uint64_t>(a) / static_cast<uint64_t>(b));
  if (b == -1) return Wrap(0 - static_cast<uint64_t>(a));  // INT64_MIN / -1 wraps, no trap
  return a / b;
}

int64_t Mod(int64_t a, int64_t b, bool is_signed) {
  if (b == 0) return a;
  if (!is_signed) return Wrap(static_cast<uint64_t>(a) % static_cast<uint64_t>(b));
  if (b == -1) return 0;
  return a % b;  // the sign of the dividend, like eBPF's smod
}

Expected<Value> IntBinary(const Expr& e, int64_t a, int64_t b) {
  const std::string& op = e.op;
  const Expr& l = *e.kids[0];
  const Expr& r = *e.kids[1];
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  const bool sgn = Signed(l, r);
  // eBPF masks shift counts to the register width.
  const unsigned sh = static_cast<unsigned>(ub & 63);
  if (op == "+") return Value(Wrap(ua + ub));
  if (op == "-") return Value(Wrap(ua - ub));
  if (op == "*") return Value(Wrap(ua * ub));
  if (op == "/") return Value(Div(a, b, sgn));
  if (op == "%") return Value(Mod(a, b, sgn));
  if (op == "&") return Value(Wrap(ua & ub));
  if (op == "|") return Value(Wrap(ua | ub));
  if (op == "^") return Value(Wrap(ua ^ ub));
  if (op == "<<") return Value(Wrap(ua << sh));
  if (op == ">>") return Value(l.type.is_signed ? (a >> sh) : Wrap(ua >> sh));
  if (op == "==") return Value(int64_t{a == b});
  if (op == "!=") return Value(int64_t{a != b});
  if (op == "<") return Value(int64_t{sgn ? a < b : ua < ub});
  if (op == "<=") return Value(int64_t{sgn ? a <= b : ua <= ub});
  if (op == ">") return Value(int64_t{sgn ? a > b : ua > ub});
  if (op == ">=") return Value(int64_t{sgn ? a >= b : ua >= ub});
  return EvalError(e, "unknown operator " + op);
}

// String equality; with a glob, the pattern is the literal operand.
bool StringEqual(const Expr& l, const std::string& a, const Expr& r, const std::string& b,
                 bool glob) {
  if (!glob) return a == b;
  if (r.kind == ExprKind::kString) return GlobMatch(b, a);
  if (l.kind == ExprKind::kString) return GlobMatch(a, b);
  return a == b;
}

Expected<Value> EvalBinary(const Expr& e, const Event& ev, const ProbeInfo& probe) {
  if (e.kids.size() != 2) return EvalError(e, "binary operator needs two operands");
  const Expr& l = *e.kids[0];
  const Expr& r = *e.kids[1];
  FAY_ASSIGN_OR_RETURN(Value a, EvalExpr(l, ev, probe));
  if (e.op == "&&" || e.op == "||") {
    bool left = Truthy(a);
    if (e.op == "&&" && !left) return Value(int64_t{0});
    if (e.op == "||" && left) return Value(int64_t{1});
    FAY_ASSIGN_OR_RETURN(Value b, EvalExpr(r, ev, probe));
    return Value(int64_t{Truthy(b)});
  }
  FAY_ASSIGN_OR_RETURN(Value b, EvalExpr(r, ev, probe));
  const auto* ia = std::get_if<int64_t>(&a);
  const auto* ib = std::get_if<int64_t>(&b);
  if (ia && ib) return IntBinary(e, *ia, *ib);
  const auto* sa = std::get_if<std::string>(&a);
  const auto* sb = std::get_if<std::string>(&b);
  if (sa && sb && (e.op == "==" || e.op == "!=")) {
    bool eq = StringEqual(l, *sa, r, *sb, e.is_glob);
    return Value(int64_t{e.op == "==" ? eq : !eq});
  }
  return EvalError(e, "operands of " + e.op + " have unsupported types");
}

Expected<Value> EvalIn(const Expr& e, const Event& ev, const ProbeInfo& probe) {
  if (e.kids.empty()) return EvalError(e, "in without an operand");
  const Expr& l = *e.kids[0];
  FAY_ASSIGN_OR_RETURN(Value a, EvalExpr(l, ev, probe));
  for (size_t i = 1; i < e.kids.size(); ++i) {
    const Expr& r = *e.kids[i];
    FAY_ASSIGN_OR_RETURN(Value b, EvalExpr(r, ev, probe));
    const auto* ia = std::get_if<int64_t>(&a);
    const auto* ib = std::get_if<int64_t>(&b);
    const auto* sa = std::get_if<std::string>(&a);
    const auto* sb = std::get_if<std::string>(&b);
    // Same rule as `==`: a literal with '*' or '?' is a pattern.
    bool glob = r.kind == ExprKind::kString && HasGlob(r.str_value);
    if ((ia && ib && *ia == *ib) || (sa && sb && StringEqual(l, *sa, r, *sb, glob))) {
      return Value(int64_t{1});
    }
  }
  return Value(int64_t{0});
}

Expected<Value> EvalUnary(const Expr& e, const Event& ev, const ProbeInfo& probe) {
  if (e.kids.size() != 1) return EvalError(e, "unary operator needs one operand");
  FAY_ASSIGN_OR_RETURN(Value a, EvalExpr(*e.kids[0], ev, probe));
  const auto* ia = std::get_if<int64_t>(&a);
  if (!ia) return EvalError(e, "operand of " + e.op + " is not an int");
  uint64_t u = static_cast<uint64_t>(*ia);
  if (e.op == "-") return Value(Wrap(0 - u));
  if (e.op == "!") return Value(int64_t{*ia == 0});
  if (e.op == "~") return Value(Wrap(~u));
  return EvalError(e, "unknown operator " + e.op);
}

}  // namespace

const Field* FieldOf(const Expr& e, int probe_index, const ProbeInfo& probe) {
  if (e.kind != ExprKind::kField || probe_index < 0 ||
      static_cast<size_t>(probe_index) >= e.field_index.size()) {
    return nullptr;
  }
  int idx = e.field_index[probe_index];
  if (idx < 0 || static_cast<size_t>(idx) >= probe.fields.size()) return nullptr;
  return &probe.fields[idx];
}

std::string BoundedString(std::string_view s, int str_len) {
  size_t n = s.find('\0');
  if (n == std::string_view::npos) n = s.size();
  if (str_len > 0) n = std::min(n, static_cast<size_t>(str_len - 1));
  return std::string(s.substr(0, n));
}

bool Truthy(const Value& v) {
  const auto* i = std::get_if<int64_t>(&v);
  return i && *i != 0;
}

namespace {

// Whether the value changed: an unchanged key lets the interpreter skip its group lookup.
bool AssignString(Value* out, std::string_view s) {
  if (auto* str = std::get_if<std::string>(out)) {
    if (*str == s) return false;
    str->assign(s);
  } else {
    *out = std::string(s);
  }
  return true;
}

bool AssignInt(Value* out, int64_t v) {
  if (const auto* i = std::get_if<int64_t>(out); i && *i == v) return false;
  *out = v;
  return true;
}

}  // namespace

Status EvalInto(const Expr& e, const Event& ev, const ProbeInfo& probe, Value* out, bool* changed) {
  bool dummy;
  if (!changed) changed = &dummy;
  if (e.kind == ExprKind::kField) {
    if (const Field* f = FieldOf(e, ev.probe_index, probe)) {
      if (f->source == FieldSource::kProbe) {
        *changed = AssignString(out, probe.name);
        return Status::Ok();
      }
      size_t idx = static_cast<size_t>(e.field_index[ev.probe_index]);
      if (f->source != FieldSource::kFunc && idx < ev.values.size()) {
        const Value& v = ev.values[idx];
        if (const auto* i = std::get_if<int64_t>(&v)) {
          *changed = AssignInt(out, *i);
          return Status::Ok();
        }
        if (const auto* s = std::get_if<std::string>(&v); s && f->type.kind == TypeKind::kString) {
          // BoundedString without a temporary: up to the first NUL, at most str_len - 1 bytes.
          size_t limit = s->size();
          if (f->type.str_len > 0)
            limit = std::min(limit, static_cast<size_t>(f->type.str_len - 1));
          const char* p = s->data();
          size_t n = 0;
          while (n < limit && p[n]) ++n;
          *changed = AssignString(out, std::string_view(p, n));
          return Status::Ok();
        }
      }
    }
  }
  FAY_ASSIGN_OR_RETURN(Value v, EvalExpr(e, ev, probe));
  *changed = !(v == *out);
  if (*changed) *out = std::move(v);
  return Status::Ok();
}

Expected<Value> EvalExpr(const Expr& e, const Event& ev, const ProbeInfo& probe) {
  switch (e.kind) {
    case ExprKind::kInt:
      return Value(e.int_value);
    case ExprKind::kString:
      return Value(e.str_value);
    case ExprKind::kField:
      return EvalField(e, ev, probe);
    case ExprKind::kCall:
      if (e.name == "str") return EvalStr(e, ev, probe);
      return EvalError(e, "unknown function " + e.name);
    case ExprKind::kUnary:
      return EvalUnary(e, ev, probe);
    case ExprKind::kBinary:
      return EvalBinary(e, ev, probe);
    case ExprKind::kIn:
      return EvalIn(e, ev, probe);
    case ExprKind::kState:
      if (!ev.state_values || e.read_slot < 0 ||
          static_cast<size_t>(e.read_slot) >= ev.state_values->size())
        return EvalError(e, "state read outside a plan that reads it");
      return (*ev.state_values)[static_cast<size_t>(e.read_slot)];
  }
  return EvalError(e, "unknown expression kind");
}

}  // namespace fay
