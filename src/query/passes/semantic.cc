#include "query/passes/semantic.h"

#include "query/passes/resolve_probes.h"
#include "query/passes/stage_check.h"
#include "query/passes/type_check.h"

namespace fay {

Expected<std::vector<ProbeInfo>> AnalyzeQuery(Query& q, ProbeCatalog& catalog,
                                              std::vector<std::vector<ProbeInfo>>* state_probes) {
  FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> probes, ResolveProbes(q, catalog));
  FAY_RETURN_IF_ERROR(CheckStages(q));
  // The state pipelines before the query: its reads are typed by what they remember.
  for (const auto& st : q.states) {
    FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> sp, ResolveProbes(*st, catalog));
    FAY_RETURN_IF_ERROR(TypeCheck(*st, sp));
    if (state_probes) state_probes->push_back(std::move(sp));
  }
  FAY_RETURN_IF_ERROR(TypeCheck(q, probes));
  return probes;
}

}  // namespace fay
