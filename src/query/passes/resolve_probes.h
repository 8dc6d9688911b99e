// Pass 1 of the semantic analysis: expands the query's probe specs through the catalog.
#pragma once

#include <vector>

#include "common/status.h"
#include "query/ast.h"
#include "schema/probe.h"

namespace fay {

// The probes of every spec, in spec order, each name once. An unknown spec (kNotFound) is a
// diagnostic at its range with the catalog's nearest names as the hint; a malformed one
// (kInvalidArgument) is a diagnostic at its range too. Other catalog failures (no tracefs, no
// permission) pass through unchanged.
Expected<std::vector<ProbeInfo>> ResolveProbes(const Query& q, ProbeCatalog& catalog);

}  // namespace fay
