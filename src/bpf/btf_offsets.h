// Offsets of kernel struct members, from the running kernel's BTF. Lets generated code read
// fields such as task_struct.comm directly instead of through a slower helper.
#pragma once

#include "common/status.h"
#include "query/plan.h"

namespace fay::bpf {

struct TaskOffsets {
  int comm = -1, pid = -1, tgid = -1, real_parent = -1, exit_code = -1;
  // linux_binprm.filename (the exec tracepoint's argument); -1 when unknown.
  int binprm_filename = -1;
  // task_struct.cred and cred.uid: the uid without a helper call.
  int cred = -1, cred_uid = -1;
  // Whether the raw tracepoint sched_process_exit passes group_dead after the task (6.16+).
  int exit_has_group_dead = 0;
  // BTF type ids of the typedefs btf_trace_sys_enter / btf_trace_sys_exit, for programs that
  // attach as BTF-typed raw tracepoints (their pt_regs argument is then read with plain loads);
  // 0 when unknown.
  int sys_enter_btf_id = 0, sys_exit_btf_id = 0;
  // task_struct.thread_info.cpu: the CPU the task runs on, without a helper call; -1 unknown.
  int cpu = -1;
  // BTF ids of struct task_struct and of the kfunc bpf_rdonly_cast; 0 when unknown. The probes
  // walk task pointers through an untrusted cast: the verifier then skips its per-load search
  // for "trusted" annotations, a linear scan of the kernel's BTF that was a third of start-up.
  int task_struct_btf_id = 0, rdonly_cast_btf_id = 0;
  // task_struct.pending.signal.sig[0]: the signals sent to the thread alone (a pending SIGKILL
  // means it dies before it returns to user space); -1 when unknown.
  int pending_signal = -1;
  // task_struct.signal, and signal_struct's flags, group_exit_code and group_exec_task (5.16+):
  // why the thread is dying. -1 when unknown.
  int signal = -1, signal_flags = -1, group_exit_code = -1, group_exec_task = -1;
  // signal_struct.shared_pending.signal.sig[0]: the signals sent to the whole process; -1 when
  // unknown.
  int shared_pending_signal = -1;
};
// Byte offsets of task_struct.comm, .pid and .tgid; kNotFound when the kernel has no BTF.
Expected<TaskOffsets> TaskStructOffsets();
// Byte offset of task_struct.comm; kNotFound when the kernel has no BTF.
Expected<int> TaskCommOffset();

}  // namespace fay::bpf
