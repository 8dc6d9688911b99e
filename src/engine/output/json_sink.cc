// JSON Lines output. Each result row is one object: keys and aggregates as members named by
// their alias (else the expression text / function name), plus "window", the window's end as
// integer ns since the epoch (CLOCK_REALTIME), so rows of one window share it exactly.
#include <nlohmann/json.hpp>

#include "engine/output/format.h"
#include "engine/output/hist_bars.h"
#include "engine/output/row_stages.h"
#include "engine/output/sink.h"

namespace fay {
namespace {

using Json = nlohmann::ordered_json;

Json IntJson(int64_t v, bool is_signed) {
  if (is_signed) return Json(v);
  return Json(static_cast<uint64_t>(v));
}

Json SlotJson(const Plan& plan, const Slot& slot, const Value& v) {
  if (const auto* stack = std::get_if<Stack>(&v)) {
    Json frames = Json::array();
    for (size_t i = 0; i < stack->frames.size(); ++i) frames.push_back(FormatFrame(*stack, i));
    return frames;
  }
  if (const auto* i = std::get_if<int64_t>(&v); i && slot.type.kind == TypeKind::kInt) {
    return IntJson(*i, slot.type.is_signed);
  }
  return Json(FormatSlotValue(plan, slot, v));
}

Json AggJson(const AggItem& item, const AggState& state) {
  if (state.Empty()) return nullptr;
  switch (item.func) {
    case AggFunc::kAvg:
      return Json(state.Average());
    case AggFunc::kDistinct:
      return Json(state.DistinctEstimate());
    case AggFunc::kHist:
    case AggFunc::kLhist: {
      Json buckets = Json::array();
      for (const HistBucket& b : HistBuckets(state)) {
        if (b.count == 0) continue;
        Json o;
        o["lo"] = b.has_lo ? Json(b.lo) : Json(nullptr);
        o["hi"] = b.has_hi ? Json(b.hi) : Json(nullptr);
        o["count"] = b.count;
        buckets.push_back(std::move(o));
      }
      return buckets;
    }
    default:
      return IntJson(state.Scalar(), !AggIsUnsigned(item));
  }
}

class JsonSink : public OutputSink {
 public:
  explicit JsonSink(FILE* out) : out_(out) {}

  void Window(const Plan& plan, const ResultSet& all) override {
    ResultSet kept;
    if (plan.when) kept = ApplyWhen(plan, all);
    const ResultSet& rs = plan.when ? kept : all;
    if (plan.cluster_k > 0) return ClusterRows(plan, rs);
    std::vector<size_t> order = RowOrder(plan, rs);
    // A cluster window with no rows still says which hosts it covers.
    if (order.empty() && rs.coverage) {
      Json o = Json::object();
      o["window"] = rs.window_end_ns;
      o["hosts_answered"] = rs.coverage->answered;
      o["hosts_expected"] = rs.coverage->expected;
      if (rs.coverage->truncated) o["truncated"] = true;
      if (plan.table >= 0) o["table"] = plan.table;  // several tables: this one had no rows
      Write(o);
    }
    for (size_t r : order) {
      const Row& row = rs.rows[r];
      Json o = Json::object();
      for (size_t k = 0; k < plan.keys.size() && k < row.keys.size(); ++k) {
        o[plan.keys[k].name] = SlotJson(plan, plan.keys[k], row.keys[k]);
      }
      for (size_t a = 0; a < plan.aggs.size() && a < row.aggs.size(); ++a) {
        o[plan.aggs[a].item->name] = AggJson(*plan.aggs[a].item, row.aggs[a]);
      }
      o["window"] = rs.window_end_ns;
      if (plan.table >= 0) o["table"] = plan.table;  // several tables: which one
      // `snapshot NAME`: printed at a firing (true) or at the end (false).
      if (plan.snapshot_state >= 0) o["snapshot"] = rs.snapshot;
      if (rs.coverage) {
        o["hosts_answered"] = rs.coverage->answered;
        o["hosts_expected"] = rs.coverage->expected;
        if (rs.coverage->truncated) o["truncated"] = true;
      }
      Write(o);
    }
  }

  void SelectRow(const Plan& plan, const std::vector<Value>& row, uint64_t time_ns) override {
    Json o = Json::object();
    for (size_t i = 0; i < plan.keys.size() && i < row.size(); ++i) {
      o[plan.keys[i].name] = SlotJson(plan, plan.keys[i], row[i]);
    }
    Write(o);
  }

  void Flush() override { fflush(out_); }

 private:
  // `cluster K by KEY`: a row per group.
  void ClusterRows(const Plan& plan, const ResultSet& rs) {
    auto groups = ClusterWindow(plan, rs);
    if (!groups.ok()) return;
    for (size_t g = 0; g < groups->groups.size(); ++g) {
      const ClusterGroup& grp = groups->groups[g];
      Json o = Json::object();
      o["group"] = g + 1;
      o["size"] = grp.members.size();
      o["members"] = grp.members;
      Json apart = Json::array();
      for (const ClusterGroup::Distinct& d : grp.distinct)
        apart.push_back(
            {{"feature", d.feature}, {"share", d.group_share}, {"all_share", d.all_share}});
      o["distinct"] = std::move(apart);
      o["window"] = rs.window_end_ns;
      if (plan.snapshot_state >= 0) o["snapshot"] = rs.snapshot;
      if (rs.coverage) {
        o["hosts_answered"] = rs.coverage->answered;
        o["hosts_expected"] = rs.coverage->expected;
      }
      Write(o);
    }
  }

  void Write(const Json& o) {
    // Kernel strings are arbitrary bytes: invalid UTF-8 becomes U+FFFD rather than bad JSON.
    std::string line = o.dump(-1, ' ', false, Json::error_handler_t::replace);
    line += '\n';
    fwrite(line.data(), 1, line.size(), out_);
  }

  FILE* out_;
};

}  // namespace

std::unique_ptr<OutputSink> MakeJsonSink(FILE* out) {
  return std::make_unique<JsonSink>(out);
}

}  // namespace fay
