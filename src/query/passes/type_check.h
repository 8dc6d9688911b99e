// Pass 3 of the semantic analysis: resolves every field against every probe and types every
// expression, aggregate argument and key. Fills Expr::type, Expr::field_index and Expr::is_glob.
#pragma once

#include <vector>

#include "common/status.h"
#include "query/ast.h"
#include "schema/probe.h"

namespace fay {

Status TypeCheck(Query& q, const std::vector<ProbeInfo>& probes);

}  // namespace fay
