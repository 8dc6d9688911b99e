#include "schema/field.h"

namespace fay {

std::string TypeName(const Type& t) {
  switch (t.kind) {
    case TypeKind::kInt:
      if (t.user_ptr) return "user pointer";
      return t.is_signed ? "int" : "uint";
    case TypeKind::kString:
      return "string";
    case TypeKind::kStack:
      return "stack";
  }
  return "?";
}

std::vector<Field> CommonFields() {
  return {
      {"time", Type::Int(false), FieldSource::kTime, 0, 8, 0, "u64"},
      {"cpu", Type::Int(false), FieldSource::kCpu, 0, 4, 0, "u32"},
      {"pid", Type::Int(true), FieldSource::kPid, 0, 4, 0, "pid_t"},
      {"tid", Type::Int(true), FieldSource::kTid, 0, 4, 0, "pid_t"},
      {"uid", Type::Int(false), FieldSource::kUid, 0, 4, 0, "uid_t"},
      {"comm", Type::Str(16), FieldSource::kComm, 0, 16, 0, "char[16]"},
      {"probe", Type::Str(64), FieldSource::kProbe, 0, 8, 0, "string"},
  };
}

std::vector<Field> StackFields() {
  return {
      {"ustack", Type::Stack(), FieldSource::kUserStack, 0, 8, 0, "user stack"},
      {"kstack", Type::Stack(), FieldSource::kKernelStack, 0, 8, 0, "kernel stack"},
  };
}

bool IsStackSource(FieldSource s) {
  return s == FieldSource::kUserStack || s == FieldSource::kKernelStack;
}

}  // namespace fay
