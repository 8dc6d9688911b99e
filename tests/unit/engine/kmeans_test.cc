#include "engine/kmeans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

namespace fay {
namespace {

using Members = std::vector<std::vector<std::string>>;

Members MembersOf(const ClusterResult& r) {
  Members out;
  for (const ClusterGroup& g : r.groups) out.push_back(g.members);
  return out;
}

std::vector<std::string> DistinctNames(const ClusterGroup& g) {
  std::vector<std::string> out;
  for (const auto& d : g.distinct) out.push_back(d.feature);
  return out;
}

ClusterResult Cluster(const std::vector<ClusterInput>& in, size_t k) {
  Expected<ClusterResult> r = KMeans(in, k);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : ClusterResult{};
}

// Three kinds of host, at volumes three orders of magnitude apart, each with a little noise.
std::vector<ClusterInput> ThreeKinds() {
  return {
      {"alpha", {{"read", 900}, {"write", 120}, {"clone", 3}}},
      {"bravo", {{"clone", 300}, {"wait4", 290}, {"execve", 280}}},
      {"charlie", {{"nanosleep", 400}, {"clock_nanosleep", 100}}},
      {"delta", {{"read", 45}, {"write", 5}}},
      {"echo", {{"clone", 12}, {"wait4", 11}, {"execve", 10}, {"read", 2}}},
      {"foxtrot", {{"nanosleep", 3}, {"clock_nanosleep", 1}}},
      {"golf", {{"read", 7000}, {"write", 1500}, {"nanosleep", 20}}},
      {"hotel", {{"clone", 5000}, {"wait4", 4800}, {"execve", 5100}, {"write", 30}}},
      {"india", {{"nanosleep", 10000}, {"clock_nanosleep", 2500}, {"read", 100}}},
  };
}

TEST(KMeans, GroupsByShapeOfActivity) {
  ClusterResult r = Cluster(ThreeKinds(), 3);
  EXPECT_EQ(r.features, (std::vector<std::string>{"clock_nanosleep", "clone", "execve", "nanosleep",
                                                  "read", "wait4", "write"}));
  EXPECT_EQ(MembersOf(r), (Members{{"alpha", "delta", "golf"},
                                   {"bravo", "echo", "hotel"},
                                   {"charlie", "foxtrot", "india"}}));
  ASSERT_EQ(r.groups.size(), 3u);
  EXPECT_EQ(DistinctNames(r.groups[0]), (std::vector<std::string>{"read", "write"}));
  EXPECT_EQ(DistinctNames(r.groups[1]), (std::vector<std::string>{"clone", "wait4", "execve"}));
  EXPECT_EQ(DistinctNames(r.groups[2]), (std::vector<std::string>{"nanosleep", "clock_nanosleep"}));

  // The centroid is the mean of the members' shares, in feature order.
  const ClusterGroup& io = r.groups[0];
  EXPECT_DOUBLE_EQ(io.centroid[4], (900.0 / 1023 + 45.0 / 50 + 7000.0 / 8520) / 3);
  EXPECT_DOUBLE_EQ(io.centroid[6], (120.0 / 1023 + 5.0 / 50 + 1500.0 / 8520) / 3);
  EXPECT_DOUBLE_EQ(io.distinct[0].group_share, io.centroid[4]);
  // everyone's read share: alpha, delta, echo, golf, india
  EXPECT_DOUBLE_EQ(io.distinct[0].all_share,
                   (900.0 / 1023 + 45.0 / 50 + 2.0 / 35 + 7000.0 / 8520 + 100.0 / 12600) / 9);
  for (const ClusterGroup& g : r.groups) {
    double sum = 0;
    for (double x : g.centroid) sum += x;
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(KMeans, InputOrderDoesNotMatter) {
  std::vector<ClusterInput> in = ThreeKinds();
  std::vector<ClusterResult> want;
  for (size_t k = 1; k <= 4; ++k) want.push_back(Cluster(in, k));
  std::mt19937 rng(20240601);
  for (int i = 0; i < 200; ++i) {
    std::shuffle(in.begin(), in.end(), rng);
    // Exact equality: the same doubles, not merely the same groups.
    for (size_t k = 1; k <= 4; ++k) EXPECT_EQ(Cluster(in, k), want[k - 1]) << "k=" << k;
  }
}

TEST(KMeans, SameMixAtAnyVolumeLandsTogether) {
  ClusterResult r = Cluster({{"idle", {{"x", 1}, {"y", 3}}},
                             {"busy", {{"x", 1000}, {"y", 3000}}},
                             {"other", {{"x", 3}, {"y", 1}}}},
                            2);
  EXPECT_EQ(MembersOf(r), (Members{{"busy", "idle"}, {"other"}}));
  EXPECT_EQ(r.groups[0].centroid, (std::vector<double>{0.25, 0.75}));
  EXPECT_EQ(r.groups[1].centroid, (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(r.inertia, 0.0);
}

TEST(KMeans, KIsCappedAtTheNumberOfDistinctVectors) {
  std::vector<ClusterInput> in = {{"a", {{"x", 1}, {"y", 3}}},
                                  {"b", {{"x", 2}, {"y", 6}}},
                                  {"c", {{"x", 3}, {"y", 1}}},
                                  {"d", {{"x", 3}, {"y", 1}}}};
  EXPECT_EQ(MembersOf(Cluster(in, 2)), (Members{{"a", "b"}, {"c", "d"}}));
  EXPECT_EQ(MembersOf(Cluster(in, 5)), (Members{{"a", "b"}, {"c", "d"}}));
  EXPECT_EQ(MembersOf(Cluster(in, 1)), (Members{{"a", "b", "c", "d"}}));
}

TEST(KMeans, SingleEntity) {
  ClusterResult r = Cluster({{"only", {{"read", 3}, {"write", 1}}}}, 3);
  EXPECT_EQ(MembersOf(r), (Members{{"only"}}));
  EXPECT_EQ(r.groups[0].centroid, (std::vector<double>{0.75, 0.25}));
  EXPECT_TRUE(r.groups[0].distinct.empty());  // no one to differ from
  EXPECT_EQ(r.inertia, 0.0);
}

TEST(KMeans, OneGroupIsTheMean) {
  std::vector<ClusterInput> in = {{"a", {{"x", 5}}}, {"b", {{"y", 7}}}};
  ClusterResult one = Cluster(in, 1);
  EXPECT_EQ(one.groups[0].centroid, (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(one.inertia, 1.0);  // four coordinates each 0.5 away
  EXPECT_TRUE(one.groups[0].distinct.empty());

  ClusterResult two = Cluster(in, 2);
  EXPECT_EQ(MembersOf(two), (Members{{"a"}, {"b"}}));
  EXPECT_EQ(two.inertia, 0.0);
  EXPECT_EQ(two.groups[0].distinct, (std::vector<ClusterGroup::Distinct>{{"x", 1.0, 0.5}}));
  EXPECT_EQ(two.groups[1].distinct, (std::vector<ClusterGroup::Distinct>{{"y", 1.0, 0.5}}));
}

TEST(KMeans, TiesGoByName) {
  // All three are equally far from the mean and from each other: "a" seeds the first group,
  // "b" the second, and "c", as near to both, joins the first.
  std::vector<ClusterInput> in = {{"c", {{"z", 1}}}, {"b", {{"y", 1}}}, {"a", {{"x", 1}}}};
  EXPECT_EQ(MembersOf(Cluster(in, 2)), (Members{{"a", "c"}, {"b"}}));
}

TEST(KMeans, FeaturesInOnlySomeEntitiesCountAsZero) {
  ClusterResult r = Cluster({{"p", {{"read", 1}}}, {"q", {{"mmap", 1}, {"brk", 3}}}}, 2);
  EXPECT_EQ(r.features, (std::vector<std::string>{"brk", "mmap", "read"}));
  EXPECT_EQ(r.groups[0].centroid, (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(r.groups[1].centroid, (std::vector<double>{0.75, 0.25, 0}));
  EXPECT_EQ(DistinctNames(r.groups[1]), (std::vector<std::string>{"brk", "mmap"}));
}

TEST(KMeans, AllZeroVectorsStayZero) {
  std::vector<ClusterInput> in = {
      {"busy", {{"read", 5}, {"write", 5}}}, {"empty", {}}, {"zero", {{"read", 0}}}};
  ClusterResult r = Cluster(in, 2);
  EXPECT_EQ(MembersOf(r), (Members{{"busy"}, {"empty", "zero"}}));
  EXPECT_EQ(r.groups[1].centroid, (std::vector<double>{0, 0}));
  EXPECT_TRUE(r.groups[1].distinct.empty());

  ClusterResult none = Cluster({{"empty", {}}, {"zero", {{"read", 0}}}}, 3);
  EXPECT_EQ(MembersOf(none), (Members{{"empty", "zero"}}));
  EXPECT_EQ(none.groups[0].centroid, (std::vector<double>{0}));
}

TEST(KMeans, RejectsBadInput) {
  std::vector<ClusterInput> ok = {{"a", {{"x", 1}}}};
  EXPECT_EQ(KMeans(ok, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(KMeans({}, 2).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(KMeans({{"a", {{"x", 1}}}, {"a", {{"y", 1}}}}, 2).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(KMeans({{"a", {{"x", -1}}}}, 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(KMeans({{"a", {{"x", NAN}}}}, 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(KMeans({{"a", {{"x", INFINITY}}}}, 1).status().code(), Code::kInvalidArgument);
}

// Random inputs with few features and small counts, so duplicates and empty groups turn up.
TEST(KMeans, InvariantsOnRandomInputs) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<ClusterInput> in(1 + rng() % 12);
    for (size_t i = 0; i < in.size(); ++i) {
      in[i].name = "e" + std::to_string(i);
      for (const char* f : {"a", "b", "c"}) {
        if (rng() % 3) in[i].features[f] = rng() % 4;
      }
    }
    size_t k = 1 + rng() % 6;
    ClusterResult r = Cluster(in, k);

    std::set<std::vector<double>> distinct;
    for (const ClusterInput& e : in) {
      std::vector<double> v;
      double total = 0;
      for (const char* f : {"a", "b", "c"}) {
        auto it = e.features.find(f);
        v.push_back(it == e.features.end() ? 0 : it->second);
        total += v.back();
      }
      if (total > 0) {
        for (double& x : v) x /= total;
      }
      distinct.insert(v);
    }
    EXPECT_EQ(r.groups.size(), std::min(k, distinct.size()));
    std::vector<std::string> all;
    for (const ClusterGroup& g : r.groups) {
      ASSERT_FALSE(g.members.empty());
      EXPECT_TRUE(std::is_sorted(g.members.begin(), g.members.end()));
      all.insert(all.end(), g.members.begin(), g.members.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all.size(), in.size());
    EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end());
    for (size_t g = 1; g < r.groups.size(); ++g) {
      EXPECT_LT(r.groups[g - 1].members[0], r.groups[g].members[0]);
    }
    std::reverse(in.begin(), in.end());
    EXPECT_EQ(Cluster(in, k), r);
  }
}

}  // namespace
}  // namespace fay
