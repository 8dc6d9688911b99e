// Typed fields that probes publish. The same Field drives the semantic pass (types), the eBPF code
// generator (where to load the value from) and the user-space interpreter (how to decode an event).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fay {

enum class TypeKind { kInt, kString, kStack };

struct Type {
  TypeKind kind = TypeKind::kInt;
  bool is_signed = true;
  // kString: capacity in bytes including the NUL (comm is 16; str() defaults to 64).
  int str_len = 0;
  // kInt that holds a user-space address of a NUL-terminated string (e.g. `const char *filename`):
  // str() accepts it.
  bool user_ptr = false;

  static Type Int(bool is_signed = true) { return {TypeKind::kInt, is_signed, 0, false}; }
  static Type Str(int len) { return {TypeKind::kString, false, len, false}; }
  static Type UserPtr() { return {TypeKind::kInt, false, 0, true}; }
  static Type Stack() { return {TypeKind::kStack, false, 0, false}; }
  bool operator==(const Type&) const = default;
};

// "int", "uint", "string", "user pointer", "stack": words used in type-mismatch diagnostics.
std::string TypeName(const Type& t);

// Where a field's value comes from at run time.
enum class FieldSource {
  // Common fields, from helpers.
  kTime,  // ns, CLOCK_MONOTONIC (bpf_ktime_get_ns)
  kCpu,
  kPid,  // tgid
  kTid,
  kUid,
  kComm,   // string[16]
  kProbe,  // string: the probe's canonical name; a small integer id inside the probe
  // Tracepoint record (for syscalls, the sys_enter record): offset/size/is_signed below.
  kCtx,
  // A `__data_loc char[]` string in a tracepoint record; offset/size locate the u32 descriptor.
  kDataLoc,
  // Syscalls (need the exit tracepoint).
  kRet,
  kErrno,    // -ret when -4095 <= ret < 0, else 0
  kLatency,  // ns from entry to exit (syscalls, uprobe+uretprobe pairs)
  // Uprobes: index is the argument position 0..5 (System V AMD64: rdi rsi rdx rcx r8 r9).
  kUprobeArg,
  kUprobeRet,  // rax at uretprobe
  kFunc,       // string: the matched symbol name
  // The user and the kernel stack where the probe fired, usable as keys (live probes only).
  kUserStack,
  kKernelStack,
  // A member of a kernel type, by BTF: from the current task (`curtask.real_parent.tgid`), or
  // from a user struct a syscall argument points at (`args.rqtp.tv_sec`, base loaded as kCtx
  // from offset/size/index). Field::hops are the byte offsets; each but the last follows a
  // pointer; the leaf is leaf_size bytes (an int, or a char array as a string).
  kTaskBtf,
  kUserBtf,
  kKernelPtrBtf,  // the same from a tracepoint's kernel pointer (`cred.euid.val`)
  // Recorded syscalls only (fay query -i): what the trace holds beyond the live probe.
  kBytes,  // captured buffer bytes of the call, summed over its buffers
  kPath,   // string: the path an fd-based call's descriptor names, from the reader's fd table
  kTrace,  // string: the trace file the event is from (fay query -i A -i B ...)
  kHost,   // string: the host that recorded it (the trace header's uname nodename)
};

struct Field {
  std::string name;  // as written in queries: "pid", "args.filename", "ret", "arg0"
  Type type;
  FieldSource source = FieldSource::kCtx;
  int offset = 0;              // kCtx/kDataLoc: byte offset in the record
  int size = 8;                // kCtx: bytes to load (1, 2, 4 or 8)
  int index = 0;               // kUprobeArg: argument position; syscall args: position 0..5
  std::string c_type;          // the type as the kernel format file spells it, for `fay probes`
  std::vector<uint32_t> hops;  // kTaskBtf, kUserBtf, kKernelPtrBtf
  int leaf_size = 0;           // kTaskBtf, kUserBtf, kKernelPtrBtf
};

// The fields every probe carries: time, cpu, pid, tid, uid, comm, probe.
std::vector<Field> CommonFields();
// ustack and kstack: the stacks a live probe can take where it fires (not in recorded traces).
std::vector<Field> StackFields();
bool IsStackSource(FieldSource s);

}  // namespace fay
