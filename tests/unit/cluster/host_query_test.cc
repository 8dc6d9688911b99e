#include "cluster/host_query.h"

#include <gtest/gtest.h>

namespace fay::cluster {
namespace {

TEST(HostQuery, ByHostIsCutAndItsPositionKept) {
  auto h = SplitHostQuery("syscall:read | count() by comm, host | every 1s");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->host_key, 1);
  EXPECT_EQ(h->key_name, "host");
  EXPECT_EQ(h->local, "syscall:read | count() by comm       | every 1s");
  h = SplitHostQuery("syscall:read | count() by host, comm");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->host_key, 0);
  EXPECT_EQ(h->local, "syscall:read | count() by       comm");
  h = SplitHostQuery("syscall:read | count() by host as h");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->key_name, "h");
  EXPECT_EQ(h->local, "syscall:read | count() " + std::string(12, ' '));
  // `as host` goes too: left behind, it would rename the aggregate.
  h = SplitHostQuery("syscall:read | count() by host as host");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->key_name, "host");
  EXPECT_EQ(h->local, "syscall:read | count() " + std::string(15, ' '));
}

// Several tables: each table's `by host` is found and cut, inside its parentheses, beside a
// `top`, the query's own table's in host_key and the others' in `tables`.
TEST(HostQuery, EachTableHasItsHostKey) {
  auto h = SplitHostQuery(
      "syscall:* | (count() by probe | top 3), (count() by comm, host), (count() by host)");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->host_key, -1);
  ASSERT_EQ(h->tables.size(), 2u);
  EXPECT_EQ(h->tables[0].index, 1);
  EXPECT_EQ(h->tables[1].index, 0);
  EXPECT_EQ(h->local,
            "syscall:* | (count() by probe | top 3), (count() by comm      ), (count()        )");
}

TEST(HostQuery, AWhereStageOnHostPicksHosts) {
  const std::string q = "syscall:read | where host == \"db*\" | count()";
  auto h = SplitHostQuery(q);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->local, "syscall:read                       | count()");
  EXPECT_EQ(h->host_filters, std::vector<std::string>{"host == \"db*\""});
  EXPECT_TRUE(*HostSelected(q, "db7"));
  EXPECT_FALSE(*HostSelected(q, "web1"));
  const std::string in = "syscall:read | where !(host in (\"a\", \"b?\")) | count()";
  EXPECT_FALSE(*HostSelected(in, "b2"));
  EXPECT_TRUE(*HostSelected(in, "c"));
}

TEST(HostQuery, HostMixedWithOtherFieldsIsRefusedAtItsCaret) {
  auto h = SplitHostQuery("syscall:read | where host == \"a\" && pid > 1 | count()");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("a host condition may use ==, !=, in, &&, || and ! only"),
            std::string::npos)
      << h.status().message();
  h = SplitHostQuery("syscall:read | sum(host) by comm");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("an aggregate cannot read host"), std::string::npos);
  h = SplitHostQuery("syscall:read | select host, pid");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("select across hosts is not supported yet"),
            std::string::npos);
}

TEST(HostQuery, AQueryWithoutHostIsUnchanged) {
  const std::string q = "syscall:openat | where ret < 0 | count() by comm | top 5";
  auto h = SplitHostQuery(q);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->local, q);
  EXPECT_EQ(h->host_key, -1);
}

}  // namespace
}  // namespace fay::cluster
