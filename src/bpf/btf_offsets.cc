#include "bpf/btf_offsets.h"

#include <bpf/btf.h>

#include <cstring>
#include <functional>

namespace fay::bpf {

Expected<int> TaskCommOffset() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return Error(Code::kNotFound, "the kernel exposes no BTF");
  int result = -1;
  int id = btf__find_by_name_kind(vmlinux, "task_struct", BTF_KIND_STRUCT);
  if (id > 0) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    const btf_member* m = btf_members(t);
    for (int i = 0; i < btf_vlen(t); ++i) {
      if (std::strcmp(btf__name_by_offset(vmlinux, m[i].name_off), "comm") == 0) {
        result = static_cast<int>(btf_member_bit_offset(t, i) / 8);
        break;
      }
    }
  }
  btf__free(vmlinux);
  if (result < 0) return Error(Code::kNotFound, "task_struct.comm not found in kernel BTF");
  return result;
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
