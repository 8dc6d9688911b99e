// The query front end on arbitrary text: lexer, parser, semantic passes and planner, with the
// offline catalog `fay query -i` uses (fay's syscall table plus the trace-only fields). Every
// input ends in a plan or a rendered diagnostic.
#include <cstdint>
#include <string>

#include "engine/offline/table_catalog.h"
#include "engine/offline/trace_catalog.h"
#include "query/compile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Queries are typed or passed on a command line: a few KB is plenty, and longer inputs only
  // slow the fuzzer down.
  if (size > 4096) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  static fay::SyscallTableCatalog table;
  fay::TraceCatalog catalog(table);
  auto plan = fay::CompileQuery(text, catalog);
  if (!plan.ok() && plan.status().message().empty()) __builtin_trap();
  return 0;
}
