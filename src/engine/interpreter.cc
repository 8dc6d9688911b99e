#include "engine/interpreter.h"

#include <fmt/format.h>

#include "engine/eval.h"

namespace fay {

Interpreter::Interpreter(const Plan& plan, uint64_t sample_seed)
    : plan_(plan), rng_(sample_seed), states_(plan.states.size()) {
  for (size_t i = 0; i < plan.states.size(); ++i) state_rngs_.emplace_back(sample_seed + i + 1);
}

namespace {

// A state key as the probe stores it under `slot`: a string no longer than the slot holds (its
// width, less the NUL).
Value StateKey(const Slot& slot, Value v) {
  if (const auto* s = std::get_if<std::string>(&v); s && slot.type.kind == TypeKind::kString)
    return Value(BoundedString(
        *s, slot.type.str_len > 0 ? std::min(slot.size, slot.type.str_len) : slot.size));
  return v;
}

}  // namespace

bool Interpreter::Remember(size_t state, const Event& e) {
  if (state >= plan_.states.size()) return false;
  const Plan& sp = *plan_.states[state];
  if (e.probe_index < 0 || static_cast<size_t>(e.probe_index) >= sp.probes.size()) return false;
  const ProbeInfo& probe = sp.probes[static_cast<size_t>(e.probe_index)];
  if (sp.predicate) {
    auto v = EvalExpr(*sp.predicate, e, probe);
    if (!v.ok()) {
      Fail(v.status());
      return false;
    }
    if (!Truthy(*v)) return false;
  }
  if (sp.sample_den > 0 && sp.sample_num < sp.sample_den &&
      state_rngs_[state]() % sp.sample_den >= sp.sample_num)
    return false;
  std::vector<Value> key;
  for (const Slot& k : sp.keys) {
    auto v = EvalExpr(*k.expr, e, probe);
    if (!v.ok()) {
      Fail(v.status());
      return false;
    }
    key.push_back(StateKey(k, std::move(*v)));
  }
  auto value = EvalExpr(*sp.remember_value, e, probe);
  if (!value.ok()) {
    Fail(value.status());
    return false;
  }
  auto& map = states_[state];
  const Stored stored{std::move(*value), e.time_ns};
  auto it = map.find(key);
  if (it != map.end()) {
    it->second = stored;
    return true;
  }
  // Mirrors the probe's map: a hash map refuses a new key when full; the LRU map of a `for`
  // pipeline makes room by dropping its oldest value.
  if (plan_.max_keys > 0 && map.size() >= plan_.max_keys) {
    if (!sp.remember_ttl_ns) {
      ++stats_.state_full;
      return false;
    }
    auto oldest = map.begin();
    for (auto i = map.begin(); i != map.end(); ++i)
      if (i->second.time_ns < oldest->second.time_ns) oldest = i;
    map.erase(oldest);
  }
  map.emplace(std::move(key), stored);
  return true;
}

bool Interpreter::ReadStates(const Event& e) {
  const ProbeInfo& probe = plan_.probes[static_cast<size_t>(e.probe_index)];
  state_values_.resize(plan_.state_reads.size());
  std::vector<std::pair<size_t, std::vector<Value>>> taken;
  for (size_t r = 0; r < plan_.state_reads.size(); ++r) {
    const Expr& read = *plan_.state_reads[r];
    const size_t state = static_cast<size_t>(read.state);
    const Plan& sp = *plan_.states[state];
    std::vector<Value> key;
    for (size_t k = 0; k < read.kids.size() && k < sp.keys.size(); ++k) {
      auto v = EvalExpr(*read.kids[k], e, probe);
      if (!v.ok()) return Fail(v.status());
      key.push_back(StateKey(sp.keys[k], std::move(*v)));
    }
    auto& map = states_[state];
    auto it = map.find(key);
    const uint64_t ttl = plan_.states[state]->remember_ttl_ns;
    if (it == map.end() ||
        (ttl && e.time_ns > it->second.time_ns && e.time_ns - it->second.time_ns > ttl)) {
      // An optional read (`until`) reads 0 where nothing is kept, and the event goes on.
      if (read.optional) {
        state_values_[r] = Value(int64_t{0});
        continue;
      }
      ++stats_.no_state;
      return false;
    }
    state_values_[r] = it->second.value;
    if (!ttl && !read.optional) taken.emplace_back(state, std::move(key));
  }
  // Taken only once every read found its value, so two reads of one value both see it.
  for (const auto& [state, key] : taken) states_[state].erase(key);
  return true;
}

bool Interpreter::Fail(const Status& st) {
  if (first_error_.ok()) first_error_ = st;
  return false;
}

bool Interpreter::Admit(const Event& e) {
  ++stats_.events_seen;
  if (e.probe_index < 0 || static_cast<size_t>(e.probe_index) >= plan_.probes.size()) {
    return Fail(Error(Code::kInternal, fmt::format("event of unknown probe {}", e.probe_index)));
  }
  // The states are read before the predicate, as the probe does: a read takes its value
  // whether or not the event then passes `where`.
  if (!plan_.state_reads.empty()) {
    if (!ReadStates(e)) return false;
    with_states_ = e;
    with_states_.state_values = &state_values_;
  }
  // The predicate runs before sampling, so the sample is a fraction of the matching events.
  if (plan_.predicate) {
    auto v = EvalExpr(*plan_.predicate, Current(e), plan_.probes[e.probe_index]);
    if (!v.ok()) return Fail(v.status());
    if (!Truthy(*v)) return false;
  }
  if (plan_.sample_den > 0 && plan_.sample_num < plan_.sample_den) {
    if (rng_() % plan_.sample_den >= plan_.sample_num) return false;
  }
  ++stats_.events_matched;
  return true;
}

bool Interpreter::UpdateAgg(AggState& state, const AggSlot& slot, const Event& e) {
  const AggItem& item = *slot.item;
  if (item.func == AggFunc::kCount || !item.arg) {
    state.Update(0);
    return true;
  }
  const ProbeInfo& probe = plan_.probes[e.probe_index];
  const Expr& arg = *item.arg;
  // probe and func are small ids inside the probe (the probe's index), and distinct() hashes
  // what the probe holds.
  if (const Field* f = FieldOf(arg, e.probe_index, probe)) {
    if (f->source == FieldSource::kProbe || f->source == FieldSource::kFunc) {
      state.Update(e.probe_index);
      return true;
    }
  }
  if (Status st = EvalInto(arg, e, probe, &arg_); !st.ok()) return Fail(st);
  if (const auto* i = std::get_if<int64_t>(&arg_)) {
    state.Update(*i);
    return true;
  }
  if (const auto* s = std::get_if<std::string>(&arg_)) {
    const Field* f = FieldOf(arg, e.probe_index, probe);
    int len = f ? f->type.str_len : arg.type.str_len;
    state.UpdateString(*s, len > 0 ? len : 64);
    return true;
  }
  return Fail(Error(Code::kInternal, fmt::format("cannot aggregate '{}': a stack", arg.text)));
}

void Interpreter::Process(const Event& in) {
  if (!Admit(in)) return;
  // An event that read states evaluates its keys and aggregates with their values.
  const Event& e = Current(in);
  const ProbeInfo& probe = plan_.probes[e.probe_index];
  // key_ holds the previous event's key while last_ is valid; only a changed key is looked up.
  bool changed = key_.size() != plan_.keys.size();
  key_.resize(plan_.keys.size());
  for (size_t i = 0; i < plan_.keys.size(); ++i) {
    bool c = false;
    if (Status st = EvalInto(*plan_.keys[i].expr, e, probe, &key_[i], &c); !st.ok()) {
      last_ = groups_.end();
      Fail(st);
      return;
    }
    changed |= c;
  }
  auto it = last_;
  if (it == groups_.end() || changed) {
    it = groups_.find(key_);
    if (it == groups_.end()) {
      // Mirrors the probe's hash map: a new key beyond max_keys is not inserted.
      if (plan_.max_keys > 0 && groups_.size() >= plan_.max_keys) {
        ++stats_.map_full;
        last_ = groups_.end();
        return;
      }
      std::vector<AggState> states;
      states.reserve(plan_.aggs.size());
      for (const AggSlot& a : plan_.aggs) states.emplace_back(SpecOf(*a.item));
      it = groups_.emplace(key_, std::move(states)).first;
    }
    last_ = it;
  }
  for (size_t i = 0; i < plan_.aggs.size(); ++i) UpdateAgg(it->second[i], plan_.aggs[i], e);
}

void Interpreter::Merge(Interpreter& other) {
  stats_ += other.stats_;
  if (first_error_.ok() && !other.first_error_.ok()) first_error_ = other.first_error_;
  for (auto& [key, states] : other.groups_) {
    auto it = groups_.find(key);
    if (it == groups_.end()) {
      if (plan_.max_keys > 0 && groups_.size() >= plan_.max_keys) {
        ++stats_.map_full;
        continue;
      }
      groups_.emplace(key, std::move(states));
      continue;
    }
    for (size_t i = 0; i < states.size() && i < it->second.size(); ++i)
      it->second[i].Merge(states[i]);
  }
  other.groups_.clear();
  other.last_ = other.groups_.end();
}

bool Interpreter::EmptyWindow(ResultSet* rs) const {
  if (!plan_.keys.empty() || !groups_.empty()) return false;
  Row row;
  for (const AggSlot& a : plan_.aggs) row.aggs.emplace_back(SpecOf(*a.item));
  rs->rows.push_back(std::move(row));
  return true;
}

ResultSet Interpreter::TakeWindow(uint64_t window_end_ns) {
  ResultSet rs;
  rs.window_end_ns = window_end_ns;
  if (EmptyWindow(&rs)) return rs;
  rs.rows.reserve(groups_.size());
  for (auto& [key, states] : groups_) rs.rows.push_back(Row{key, std::move(states)});
  groups_.clear();
  last_ = groups_.end();
  return rs;
}

ResultSet Interpreter::PeekWindow(uint64_t window_end_ns) const {
  ResultSet rs;
  rs.window_end_ns = window_end_ns;
  if (EmptyWindow(&rs)) return rs;
  rs.rows.reserve(groups_.size());
  for (const auto& [key, states] : groups_) rs.rows.push_back(Row{key, states});
  return rs;
}

std::optional<std::vector<Value>> Interpreter::Select(const Event& in) {
  if (!Admit(in)) return std::nullopt;
  const Event& e = Current(in);
  const ProbeInfo& probe = plan_.probes[e.probe_index];
  std::vector<Value> row;
  row.reserve(plan_.keys.size());
  for (const Slot& slot : plan_.keys) {
    auto v = EvalExpr(*slot.expr, e, probe);
    if (!v.ok()) {
      Fail(v.status());
      return std::nullopt;
    }
    row.push_back(std::move(*v));
  }
  return row;
}

}  // namespace fay
