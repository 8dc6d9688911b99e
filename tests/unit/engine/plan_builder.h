// Hand-built plans and events for the engine tests: two syscall probes sharing common fields.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/value.h"
#include "query/plan.h"

namespace fay::testing {

// Field positions in both test probes.
enum FieldPos { kTime, kCpu, kPid, kTid, kUid, kComm, kProbe, kFd, kCount, kFilename, kRet };

inline ProbeInfo TestProbe(const std::string& name) {
  ProbeInfo p;
  p.name = name;
  p.kind = ProbeKind::kSyscall;
  p.fields = CommonFields();
  p.fields.push_back({"args.fd", Type::Int(true), FieldSource::kCtx, 16, 8, 0, "int"});
  p.fields.push_back({"args.count", Type::Int(false), FieldSource::kCtx, 24, 8, 2, "size_t"});
  p.fields.push_back(
      {"args.filename", Type::UserPtr(), FieldSource::kCtx, 32, 8, 1, "const char *"});
  p.fields.push_back({"ret", Type::Int(true), FieldSource::kRet, 0, 8, 0, "long"});
  return p;
}

class PlanBuilder {
 public:
  PlanBuilder() { plan.probes = {TestProbe("syscall:read"), TestProbe("syscall:write")}; }

  Expr* Field(const std::string& name) {
    auto e = New(ExprKind::kField);
    e->name = name;
    e->text = name;
    for (const auto& p : plan.probes) {
      for (size_t i = 0; i < p.fields.size(); ++i) {
        if (p.fields[i].name == name) {
          e->field_index.push_back(static_cast<int>(i));
          e->type = p.fields[i].type;
        }
      }
    }
    return e;
  }
  Expr* Int(int64_t v, bool is_signed = true) {
    auto e = New(ExprKind::kInt);
    e->int_value = v;
    e->type = Type::Int(is_signed);
    e->text = std::to_string(v);
    return e;
  }
  Expr* Str(const std::string& s) {
    auto e = New(ExprKind::kString);
    e->str_value = s;
    e->type = Type::Str(static_cast<int>(s.size()) + 1);
    e->text = "\"" + s + "\"";
    return e;
  }
  Expr* Unary(const std::string& op, Expr* a) {
    auto e = New(ExprKind::kUnary);
    e->op = op;
    e->type = a->type;
    e->kids.push_back(Take(a));
    return e;
  }
  // Takes ownership of the operands (which must come from this builder and be unused).
  Expr* Bin(const std::string& op, Expr* a, Expr* b) {
    auto e = New(ExprKind::kBinary);
    e->op = op;
    static const std::vector<std::string> kBool = {"==", "!=", "<", "<=", ">", ">=", "&&", "||"};
    bool is_bool = std::find(kBool.begin(), kBool.end(), op) != kBool.end();
    e->type = is_bool ? Type::Int(true) : Type::Int(a->type.is_signed || b->type.is_signed);
    e->is_glob =
        b->kind == ExprKind::kString && b->str_value.find_first_of("*?") != std::string::npos;
    e->text = a->text + " " + op + " " + b->text;
    e->kids.push_back(Take(a));
    e->kids.push_back(Take(b));
    return e;
  }
  Expr* In(Expr* a, std::vector<Expr*> set) {
    auto e = New(ExprKind::kIn);
    e->type = Type::Int(true);
    e->kids.push_back(Take(a));
    for (Expr* s : set) e->kids.push_back(Take(s));
    return e;
  }
  Expr* StrCall(Expr* ptr, int n) {
    auto e = New(ExprKind::kCall);
    e->name = "str";
    e->type = Type::Str(n);
    e->text = "str(" + ptr->text + ")";
    e->kids.push_back(Take(ptr));
    return e;
  }

  void Where(Expr* e) { plan.predicate = e; }
  void Key(Expr* e, const std::string& name = "") {
    plan.keys.push_back({e, name.empty() ? e->text : name, e->type, 0, 8});
  }
  AggItem* Agg(AggFunc f, Expr* arg, const std::string& name) {
    items_.emplace_back();
    AggItem& it = items_.back();
    it.func = f;
    it.name = name;
    if (arg) it.arg = Take(arg);
    plan.aggs.push_back({&it, 0, 0});
    return &it;
  }

  Event Ev(int probe, int64_t pid, const std::string& comm, int64_t fd = 0, int64_t count = 0,
           const std::string& filename = "", int64_t ret = 0, uint64_t uid = 1000) {
    Event e;
    e.probe_index = probe;
    e.values = {int64_t{123456789},
                int64_t{1},
                pid,
                pid,
                static_cast<int64_t>(uid),
                comm,
                int64_t{probe},
                fd,
                count,
                int64_t{0x7ffd0000},
                ret};
    e.user_strings.assign(e.values.size(), "");
    e.user_strings[kFilename] = filename;
    return e;
  }

  Plan plan;

 private:
  Expr* New(ExprKind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    Expr* raw = e.get();
    plan.owned.push_back(std::move(e));
    return raw;
  }
  // Moves an expression out of plan.owned into a parent.
  ExprPtr Take(Expr* e) {
    for (auto& p : plan.owned) {
      if (p.get() == e) return std::move(p);
    }
    return nullptr;
  }
  std::deque<AggItem> items_;
};

}  // namespace fay::testing
