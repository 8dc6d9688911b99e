// The stages that act on a window's rows once they are aggregated, wherever the rows come from
// (the kernel's maps, the interpreter, a recording, a cluster's merge): `when COND` keeps the
// rows whose output columns meet COND; `cluster K by KEY` groups KEY's values by the shape of
// their rows over the other keys (engine/kmeans.h).
#pragma once

#include "common/status.h"
#include "engine/kmeans.h"
#include "engine/value.h"
#include "query/plan.h"

namespace fay {

// The rows of rs that meet plan.when (all of them without one), in their order.
ResultSet ApplyWhen(const Plan& plan, const ResultSet& rs);

// plan.cluster_k groups of the values of key plan.cluster_key. Each value's features are the
// other keys' values (printed as text, joined by a space), weighed by the first aggregate.
Expected<ClusterResult> ClusterWindow(const Plan& plan, const ResultSet& rs);

}  // namespace fay
