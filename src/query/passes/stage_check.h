// Pass 2 of the semantic analysis: the shape of the pipeline (which stages, in which order) and
// the uniqueness of output names.
#pragma once

#include "common/status.h"
#include "query/ast.h"

namespace fay {

// where and sample come before the aggregate or select; at most one aggregate or select, one
// sample, one top, one every, one for; top follows an aggregate; every needs an aggregate;
// output names are unique and not "window".
Status CheckStages(const Query& q);

}  // namespace fay
