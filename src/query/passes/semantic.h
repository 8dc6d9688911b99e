// The semantic analysis: probe resolution, pipeline shape, then types. Each part is its own pass
// (resolve_probes, stage_check, type_check); this runs them in order.
#pragma once

#include <vector>

#include "common/status.h"
#include "query/ast.h"
#include "schema/probe.h"

namespace fay {

// Returns the query's probes; every kField's field_index is parallel to them. Fills the types of
// q's expressions. Errors are rendered diagnostics (see query/diagnostics.h).
// The probes of each state pipeline (Query::states) go to `state_probes`, in order.
Expected<std::vector<ProbeInfo>> AnalyzeQuery(
    Query& q, ProbeCatalog& catalog, std::vector<std::vector<ProbeInfo>>* state_probes = nullptr);

}  // namespace fay
