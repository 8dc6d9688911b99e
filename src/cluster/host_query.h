// The `host` field of a cluster query. A host's name is a constant on that host, so everything
// the query says of it is decided before any probe runs: a `where` stage on host alone picks the
// hosts, and `by host` is a key the agent fills in. Both are cut from the text the local engine
// compiles (the kernel never sees them), and nothing else may use host.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "query/ast.h"
#include "query/plan.h"

namespace fay::cluster {

struct HostKey {
  int index = -1;    // the position of `host` among a table's `by` keys, or -1
  std::string name;  // its output name ("host", or the alias)
};

struct HostQuery {
  std::string local;     // the query without its host stages and keys, for the local engine
  int host_key = -1;     // the position of `host` among the `by` keys, or -1
  std::string key_name;  // its output name ("host", or the alias)
  // With several tables, the host key of each one after the query's own (Plan::tables).
  std::vector<HostKey> tables;
  // Where host is among each table's keys (-1: not a key), the query's own first.
  std::vector<int> KeyIndexes() const {
    std::vector<int> out{host_key};
    for (const HostKey& k : tables) out.push_back(k.index);
    return out;
  }
  // The `where` stages on host, as written, each a condition every answering host must meet.
  std::vector<std::string> host_filters;
};

// Splits `text`. A use of host anywhere else (inside an expression with other fields, in an
// aggregate, in select) is refused at its caret with a hint.
Expected<HostQuery> SplitHostQuery(const std::string& text);

// The query's `when` and `cluster` stages (cut from `local`) onto the root's plan, whose keys
// have host back: checked against its columns. `q` must outlive the plan's use of them.
Status ApplyOutputStages(const Query& q, Plan* plan);

// Whether a host named `name` meets every host filter of the query (the stages are re-parsed).
Expected<bool> HostSelected(const std::string& text, const std::string& name);

}  // namespace fay::cluster
