// The front half of the compiler in one call: parse -> semantic passes -> planner.
#pragma once

#include <string>

#include "common/status.h"
#include "query/plan.h"
#include "schema/probe.h"

namespace fay {

Expected<Plan> CompileQuery(const std::string& text, ProbeCatalog& catalog,
                            const PlanOptions& options = {});

}  // namespace fay
