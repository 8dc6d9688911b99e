// Formatting helpers shared by the sinks: values by their slot's type, aggregate scalars, and
// the row order (first aggregate descending, then key) with top-N.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/value.h"
#include "query/plan.h"

namespace fay {

std::string FormatInt(int64_t v, bool is_signed);

// "0x00007f1234567890".
std::string FormatAddr(uint64_t addr);

// One stack frame: its name ("func+0x1a") when it has one, else its address.
std::string FormatFrame(const Stack& stack, size_t i);

// A key or select column as text. Probe and func ids (ints in a string-typed slot, as read from
// the kernel) print as the names they stand for; stacks print as their frames, innermost first,
// separated by "; " (one line per frame is the text sink's block layout).
std::string FormatSlotValue(const Plan& plan, const Slot& slot, const Value& v);

// Whether an aggregate's value prints unsigned: count and distinct always, sum/min/max/quantile
// when their argument is unsigned.
bool AggIsUnsigned(const AggItem& item);

// count, sum, min, max, quantile, distinct as integers; avg with two decimals; "-" for an empty
// min/max/avg. hist/lhist print their total count.
std::string FormatAggScalar(const AggItem& item, const AggState& state);

bool IsHistogram(AggFunc f);

// Row indices in output order: by the first aggregate's value descending, ties by key
// ascending, at most plan.top_n rows when top_n > 0.
std::vector<size_t> RowOrder(const Plan& plan, const ResultSet& rs);

}  // namespace fay
