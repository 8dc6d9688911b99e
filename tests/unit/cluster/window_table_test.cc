#include "cluster/window_table.h"

#include <gtest/gtest.h>

#include "cluster/node.h"

namespace fay::cluster {
namespace {

pb::WindowState State(uint64_t index, const std::string& host, int64_t count,
                      const std::string& key = "a") {
  AggSpec spec;
  spec.func = AggFunc::kCount;
  AggState s(spec);
  for (int64_t i = 0; i < count; ++i) s.Update(0);
  std::vector<Row> rows{Row{{Value{key}}, {s}}};
  pb::WindowState ws;
  ws.set_version(kProtocolVersion);
  ws.set_index(index);
  RowsToGroups(rows, &ws);
  pb::HostState* h = ws.add_hosts();
  h->set_host(host);
  h->set_address(host + ":1");
  return ws;
}

int64_t CountOf(const pb::WindowState& ws, size_t group = 0) {
  std::vector<Row> rows;
  EXPECT_TRUE(GroupsToRows(ws, &rows).ok());
  return rows.at(group).aggs.at(0).Scalar();
}

TEST(WindowTable, MergesEachWindowApartAndSaysWhoAnswered) {
  WindowTable t(100);
  EXPECT_TRUE(t.Add(State(0, "h1", 3)));
  EXPECT_TRUE(t.Add(State(0, "h2", 4)));
  EXPECT_TRUE(t.Add(State(1, "h1", 10)));
  EXPECT_TRUE(t.Heard(0, {"h1:1", "h2:1"}));
  EXPECT_FALSE(t.Heard(1, {"h1:1", "h2:1"}));
  pb::WindowState w0 = t.Close(0);
  EXPECT_EQ(CountOf(w0), 7);
  EXPECT_EQ(w0.hosts_size(), 2);
  EXPECT_EQ(CountOf(t.Close(1)), 10);
}

TEST(WindowTable, ALateStateIsCountedAndNeverMergedElsewhere) {
  WindowTable t(100);
  t.Add(State(0, "h1", 3));
  t.Close(0);
  EXPECT_FALSE(t.Add(State(0, "h2", 5)));
  EXPECT_EQ(t.late(), 1u);
  t.Add(State(1, "h1", 1));
  EXPECT_EQ(CountOf(t.Close(1)), 1);
}

TEST(WindowTable, PastItsKeyBoundAWindowIsTruncatedNotGrown) {
  WindowTable t(2);
  t.Add(State(0, "h1", 1, "a"));
  t.Add(State(0, "h1", 1, "b"));
  t.Add(State(0, "h1", 1, "c"));
  pb::WindowState w = t.Close(0);
  EXPECT_EQ(w.groups_size(), 2);
  EXPECT_TRUE(w.truncated());
}

TEST(WindowTable, PastItsMemoryBoundAWindowIsTruncatedAndTheMemoryComesBack) {
  // Room for about three groups of a count: each takes its key (its table, a tag, a length, a
  // character) twice, 128 and 48 bytes.
  WindowTable t(100, std::nullopt, 3 * (2 * 7 + 128 + 8 + 48) + 10);
  for (const char* k : {"a", "b", "c", "d"}) t.Add(State(0, "h1", 1, k));
  pb::WindowState w = t.Close(0);
  EXPECT_EQ(w.groups_size(), 3);
  EXPECT_TRUE(w.truncated());
  // Closed, its memory is free again for the next window.
  for (const char* k : {"a", "b", "c"}) t.Add(State(1, "h1", 1, k));
  pb::WindowState w1 = t.Close(1);
  EXPECT_EQ(w1.groups_size(), 3);
  EXPECT_FALSE(w1.truncated());
}

TEST(WindowTable, AStateThatDoesNotDecodeIsRefused) {
  WindowTable t(10);
  pb::WindowState ws = State(0, "h1", 1);
  ws.mutable_groups(0)->set_aggs(0, "garbage");
  EXPECT_FALSE(t.Add(ws));
}

// What State() sends: a count by one string key.
GroupShape CountByString() {
  GroupShape shape;
  shape.keys = {pb::Value::kS};
  AggSpec count;
  count.func = AggFunc::kCount;
  shape.aggs = {count};
  return shape;
}

TEST(WindowTable, AStateOfAnotherShapeIsRefusedWholeWithTheReason) {
  WindowTable t(10, QueryShape{CountByString()});
  std::string why;
  EXPECT_TRUE(t.Add(State(0, "h1", 2), &why)) << why;
  // An integer where the query has a string key.
  pb::WindowState ws = State(0, "h2", 5);
  ws.mutable_groups(0)->mutable_keys(0)->set_i(7);
  EXPECT_FALSE(t.Add(ws, &why));
  EXPECT_EQ(why,
            "a state that does not fit the query: group 0 key 0 is an integer, the query's is a "
            "string");
  // A histogram where the query has a count: decodes, but is not the query's.
  AggSpec hist;
  hist.func = AggFunc::kHist;
  AggState h(hist);
  h.Update(5);
  pb::WindowState other = State(0, "h3", 1);
  other.mutable_groups(0)->set_aggs(0, h.Serialize());
  EXPECT_FALSE(t.Add(other, &why));
  EXPECT_EQ(why, "a state that does not fit the query: group 0 aggregate 0 is not the query's");
  // Nothing of the refused states was merged, nor their hosts heard.
  pb::WindowState w = t.Close(0);
  EXPECT_EQ(CountOf(w), 2);
  EXPECT_EQ(w.hosts_size(), 1);
}

// Several tables: the same keys in two tables are two groups, each merged with its own table's,
// and each table reads back only its own; a table the query does not have is refused.
TEST(WindowTable, EachTableMergesOnItsOwn) {
  WindowTable t(10, QueryShape{CountByString(), CountByString()});
  auto state = [&](const std::string& host, int n0, int n1) {
    pb::WindowState ws = State(0, host, n0);
    pb::WindowState second = State(0, host, n1);
    pb::Group* g = ws.add_groups();
    *g = second.groups(0);
    g->set_table(1);
    return ws;
  };
  std::string why;
  ASSERT_TRUE(t.Add(state("h1", 2, 10), &why)) << why;
  ASSERT_TRUE(t.Add(state("h1", 3, 20), &why)) << why;
  pb::WindowState bad = State(0, "h2", 1);
  bad.mutable_groups(0)->set_table(2);
  EXPECT_FALSE(t.Add(bad, &why));
  EXPECT_EQ(why, "a state that does not fit the query: group 0 is of table 2, the query has 2");
  pb::WindowState w = t.Close(0);
  std::vector<Row> first, second;
  ASSERT_TRUE(GroupsToRows(w, &first, 0).ok());
  ASSERT_TRUE(GroupsToRows(w, &second, 1).ok());
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].aggs[0].Scalar(), 5);
  EXPECT_EQ(second[0].aggs[0].Scalar(), 30);
}

