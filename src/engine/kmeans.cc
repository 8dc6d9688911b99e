#include "engine/kmeans.h"

#include <algorithm>
#include <cmath>

namespace fay {
namespace {

using Point = std::vector<double>;

// Lloyd's iterations settle in a few rounds on real data; the cap only bounds an oscillation.
constexpr int kMaxIterations = 100;
constexpr size_t kMaxDistinct = 3;

double Dist2(const Point& a, const Point& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return d;
}

// Ties go to the lower centre, so the (deterministic) seeding order decides them.
std::vector<size_t> Assign(const std::vector<Point>& points, const std::vector<Point>& centres) {
  std::vector<size_t> assign(points.size(), 0);
  for (size_t i = 0; i < points.size(); ++i) {
    double best = Dist2(points[i], centres[0]);
    for (size_t c = 1; c < centres.size(); ++c) {
      double d = Dist2(points[i], centres[c]);
      if (d < best) best = d, assign[i] = c;
    }
  }
  return assign;
}

// Sums in point order (by name), so equal inputs give bit-identical centroids. An empty group's
// mean stays zero; FillEmpty runs first so that does not reach the result.
std::vector<Point> Means(const std::vector<Point>& points, const std::vector<size_t>& assign,
                         size_t k, size_t dims) {
  std::vector<Point> sums(k, Point(dims, 0.0));
  std::vector<size_t> n(k, 0);
  for (size_t i = 0; i < points.size(); ++i) {
    ++n[assign[i]];
    for (size_t d = 0; d < dims; ++d) sums[assign[i]][d] += points[i][d];
  }
  for (size_t c = 0; c < k; ++c) {
    for (double& x : sums[c]) x = n[c] > 0 ? x / static_cast<double>(n[c]) : 0.0;
  }
  return sums;
}

// Deterministic k-means++: the first centre is the point farthest from the mean, each next one
// the point farthest from its nearest chosen centre. A strict '>' over name-sorted points breaks
// ties by name. With k at most the number of distinct points, no centre is chosen twice.
std::vector<Point> Seed(const std::vector<Point>& points, const Point& mean, size_t k) {
  std::vector<double> nearest(points.size());
  for (size_t i = 0; i < points.size(); ++i) nearest[i] = Dist2(points[i], mean);
  std::vector<Point> centres;
  while (centres.size() < k) {
    size_t far = 0;
    for (size_t i = 1; i < points.size(); ++i) {
      if (nearest[i] > nearest[far]) far = i;
    }
    centres.push_back(points[far]);
    for (size_t i = 0; i < points.size(); ++i) {
      double d = Dist2(points[i], centres.back());
      nearest[i] = centres.size() == 1 ? d : std::min(nearest[i], d);
    }
  }
  return centres;
}

// An empty group takes the point farthest from its centre: the worst fit gains most from a group
// of its own. Donors need 2+ members so no group is emptied in turn. Such a point always exists:
// fewer than k non-empty groups hold at least k distinct points, so one group holds two distinct
// points and its centre differs from at least one of them.
void FillEmpty(const std::vector<Point>& points, const std::vector<Point>& centres,
               std::vector<size_t>& assign) {
  std::vector<size_t> n(centres.size(), 0);
  for (size_t a : assign) ++n[a];
  for (size_t c = 0; c < centres.size(); ++c) {
    if (n[c] > 0) continue;
    size_t far = points.size();
    double far_d = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      double d = Dist2(points[i], centres[assign[i]]);
      if (n[assign[i]] > 1 && d > far_d) far = i, far_d = d;
    }
    if (far == points.size()) return;  // unreachable, see above
    --n[assign[far]];
    assign[far] = c;
    n[c] = 1;
  }
}

std::vector<ClusterGroup::Distinct> DistinctFeatures(const std::vector<std::string>& features,
                                                     const Point& centroid, const Point& mean) {
  std::vector<ClusterGroup::Distinct> out;
  for (size_t d = 0; d < features.size(); ++d) {
    if (centroid[d] > mean[d]) out.push_back({features[d], centroid[d], mean[d]});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    double da = a.group_share - a.all_share, db = b.group_share - b.all_share;
    return da != db ? da > db : a.feature < b.feature;
  });
  if (out.size() > kMaxDistinct) out.resize(kMaxDistinct);
  return out;
}

}  // namespace

Expected<ClusterResult> KMeans(const std::vector<ClusterInput>& in, size_t k) {
  if (k == 0) return Error(Code::kInvalidArgument, "k-means needs k >= 1");
  if (in.empty()) return Error(Code::kInvalidArgument, "k-means needs at least one entity");
  // Everything below walks entities in name order: that is what makes the input order irrelevant.
  std::vector<const ClusterInput*> sorted;
  for (const ClusterInput& e : in) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  ClusterResult out;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i]->name == sorted[i - 1]->name) {
      return Error(Code::kInvalidArgument, "k-means: duplicate entity '" + sorted[i]->name + "'");
    }
    for (const auto& [feature, count] : sorted[i]->features) {
      if (!std::isfinite(count) || count < 0) {
        return Error(Code::kInvalidArgument, "k-means: bad count for '" + feature + "' of '" +
                                                 sorted[i]->name + "'; counts must be >= 0");
      }
      out.features.push_back(feature);
    }
  }
  std::sort(out.features.begin(), out.features.end());
  out.features.erase(std::unique(out.features.begin(), out.features.end()), out.features.end());
  const size_t dims = out.features.size();

  // Shares, not counts, so that the mix decides and the volume does not.
  std::vector<Point> points;
  for (const ClusterInput* e : sorted) {
    Point p(dims, 0.0);
    double total = 0;
    for (const auto& [feature, count] : e->features) {
      auto it = std::lower_bound(out.features.begin(), out.features.end(), feature);
      p[it - out.features.begin()] = count;
      total += count;
    }
    if (total > 0) {
      for (double& x : p) x /= total;
    }
    points.push_back(std::move(p));
  }
  std::vector<Point> distinct = points;
  std::sort(distinct.begin(), distinct.end());
  k = std::min<size_t>(k, std::unique(distinct.begin(), distinct.end()) - distinct.begin());

  const Point mean = Means(points, std::vector<size_t>(points.size(), 0), 1, dims)[0];
  std::vector<Point> centres = Seed(points, mean, k);
  std::vector<size_t> assign;  // empty, so the first round never looks settled
  for (int round = 0; round < kMaxIterations; ++round) {
    std::vector<size_t> next = Assign(points, centres);
    if (next == assign) break;
    assign = std::move(next);
    FillEmpty(points, centres, assign);
    centres = Means(points, assign, k, dims);
  }

  out.groups.resize(k);
  for (size_t i = 0; i < points.size(); ++i) {
    out.groups[assign[i]].members.push_back(sorted[i]->name);
    out.inertia += Dist2(points[i], centres[assign[i]]);
  }
  for (size_t c = 0; c < k; ++c) {
    out.groups[c].centroid = centres[c];
    out.groups[c].distinct = DistinctFeatures(out.features, centres[c], mean);
  }
  std::erase_if(out.groups, [](const ClusterGroup& g) { return g.members.empty(); });
  std::sort(out.groups.begin(), out.groups.end(),
            [](const auto& a, const auto& b) { return a.members[0] < b.members[0]; });
  return out;
}

}  // namespace fay
