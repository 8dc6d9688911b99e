#include "query/passes/semantic.h"

#include <functional>

#include "probes/btf_fields.h"
#include "query/diagnostics.h"
#include "query/passes/resolve_probes.h"
#include "query/passes/stage_check.h"
#include "query/passes/type_check.h"

namespace fay {
namespace {

void VisitQueryExprs(Query& q, const std::function<void(Expr&)>& fn) {
  std::function<void(Expr*)> walk = [&](Expr* e) {
    if (!e) return;
    fn(*e);
    for (ExprPtr& k : e->kids) walk(k.get());
  };
  for (StageNode& node : q.stages) {
    if (auto* w = std::get_if<WhereStage>(&node.stage)) walk(w->cond.get());
    if (auto* a = std::get_if<AggregateStage>(&node.stage)) {
      for (AggItem& i : a->aggs) walk(i.arg.get());
      for (KeyItem& k : a->keys) walk(k.expr.get());
    }
    if (auto* s = std::get_if<SelectStage>(&node.stage))
      for (KeyItem& k : s->items) walk(k.expr.get());
    if (auto* t = std::get_if<TablesStage>(&node.stage))
      for (TableItem& table : t->tables) {
        for (AggItem& i : table.agg.aggs) walk(i.arg.get());
        for (KeyItem& k : table.agg.keys) walk(k.expr.get());
      }
    if (auto* r = std::get_if<RememberStage>(&node.stage)) {
      walk(r->value.get());
      for (ExprPtr& k : r->keys) walk(k.get());
    }
  }
}

// A diagnostic from a "WHAT\nHINT" message, at the expression.
Status AtExpr(const Query& q, const Expr& e, const Status& st) {
  const std::string& m = st.message();
  const size_t nl = m.find('\n');
  std::string what = m.substr(0, nl);
  if (!what.empty() && what[0] >= 'a' && what[0] <= 'z') what[0] -= 'a' - 'A';
  return QueryError(q.text, e.range, what, nl == std::string::npos ? "" : m.substr(nl + 1));
}

// Fields typed by the kernel's BTF (probes/btf_fields.h) become fields of the probes that
// lack them, before the type check looks them up: `curtask.real_parent.tgid` on any probe, and
// `args.rqtp.tv_sec` where args.rqtp points at a struct.
Status AddBtfFields(Query& q, std::vector<ProbeInfo>& probes) {
  Status status;
  VisitQueryExprs(q, [&](Expr& e) {
    if (!status.ok() || e.kind != ExprKind::kField) return;
    for (ProbeInfo& p : probes) {
      if (p.FindField(e.name)) continue;
      Expected<Field> f = Status(Code::kNotFound, "");
      if (IsTaskBtfName(e.name)) {
        f = TaskBtfField(e.name);
      } else {
        // The longest pointer field the name extends: a system call's argument points into
        // user memory, a tracepoint's into the kernel's.
        if (p.kind != ProbeKind::kSyscall && p.kind != ProbeKind::kTracepoint) continue;
        const Field* base = nullptr;
        for (const Field& pf : p.fields)
          if (pf.source == FieldSource::kCtx && e.name.size() > pf.name.size() + 1 &&
              e.name.compare(0, pf.name.size() + 1, pf.name + ".") == 0 &&
              (!base || pf.name.size() > base->name.size()))
            base = &pf;
        if (!base) continue;
        f = StructBtfField(
            *base, e.name,
            p.kind == ProbeKind::kSyscall ? FieldSource::kUserBtf : FieldSource::kKernelPtrBtf);
        if (!f.ok() && f.status().code() == Code::kNotFound) continue;
      }
      if (!f.ok()) {
        status = AtExpr(q, e, f.status());
        return;
      }
      p.fields.push_back(std::move(f).value());
    }
  });
  return status;
}

}  // namespace

Expected<std::vector<ProbeInfo>> AnalyzeQuery(Query& q, ProbeCatalog& catalog,
                                              std::vector<std::vector<ProbeInfo>>* state_probes) {
  FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> probes, ResolveProbes(q, catalog));
  FAY_RETURN_IF_ERROR(CheckStages(q));
  // The state pipelines before the query: its reads are typed by what they remember.
  for (const auto& st : q.states) {
    FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> sp, ResolveProbes(*st, catalog));
    FAY_RETURN_IF_ERROR(AddBtfFields(*st, sp));
    FAY_RETURN_IF_ERROR(TypeCheck(*st, sp));
    if (state_probes) state_probes->push_back(std::move(sp));
  }
  FAY_RETURN_IF_ERROR(AddBtfFields(q, probes));
  FAY_RETURN_IF_ERROR(TypeCheck(q, probes));
  return probes;
}

}  // namespace fay
