#include "cluster/window_table.h"

#include <fmt/format.h>

namespace fay::cluster {

void RowsToGroups(const std::vector<Row>& rows, pb::WindowState* out) {
  for (const Row& row : rows) {
    pb::Group* g = out->add_groups();
    for (const Value& v : row.keys) {
      pb::Value* pv = g->add_keys();
      if (const auto* i = std::get_if<int64_t>(&v))
        pv->set_i(*i);
      else if (const auto* s = std::get_if<std::string>(&v))
        pv->set_s(*s);
    }
    for (const AggState& a : row.aggs) g->add_aggs(a.Serialize());
  }
}

Status GroupsToRows(const pb::WindowState& in, std::vector<Row>* rows) {
  for (const pb::Group& g : in.groups()) {
    Row row;
    for (const pb::Value& v : g.keys()) {
      if (v.v_case() == pb::Value::kS)
        row.keys.emplace_back(v.s());
      else
        row.keys.emplace_back(static_cast<int64_t>(v.i()));
    }
    for (const std::string& a : g.aggs()) {
      auto st = AggState::Deserialize(a);
      if (!st.ok())
        return Error(Code::kIo, "a state that does not decode: " + st.status().message());
      row.aggs.push_back(std::move(st).value());
    }
    rows->push_back(std::move(row));
  }
  return Status::Ok();
}

bool WindowTable::Add(const pb::WindowState& s) {
  std::vector<Row> rows;
  if (!GroupsToRows(s, &rows).ok()) return false;
  std::lock_guard lk(mu_);
  if (s.index() < closed_below_ || closed_.count(s.index())) {
    ++late_;
    return false;
  }
  Open& w = open_[s.index()];
  for (Row& r : rows) {
    auto it = w.groups.find(r.keys);
    if (it == w.groups.end()) {
      if (w.groups.size() >= max_keys_) {
        w.truncated = true;
        continue;
      }
      w.groups.emplace(std::move(r.keys), std::move(r.aggs));
      continue;
    }
    if (it->second.size() != r.aggs.size()) continue;  // another plan: never merged
    for (size_t i = 0; i < r.aggs.size(); ++i) {
      if (!(it->second[i].spec().func == r.aggs[i].spec().func)) continue;
      it->second[i].Merge(r.aggs[i]);
    }
  }
  for (const pb::HostState& h : s.hosts()) {
    auto [it, fresh] = w.hosts.emplace(h.address(), h);
    // An answer outranks an error for the same host (a rejoin within the window).
    if (!fresh && !h.error().empty()) continue;
    it->second = h;
  }
  pb::Stats* st = &w.stats;
  st->set_events_seen(st->events_seen() + s.stats().events_seen());
  st->set_events_matched(st->events_matched() + s.stats().events_matched());
  st->set_dropped(st->dropped() + s.stats().dropped());
  st->set_map_full(st->map_full() + s.stats().map_full());
  st->set_read_errors(st->read_errors() + s.stats().read_errors());
  st->set_late(st->late() + s.stats().late());
  w.truncated |= s.truncated();
  w.last |= s.last();
  return true;
}

bool WindowTable::Heard(uint64_t index, const std::vector<std::string>& hosts) const {
  std::lock_guard lk(mu_);
  auto it = open_.find(index);
  if (it == open_.end()) return hosts.empty();
  for (const std::string& h : hosts)
    if (!it->second.hosts.count(h)) return false;
  return true;
}

pb::WindowState WindowTable::Close(uint64_t index) {
  std::lock_guard lk(mu_);
  pb::WindowState out;
  out.set_version(kProtocolVersion);
  out.set_index(index);
  closed_.insert(index);
  while (closed_.count(closed_below_)) closed_.erase(closed_below_++);
  auto it = open_.find(index);
  if (it == open_.end()) return out;
  Open& w = it->second;
  std::vector<Row> rows;
  for (auto& [keys, aggs] : w.groups) rows.push_back(Row{keys, aggs});
  RowsToGroups(rows, &out);
  for (auto& [addr, h] : w.hosts) *out.add_hosts() = h;
  *out.mutable_stats() = w.stats;
  out.set_truncated(w.truncated);
  out.set_last(w.last);
  open_.erase(it);
  return out;
}

}  // namespace fay::cluster
