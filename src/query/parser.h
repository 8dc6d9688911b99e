// The query parser: text -> AST (query/ast.h). Syntax errors are QueryError statuses that point
// at the offending range and carry a hint. The grammar is in docs/QUERY.md.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "query/ast.h"

namespace fay {

Expected<std::shared_ptr<Query>> ParseQuery(const std::string& text);

// The aggregate function for a name ("count", "lhist", ...); false for any other word.
bool AggFuncFromName(const std::string& name, AggFunc* out);
// "count", "sum", ...: the unaliased output name of an aggregate.
const char* AggFuncName(AggFunc f);

}  // namespace fay
