// The planner: splits a checked query into the probe part and the machine part (query/plan.h).
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "query/plan.h"

namespace fay {

// `probes` is what the semantic pass resolved for `query`; Expr::field_index is parallel to it.
// `state_probes` are those of query->states, in order.
Expected<Plan> BuildPlan(std::shared_ptr<Query> query, std::vector<ProbeInfo> probes,
                         const PlanOptions& options = {},
                         std::vector<std::vector<ProbeInfo>> state_probes = {});

// Human-readable plan for `fay explain`.
std::string DescribePlan(const Plan& plan);

}  // namespace fay
