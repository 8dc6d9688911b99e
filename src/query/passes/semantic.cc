#include "query/passes/semantic.h"

#include "query/passes/resolve_probes.h"
#include "query/passes/stage_check.h"
#include "query/passes/type_check.h"

namespace fay {

Expected<std::vector<ProbeInfo>> AnalyzeQuery(Query& q, ProbeCatalog& catalog) {
  FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> probes, ResolveProbes(q, catalog));
  FAY_RETURN_IF_ERROR(CheckStages(q));
  FAY_RETURN_IF_ERROR(TypeCheck(q, probes));
  return probes;
}

}  // namespace fay
