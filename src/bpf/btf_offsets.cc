#include "bpf/btf_offsets.h"

#include <bpf/btf.h>

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

namespace fay::bpf {

namespace {

// Parsing vmlinux BTF (5 MB, read 4 KiB at a time from sysfs) was a fifth of fay's start-up, and
// the answer cannot change until the next boot, so it is kept in /run (tmpfs, per boot), keyed
// by the running kernel's release and build.
constexpr const char* kCacheDir = "/run/fay";
constexpr const char* kCachePath = "/run/fay/task_struct_offsets";

std::string KernelIdentity() {
  utsname u{};
  if (uname(&u) != 0) return {};
  return std::string(u.release) + " " + u.version;
}

bool ReadCache(TaskOffsets* out) {
  std::ifstream in(kCachePath);
  std::string id;
  if (!in || !std::getline(in, id) || id != KernelIdentity()) return false;
  TaskOffsets o;
  if (!(in >> o.comm >> o.pid >> o.tgid >> o.real_parent >> o.exit_code >> o.binprm_filename >>
        o.exit_has_group_dead >> o.cred >> o.cred_uid >> o.sys_enter_btf_id >> o.sys_exit_btf_id >>
        o.cpu >> o.task_struct_btf_id >> o.rdonly_cast_btf_id >> o.pending_signal >> o.signal >>
        o.signal_flags >> o.group_exit_code >> o.group_exec_task >> o.shared_pending_signal) ||
      o.comm < 0 || o.pid < 0 || o.tgid < 0 || o.real_parent < 0 || o.exit_code < 0)
    return false;
  *out = o;
  return true;
}

void WriteCache(const TaskOffsets& o) {
  mkdir(kCacheDir, 0755);
  std::string tmp = std::string(kCachePath) + "." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return;
    f << KernelIdentity() << "\n"
      << o.comm << " " << o.pid << " " << o.tgid << " " << o.real_parent << " " << o.exit_code
      << " " << o.binprm_filename << " " << o.exit_has_group_dead << " " << o.cred << " "
      << o.cred_uid << " " << o.sys_enter_btf_id << " " << o.sys_exit_btf_id << " " << o.cpu << " "
      << o.task_struct_btf_id << " " << o.rdonly_cast_btf_id << " " << o.pending_signal << " "
      << o.signal << " " << o.signal_flags << " " << o.group_exit_code << " " << o.group_exec_task
      << " " << o.shared_pending_signal << "\n";
    if (!f) return;
  }
  // Atomic: a concurrent fay reads the old file or the new one, never half of one.
  if (rename(tmp.c_str(), kCachePath) != 0) unlink(tmp.c_str());
}

// Byte offset of struct_name.member, or -1.
int MemberOffset(const btf* vmlinux, const char* struct_name, const char* member) {
  int id = btf__find_by_name_kind(vmlinux, struct_name, BTF_KIND_STRUCT);
  if (id <= 0) return -1;
  const btf_type* t = btf__type_by_id(vmlinux, id);
  const btf_member* m = btf_members(t);
  for (int i = 0; i < btf_vlen(t); ++i)
    if (std::strcmp(btf__name_by_offset(vmlinux, m[i].name_off), member) == 0)
      return static_cast<int>(btf_member_bit_offset(t, i) / 8);
  return -1;
}

Expected<TaskOffsets> ParseTaskStructOffsets() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return Error(Code::kNotFound, "the kernel exposes no BTF");
  TaskOffsets out;
  int id = btf__find_by_name_kind(vmlinux, "task_struct", BTF_KIND_STRUCT);
  out.task_struct_btf_id = std::max(0, id);
  out.rdonly_cast_btf_id =
      std::max(0, btf__find_by_name_kind(vmlinux, "bpf_rdonly_cast", BTF_KIND_FUNC));
  if (id > 0) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    const btf_member* m = btf_members(t);
    for (int i = 0; i < btf_vlen(t); ++i) {
      const char* name = btf__name_by_offset(vmlinux, m[i].name_off);
      int off = static_cast<int>(btf_member_bit_offset(t, i) / 8);
      if (std::strcmp(name, "comm") == 0) out.comm = off;
      if (std::strcmp(name, "pid") == 0) out.pid = off;
      if (std::strcmp(name, "tgid") == 0) out.tgid = off;
      if (std::strcmp(name, "real_parent") == 0) out.real_parent = off;
      if (std::strcmp(name, "exit_code") == 0) out.exit_code = off;
      if (std::strcmp(name, "cred") == 0) out.cred = off;
    }
  }
  out.cred_uid = MemberOffset(vmlinux, "cred", "uid");
  out.binprm_filename = MemberOffset(vmlinux, "linux_binprm", "filename");
  // typedef void (*btf_trace_sched_process_exit)(void *, struct task_struct *[, bool]);
  id = btf__find_by_name_kind(vmlinux, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
  if (id > 0) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    while (t && (btf_is_typedef(t) || btf_is_ptr(t))) t = btf__type_by_id(vmlinux, t->type);
    if (t && btf_is_func_proto(t)) out.exit_has_group_dead = btf_vlen(t) >= 3 ? 1 : 0;
  }
  out.sys_enter_btf_id =
      std::max(0, btf__find_by_name_kind(vmlinux, "btf_trace_sys_enter", BTF_KIND_TYPEDEF));
  out.sys_exit_btf_id =
      std::max(0, btf__find_by_name_kind(vmlinux, "btf_trace_sys_exit", BTF_KIND_TYPEDEF));
  {
    int ti = MemberOffset(vmlinux, "task_struct", "thread_info");
    int cpu = MemberOffset(vmlinux, "thread_info", "cpu");
    if (ti >= 0 && cpu >= 0) out.cpu = ti + cpu;
  }
  {
    int pending = MemberOffset(vmlinux, "task_struct", "pending");
    int signal = MemberOffset(vmlinux, "sigpending", "signal");
    if (pending >= 0 && signal >= 0) out.pending_signal = pending + signal;
    int shared = MemberOffset(vmlinux, "signal_struct", "shared_pending");
    if (shared >= 0 && signal >= 0) out.shared_pending_signal = shared + signal;
  }
  out.signal = MemberOffset(vmlinux, "task_struct", "signal");
  out.signal_flags = MemberOffset(vmlinux, "signal_struct", "flags");
  out.group_exit_code = MemberOffset(vmlinux, "signal_struct", "group_exit_code");
  out.group_exec_task = MemberOffset(vmlinux, "signal_struct", "group_exec_task");
  btf__free(vmlinux);
  if (out.comm < 0 || out.pid < 0 || out.tgid < 0 || out.real_parent < 0 || out.exit_code < 0)
    return Error(Code::kNotFound,
                 "task_struct.comm/pid/tgid/real_parent/exit_code not found in kernel BTF");
  return out;
}

}  // namespace

Expected<TaskOffsets> TaskStructOffsets() {
  TaskOffsets o;
  if (ReadCache(&o)) return o;
  FAY_ASSIGN_OR_RETURN(o, ParseTaskStructOffsets());
  WriteCache(o);
  return o;
}

Expected<int> TaskCommOffset() {
  FAY_ASSIGN_OR_RETURN(TaskOffsets o, TaskStructOffsets());
  return o.comm;
}

}  // namespace fay::bpf
