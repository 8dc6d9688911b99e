#include "sinks/clickhouse.h"

#include <httplib.h>

#include <chrono>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/output/format.h"
#include "engine/output/hist_bars.h"
#include "engine/output/row_stages.h"
#include "query/agg_layout.h"
#include "sinks/metrics.h"

namespace fay::sinks {
namespace {

using Json = nlohmann::json;

// A column name ClickHouse takes unquoted too: the JSON name under the label rules, kept apart
// from window and host.
std::vector<std::string> ColumnNames(const Plan& plan) {
  std::vector<std::string> names = {"window", "host"};
  auto add = [&](const std::string& raw) {
    std::string n = LabelName(raw);
    while (std::find(names.begin(), names.end(), n) != names.end()) n += "_";
    names.push_back(n);
  };
  for (const Slot& k : plan.keys) add(k.name);
  for (const AggSlot& a : plan.aggs) add(a.item->name);
  return names;
}

std::string KeyType(const Slot& k) {
  if (k.type.kind == TypeKind::kInt) return k.type.is_signed ? "Int64" : "UInt64";
  return "String";
}

// The aggregate's columns in TABLE_input (named NAME__in...: ClickHouse takes an alias equal to
// a column it reads for a cycle), in TABLE, in the view between them; its merge in TABLE_result's
// inner query (NAME__m...), and its value in the outer one.
struct AggColumns {
  std::vector<std::string> input, stored, mv, merged;
  std::string result;
};

AggColumns ColumnsOf(const AggItem& item, const std::string& c) {
  const std::string num = AggIsUnsigned(item) ? "UInt64" : "Int64";
  switch (item.func) {
    case AggFunc::kCount:
    case AggFunc::kSum:
    case AggFunc::kMin:
    case AggFunc::kMax: {
      const char* f = item.func == AggFunc::kMin   ? "min"
                      : item.func == AggFunc::kMax ? "max"
                                                   : "sum";
      return {{fmt::format("`{}__in` {}", c, num)},
              {fmt::format("`{}` AggregateFunction({}, {})", c, f, num)},
              {fmt::format("{}State(`{}__in`) AS `{}`", f, c, c)},
              {fmt::format("{}Merge(`{}`) AS `{}__m`", f, c, c)},
              fmt::format("`{0}__m` AS `{0}`", c)};
    }
    case AggFunc::kAvg:
      return {{fmt::format("`{}__sum__in` Int64", c), fmt::format("`{}__n__in` UInt64", c)},
              {fmt::format("`{}__sum` AggregateFunction(sum, Int64)", c),
               fmt::format("`{}__n` AggregateFunction(sum, UInt64)", c)},
              {fmt::format("sumState(`{0}__sum__in`) AS `{0}__sum`", c),
               fmt::format("sumState(`{0}__n__in`) AS `{0}__n`", c)},
              {fmt::format("sumMerge(`{0}__sum`) AS `{0}__sum__m`", c),
               fmt::format("sumMerge(`{0}__n`) AS `{0}__n__m`", c)},
              fmt::format("`{0}__sum__m` / `{0}__n__m` AS `{0}`", c)};
    case AggFunc::kHist:
    case AggFunc::kLhist:
    case AggFunc::kQuantile: {
      AggColumns a{
          {fmt::format("`{}__k__in` Array(Int64)", c), fmt::format("`{}__v__in` Array(UInt64)", c)},
          {fmt::format("`{}` AggregateFunction(sumMap, Array(Int64), Array(UInt64))", c)},
          {fmt::format("sumMapState(`{0}__k__in`, `{0}__v__in`) AS `{0}`", c)},
          {fmt::format("sumMapMerge(`{0}`) AS `{0}__m`", c)},
          fmt::format("`{0}__m` AS `{0}`", c)};
      if (item.func == AggFunc::kQuantile) {
        // The value of the first bucket whose running count reaches rank ceil(q * n), clamped
        // to [1, n]: AggState::QuantileValue's choice.
        a.result = fmt::format(
            "arrayElement(`{0}__m`.1, arrayFirstIndex(x -> x >= greatest(1, least(arraySum("
            "`{0}__m`.2), toUInt64(ceil({1} * arraySum(`{0}__m`.2))))), arrayCumSum(`{0}__m`.2))) "
            "AS `{0}`",
            c, item.q);
      }
      return a;
    }
    case AggFunc::kDistinct:
      // HyperLogLog over the merged registers, as AggState::DistinctEstimate: linear counting
      // while registers are still empty.
      return {{fmt::format("`{}__in` Array(UInt8)", c)},
              {fmt::format("`{}` AggregateFunction(maxForEach, Array(UInt8))", c)},
              {fmt::format("maxForEachState(`{0}__in`) AS `{0}`", c)},
              {fmt::format("maxForEachMerge(`{0}`) AS `{0}__m`", c)},
              fmt::format(
                  "toUInt64(round(if(0.7213 / (1 + 1.079 / 1024) * 1024 * 1024 / arraySum(arrayMap("
                  "r -> exp2(-r), `{0}__m`)) <= 2.5 * 1024 AND countEqual(`{0}__m`, 0) > 0, "
                  "1024 * log(1024 / countEqual(`{0}__m`, 0)), 0.7213 / (1 + 1.079 / 1024) * 1024 "
                  "* 1024 / arraySum(arrayMap(r -> exp2(-r), `{0}__m`))))) AS `{0}`",
                  c)};
  }
  return {};
}

void AggJson(const AggItem& item, const AggState& s, const std::string& c, Json* row) {
  switch (item.func) {
    case AggFunc::kCount:
    case AggFunc::kSum:
    case AggFunc::kMin:
    case AggFunc::kMax:
      if (AggIsUnsigned(item))
        (*row)[c + "__in"] = static_cast<uint64_t>(s.Scalar());
      else
        (*row)[c + "__in"] = s.Scalar();
      break;
    case AggFunc::kAvg:
      (*row)[c + "__sum__in"] = static_cast<int64_t>(s.Word(0));
      (*row)[c + "__n__in"] = s.Word(1);
      break;
    case AggFunc::kHist:
    case AggFunc::kLhist: {
      Json k = Json::array(), v = Json::array();
      for (const HistBucket& b : HistBuckets(s)) {
        if (b.count == 0) continue;
        k.push_back(b.has_lo ? b.lo : INT64_MIN);
        v.push_back(b.count);
      }
      (*row)[c + "__k__in"] = std::move(k);
      (*row)[c + "__v__in"] = std::move(v);
      break;
    }
    case AggFunc::kQuantile: {
      Json k = Json::array(), v = Json::array();
      for (int i = 0; i < kQuantSlots; ++i)
        if (uint64_t n = s.Word(i)) {
          k.push_back(QuantBucketValue(i));
          v.push_back(n);
        }
      (*row)[c + "__k__in"] = std::move(k);
      (*row)[c + "__v__in"] = std::move(v);
      break;
    }
    case AggFunc::kDistinct: {
      Json r = Json::array();
      for (uint8_t b : s.bytes()) r.push_back(b);
      (*row)[c + "__in"] = std::move(r);
      break;
    }
  }
}

bool ValidIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

Expected<ClickHouseTarget> ParseClickHouseUrl(const std::string& url) {
  const std::string scheme = "clickhouse://";
  auto bad = [&](const std::string& why) {
    return Error(
        Code::kInvalidArgument,
        fmt::format("--sink {}: {}; expected clickhouse://HOST[:PORT]/DB.TABLE", url, why));
  };
  if (url.rfind(scheme, 0) != 0) return bad("not a clickhouse:// address");
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return bad("no /DB.TABLE");
  ClickHouseTarget t;
  std::string hostport = rest.substr(0, slash), path = rest.substr(slash + 1);
  const size_t colon = hostport.rfind(':');
  t.host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      t.port = std::stoi(hostport.substr(colon + 1));
    } catch (...) {
      return bad("bad port");
    }
  }
  if (t.host.empty() || t.port <= 0 || t.port > 65535) return bad("bad host or port");
  const size_t dot = path.find('.');
  if (dot == std::string::npos) return bad("no DB.TABLE");
  t.db = path.substr(0, dot);
  t.table = path.substr(dot + 1);
  if (!ValidIdentifier(t.db) || !ValidIdentifier(t.table))
    return bad("DB and TABLE are letters, digits and _");
  return t;
}

