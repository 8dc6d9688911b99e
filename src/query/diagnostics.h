// User-facing query errors, rendered the way bpftrace renders them:
//
//   query:1:24-30: ERROR: Unknown field 'filenme' on syscall:openat
//   syscall:openat | where filenme == "x"
//                          ~~~~~~~
//   HINT: did you mean 'args.filename'? fields of syscall:openat: time, cpu, ...
#pragma once

#include <string>

#include "common/source_range.h"
#include "common/status.h"

namespace fay {

// The header uses "LINE:BEGIN-END" (END inclusive), or "LINE:COL" for a one-column range. The
// marker line copies tabs from the source line so the '~' stay aligned under the range. A range
// that starts past the end of its line (an error at end of input) marks the column just after
// the last character. The HINT line is left out when hint is empty. No trailing newline.
std::string RenderDiagnostic(const std::string& source, SourceRange r, const std::string& message,
                             const std::string& hint);

// A Code::kInvalidArgument status whose message is the rendered diagnostic.
Status QueryError(const std::string& source, SourceRange r, const std::string& message,
                  const std::string& hint = "");

}  // namespace fay