TEST(WindowTable, StacksCrossWithTheirHostsNames) {
  AggSpec count;
  count.func = AggFunc::kCount;
  AggState c(count);
  c.Update(0);
  Stack st;
  st.frames = {0x401000, 0x401100};
  st.names = {"work+0x10", ""};
  st.tgid = 42;
  pb::WindowState ws;
  RowsToGroups({Row{{Value{st}, Value{std::string("h1")}}, {c}}}, &ws);
  std::vector<Row> rows;
  ASSERT_TRUE(GroupsToRows(ws, &rows).ok());
  const Stack& back = std::get<Stack>(rows.at(0).keys.at(0));
  EXPECT_EQ(back.frames, st.frames);
  EXPECT_EQ(back.names, st.names);
  EXPECT_EQ(back.tgid, 42);
  // Names that do not match the frames are no stack fay sent.
  ws.mutable_groups(0)->mutable_keys(0)->mutable_stack()->add_names("extra");
  rows.clear();
  EXPECT_FALSE(GroupsToRows(ws, &rows).ok());
}

TEST(Layout, SmallListsAreFlatLargeOnesATree) {
  std::vector<std::string> hosts;
  for (int i = 0; i < 16; ++i) hosts.push_back("h" + std::to_string(i));
  auto flat = Layout(hosts, 32);
  EXPECT_EQ(flat.size(), 16u);
  auto tree = Layout(hosts, 4);
  ASSERT_EQ(tree.size(), 4u);
  size_t covered = 0;
  for (auto& [child, below] : tree) covered += 1 + below.size();
  EXPECT_EQ(covered, 16u);
  EXPECT_EQ(tree[0].first, "h0");
  EXPECT_EQ(tree[0].second.size(), 3u);
  // The inner agent h0 lays its 3 out flat: three levels in all.
  EXPECT_EQ(Layout(tree[0].second, 4).size(), 3u);
}

TEST(Windows, EndsAreAlignedToTheStartAndTheLastIsCut) {
  pb::QueryRequest r;
  r.set_start_unix_ns(1000);
  r.set_every_ns(100);
  r.set_for_ns(250);
  EXPECT_EQ(WindowEnd(r, 0), 1100u);
  EXPECT_EQ(WindowEnd(r, 2), 1250u);
  EXPECT_FALSE(IsLastWindow(r, 1));
  EXPECT_TRUE(IsLastWindow(r, 2));
  r.set_every_ns(0);
  r.set_for_ns(0);
  EXPECT_EQ(WindowEnd(r, 0), UINT64_MAX);
}

}  // namespace
}  // namespace fay::cluster
