// Terminal output. Scalar results are an aligned table; results with a histogram or a stack key
// are printed as one block per row, like bpftrace's maps.
#include <fmt/format.h>

#include <optional>

#include <algorithm>
#include <ctime>

#include "engine/output/format.h"
#include "engine/output/hist_bars.h"
#include "engine/output/row_stages.h"
#include "engine/output/sink.h"
#include "query/row_format.h"

namespace fay {
namespace {

constexpr const char* kColumnGap = "  ";

std::string WallClock(uint64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000);
  struct tm tm {};
  localtime_r(&secs, &tm);
  char buf[16];
  strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

// Pads each cell to its column's width: left-aligned where left[i], right-aligned otherwise. The
// last column is not padded on the right, so lines carry no trailing blanks.
std::string FormatLine(const std::vector<std::string>& cells, const std::vector<size_t>& widths,
                       const std::vector<bool>& left) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += kColumnGap;
    bool last = i + 1 == cells.size();
    if (left[i]) {
      line += last ? cells[i] : fmt::format("{:<{}}", cells[i], widths[i]);
    } else {
      line += fmt::format("{:>{}}", cells[i], widths[i]);
    }
  }
  return line + "\n";
}

// `cluster K by KEY`: one line per group, its members and the features that set it apart.
std::string ClusterText(const Plan& plan, const ResultSet& rs) {
  auto groups = ClusterWindow(plan, rs);
  if (!groups.ok()) return fmt::format("({})\n", groups.status().message());
  std::vector<std::string> head = {"group", "size", plan.keys[plan.cluster_key].name,
                                   "sets it apart (share in the group, share in all)"};
  std::vector<std::vector<std::string>> lines;
  for (size_t g = 0; g < groups->groups.size(); ++g) {
    const ClusterGroup& grp = groups->groups[g];
    std::string members;
    for (size_t m = 0; m < grp.members.size() && m < 20; ++m)
      members += (m ? ", " : "") + grp.members[m];
    if (grp.members.size() > 20) members += fmt::format(", and {} more", grp.members.size() - 20);
    std::string apart;
    // Small shares keep a decimal: "0%" beside a feature that sets a group apart says nothing.
    auto pct = [](double share) {
      return 100 * share >= 10 ? fmt::format("{:.0f}%", 100 * share)
                               : fmt::format("{:.1f}%", 100 * share);
    };
    for (const ClusterGroup::Distinct& d : grp.distinct)
      apart += fmt::format("{}{} {} ({})", apart.empty() ? "" : ", ", d.feature, pct(d.group_share),
                           pct(d.all_share));
    lines.push_back({std::to_string(g + 1), std::to_string(grp.members.size()), members,
                     apart.empty() ? "-" : apart});
  }
  std::vector<size_t> widths(head.size());
  for (size_t i = 0; i < head.size(); ++i) {
    widths[i] = head[i].size();
    for (const auto& l : lines) widths[i] = std::max(widths[i], l[i].size());
  }
  widths.back() = 0;  // the last column is not padded
  std::vector<bool> left = {false, false, true, true};
  std::string out = FormatLine(head, widths, left);
  for (const auto& l : lines) out += FormatLine(l, widths, left);
  return out;
}

class TextSink : public OutputSink {
 public:
  TextSink(FILE* out, TextOptions options) : out_(out), options_(std::move(options)) {}

  void Window(const Plan& plan, const ResultSet& all) override {
    // `when`: a window none of whose rows qualifies is not printed at all.
    ResultSet kept;
    if (plan.when) {
      kept = ApplyWhen(plan, all);
      if (kept.rows.empty() && !kept.coverage) return;
    }
    const ResultSet& rs = plan.when ? kept : all;
    std::string text;
    if (plan.every_ns > 0) text += WallClock(rs.window_end_ns) + "\n";
    // Each snapshot says which firing it is; the last print, at the end, says so.
    if (plan.snapshot_state >= 0)
      text += WallClock(rs.window_end_ns) +
              (rs.snapshot ? " snapshot: " + plan.snapshot_name + " fired\n" : " end\n");
    if (plan.cluster_k > 0) {
      text += ClusterText(plan, rs);
    } else {
      bool blocks = std::any_of(plan.aggs.begin(), plan.aggs.end(),
                                [](const AggSlot& a) { return IsHistogram(a.item->func); }) ||
                    std::any_of(plan.keys.begin(), plan.keys.end(),
                                [](const Slot& s) { return s.type.kind == TypeKind::kStack; });
      std::vector<size_t> order = RowOrder(plan, rs);
      text += blocks ? Blocks(plan, rs, order) : Table(plan, rs, order);
    }
    if (rs.coverage) {
      const Coverage& c = *rs.coverage;
      text += fmt::format("hosts: {} of {} answered", c.answered, c.expected);
      if (!c.missing.empty()) {
        text += " (";
        for (size_t i = 0; i < c.missing.size() && i < 20; ++i)
          text += (i ? ", " : "") + c.missing[i];
        if (c.missing.size() > 20) text += fmt::format(", and {} more", c.missing.size() - 20);
        text += ")";
      }
      if (c.truncated) text += "; truncated: the merge hit its key bound";
      text += "\n";
    }
    fputs(text.c_str(), out_);
  }

