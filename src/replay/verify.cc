#include "replay/verify.h"

#include <dirent.h>
#include <fmt/core.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace fay::replay {
namespace {

std::vector<std::pair<std::string, uint8_t>> Dirents(const uint8_t* p, size_t n) {
  std::vector<std::pair<std::string, uint8_t>> out;
  ForEachDirent({p, n}, [&](std::string_view name, uint8_t type) { out.emplace_back(name, type); });
  std::sort(out.begin(), out.end());
  return out;
}

std::string Octal(uint32_t v) {
  return fmt::format("0{:o}", v);
}

}  // namespace

std::string CompareBytes(const CapturedBuffer& recorded, const uint8_t* live, size_t n) {
  if (recorded.not_captured) return {};
  // A buffer cut by --max-buffer is compared as far as it goes.
  size_t m = std::min(n, recorded.View().size());
  if (!recorded.truncated && recorded.View().size() != n) {
    return fmt::format("data: {} bytes recorded, {} returned", recorded.View().size(), n);
  }
  if (m == 0 || std::memcmp(recorded.View().data(), live, m) == 0) return {};
  size_t i = 0;
  while (i < m && recorded.View()[i] == live[i]) ++i;
  return fmt::format("data differs at byte {} (0x{:02x} recorded, 0x{:02x} returned)", i,
                     recorded.View()[i], live[i]);
}

std::string CompareDirents(const CapturedBuffer& recorded, const uint8_t* live, size_t n) {
  if (recorded.not_captured || recorded.truncated) return {};
  auto want = Dirents(recorded.View().data(), recorded.View().size());
  auto got = Dirents(live, n);
  if (want == got) return {};
  std::vector<std::string> missing, extra;
  for (const auto& e : want)
    if (!std::binary_search(got.begin(), got.end(), e)) missing.push_back(e.first);
  for (const auto& e : got)
    if (!std::binary_search(want.begin(), want.end(), e)) extra.push_back(e.first);
  std::string s = "directory entries differ:";
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    s += fmt::format(" {} {}", v.size(), what);
    for (size_t i = 0; i < v.size() && i < 5; ++i) s += fmt::format(" '{}'", v[i]);
    if (v.size() > 5) s += " ...";
  };
  list("missing", missing);
  list("extra", extra);
  return s;
}

namespace {

// "st_size 10 recorded, 12 returned; ..." for the fields that differ.
struct FieldDiffs {
  std::string s;
  void operator()(const char* name, uint64_t w, uint64_t g, bool octal = false) {
    if (w == g) return;
    s += fmt::format("{}{} {} recorded, {} returned", s.empty() ? "" : "; ", name,
                     octal ? Octal(static_cast<uint32_t>(w)) : std::to_string(w),
                     octal ? Octal(static_cast<uint32_t>(g)) : std::to_string(g));
  }
};

}  // namespace

void PreparedDiffs::Add(uint64_t dev, uint64_t ino, Diff d) {
  std::lock_guard<std::mutex> lock(mu_);
  Diff& have = diffs_[{dev, ino}];
  have.mode_bits |= d.mode_bits;
  have.owner = have.owner || d.owner;
}

std::optional<PreparedDiffs::Diff> PreparedDiffs::Find(uint64_t dev, uint64_t ino) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = diffs_.find({dev, ino});
  if (it == diffs_.end()) return std::nullopt;
  return it->second;
}

size_t PreparedDiffs::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return diffs_.size();
}

namespace {

// The stable fields of a stat result, from struct stat or struct statx.
struct StatFields {
  uint32_t mode = 0;
  uint64_t nlink = 0, uid = 0, gid = 0, size = 0;
  bool nlink_ok = true, uid_ok = true, gid_ok = true, size_ok = true, mode_ok = true;
};

std::string Compare(const StatFields& want, const StatFields& live, const char* p,
                    const PreparedDiffs::Diff* allow) {
  FieldDiffs field;
  uint32_t want_mode = allow ? want.mode & ~allow->mode_bits : want.mode;
  std::string name = p;
  if (want.mode_ok) field((name + "_mode").c_str(), want_mode, live.mode, true);
  bool dir = S_ISDIR(want.mode);
  if (!dir && want.nlink_ok) field((name + "_nlink").c_str(), want.nlink, live.nlink);
  if (!(allow && allow->owner)) {
    if (want.uid_ok) field((name + "_uid").c_str(), want.uid, live.uid);
    if (want.gid_ok) field((name + "_gid").c_str(), want.gid, live.gid);
  }
  if (!dir && !S_ISCHR(want.mode) && !S_ISBLK(want.mode) && want.size_ok) {
    field((name + "_size").c_str(), want.size, live.size);
  }
  return field.s;
}

// Compared as recorded; a difference on a file --prepare made so is compared again without
// what it did not restore.
std::string CompareFields(const StatFields& want, const StatFields& live, const char* p,
                          uint64_t dev, uint64_t ino, const PreparedDiffs* prepared,
                          bool* as_prepared) {
  std::string s = Compare(want, live, p, nullptr);
  if (s.empty() || !prepared) return s;
  std::optional<PreparedDiffs::Diff> d = prepared->Find(dev, ino);
  if (!d || !Compare(want, live, p, &*d).empty()) return s;
  if (as_prepared) *as_prepared = true;
  return {};
}

}  // namespace

std::string CompareStat(const CapturedBuffer& recorded, const struct stat& live,
                        const PreparedDiffs* prepared, bool* as_prepared) {
  if (recorded.not_captured || recorded.View().size() < sizeof(struct stat)) return {};
  struct stat want;
  std::memcpy(&want, recorded.View().data(), sizeof(want));
  auto fields = [](const struct stat& st) {
    StatFields f;
    f.mode = st.st_mode;
    f.nlink = st.st_nlink;
    f.uid = st.st_uid;
    f.gid = st.st_gid;
    f.size = static_cast<uint64_t>(st.st_size);
    return f;
  };
  return CompareFields(fields(want), fields(live), "st", live.st_dev, live.st_ino, prepared,
                       as_prepared);
}

std::string CompareStatx(const CapturedBuffer& recorded, const struct statx& live,
                         const PreparedDiffs* prepared, bool* as_prepared) {
  if (recorded.not_captured || recorded.View().size() < sizeof(struct statx)) return {};
  struct statx want;
  std::memcpy(&want, recorded.View().data(), sizeof(want));
  // Only what both the recording and the replay were asked for and got.
  uint32_t both = want.stx_mask & live.stx_mask;
  auto fields = [both](const struct statx& st) {
    StatFields f;
    f.mode = st.stx_mode;
    f.nlink = st.stx_nlink;
    f.uid = st.stx_uid;
    f.gid = st.stx_gid;
    f.size = st.stx_size;
    f.mode_ok = both & (STATX_TYPE | STATX_MODE);
    f.nlink_ok = both & STATX_NLINK;
    f.uid_ok = both & STATX_UID;
    f.gid_ok = both & STATX_GID;
    f.size_ok = both & STATX_SIZE;
    return f;
  };
  return CompareFields(fields(want), fields(live), "stx",
                       makedev(live.stx_dev_major, live.stx_dev_minor), live.stx_ino, prepared,
                       as_prepared);
}

}  // namespace fay::replay
