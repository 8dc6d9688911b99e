#include "query/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "common/strings.h"
#include "query/diagnostics.h"
#include "query/lexer.h"

namespace fay {
namespace {

struct AggDesc {
  AggFunc func;
  const char* name;
  const char* usage;  // shown in hints
};

constexpr std::array<AggDesc, 9> kAggs = {{
    {AggFunc::kCount, "count", "count()"},
    {AggFunc::kSum, "sum", "sum(x)"},
    {AggFunc::kMin, "min", "min(x)"},
    {AggFunc::kMax, "max", "max(x)"},
    {AggFunc::kAvg, "avg", "avg(x)"},
    {AggFunc::kHist, "hist", "hist(x)"},
    {AggFunc::kLhist, "lhist", "lhist(x, lo, hi, step), e.g. lhist(latency, 0, 1ms, 100us)"},
    {AggFunc::kQuantile, "quantile", "quantile(x, q), e.g. quantile(latency, 0.99)"},
    {AggFunc::kDistinct, "distinct", "distinct(x)"},
}};

const AggDesc& Desc(AggFunc f) {
  for (const auto& d : kAggs)
    if (d.func == f) return d;
  return kAggs[0];
}

const std::vector<std::string>& StageWords() {
  static const std::vector<std::string> words = {
      "where",  "sample",  "select", "top",     "every", "for",      "count",    "sum",
      "min",    "max",     "avg",    "hist",    "lhist", "quantile", "distinct", "remember",
      "format", "cluster", "when",   "trigger", "after", "until",    "snapshot"};
  return words;
}

constexpr const char* kStageList =
    "stages: where EXPR, sample P% or 1/N, select EXPR, ..., top N, every DURATION, "
    "for DURATION, or aggregates: count() sum(x) min(x) max(x) avg(x) hist(x) "
    "lhist(x, lo, hi, step) quantile(x, q) distinct(x) [by EXPR, ...]";

// Binary operators by precedence level, loosest first. Level 6 also takes `in`/`not in`.
const std::vector<std::vector<std::string>>& BinaryLevels() {
  static const std::vector<std::vector<std::string>> levels = {
      {"||"},       {"&&"},     {"|"},          {"^"}, {"&"}, {"==", "!="}, {"<", "<=", ">", ">="},
      {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}};
  return levels;
}
constexpr size_t kRelationalLevel = 6;
constexpr size_t kNotLevel = 2;  // the operands of && (see ParseBinary)

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text), lex_(text_) {}

  // Pipelines separated by ';': every one but the last is a state pipeline (it ends in
  // `remember`), which the last one reads.
  Expected<std::shared_ptr<Query>> Parse() {
    std::vector<std::shared_ptr<Query>> states;
    while (true) {
      auto q = std::make_shared<Query>();
      q->text = text_;
      FAY_ASSIGN_OR_RETURN(q->sources, lex_.ScanSource());
      FAY_RETURN_IF_ERROR(Advance());
      // ScanSource stops only at '|' or ';', and each stage must end at '|', ';' or the end.
      while (cur_.IsOp("|")) {
        FAY_RETURN_IF_ERROR(Advance());
        if (cur_.kind == TokKind::kEnd || cur_.IsOp(";"))
          return Fail(cur_, "Expected a stage after '|'", kStageList);
        StageNode node;
        FAY_RETURN_IF_ERROR(ParseStage(&node));
        q->stages.push_back(std::move(node));
      }
      if (cur_.kind == TokKind::kEnd) {
        q->states = std::move(states);
        return q;
      }
      // cur_ is ';' (ParseStage accepts nothing else): a state pipeline ends here.
      for (const StageNode& node : q->stages)
        if (std::holds_alternative<RememberStage>(node.stage) && &node != &q->stages.back())
          return Fail(cur_, "'remember' must be the last stage before ';'",
                      "filter first: PROBES | where ... | remember EXPR as NAME");
      if (q->stages.empty() || !std::holds_alternative<RememberStage>(q->stages.back().stage))
        return Fail(cur_, "A pipeline before ';' must end with a remember stage",
                    "e.g. uprobe:./app:start | remember time as t0; uprobe:./app:stop | "
                    "hist(time - t0[tid])");
      states.push_back(std::move(q));
      if (states.size() > kMaxStates)
        return Fail(cur_, fmt::format("At most {} state pipelines in one query", kMaxStates));
    }
  }

 private:
  Status Advance() {
    prev_end_ = cur_.end;
    FAY_ASSIGN_OR_RETURN(cur_, lex_.Next());
    return Status::Ok();
  }

  Status Fail(const Token& at, const std::string& message, const std::string& hint = "") const {
    return QueryError(text_, at.range, message, hint);
  }
  Status FailRange(size_t begin, size_t end, const std::string& message,
                   const std::string& hint = "") const {
    return QueryError(text_, lex_.RangeOf(begin, end), message, hint);
  }

  Status Expect(const char* op, const std::string& context, const std::string& hint = "") {
    if (!cur_.IsOp(op))
      return Fail(cur_, fmt::format("Expected '{}' {}, found {}", op, context, Describe(cur_)),
                  hint);
    return Advance();
  }

