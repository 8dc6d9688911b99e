// The query AST. The parser builds it; the semantic pass fills in the `resolved` parts.
//
//   program := (state ';')* query
//   state   := source ('|' (where | sample))* '|' remember
//   query   := source ('|' stage)*
//   source  := probe_spec (',' probe_spec)*
//   stage   := where | sample | aggregate | select | format | top | every | for
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/source_range.h"
#include "schema/field.h"

namespace fay {

enum class ExprKind {
  kInt,     // int_value (duration literals are folded to ns: 5ms -> 5000000)
  kString,  // str_value
  kField,   // name: "comm", "args.filename", "ret"
  kCall,    // name: "str"; args in kids. (Aggregates are not expressions; see AggItem.)
  kUnary,   // op: "-", "!", "~"; kids[0]
  kBinary,  // op: "+ - * / % & | ^ << >> == != < <= > >= && ||"; kids[0], kids[1]
  kIn,      // kids[0] in (kids[1..])
  kState,   // name[kids...]: the value a state pipeline remembered under these keys
};

struct Expr {
  ExprKind kind = ExprKind::kInt;
  SourceRange range;
  int64_t int_value = 0;
  std::string str_value;
  std::string name;  // kField / kCall
  std::string op;    // kUnary / kBinary
  std::vector<std::unique_ptr<Expr>> kids;
  std::string text;  // the source text of the whole expression, used to name unaliased keys
  // Levels of nodes from this one down to its deepest leaf (1 for a leaf). The parser bounds it,
  // so the passes, the planner and destruction may recurse over the tree.
  int height = 1;

  // Filled by the semantic pass.
  Type type;
  // kField: the field's position in each probe's `fields`, parallel to Query::probes.
  std::vector<int> field_index;
  // `==`/`!=` between a string and a literal containing '*' or '?' is a glob match.
  bool is_glob = false;
  // kState: the state pipeline (Query::states) that remembers `name`, and this read's place in
  // Plan::state_reads (reads of the same text share one).
  int state = -1;
  int read_slot = -1;
  // kState: a missing value reads as 0 and lets the event through, instead of dropping it
  // (`until NAME`, which passes events while NAME has not fired).
  bool optional = false;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ProbeSpec {
  std::string text;  // "syscall:openat", "uprobe:/bin/bash:readline", "syscall:*"
  SourceRange range;
};

struct WhereStage {
  ExprPtr cond;
  // Written `after NAME` or `until NAME` (a trigger's read), named so in errors.
  bool after = false, until = false;
};

// `sample 1%` or `sample 1/N`: keep an event with probability num/den.
struct SampleStage {
  uint64_t num = 1;
  uint64_t den = 1;
};

enum class AggFunc { kCount, kSum, kMin, kMax, kAvg, kHist, kLhist, kQuantile, kDistinct };

struct AggItem {
  AggFunc func = AggFunc::kCount;
  ExprPtr arg;                       // null for count()
  int64_t lo = 0, hi = 0, step = 0;  // lhist
  double q = 0;                      // quantile, 0 < q <= 1 (e.g. 0.99)
  std::string name;  // output name: the alias, else the function name ("count", "hist")
  SourceRange range;
};

struct KeyItem {
  ExprPtr expr;
  std::string name;  // the alias, else the expression text ("comm", "args.filename")
};

struct AggregateStage {
  std::vector<AggItem> aggs;
  std::vector<KeyItem> keys;
};

struct SelectStage {
  std::vector<KeyItem> items;
};

struct TopStage {
  int64_t n = 10;
};

struct EveryStage {
  uint64_t ns = 0;
};

struct ForStage {
  uint64_t ns = 0;
};

// `remember EXPR as NAME [by KEY, ...] [for DURATION]`, the last stage of a state pipeline:
// each event stores EXPR under its keys (the thread id when there is no `by`), for a later
// pipeline to read as NAME[KEY, ...]. Without `for`, a read takes the value (deletes it); with
// `for D`, values are kept and read as missing once older than D.
struct RememberStage {
  ExprPtr value;
  std::string name;
  SourceRange name_range;
  std::vector<ExprPtr> keys;
  uint64_t ttl_ns = 0;
  bool trigger = false;  // written `trigger NAME`, the state `after NAME` reads
};

// `format "FMT"` after a select: how text output lays out each row (query/row_format.h).
struct FormatStage {
  std::string fmt;
  SourceRange range;  // the string literal
};

// `(AGGREGATE [| top N]), (AGGREGATE [| top N]), ...`: several tables from one pass over the
// events, each with its own keys (syscount's by syscall and by process).
struct TableItem {
  AggregateStage agg;
  int64_t top_n = 0;
  SourceRange range;
};
struct TablesStage {
  std::vector<TableItem> tables;
};

// `cluster K by KEY` after an aggregate with KEY and other keys: the values of KEY (hosts,
// traces, processes) in K groups by the shape of their rows, their mix over the other keys
// (engine/kmeans.h). Printed instead of the rows.
struct ClusterStage {
  int64_t k = 0;
  std::string by;  // one of the aggregate's key names
  SourceRange by_range;
};

// `when COND` after an aggregate: only the rows whose output columns (keys and aggregates, by
// their names) meet COND print, and a window with none is not printed (SQL's HAVING).
struct WhenStage {
  ExprPtr cond;
};

// `snapshot NAME` after an aggregate: print the aggregation as it stands each time the trigger
// NAME fires, and go on aggregating (ftrace's and LTTng's snapshot, for an aggregate).
struct SnapshotStage {
  std::string name;
  SourceRange name_range;
};

using Stage = std::variant<WhereStage, SampleStage, AggregateStage, SelectStage, TopStage,
                           EveryStage, ForStage, RememberStage, FormatStage, TablesStage,
                           ClusterStage, WhenStage, SnapshotStage>;

struct StageNode {
  Stage stage;
  SourceRange range;  // the stage keyword through its last token
};

// A trigger without `for` stays set for as long as the query runs: a century.
inline constexpr uint64_t kTriggerForever = 100ull * 365 * 24 * 3600 * 1'000'000'000;

// State pipelines in one query: each has a map of its own in the probe.
inline constexpr size_t kMaxStates = 4;
// Tables of one query (TablesStage): each has maps of its own in the probe.
inline constexpr size_t kMaxTables = 4;

struct Query {
  std::string text;  // the full source, for diagnostics
  std::vector<ProbeSpec> sources;
  std::vector<StageNode> stages;
  // The state pipelines before the query's ';'s, in order. Each is a Query of its own whose
  // last stage is a RememberStage; they have no states of their own.
  std::vector<std::shared_ptr<Query>> states;
};

}  // namespace fay
