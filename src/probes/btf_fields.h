// Fields typed by the kernel's BTF, which describes every kernel type on this machine, so no
// header is needed: members of the current task (`curtask.real_parent.tgid`, `curtask.comm`)
// and of the user structs a system call's arguments point at (`args.rqtp.tv_sec`).
#pragma once

#include <string>

#include "common/status.h"
#include "schema/field.h"

namespace fay {

// `curtask.MEMBER[.MEMBER...]`: a field of source kTaskBtf. Errors name the struct and the
// member, with the nearest member names as a hint (Status message: "WHAT\nHINT").
Expected<Field> TaskBtfField(const std::string& name);

// `BASE.MEMBER[...]` where `base` is a pointer whose C type is `struct X *`: a syscall's
// argument (source kUserBtf: user memory) or a tracepoint's field (kKernelPtrBtf: the
// kernel's). kNotFound when `base` points at no struct.
Expected<Field> StructBtfField(const Field& base, const std::string& name, FieldSource source);

// Whether `name` could be such a field: curtask.*, or a name longer than a probe's pointer.
bool IsTaskBtfName(const std::string& name);

}  // namespace fay
