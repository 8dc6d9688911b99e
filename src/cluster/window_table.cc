#include "cluster/window_table.h"

#include <fmt/format.h>

namespace fay::cluster {

void RowsToGroups(const std::vector<Row>& rows, pb::WindowState* out, uint32_t table) {
  for (const Row& row : rows) {
    pb::Group* g = out->add_groups();
    g->set_table(table);
    for (const Value& v : row.keys) {
      pb::Value* pv = g->add_keys();
      if (const auto* i = std::get_if<int64_t>(&v)) {
        pv->set_i(*i);
      } else if (const auto* s = std::get_if<std::string>(&v)) {
        pv->set_s(*s);
      } else if (const auto* st = std::get_if<Stack>(&v)) {
        pb::StackValue* ps = pv->mutable_stack();
        for (uint64_t f : st->frames) ps->add_frames(f);
        for (const std::string& n : st->names) ps->add_names(n);
        ps->set_tgid(st->tgid);
      }
    }
    for (const AggState& a : row.aggs) g->add_aggs(a.Serialize());
  }
}

Status GroupsToRows(const pb::WindowState& in, std::vector<Row>* rows, uint32_t table) {
  for (const pb::Group& g : in.groups()) {
    if (g.table() != table) continue;
    Row row;
    for (const pb::Value& v : g.keys()) {
      if (v.v_case() == pb::Value::kS) {
        row.keys.emplace_back(v.s());
      } else if (v.v_case() == pb::Value::kStack) {
        Stack st;
        st.frames.assign(v.stack().frames().begin(), v.stack().frames().end());
        // Names are parallel to frames or absent; anything else is not a stack fay sent.
        if (v.stack().names_size() != 0 && v.stack().names_size() != v.stack().frames_size())
          return Error(Code::kIo, "a stack whose names do not match its frames");
        st.names.assign(v.stack().names().begin(), v.stack().names().end());
        st.tgid = v.stack().tgid();
        row.keys.emplace_back(std::move(st));
      } else {
        row.keys.emplace_back(static_cast<int64_t>(v.i()));
      }
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

namespace {

int KindOf(TypeKind k) {
  switch (k) {
    case TypeKind::kString:
      return pb::Value::kS;
    case TypeKind::kStack:
      return pb::Value::kStack;
    default:
      return pb::Value::kI;
  }
}

const char* KindName(int k) {
  return k == pb::Value::kS ? "a string" : k == pb::Value::kStack ? "a stack" : "an integer";
}

}  // namespace

namespace {

GroupShape TableShape(const Plan& p, int host_key) {
  GroupShape g;
  for (const Slot& k : p.keys) g.keys.push_back(KindOf(k.type.kind));
  if (host_key >= 0 && static_cast<size_t>(host_key) <= g.keys.size())
    g.keys.insert(g.keys.begin() + host_key, pb::Value::kS);
  for (const AggSlot& a : p.aggs) g.aggs.push_back(SpecOf(*a.item));
  return g;
}

}  // namespace

QueryShape ShapeOf(const Plan& p, const std::vector<int>& host_keys) {
  QueryShape shape;
  const std::vector<const Plan*> tables = AllTables(p);
  for (size_t t = 0; t < tables.size(); ++t)
    shape.push_back(TableShape(*tables[t], t < host_keys.size() ? host_keys[t] : -1));
  return shape;
}

namespace {

// A group's keys as one string, the merge map's key: a tag per value, then its bytes. Two
// groups have equal strings exactly when their keys are equal (a stack by frames and process,
// as the engine compares stacks).
void EncodeKeys(const pb::Group& g, std::string& out) {
  out.clear();
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  out.push_back(static_cast<char>(g.table()));  // below kMaxTables: CheckState came first
  for (const pb::Value& v : g.keys()) {
    char tag = static_cast<char>(v.v_case());
    out.push_back(tag);
    if (v.v_case() == pb::Value::kS) {
      uint32_t n = static_cast<uint32_t>(v.s().size());
      put(&n, 4);
      out += v.s();
    } else if (v.v_case() == pb::Value::kStack) {
      uint32_t n = static_cast<uint32_t>(v.stack().frames_size());
      put(&n, 4);
      for (uint64_t f : v.stack().frames()) put(&f, 8);
      int32_t tgid = v.stack().tgid();
      put(&tgid, 4);
    } else {
      int64_t i = v.i();
      put(&i, 8);
    }
  }
}

}  // namespace

std::string CheckState(const pb::WindowState& s, const QueryShape* shapes) {
  const std::string prefix = "a state that does not fit the query: ";
  for (int gi = 0; gi < s.groups_size(); ++gi) {
    const pb::Group& g = s.groups(gi);
    const size_t tables = shapes ? shapes->size() : kMaxTables;
    if (g.table() >= tables)
      return prefix +
             fmt::format("group {} is of table {}, the query has {}", gi, g.table(), tables);
    const GroupShape* shape = shapes ? &(*shapes)[g.table()] : nullptr;
    if (shape && (static_cast<size_t>(g.keys_size()) != shape->keys.size() ||
                  static_cast<size_t>(g.aggs_size()) != shape->aggs.size()))
      return prefix + fmt::format("group {} has {} keys and {} aggregates, the query {} and {}", gi,
                                  g.keys_size(), g.aggs_size(), shape->keys.size(),
                                  shape->aggs.size());
    for (int k = 0; k < g.keys_size(); ++k) {
      const pb::Value& v = g.keys(k);
      // An unset oneof decodes as the integer 0, as protobuf's own default would.
      int got = v.v_case() == pb::Value::V_NOT_SET ? pb::Value::kI : v.v_case();
      if (shape && got != shape->keys[k])
        return prefix + fmt::format("group {} key {} is {}, the query's is {}", gi, k,
                                    KindName(got), KindName(shape->keys[k]));
      if (got == pb::Value::kStack && v.stack().names_size() != 0 &&
          v.stack().names_size() != v.stack().frames_size())
        return "a state that does not decode: a stack whose names do not match its frames";
    }
    for (int a = 0; a < g.aggs_size(); ++a) {
      auto spec = AggState::Validate(g.aggs(a));
      if (!spec.ok()) return "a state that does not decode: " + spec.status().message();
      if (shape && !SameSpec(*spec, shape->aggs[a]))
        return prefix + fmt::format("group {} aggregate {} is not the query's", gi, a);
    }
  }
  return "";
}

void WindowTable::WaitForAdd(uint64_t since, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  added_.wait_for(lk, timeout, [&] { return adds_ != since; });
}

bool WindowTable::Add(const pb::WindowState& s, std::string* why) {
  // The whole state is checked before any of it is merged: a bad one is refused whole.
  std::string bad = CheckState(s, shape_ ? &*shape_ : nullptr);
  if (!bad.empty()) {
    if (why) *why = bad;
    return false;
  }
  std::lock_guard lk(mu_);
  if (s.index() < closed_below_ || closed_.count(s.index())) {
    ++late_;
    return false;
  }
  ++adds_;
  added_.notify_all();
  Open& w = open_[s.index()];
  std::string key;  // one buffer for every group's lookup: a state holds hundreds
  for (const pb::Group& g : s.groups()) {
    EncodeKeys(g, key);
    auto it = w.groups.find(key);
    if (it == w.groups.end()) {
      if (w.groups.size() >= max_keys_) {
        w.truncated = true;
        continue;
      }
      Merged m;
      m.aggs.resize(static_cast<size_t>(g.aggs_size()));
      for (int a = 0; a < g.aggs_size(); ++a) m.aggs[a].MergeSerialized(g.aggs(a));
      // A group's memory, about: its key twice (the map's and the message's), its states,
      // and the nodes and headers around them.
      size_t need = 2 * key.size() + 128;
      for (const AggState& st : m.aggs) need += st.bytes().size() + 48;
      if (bytes_ + need > max_bytes_) {
        w.truncated = true;
        continue;
      }
      *m.keys.mutable_keys() = g.keys();
      m.keys.set_table(g.table());
      w.groups.emplace(key, std::move(m));
      w.bytes += need;
      bytes_ += need;
      continue;
    }
    Merged& m = it->second;
    if (m.aggs.size() != static_cast<size_t>(g.aggs_size())) continue;  // another plan
    for (int a = 0; a < g.aggs_size(); ++a) m.aggs[a].MergeSerialized(g.aggs(a));
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
  // Called on every state that arrives: the count settles most calls without a lookup each.
  if (it->second.hosts.size() < hosts.size()) return false;
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
  out.mutable_groups()->Reserve(static_cast<int>(w.groups.size()));
  for (auto& [key, m] : w.groups) {
    pb::Group* g = out.add_groups();
    g->mutable_keys()->Swap(m.keys.mutable_keys());
    g->set_table(m.keys.table());
    for (const AggState& a : m.aggs) g->add_aggs(a.Serialize());
  }
  for (auto& [addr, h] : w.hosts) *out.add_hosts() = h;
  *out.mutable_stats() = w.stats;
  out.set_truncated(w.truncated);
  out.set_last(w.last);
  bytes_ -= w.bytes;
  open_.erase(it);
  return out;
}

}  // namespace fay::cluster
