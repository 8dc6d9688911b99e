#include "bpf/btf_offsets.h"

#include <bpf/btf.h>

#include <cstring>
#include <functional>

namespace fay::bpf {

Expected<TaskOffsets> TaskStructOffsets() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return Error(Code::kNotFound, "the kernel exposes no BTF");
  TaskOffsets out;
  int id = btf__find_by_name_kind(vmlinux, "task_struct", BTF_KIND_STRUCT);
  if (id > 0) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    const btf_member* m = btf_members(t);
    for (int i = 0; i < btf_vlen(t); ++i) {
      const char* name = btf__name_by_offset(vmlinux, m[i].name_off);
      int off = static_cast<int>(btf_member_bit_offset(t, i) / 8);
      if (std::strcmp(name, "comm") == 0) out.comm = off;
      if (std::strcmp(name, "pid") == 0) out.pid = off;
      if (std::strcmp(name, "tgid") == 0) out.tgid = off;
    }
  }
  btf__free(vmlinux);
  if (out.comm < 0 || out.pid < 0 || out.tgid < 0)
    return Error(Code::kNotFound, "task_struct.comm/pid/tgid not found in kernel BTF");
  return out;
}

Expected<int> TaskCommOffset() {
  FAY_ASSIGN_OR_RETURN(TaskOffsets o, TaskStructOffsets());
  return o.comm;
}

bool PlanReadsComm(const Plan& plan) {
  bool found = false;
  std::function<void(const Expr*)> visit = [&](const Expr* e) {
    if (!e) return;
    if (e->kind == ExprKind::kField && e->name == "comm") found = true;
    for (const auto& k : e->kids) visit(k.get());
  };
  visit(plan.predicate);
  for (const auto& k : plan.keys) visit(k.expr);
  for (const auto& a : plan.aggs) visit(a.item->arg.get());
  return found;
}

}  // namespace fay::bpf