  // The source text of [begin, end). Spans that cross lines lose their comments and newlines, so
  // an output name is always one line.
  std::string SourceText(size_t begin, size_t end) const {
    std::string_view raw = std::string_view(text_).substr(begin, end - begin);
    if (raw.find('\n') == std::string_view::npos) return std::string(raw);
    std::string out;
    bool in_string = false;
    for (size_t i = 0; i < raw.size(); ++i) {
      char c = raw[i];
      if (in_string) {
        out += c;
        if (c == '\\' && i + 1 < raw.size())
          out += raw[++i];
        else if (c == '"')
          in_string = false;
        continue;
      }
      if (c == '"') {
        in_string = true;
        out += c;
      } else if (c == '#') {
        while (i + 1 < raw.size() && raw[i + 1] != '\n') ++i;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        if (!out.empty() && out.back() != ' ') out += ' ';
      } else {
        out += c;
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }

  void Finish(Expr* e, size_t begin) const {
    e->range = lex_.RangeOf(begin, prev_end_);
    e->text = SourceText(begin, prev_end_);
    e->height = 1;
    for (const ExprPtr& k : e->kids) e->height = std::max(e->height, k->height + 1);
  }

  // Every pass over an expression recurses, and every node keeps its source text: nesting is
  // bounded so a hostile query cannot exhaust the stack or allocate its length squared. A level
  // of parentheses, unary operator or call costs the parser a dozen frames (one per precedence
  // level; 175 overflowed 8 MiB under ASan), a node of a binary chain costs each pass one.
  static constexpr int kMaxNesting = 64;  // parentheses, unary operators, calls
  static constexpr int kMaxHeight = 256;  // levels of the expression tree
  Status TooDeep(size_t begin, int limit) const {
    return FailRange(begin, std::max(prev_end_, begin + 1),
                     fmt::format("Expression nested more than {} levels deep", limit),
                     "split it, e.g. into several where stages");
  }
  // Counts one level of parser recursion for as long as it lives.
  struct NestGuard {
    explicit NestGuard(int* n) : n_(n) { ++*n_; }
    ~NestGuard() { --*n_; }
    NestGuard(const NestGuard&) = delete;
    NestGuard& operator=(const NestGuard&) = delete;
    int* n_;
  };

  // ---- stages

  Status ParseStage(StageNode* node) {
    size_t begin = cur_.begin;
    if (cur_.IsOp("(")) {
      // After a where, `| (` is more likely a bitwise or missing its parentheses than tables.
      size_t w = cur_.end;
      while (w < text_.size() && (text_[w] == ' ' || text_[w] == '\t' || text_[w] == '\n')) ++w;
      size_t w_end = w;
      while (w_end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[w_end])) || text_[w_end] == '_'))
        ++w_end;
      AggFunc ignored;
      if (after_expr_stage_ && !AggFuncFromName(text_.substr(w, w_end - w), &ignored))
        return Fail(cur_, "Expected a stage, found '('",
                    "for a bitwise or, use parentheses: where (a | b); tables are "
                    "(count() by x), (count() by y)");
      TablesStage s;
      FAY_RETURN_IF_ERROR(ParseTables(&s));
      node->stage = std::move(s);
      node->range = lex_.RangeOf(begin, prev_end_);
      after_expr_stage_ = false;
      if (cur_.kind == TokKind::kEnd || cur_.IsOp("|")) return Status::Ok();
      return Fail(cur_, fmt::format("Unexpected {} after the tables", Describe(cur_)),
                  "tables are separated by ',': (count() by probe | top 10), (count() by comm)");
    }
    if (cur_.kind != TokKind::kIdent) {
      return Fail(cur_, fmt::format("Expected a stage, found {}", Describe(cur_)), kStageList);
    }
    std::string word = cur_.text;
    std::string what = word;
    AggFunc func;
    bool expr_stage = false;
    if (word == "where") {
      FAY_RETURN_IF_ERROR(Advance());
      WhereStage s;
      FAY_ASSIGN_OR_RETURN(s.cond, ParseExpr());
      node->stage = std::move(s);
      expr_stage = true;
    } else if (word == "sample") {
      FAY_RETURN_IF_ERROR(Advance());
      SampleStage s;
      FAY_RETURN_IF_ERROR(ParseSample(&s));
      node->stage = s;
    } else if (word == "select") {
      FAY_RETURN_IF_ERROR(Advance());
      SelectStage s;
      FAY_RETURN_IF_ERROR(ParseNamedList(&s.items));
      node->stage = std::move(s);
      expr_stage = true;
    } else if (word == "top") {
      FAY_RETURN_IF_ERROR(Advance());
      if (cur_.kind != TokKind::kInt || cur_.int_value <= 0)
        return Fail(cur_, fmt::format("Expected a row count after 'top', found {}", Describe(cur_)),
                    "e.g. top 10");
      node->stage = TopStage{cur_.int_value};
      FAY_RETURN_IF_ERROR(Advance());
    } else if (word == "every" || word == "for") {
      FAY_RETURN_IF_ERROR(Advance());
      FAY_ASSIGN_OR_RETURN(uint64_t ns, ParseDuration(word));
      if (word == "every")
        node->stage = EveryStage{ns};
      else
        node->stage = ForStage{ns};
    } else if (word == "format") {
      FAY_RETURN_IF_ERROR(Advance());
      if (cur_.kind != TokKind::kString)
        return Fail(
            cur_, fmt::format("Expected a format string after 'format', found {}", Describe(cur_)),
            "e.g. select pid, comm | format \"%-6d %s\"");
      node->stage = FormatStage{cur_.str_value, cur_.range};
      FAY_RETURN_IF_ERROR(Advance());
    } else if (word == "remember") {
      FAY_RETURN_IF_ERROR(Advance());
      RememberStage s;
      FAY_RETURN_IF_ERROR(ParseRemember(&s));
      node->stage = std::move(s);
      expr_stage = true;
    } else if (word == "cluster") {
      FAY_RETURN_IF_ERROR(Advance());
      ClusterStage s;
      FAY_RETURN_IF_ERROR(ParseCluster(&s));
      node->stage = std::move(s);
    } else if (word == "when") {
      FAY_RETURN_IF_ERROR(Advance());
      WhenStage s;
      FAY_ASSIGN_OR_RETURN(s.cond, ParseExpr());
      node->stage = std::move(s);
      expr_stage = true;
    } else if (word == "trigger") {
      FAY_RETURN_IF_ERROR(Advance());
      RememberStage s;
      FAY_RETURN_IF_ERROR(ParseTrigger(&s));
      node->stage = std::move(s);
    } else if (word == "snapshot") {
      FAY_RETURN_IF_ERROR(Advance());
      if (cur_.kind != TokKind::kIdent)
        return Fail(
            cur_,
            fmt::format("Expected a trigger's name after 'snapshot', found {}", Describe(cur_)),
            "e.g. syscall:fsync | trigger synced; syscall:read | count() by comm | "
            "snapshot synced");
      SnapshotStage s;
      s.name = cur_.text;
      s.name_range = cur_.range;
      FAY_RETURN_IF_ERROR(Advance());
      node->stage = std::move(s);
    } else if (word == "after" || word == "until") {
      FAY_RETURN_IF_ERROR(Advance());
      WhereStage s;
      (word == "after" ? s.after : s.until) = true;
      FAY_ASSIGN_OR_RETURN(s.cond, ParseAfter(s.until));
      node->stage = std::move(s);
    } else if (AggFuncFromName(word, &func)) {
      what = "aggregate";
      AggregateStage s;
      FAY_RETURN_IF_ERROR(ParseAggregate(&s));
      node->stage = std::move(s);
      expr_stage = true;
    } else {
      std::vector<std::string> near = Nearest(StageWords(), word, 1);
      std::string hint =
          near.empty() ? kStageList : fmt::format("did you mean '{}'? {}", near[0], kStageList);
      if (near.empty() && after_expr_stage_)
        hint = "for a bitwise or, use parentheses: where (a | b); " + hint;
      return Fail(cur_, fmt::format("Unknown stage '{}'", word), hint);
    }
    node->range = lex_.RangeOf(begin, prev_end_);
    after_expr_stage_ = expr_stage;
    if (cur_.kind == TokKind::kEnd || cur_.IsOp("|") || cur_.IsOp(";")) return Status::Ok();
    std::string hint = "stages are separated by '|'";
    if (cur_.IsWord("and"))
      hint = "use '&&' for a logical and";
    else if (cur_.IsWord("or"))
      hint = "use '||' for a logical or";
    else if (word == "remember" && cur_.IsWord("by"))
      hint = "'by' comes before 'for': remember EXPR as NAME by KEY for DURATION";
    else if (expr_stage && cur_.kind == TokKind::kIdent && !cur_.IsWord("as"))
      hint = "stages are separated by '|'; bitwise '|' needs parentheses: (a | b)";
    else if (cur_.IsWord("as") && what != "select" && what != "aggregate")
      hint = "'as' names select columns, aggregates and keys";
    return Fail(cur_, fmt::format("Unexpected {} after the {} stage", Describe(cur_), what), hint);
  }

  // '(' aggregate ['|' top N] ')' { ',' '(' ... ')' }
  Status ParseTables(TablesStage* s) {
    const char* usage = "e.g. syscall:* | (count() by probe | top 10), (count() by comm | top 10)";
    while (true) {
      TableItem t;
      const size_t begin = cur_.begin;
      FAY_RETURN_IF_ERROR(Expect("(", "to open a table", usage));
      FAY_RETURN_IF_ERROR(ParseAggregate(&t.agg));
      if (cur_.IsOp("|")) {
        FAY_RETURN_IF_ERROR(Advance());
        if (!cur_.IsWord("top"))
          return Fail(cur_, fmt::format("Expected 'top' inside a table, found {}", Describe(cur_)),
                      usage);
        FAY_RETURN_IF_ERROR(Advance());
        if (cur_.kind != TokKind::kInt || cur_.int_value <= 0)
          return Fail(cur_,
                      fmt::format("Expected a row count after 'top', found {}", Describe(cur_)),
                      "e.g. top 10");
        t.top_n = cur_.int_value;
        FAY_RETURN_IF_ERROR(Advance());
      }
      FAY_RETURN_IF_ERROR(Expect(")", "to close the table", usage));
      t.range = lex_.RangeOf(begin, prev_end_);
      s->tables.push_back(std::move(t));
      if (s->tables.size() > kMaxTables)
        return FailRange(begin, prev_end_,
                         fmt::format("At most {} tables in one query", kMaxTables));
      if (!cur_.IsOp(",")) return Status::Ok();
      FAY_RETURN_IF_ERROR(Advance());
    }
  }

  // remember EXPR as NAME [by KEY, ...] [for DURATION]
  Status ParseRemember(RememberStage* s) {
    const char* usage = "e.g. remember time as t0 by tid, then read t0[tid] after ';'";
    FAY_ASSIGN_OR_RETURN(s->value, ParseExpr());
    if (!cur_.IsWord("as"))
      return Fail(
          cur_, fmt::format("Expected 'as NAME' after remember's value, found {}", Describe(cur_)),
          usage);
    FAY_RETURN_IF_ERROR(Advance());
    if (cur_.kind != TokKind::kIdent)
      return Fail(cur_, fmt::format("Expected a name after 'as', found {}", Describe(cur_)), usage);
    s->name = cur_.text;
    s->name_range = cur_.range;
    FAY_RETURN_IF_ERROR(Advance());
    if (cur_.IsWord("by")) {
      FAY_RETURN_IF_ERROR(Advance());
      while (true) {
        FAY_ASSIGN_OR_RETURN(ExprPtr k, ParseExpr());
        s->keys.push_back(std::move(k));
        if (!cur_.IsOp(",")) break;
        FAY_RETURN_IF_ERROR(Advance());
      }
    }
    if (cur_.IsWord("for")) {
      FAY_RETURN_IF_ERROR(Advance());
      FAY_ASSIGN_OR_RETURN(s->ttl_ns, ParseDuration("for"));
    }
    return Status::Ok();
  }

  // `cluster K by KEY`: KEY is kept as text, the name of one of the aggregate's keys.
  Status ParseCluster(ClusterStage* s) {
    const char* hint = "e.g. syscall:* | count() by host, probe | cluster 3 by host";
    if (cur_.kind != TokKind::kInt || cur_.int_value < 1 || cur_.int_value > 64)
      return Fail(cur_,
                  fmt::format("Expected a number of groups (1 to 64) after 'cluster', found {}",
                              Describe(cur_)),
                  hint);
    s->k = cur_.int_value;
    FAY_RETURN_IF_ERROR(Advance());
    if (!cur_.IsWord("by"))
      return Fail(cur_,
                  fmt::format("Expected 'by' after 'cluster {}', found {}", s->k, Describe(cur_)),
                  hint);
    FAY_RETURN_IF_ERROR(Advance());
    FAY_ASSIGN_OR_RETURN(ExprPtr key, ParseExpr());
    s->by = key->text;
    s->by_range = key->range;
    return Status::Ok();
  }

  // An expression the parser writes for sugar, placed at `at` for errors.
  static ExprPtr Synth(ExprKind kind, const Token& at, std::string text, int64_t value = 0) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->range = at.range;
    e->text = std::move(text);
    e->int_value = value;
    return e;
  }

  // `trigger NAME [for D]` ends a state pipeline: `remember 1 as NAME by 0`, kept for D, or for
  // good without `for`. A later `after NAME` lets events through once it fired.
  Status ParseTrigger(RememberStage* s) {
    const char* hint = "e.g. syscall:fsync | trigger synced; syscall:read | after synced | count()";
    if (cur_.kind != TokKind::kIdent)
      return Fail(cur_, fmt::format("Expected a name after 'trigger', found {}", Describe(cur_)),
                  hint);
    Token name = cur_;
    s->name = name.text;
    s->name_range = name.range;
    s->value = Synth(ExprKind::kInt, name, "1", 1);
    s->keys.push_back(Synth(ExprKind::kInt, name, "0", 0));
    s->ttl_ns = kTriggerForever;
    s->trigger = true;
    FAY_RETURN_IF_ERROR(Advance());
    if (cur_.IsWord("for")) {
      FAY_RETURN_IF_ERROR(Advance());
      FAY_ASSIGN_OR_RETURN(s->ttl_ns, ParseDuration("for"));
    }
    return Status::Ok();
  }

  // `after NAME`: `where NAME[0] == 1`, the trigger's value read without taking it. `until
  // NAME`: `where NAME[0] != 1` over a read that finds 0 while NAME has not fired.
  Expected<ExprPtr> ParseAfter(bool until) {
    const char* word = until ? "until" : "after";
    if (cur_.kind != TokKind::kIdent)
      return Fail(
          cur_, fmt::format("Expected a trigger's name after '{}', found {}", word, Describe(cur_)),
          fmt::format("e.g. syscall:fsync | trigger synced; syscall:read | {} synced | "
                      "count()",
                      word));
    Token name = cur_;
    FAY_RETURN_IF_ERROR(Advance());
    auto read = Synth(ExprKind::kState, name, name.text + "[0]");
    read->name = name.text;
    read->optional = until;
    read->kids.push_back(Synth(ExprKind::kInt, name, "0", 0));
    read->height = 2;
    const char* op = until ? "!=" : "==";
    auto cond = Synth(ExprKind::kBinary, name, fmt::format("{}[0] {} 1", name.text, op));
    cond->op = op;
    cond->kids.push_back(std::move(read));
    cond->kids.push_back(Synth(ExprKind::kInt, name, "1", 1));
    cond->height = 3;
    return cond;
  }

  Expected<uint64_t> ParseDuration(const std::string& stage) {
    if (cur_.kind == TokKind::kInt)
      return Fail(cur_, fmt::format("'{}' needs a duration with a unit", stage),
                  fmt::format("e.g. {} {}s; units: ns, us, ms, s, m, h", stage, cur_.int_value));
    if (cur_.kind != TokKind::kDuration || cur_.int_value <= 0)
      return Fail(cur_,
                  fmt::format("Expected a duration after '{}', found {}", stage, Describe(cur_)),
                  fmt::format("e.g. {} 1s; units: ns, us, ms, s, m, h", stage));
    uint64_t ns = static_cast<uint64_t>(cur_.int_value);
    FAY_RETURN_IF_ERROR(Advance());
    return ns;
  }

  Status ParseSample(SampleStage* s) {
    const char* hint = "e.g. sample 1% or sample 0.5% or sample 1/100";
    Token num = cur_;
    if (num.kind != TokKind::kInt && num.kind != TokKind::kFloat)
      return Fail(num, fmt::format("Expected a sampling rate, found {}", Describe(num)), hint);
    FAY_RETURN_IF_ERROR(Advance());
    if (cur_.IsOp("%")) {
      FAY_RETURN_IF_ERROR(Advance());
      // Keep the digits exact: 0.5% is 5/1000, never a rounded double.
      uint64_t n = 0, den = 100;
      bool fraction = false;
      for (char c : num.text) {
        if (c == '.') {
          fraction = true;
          continue;
        }
        n = n * 10 + static_cast<uint64_t>(c - '0');
        if (fraction) den *= 10;
        if (den > 100000000000000000ULL || n > den)
          return FailRange(num.begin, prev_end_, "Sampling rate must be above 0% and at most 100%",
                           hint);
      }
      if (n == 0 || n > den)
        return FailRange(num.begin, prev_end_, "Sampling rate must be above 0% and at most 100%",
                         hint);
      s->num = n;
      s->den = den;
      return Status::Ok();
    }
    if (num.kind == TokKind::kInt && cur_.IsOp("/")) {
      FAY_RETURN_IF_ERROR(Advance());
      if (cur_.kind != TokKind::kInt)
        return Fail(cur_, fmt::format("Expected an integer after '/', found {}", Describe(cur_)),
                    hint);
      Token den = cur_;
      FAY_RETURN_IF_ERROR(Advance());
      if (num.int_value < 1 || den.int_value < num.int_value)
        return FailRange(num.begin, prev_end_, "Sampling fraction must be between 1/N and 1/1",
                         hint);
      s->num = static_cast<uint64_t>(num.int_value);
      s->den = static_cast<uint64_t>(den.int_value);
      return Status::Ok();
    }
    return Fail(
        cur_, fmt::format("Expected '%' or '/' after the sampling rate, found {}", Describe(cur_)),
        hint);
  }

  // `as NAME`, if present.
  Status ParseAlias(std::string* name) {
    if (!cur_.IsWord("as")) return Status::Ok();
    FAY_RETURN_IF_ERROR(Advance());
    if (cur_.kind != TokKind::kIdent)
      return Fail(cur_, fmt::format("Expected a name after 'as', found {}", Describe(cur_)),
                  "names are identifiers, e.g. count() as calls");
    *name = cur_.text;
    return Advance();
  }

  // EXPR [as NAME] (',' EXPR [as NAME])*
  Status ParseNamedList(std::vector<KeyItem>* items) {
    while (true) {
      KeyItem item;
      FAY_ASSIGN_OR_RETURN(item.expr, ParseExpr());
      item.name = item.expr->text;
      FAY_RETURN_IF_ERROR(ParseAlias(&item.name));
      items->push_back(std::move(item));
      if (!cur_.IsOp(",")) return Status::Ok();
      FAY_RETURN_IF_ERROR(Advance());
    }
  }

  Status ParseAggregate(AggregateStage* s) {
    while (true) {
      AggItem item;
      FAY_RETURN_IF_ERROR(ParseAggItem(&item));
      s->aggs.push_back(std::move(item));
      if (cur_.IsOp(",")) {
        FAY_RETURN_IF_ERROR(Advance());
        continue;
      }
      break;
    }
    if (cur_.IsWord("by")) {
      FAY_RETURN_IF_ERROR(Advance());
      return ParseNamedList(&s->keys);
    }
    return Status::Ok();
  }

  Status ParseAggItem(AggItem* item) {
    AggFunc func;
    if (cur_.kind != TokKind::kIdent || !AggFuncFromName(cur_.text, &func))
      return Fail(cur_, fmt::format("Expected an aggregate, found {}", Describe(cur_)),
                  "aggregates: count() sum(x) min(x) max(x) avg(x) hist(x) lhist(x, lo, hi, step) "
                  "quantile(x, q) distinct(x)");
    const AggDesc& d = Desc(func);
    Token name = cur_;
    item->func = func;
    item->name = d.name;
    FAY_RETURN_IF_ERROR(Advance());
    if (!cur_.IsOp("("))
      return Fail(name, fmt::format("Expected '(' after '{}'", d.name),
                  fmt::format("write {}", d.usage));
    FAY_RETURN_IF_ERROR(Advance());
    ++depth_;
    if (func == AggFunc::kCount) {
      if (!cur_.IsOp(")")) {
        size_t arg_begin = cur_.begin;
        FAY_ASSIGN_OR_RETURN(auto arg, ParseExpr());
        (void)arg;
        return FailRange(arg_begin, prev_end_, "count() takes no argument",
                         "count() counts events; to count distinct values use distinct(x)");
      }
    } else {
      if (cur_.IsOp(")"))
        return Fail(cur_, fmt::format("{}() needs an argument", d.name),
                    fmt::format("write {}", d.usage));
      FAY_ASSIGN_OR_RETURN(item->arg, ParseExpr());
      if (func == AggFunc::kLhist) {
        const char* what[] = {"lo", "hi", "step"};
        int64_t* out[] = {&item->lo, &item->hi, &item->step};
        for (int i = 0; i < 3; ++i) {
          FAY_RETURN_IF_ERROR(Expect(",", fmt::format("before lhist's {}", what[i]),
                                     fmt::format("write {}", d.usage)));
          FAY_ASSIGN_OR_RETURN(*out[i], ParseIntLiteral(what[i], d.usage));
        }
      } else if (func == AggFunc::kQuantile) {
        FAY_RETURN_IF_ERROR(Expect(",", "before quantile's q", fmt::format("write {}", d.usage)));
        FAY_ASSIGN_OR_RETURN(item->q, ParseQuantileQ());
      }
    }
    if (!cur_.IsOp(")")) {
      std::string msg = cur_.IsOp(",")
                            ? fmt::format("Too many arguments to {}()", d.name)
                            : fmt::format("Expected ')' after the arguments of {}(), found {}",
                                          d.name, Describe(cur_));
      return Fail(cur_, msg, fmt::format("write {}", d.usage));
    }
    FAY_RETURN_IF_ERROR(Advance());
    --depth_;
    item->range = lex_.RangeOf(name.begin, prev_end_);
    return ParseAlias(&item->name);
  }

  Expected<int64_t> ParseIntLiteral(const char* what, const char* usage) {
    size_t begin = cur_.begin;
    FAY_ASSIGN_OR_RETURN(ExprPtr e, ParseUnary());
    if (e->kind != ExprKind::kInt)
      return FailRange(begin, prev_end_,
                       fmt::format("Expected an integer or duration literal for {}", what),
                       fmt::format("write {}", usage));
    return e->int_value;
  }

  // q as a fraction (0.99) or as an integer percent (99).
  Expected<double> ParseQuantileQ() {
    const char* hint = "q is a fraction in (0, 1] such as 0.99, or a percent 1..100 such as 99";
    Token t = cur_;
    double q = 0;
    if (t.kind == TokKind::kFloat) {
      q = t.float_value;
    } else if (t.kind == TokKind::kInt) {
      if (t.int_value < 1 || t.int_value > 100) return Fail(t, "Quantile out of range", hint);
      q = static_cast<double>(t.int_value) / 100.0;
    } else {
      return Fail(t, fmt::format("Expected a quantile, found {}", Describe(t)), hint);
    }
    if (!(q > 0 && q <= 1)) return Fail(t, "Quantile out of range", hint);
    FAY_RETURN_IF_ERROR(Advance());
    return q;
  }

  // ---- expressions

  Expected<ExprPtr> ParseExpr() { return ParseBinary(0); }

  Expected<ExprPtr> ParseBinary(size_t level) {
    if (level == BinaryLevels().size()) return ParseUnary();
    size_t begin = cur_.begin;
    // `not` as Python and SQL read it: below the comparisons, above `and`, so `not a == b` is
    // `!(a == b)`.
    if (level == kNotLevel && cur_.IsWord("not")) {
      NestGuard guard(&nesting_);
      if (nesting_ > kMaxNesting) return TooDeep(begin, kMaxNesting);
      FAY_RETURN_IF_ERROR(Advance());
      FAY_ASSIGN_OR_RETURN(ExprPtr operand, ParseBinary(kNotLevel));
      auto e = std::make_unique<Expr>();
      e->kind = ExprKind::kUnary;
      e->op = "!";
      e->kids.push_back(std::move(operand));
      Finish(e.get(), begin);
      return ExprPtr(std::move(e));
    }
    FAY_ASSIGN_OR_RETURN(ExprPtr left, ParseBinary(level + 1));
    while (true) {
      if (level == kRelationalLevel && (cur_.IsWord("in") || cur_.IsWord("not"))) {
        FAY_ASSIGN_OR_RETURN(left, ParseIn(std::move(left), begin));
        continue;
      }
      // `and` and `or` read as SQL and Python users write them: the same as && and ||.
      std::string word_op = level == 0 && cur_.IsWord("or")    ? "||"
                            : level == 1 && cur_.IsWord("and") ? "&&"
                                                               : "";
      if (word_op.empty()) {
        if (cur_.kind != TokKind::kOp) break;
        const auto& ops = BinaryLevels()[level];
        bool match = false;
        for (const auto& op : ops) match = match || cur_.text == op;
        // At the top level of a stage '|' separates stages; bitwise or needs parentheses.
        if (!match || (cur_.text == "|" && depth_ == 0)) break;
      }
      auto e = std::make_unique<Expr>();
      e->kind = ExprKind::kBinary;
      e->op = word_op.empty() ? cur_.text : word_op;
      FAY_RETURN_IF_ERROR(Advance());
      FAY_ASSIGN_OR_RETURN(ExprPtr right, ParseBinary(level + 1));
      e->kids.push_back(std::move(left));
      e->kids.push_back(std::move(right));
      Finish(e.get(), begin);
      if (e->height > kMaxHeight) return TooDeep(begin, kMaxHeight);
      left = std::move(e);
    }
    return left;
  }

  // left [not] in (lit, lit, ...). `not in` is the `!` of an `in`.
  Expected<ExprPtr> ParseIn(ExprPtr left, size_t begin) {
    bool negate = cur_.IsWord("not");
    if (negate) {
      Token not_tok = cur_;
      FAY_RETURN_IF_ERROR(Advance());
      if (!cur_.IsWord("in"))
        return Fail(not_tok, "Unexpected 'not'", "use '!' to negate, or 'not in (...)'");
    }
    FAY_RETURN_IF_ERROR(Advance());
    const char* hint = "e.g. comm in (\"bash\", \"sh\") or ret in (-2, -13)";
    FAY_RETURN_IF_ERROR(Expect("(", "after 'in'", hint));
    ++depth_;
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::kIn;
    e->kids.push_back(std::move(left));
    while (true) {
      size_t item_begin = cur_.begin;
      FAY_ASSIGN_OR_RETURN(ExprPtr item, ParseUnary());
      if (item->kind != ExprKind::kInt && item->kind != ExprKind::kString)
        return FailRange(item_begin, prev_end_, "'in' takes a list of literals", hint);
      e->kids.push_back(std::move(item));
      if (cur_.IsOp(",")) {
        FAY_RETURN_IF_ERROR(Advance());
        continue;
      }
      FAY_RETURN_IF_ERROR(Expect(")", "to close the 'in' list", hint));
      break;
    }
    --depth_;
    Finish(e.get(), begin);
    if (!negate) return ExprPtr(std::move(e));
    auto n = std::make_unique<Expr>();
    n->kind = ExprKind::kUnary;
    n->op = "!";
    n->kids.push_back(std::move(e));
    Finish(n.get(), begin);
    return ExprPtr(std::move(n));
  }

  Expected<ExprPtr> ParseUnary() {
    size_t begin = cur_.begin;
    if (cur_.IsOp("-") || cur_.IsOp("!") || cur_.IsOp("~")) {
      NestGuard guard(&nesting_);
      if (nesting_ > kMaxNesting) return TooDeep(begin, kMaxNesting);
      std::string op = cur_.text;
      FAY_RETURN_IF_ERROR(Advance());
      FAY_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary());
      if (op == "-" && operand->kind == ExprKind::kInt) {
        // Fold negative literals so `ret == -2` and `in (-2, -13)` compare with constants.
        operand->int_value = -operand->int_value;
        Finish(operand.get(), begin);
        return operand;
      }
      auto e = std::make_unique<Expr>();
      e->kind = ExprKind::kUnary;
      e->op = op;
      e->kids.push_back(std::move(operand));
      Finish(e.get(), begin);
      return ExprPtr(std::move(e));
    }
    return ParsePrimary();
  }

  Expected<ExprPtr> ParsePrimary() {
    size_t begin = cur_.begin;
    auto e = std::make_unique<Expr>();
    switch (cur_.kind) {
      case TokKind::kInt:
      case TokKind::kDuration:
        e->kind = ExprKind::kInt;
        e->int_value = cur_.int_value;
        FAY_RETURN_IF_ERROR(Advance());
        break;
      case TokKind::kString:
        e->kind = ExprKind::kString;
        e->str_value = cur_.str_value;
        FAY_RETURN_IF_ERROR(Advance());
        break;
      case TokKind::kFloat:
        return Fail(cur_, "Float literals are only allowed in quantile() and sample",
                    "expressions compute on integers; use a duration such as 1500us for 1.5ms");
      case TokKind::kIdent:
        return ParseIdent();
      case TokKind::kOp:
        if (cur_.IsOp("(")) {
          NestGuard guard(&nesting_);
          if (nesting_ > kMaxNesting) return TooDeep(begin, kMaxNesting);
          FAY_RETURN_IF_ERROR(Advance());
          ++depth_;
          FAY_ASSIGN_OR_RETURN(e, ParseExpr());
          FAY_RETURN_IF_ERROR(Expect(")", "to close '('"));
          --depth_;
          break;
        }
        [[fallthrough]];
      default:
        return Fail(cur_, fmt::format("Expected an expression, found {}", Describe(cur_)),
                    "e.g. a field (pid, comm, args.filename), a literal (42, \"bash\", 5ms) "
                    "or str(ptr)");
    }
    Finish(e.get(), begin);
    return ExprPtr(std::move(e));
  }

  Expected<ExprPtr> ParseIdent() {
    size_t begin = cur_.begin;
    Token first = cur_;
    if (first.IsWord("as") || first.IsWord("by") || first.IsWord("in"))
      return Fail(first, fmt::format("Expected an expression, found {}", Describe(first)));
    if (first.IsWord("not"))
      return Fail(first, "Unexpected 'not'",
                  "'not' negates a whole condition (not a == b); inside an operand use '!'");
    FAY_RETURN_IF_ERROR(Advance());
    auto e = std::make_unique<Expr>();
    if (cur_.IsOp("(")) {
      AggFunc func;
      if (AggFuncFromName(first.text, &func))
        return Fail(first,
                    fmt::format("Aggregate {}() is not allowed inside an expression", first.text),
                    fmt::format("aggregates form a stage of their own, e.g. ... | {} by comm",
                                Desc(func).usage));
      e->kind = ExprKind::kCall;
      e->name = first.text;
      NestGuard guard(&nesting_);
      if (nesting_ > kMaxNesting) return TooDeep(begin, kMaxNesting);
      FAY_RETURN_IF_ERROR(Advance());
      ++depth_;
      if (!cur_.IsOp(")")) {
        while (true) {
          FAY_ASSIGN_OR_RETURN(ExprPtr arg, ParseExpr());
          e->kids.push_back(std::move(arg));
          if (!cur_.IsOp(",")) break;
          FAY_RETURN_IF_ERROR(Advance());
        }
      }
      FAY_RETURN_IF_ERROR(Expect(")", fmt::format("after the arguments of {}()", first.text)));
      --depth_;
    } else if (cur_.IsOp("[")) {
      // A remembered value: name[key, ...].
      e->kind = ExprKind::kState;
      e->name = first.text;
      NestGuard guard(&nesting_);
      if (nesting_ > kMaxNesting) return TooDeep(begin, kMaxNesting);
      FAY_RETURN_IF_ERROR(Advance());
      ++depth_;
      while (true) {
        FAY_ASSIGN_OR_RETURN(ExprPtr key, ParseExpr());
        e->kids.push_back(std::move(key));
        if (!cur_.IsOp(",")) break;
        FAY_RETURN_IF_ERROR(Advance());
      }
      FAY_RETURN_IF_ERROR(Expect("]", fmt::format("after the keys of {}[...]", first.text)));
      --depth_;
    } else {
      e->kind = ExprKind::kField;
      e->name = first.text;
      while (cur_.IsOp(".")) {
        FAY_RETURN_IF_ERROR(Advance());
        if (cur_.kind != TokKind::kIdent)
          return Fail(cur_,
                      fmt::format("Expected a field name after '.', found {}", Describe(cur_)),
                      "e.g. args.filename");
        e->name += "." + cur_.text;
        FAY_RETURN_IF_ERROR(Advance());
      }
    }
    Finish(e.get(), begin);
    return ExprPtr(std::move(e));
  }

  std::string text_;
  Lexer lex_;
  Token cur_;
  size_t prev_end_ = 0;
  int depth_ = 0;    // parentheses open around the current token
  int nesting_ = 0;  // parser recursion inside the current expression (NestGuard)
  // The previous stage ended in an expression, so an unknown stage word after '|' may be a
  // bitwise or that lacks parentheses.
  bool after_expr_stage_ = false;
};

}  // namespace

bool AggFuncFromName(const std::string& name, AggFunc* out) {
  for (const auto& d : kAggs) {
    if (name == d.name) {
      *out = d.func;
      return true;
    }
  }
  return false;
}

const char* AggFuncName(AggFunc f) {
  return Desc(f).name;
}

Expected<std::shared_ptr<Query>> ParseQuery(const std::string& text) {
  Parser p(text);
  return p.Parse();
}

}  // namespace fay