Expected<std::vector<std::string>> ClickHouseSchema(const Plan& plan, const ClickHouseTarget& t) {
  if (plan.mode != PlanMode::kAggregate)
    return Error(Code::kInvalidArgument,
                 "--sink takes aggregating queries (select rows do not merge)");
  const std::vector<std::string> names = ColumnNames(plan);
  std::vector<std::string> input = {"`window` DateTime", "`host` String"}, stored = input,
                           mv = {"`window`", "`host`"}, merged = mv, result = mv, keys = mv;
  for (size_t k = 0; k < plan.keys.size(); ++k) {
    const std::string col = fmt::format("`{}`", names[2 + k]);
    input.push_back(col + " " + KeyType(plan.keys[k]));
    stored.push_back(col + " " + KeyType(plan.keys[k]));
    mv.push_back(col);
    merged.push_back(col);
    result.push_back(col);
    keys.push_back(col);
  }
  for (size_t a = 0; a < plan.aggs.size(); ++a) {
    AggColumns c = ColumnsOf(*plan.aggs[a].item, names[2 + plan.keys.size() + a]);
    input.insert(input.end(), c.input.begin(), c.input.end());
    stored.insert(stored.end(), c.stored.begin(), c.stored.end());
    mv.insert(mv.end(), c.mv.begin(), c.mv.end());
    merged.insert(merged.end(), c.merged.begin(), c.merged.end());
    result.push_back(c.result);
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  };
  const std::string T = fmt::format("`{}`.`{}`", t.db, t.table);
  const std::string In = fmt::format("`{}`.`{}_input`", t.db, t.table);
  return std::vector<std::string>{
      fmt::format("CREATE DATABASE IF NOT EXISTS `{}`", t.db),
      fmt::format("CREATE TABLE IF NOT EXISTS {} ({}) ENGINE = AggregatingMergeTree() "
                  "PARTITION BY toYYYYMM(`window`) ORDER BY ({})",
                  T, join(stored), join(keys)),
      fmt::format("CREATE TABLE IF NOT EXISTS {} ({}) ENGINE = Null", In, join(input)),
      fmt::format("CREATE MATERIALIZED VIEW IF NOT EXISTS `{}`.`{}_mv` TO {} AS SELECT {} FROM {} "
                  "GROUP BY {}",
                  t.db, t.table, T, join(mv), In, join(keys)),
      fmt::format("CREATE VIEW IF NOT EXISTS `{}`.`{}_result` AS SELECT {} FROM (SELECT {} FROM {} "
                  "GROUP BY {})",
                  t.db, t.table, join(result), join(merged), T, join(keys)),
  };
}

