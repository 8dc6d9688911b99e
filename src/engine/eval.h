// Expression evaluation with the generated probe code's semantics: 64-bit wrapping ints, eBPF
// division (x / 0 == 0, x % 0 == x), signedness from the operand types, strings bounded by their
// type's capacity. The interpreter is the differential oracle for the kernel path, so any
// difference from the code generator is a bug in one of them.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/value.h"
#include "query/ast.h"
#include "schema/probe.h"

namespace fay {

Expected<Value> EvalExpr(const Expr& e, const Event& ev, const ProbeInfo& probe);

// EvalExpr into *out, reusing the string *out already holds: fields (the usual keys and
// aggregate arguments) are copied without building a temporary, which is what keeps the
// interpreter fast over millions of recorded events.
// *changed, when given, says whether *out differs from what it held before.
Status EvalInto(const Expr& e, const Event& ev, const ProbeInfo& probe, Value* out,
                bool* changed = nullptr);

// A predicate's verdict: a non-zero int. Strings and stacks are never true.
bool Truthy(const Value& v);

// The string a probe buffer of str_len bytes holds: up to the first NUL, at most str_len - 1
// bytes (the probe always NUL-terminates). str_len <= 0 means unbounded.
std::string BoundedString(std::string_view s, int str_len);

// The field of `probe` an expression names, or null when e is not a field of that probe.
const Field* FieldOf(const Expr& e, int probe_index, const ProbeInfo& probe);

}  // namespace fay
