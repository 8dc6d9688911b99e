#include "query/compile.h"

#include "query/parser.h"
#include "query/passes/semantic.h"
#include "query/planner.h"

namespace fay {

Expected<Plan> CompileQuery(const std::string& text, ProbeCatalog& catalog,
                            const PlanOptions& options) {
  FAY_ASSIGN_OR_RETURN(std::shared_ptr<Query> query, ParseQuery(text));
  std::vector<std::vector<ProbeInfo>> state_probes;
  FAY_ASSIGN_OR_RETURN(std::vector<ProbeInfo> probes, AnalyzeQuery(*query, catalog, &state_probes));
  return BuildPlan(std::move(query), std::move(probes), options, std::move(state_probes));
}

}  // namespace fay