std::string ClickHouseRows(const Plan& plan, const ResultSet& rs, const std::string& host) {
  const std::vector<std::string> names = ColumnNames(plan);
  std::string out;
  for (const Row& row : rs.rows) {
    Json o = Json::object();
    o["window"] = rs.window_end_ns / 1'000'000'000;
    o["host"] = host;
    for (size_t k = 0; k < plan.keys.size() && k < row.keys.size(); ++k) {
      const Slot& slot = plan.keys[k];
      const auto* i = std::get_if<int64_t>(&row.keys[k]);
      if (i && slot.type.kind == TypeKind::kInt) {
        if (slot.type.is_signed)
          o[names[2 + k]] = *i;
        else
          o[names[2 + k]] = static_cast<uint64_t>(*i);
      } else {
        o[names[2 + k]] = FormatSlotValue(plan, slot, row.keys[k]);
      }
    }
    for (size_t a = 0; a < plan.aggs.size() && a < row.aggs.size(); ++a)
      AggJson(*plan.aggs[a].item, row.aggs[a], names[2 + plan.keys.size() + a], &o);
    out += o.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  return out;
}

Expected<std::unique_ptr<ClickHouseSink>> ClickHouseSink::Start(const std::string& url,
                                                                const Plan& plan,
                                                                const std::string& host,
                                                                bool create, size_t max_pending) {
  FAY_ASSIGN_OR_RETURN(ClickHouseTarget t, ParseClickHouseUrl(url));
  FAY_ASSIGN_OR_RETURN(std::vector<std::string> schema, ClickHouseSchema(plan, t));
  auto s = std::unique_ptr<ClickHouseSink>(new ClickHouseSink());
  s->target_ = t;
  s->plan_ = &plan;
  s->host_ = host;
  s->max_pending_ = max_pending;
  if (create) {
    for (const std::string& sql : schema) FAY_RETURN_IF_ERROR(s->Post(sql));
  } else {
    std::string exists;
    FAY_RETURN_IF_ERROR(
        s->Post(fmt::format("EXISTS TABLE `{}`.`{}_input`", t.db, t.table), &exists));
    if (exists.rfind("1", 0) != 0)
      return Error(
          Code::kNotFound,
          fmt::format("--sink {}: ClickHouse has no table {}.{}_input; --sink-create makes "
                      "the tables and views",
                      url, t.db, t.table));
  }
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

ClickHouseSink::~ClickHouseSink() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status ClickHouseSink::Post(const std::string& body, std::string* answer) {
  httplib::Client cli(target_.host, target_.port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  cli.set_write_timeout(10, 0);
  auto res = cli.Post("/", body, "text/plain");
  if (!res)
    return Error(Code::kIo, fmt::format("clickhouse://{}:{}: {}", target_.host, target_.port,
                                        httplib::to_string(res.error())));
  if (res->status != 200) {
    std::string msg = res->body;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return Error(Code::kInvalidArgument, fmt::format("clickhouse refused it: {}", msg));
  }
  if (answer) *answer = res->body;
  return Status::Ok();
}

void ClickHouseSink::Window(const ResultSet& rs) {
  if (rs.rows.empty()) return;
  std::string body =
      fmt::format("INSERT INTO `{}`.`{}_input` FORMAT JSONEachRow\n", target_.db, target_.table) +
      ClickHouseRows(*plan_, rs, host_);
  {
    std::lock_guard lk(mu_);
    pending_.push_back(std::move(body));
    while (pending_.size() > max_pending_) {  // the server is behind: the oldest goes
      pending_.pop_front();
      ++dropped_;
    }
  }
  cv_.notify_all();
}

void ClickHouseSink::Loop() {
  std::unique_lock lk(mu_);
  auto backoff = std::chrono::milliseconds(200);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, nothing left
    std::string body = pending_.front();
    busy_ = true;
    lk.unlock();
    Status st = Post(body);
    lk.lock();
    busy_ = false;
    // Finish may have emptied the queue meanwhile, leaving this window to this attempt.
    const bool queued = !pending_.empty() && pending_.front() == body;
    if (st.ok()) {
      if (queued) pending_.pop_front();
      ++written_;
      backoff = std::chrono::milliseconds(200);
    } else if (st.code() == Code::kInvalidArgument) {
      // ClickHouse answered with an error: sending it again would get the same one.
      if (queued) pending_.pop_front();
      ++failures_;
      last_error_ = st.message();
    } else {
      // Down or slow: kept, tried again later (the bound above drops the oldest meanwhile).
      last_error_ = st.message();
      if (stop_) {
        if (queued) pending_.pop_front();
        ++dropped_;
        return;
      }
      cv_.wait_for(lk, backoff, [&] { return stop_; });
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
    cv_.notify_all();
  }
}

std::string ClickHouseSink::Finish(double seconds) {
  {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, std::chrono::duration<double>(seconds),
                 [&] { return pending_.empty() && !busy_; });
    // The window being sent is left to its attempt, which counts it either way.
    const size_t in_flight = busy_ && !pending_.empty() ? 1 : 0;
    dropped_ += pending_.size() - in_flight;
    pending_.erase(pending_.begin() + static_cast<long>(in_flight), pending_.end());
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::string out = fmt::format("clickhouse: {} windows written, {} dropped, {} refused", written_,
                                dropped_, failures_);
  if (!last_error_.empty()) out += "; last error: " + last_error_;
  return out;
}

namespace {

class Tee : public OutputSink {
 public:
  Tee(std::unique_ptr<OutputSink> inner, std::vector<ClickHouseSink*> chs)
      : inner_(std::move(inner)), chs_(std::move(chs)) {}
  void Window(const Plan& plan, const ResultSet& rs) override {
    // The table gets the rows the query prints (after `when`); for `cluster`, the rows it
    // grouped, which fit the table's columns.
    const size_t t = plan.table > 0 ? static_cast<size_t>(plan.table) : 0;
    if (t < chs_.size()) chs_[t]->Window(plan.when ? ApplyWhen(plan, rs) : rs);
    inner_->Window(plan, rs);
  }
  void SelectRow(const Plan& plan, const std::vector<Value>& row, uint64_t t) override {
    inner_->SelectRow(plan, row, t);
  }
  void Flush() override { inner_->Flush(); }

 private:
  std::unique_ptr<OutputSink> inner_;
  std::vector<ClickHouseSink*> chs_;
};

}  // namespace

std::string ClickHouseTableUrl(const std::string& url, size_t table) {
  return table == 0 ? url : fmt::format("{}_{}", url, table + 1);
}

std::unique_ptr<OutputSink> WithClickHouse(std::unique_ptr<OutputSink> inner,
                                           std::vector<ClickHouseSink*> chs) {
  if (chs.empty()) return inner;
  return std::make_unique<Tee>(std::move(inner), std::move(chs));
}

}  // namespace fay::sinks
