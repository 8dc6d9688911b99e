// The ClickHouse sink's pure parts: its address, the schema it creates, the rows it inserts.
#include "sinks/clickhouse.h"

#include <gtest/gtest.h>

#include "probes/catalog.h"
#include "query/compile.h"

namespace fay::sinks {
namespace {

TEST(ClickHouseUrl, ParsesAndRefusesWithTheForm) {
  auto t = ParseClickHouseUrl("clickhouse://db1:9123/fleet.reads");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->host, "db1");
  EXPECT_EQ(t->port, 9123);
  EXPECT_EQ(t->db, "fleet");
  EXPECT_EQ(t->table, "reads");
  EXPECT_EQ(ParseClickHouseUrl("clickhouse://db1/fleet.reads")->port, 8123);
  for (const char* bad :
       {"http://db1/fleet.reads", "clickhouse://db1", "clickhouse://db1/fleet",
        "clickhouse://db1:x/f.r", "clickhouse://db1/f.r;drop", "clickhouse://:1/f.r"}) {
    auto r = ParseClickHouseUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("clickhouse://HOST[:PORT]/DB.TABLE"), std::string::npos);
  }
}

TEST(ClickHouseSchema, NamesEveryColumnAsJsonDoesAndRowsFillTheInput) {
  SystemCatalog catalog;
  auto plan = CompileQuery(
      "syscall:read | count() as n, avg(args.count) as mean, "
      "hist(args.count) as h by comm",
      catalog, PlanOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto sql = ClickHouseSchema(*plan, *ParseClickHouseUrl("clickhouse://h/db.t"));
  ASSERT_TRUE(sql.ok());
  ASSERT_EQ(sql->size(), 5u);
  EXPECT_NE((*sql)[1].find("`n` AggregateFunction(sum, UInt64)"), std::string::npos) << (*sql)[1];
  EXPECT_NE((*sql)[1].find("ENGINE = AggregatingMergeTree()"), std::string::npos);
  EXPECT_NE((*sql)[2].find("`db`.`t_input` (`window` DateTime, `host` String, `comm` String"),
            std::string::npos)
      << (*sql)[2];
  EXPECT_NE((*sql)[2].find("ENGINE = Null"), std::string::npos);
  EXPECT_NE((*sql)[3].find("sumMapState(`h__k__in`, `h__v__in`) AS `h`"), std::string::npos);
  EXPECT_NE((*sql)[4].find("`mean__sum__m` / `mean__n__m` AS `mean`"), std::string::npos);

  ResultSet rs;
  rs.window_end_ns = 1'700'000'000'123'000'000;
  Row r;
  r.keys.push_back(Value{std::string("cat")});
  for (const AggSlot& a : plan->aggs) {
    AggState s(SpecOf(*a.item));
    s.Update(3);
    s.Update(5);
    r.aggs.push_back(s);
  }
  rs.rows.push_back(r);
  EXPECT_EQ(ClickHouseRows(*plan, rs, "h1"),
            "{\"comm\":\"cat\",\"h__k__in\":[2,4],\"h__v__in\":[1,1],\"host\":\"h1\","
            "\"mean__n__in\":2,\"mean__sum__in\":8,\"n__in\":2,\"window\":1700000000}\n");
}

TEST(ClickHouseSchema, SelectQueriesDoNotMerge) {
  SystemCatalog catalog;
  auto plan = CompileQuery("syscall:read | select comm", catalog, PlanOptions{});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(ClickHouseSchema(*plan, *ParseClickHouseUrl("clickhouse://h/db.t")).ok());
}

}  // namespace
}  // namespace fay::sinks
