#include "record/ebpf/probes.h"

#include <linux/bpf.h>

#include "record/ebpf/probe_gen.h"

namespace fay::record::ebpf {

using namespace gen;

Expected<ProbeSet> GenerateProbes(const ProbeOptions& o) {
  if (o.task_comm < 0 || o.task_pid < 0 || o.task_tgid < 0 || o.task_real_parent < 0 ||
      o.task_exit_code < 0 || o.binprm_filename < 0 || o.task_cred < 0 || o.cred_uid < 0)
    return Error(Code::kUnsupported, "the eBPF recorder needs task_struct offsets from BTF");
  ProbeSet set;
  Status st;
  struct Role {
    void (*gen)(Gen&);
    ProgramSpec* out;
    const char* name;
    int btf_id;  // typed raw tracepoint, or 0
  };
  const Role roles[] = {
      {GenSysEnter, &set.sys_enter, "fay_rec_enter", o.sys_enter_btf_id},
      {GenSysExit, &set.sys_exit, "fay_rec_exit", o.sys_exit_btf_id},
      {GenFork, &set.fork, "fay_rec_fork", 0},
      {GenExec, &set.exec, "fay_rec_exec", 0},
      {GenExit, &set.exit, "fay_rec_pexit", 0},
      {GenSwitch, &set.sched_switch, "fay_rec_switch", 0},
      {GenSignalDeliver, &set.signal_deliver, "fay_rec_sig", 0},
      {GenSignalGenerate, &set.signal_generate, "fay_rec_siggen", 0},
  };
  for (const Role& r : roles) {
    Gen g(o);
    g.typed_ctx = r.btf_id > 0;
    r.gen(g);
    g.Finish(r.out, g.typed_ctx ? BPF_PROG_TYPE_TRACING : BPF_PROG_TYPE_RAW_TRACEPOINT, r.name,
             &st);
    if (g.typed_ctx) {
      r.out->attach_btf_id = static_cast<uint32_t>(r.btf_id);
      r.out->expected_attach_type = BPF_TRACE_RAW_TP;
    }
  }
  if (!st.ok()) return st;
  return set;
}

}  // namespace fay::record::ebpf