  void SelectRow(const Plan& plan, const std::vector<Value>& row, uint64_t time_ns) override {
    if (!plan.format.empty()) {
      FormattedRow(plan, row, time_ns);
      return;
    }
    if (!select_header_done_) {
      select_header_done_ = true;
      std::vector<std::string> names;
      for (const Slot& s : plan.keys) {
        // Long strings (paths) get 16 columns and overflow rather than pad every line.
        // Integers get room for their usual magnitude: `time` is CLOCK_MONOTONIC ns (16
        // digits on a machine up for months), ids fit 7, counts and sizes 12.
        size_t w = s.type.kind == TypeKind::kString ? std::clamp(s.type.str_len - 1, 1, 16)
                   : s.name == "time"               ? 16
                   : (s.name == "pid" || s.name == "tid" || s.name == "uid" || s.name == "cpu")
                       ? 7
                       : 12;
        select_widths_.push_back(std::max(s.name.size(), w));
        select_left_.push_back(s.type.kind != TypeKind::kInt);
        names.push_back(s.name);
      }
      fputs(FormatLine(names, select_widths_, select_left_).c_str(), out_);
    }
    std::vector<std::string> cells;
    for (size_t i = 0; i < row.size() && i < plan.keys.size(); ++i) {
      cells.push_back(FormatSlotValue(plan, plan.keys[i], row[i]));
    }
    cells.resize(select_widths_.size());
    fputs(FormatLine(cells, select_widths_, select_left_).c_str(), out_);
  }

  void Flush() override { fflush(out_); }

 private:
  // The row as the query's format says, with no header; a line ends where the format does not.
  void FormattedRow(const Plan& plan, const std::vector<Value>& row, uint64_t time_ns) {
    if (!row_format_) {
      std::vector<Type> types;
      std::vector<std::string> names;
      for (const Slot& s : plan.keys) {
        types.push_back(s.type);
        names.push_back(s.name);
      }
      auto rf = RowFormat::Parse(plan.format, types, names);
      if (!rf.ok()) return;  // the type checker refused it already
      row_format_ = std::move(rf).value();
    }
    std::vector<int64_t> ints;
    std::vector<std::string> texts;
    for (size_t i = 0; i < row.size() && i < plan.keys.size(); ++i) {
      const auto* v = std::get_if<int64_t>(&row[i]);
      ints.push_back(v ? *v : 0);
      texts.push_back(FormatSlotValue(plan, plan.keys[i], row[i]));
    }
    std::string line = row_format_->Apply(ints, texts, time_ns);
    if (line.empty() || line.back() != '\n') line += '\n';
    fwrite(line.data(), 1, line.size(), out_);  // a %c of 0 does not cut the line
  }

  std::string Table(const Plan& plan, const ResultSet& rs, const std::vector<size_t>& order) {
    std::vector<std::vector<std::string>> lines;
    std::vector<bool> left;
    std::vector<std::string> header;
    for (const Slot& s : plan.keys) {
      header.push_back(s.name);
      left.push_back(s.type.kind == TypeKind::kString);
    }
    for (const AggSlot& a : plan.aggs) {
      header.push_back(a.item->name);
      left.push_back(false);
    }
    lines.push_back(header);
    for (size_t r : order) {
      const Row& row = rs.rows[r];
      std::vector<std::string> cells;
      for (size_t k = 0; k < plan.keys.size(); ++k) {
        cells.push_back(k < row.keys.size() ? FormatSlotValue(plan, plan.keys[k], row.keys[k])
                                            : "");
      }
      for (size_t a = 0; a < plan.aggs.size(); ++a) {
        cells.push_back(a < row.aggs.size() ? FormatAggScalar(*plan.aggs[a].item, row.aggs[a])
                                            : "");
      }
      lines.push_back(std::move(cells));
    }
    std::vector<size_t> widths(header.size(), 0);
    for (const auto& l : lines) {
      for (size_t i = 0; i < l.size(); ++i) widths[i] = std::max(widths[i], l[i].size());
    }
    std::string text;
    for (const auto& l : lines) text += FormatLine(l, widths, left);
    return text;
  }

  std::string Blocks(const Plan& plan, const ResultSet& rs, const std::vector<size_t>& order) {
    std::string text;
    // With a single histogram and nothing else, the bars follow the key line unlabelled.
    bool label_aggs = plan.aggs.size() != 1 || !IsHistogram(plan.aggs[0].item->func);
    for (size_t r : order) {
      const Row& row = rs.rows[r];
      std::string scalar_keys;
      std::string stack_keys;
      for (size_t k = 0; k < plan.keys.size() && k < row.keys.size(); ++k) {
        const Slot& slot = plan.keys[k];
        if (const auto* stack = std::get_if<Stack>(&row.keys[k])) {
          stack_keys += slot.name + ":\n";
          for (size_t i = 0; i < stack->frames.size(); ++i)
            stack_keys += "    " + FormatFrame(*stack, i) + "\n";
          continue;
        }
        if (!scalar_keys.empty()) scalar_keys += ", ";
        scalar_keys += slot.name + " = " + FormatSlotValue(plan, slot, row.keys[k]);
      }
      if (!scalar_keys.empty()) text += scalar_keys + "\n";
      text += stack_keys;
      for (size_t a = 0; a < plan.aggs.size() && a < row.aggs.size(); ++a) {
        const AggItem& item = *plan.aggs[a].item;
        if (!IsHistogram(item.func)) {
          text += item.name + " = " + FormatAggScalar(item, row.aggs[a]) + "\n";
          continue;
        }
        if (label_aggs) text += item.name + ":\n";
        text += HistBars(row.aggs[a]);
      }
      text += "\n";
    }
    return text;
  }

  FILE* out_;
  TextOptions options_;
  bool select_header_done_ = false;
  std::optional<RowFormat> row_format_;
  std::vector<size_t> select_widths_;
  std::vector<bool> select_left_;
};

}  // namespace

std::unique_ptr<OutputSink> MakeTextSink(FILE* out, TextOptions options) {
  return std::make_unique<TextSink>(out, std::move(options));
}

}  // namespace fay
