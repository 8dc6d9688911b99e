#include "engine/output/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace fay {

std::string FormatInt(int64_t v, bool is_signed) {
  if (is_signed) return std::to_string(v);
  return std::to_string(static_cast<uint64_t>(v));
}

std::string FormatAddr(uint64_t addr) {
  return fmt::format("0x{:016x}", addr);
}

std::string FormatFrame(const Stack& stack, size_t i) {
  if (i < stack.names.size() && !stack.names[i].empty()) return stack.names[i];
  return FormatAddr(stack.frames[i]);
}

std::string FormatSlotValue(const Plan& plan, const Slot& slot, const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* stack = std::get_if<Stack>(&v)) {
    std::string out;
    for (size_t i = 0; i < stack->frames.size(); ++i) {
      if (i > 0) out += "; ";
      out += FormatFrame(*stack, i);
    }
    return out;
  }
  int64_t i = std::get<int64_t>(v);
  if (slot.type.kind == TypeKind::kString && i >= 0 &&
      static_cast<size_t>(i) < plan.probes.size()) {
    const ProbeInfo& p = plan.probes[i];
    bool is_func = slot.expr && slot.expr->kind == ExprKind::kField && slot.expr->name == "func";
    return is_func ? p.symbol : p.name;
  }
  return FormatInt(i, slot.type.is_signed);
}

bool AggIsUnsigned(const AggItem& item) {
  switch (item.func) {
    case AggFunc::kCount:
    case AggFunc::kDistinct:
    case AggFunc::kHist:
    case AggFunc::kLhist:
      return true;
    default:
      return item.arg && !item.arg->type.is_signed;
  }
}

std::string FormatAggScalar(const AggItem& item, const AggState& state) {
  if (state.Empty()) return "-";
  switch (item.func) {
    case AggFunc::kAvg:
      return fmt::format("{:.2f}", state.Average());
    case AggFunc::kHist:
    case AggFunc::kLhist:
      return std::to_string(state.Count());
    default:
      return FormatInt(state.Scalar(), !AggIsUnsigned(item));
  }
}

bool IsHistogram(AggFunc f) {
  return f == AggFunc::kHist || f == AggFunc::kLhist;
}

namespace {

// -1, 0, 1 as a is below, equal to or above b in value order.
int CompareAgg(const AggItem& item, const AggState& a, const AggState& b) {
  if (a.Empty() != b.Empty()) return a.Empty() ? -1 : 1;
  if (item.func == AggFunc::kAvg) {
    double x = a.Average(), y = b.Average();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  int64_t x = a.Scalar(), y = b.Scalar();
  if (AggIsUnsigned(item)) {
    uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
    return ux < uy ? -1 : (ux > uy ? 1 : 0);
  }
  return x < y ? -1 : (x > y ? 1 : 0);
}

}  // namespace

std::vector<size_t> RowOrder(const Plan& plan, const ResultSet& rs) {
  std::vector<size_t> order(rs.rows.size());
  std::iota(order.begin(), order.end(), 0);
  const AggItem* first = plan.aggs.empty() ? nullptr : plan.aggs[0].item;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Row& ra = rs.rows[a];
    const Row& rb = rs.rows[b];
    if (first && !ra.aggs.empty() && !rb.aggs.empty()) {
      int c = CompareAgg(*first, ra.aggs[0], rb.aggs[0]);
      if (c != 0) return c > 0;
    }
    return ra.keys < rb.keys;
  });
  if (plan.top_n > 0 && order.size() > static_cast<size_t>(plan.top_n)) order.resize(plan.top_n);
  return order;
}

}  // namespace fay
