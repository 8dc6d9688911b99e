#include "replay/verify.h"

#include <dirent.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

namespace fay::replay {
namespace {

// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name[].
constexpr size_t kDirentHeader = 19;

std::vector<std::pair<std::string, uint8_t>> Dirents(const uint8_t* p, size_t n) {
  std::vector<std::pair<std::string, uint8_t>> out;
  size_t at = 0;
  while (at + kDirentHeader <= n) {
    uint16_t reclen;
    std::memcpy(&reclen, p + at + 16, 2);
    if (reclen < kDirentHeader || at + reclen > n) break;
    const char* name = reinterpret_cast<const char*>(p + at + kDirentHeader);
    size_t len = strnlen(name, reclen - kDirentHeader);
    out.emplace_back(std::string(name, len), p[at + 18]);
    at += reclen;
  }
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

std::string CompareStat(const CapturedBuffer& recorded, const struct stat& live) {
  if (recorded.not_captured || recorded.View().size() < sizeof(struct stat)) return {};
  struct stat want;
  std::memcpy(&want, recorded.View().data(), sizeof(want));
  FieldDiffs field;
  field("st_mode", want.st_mode, live.st_mode, true);
  bool dir = S_ISDIR(want.st_mode);
  if (!dir) field("st_nlink", want.st_nlink, live.st_nlink);
  field("st_uid", want.st_uid, live.st_uid);
  field("st_gid", want.st_gid, live.st_gid);
  if (!dir && !S_ISCHR(want.st_mode) && !S_ISBLK(want.st_mode)) {
    field("st_size", static_cast<uint64_t>(want.st_size), static_cast<uint64_t>(live.st_size));
  }
  return field.s;
}

std::string CompareStatx(const CapturedBuffer& recorded, const struct statx& live) {
  if (recorded.not_captured || recorded.View().size() < sizeof(struct statx)) return {};
  struct statx want;
  std::memcpy(&want, recorded.View().data(), sizeof(want));
  FieldDiffs field;
  // Only what both the recording and the replay were asked for and got.
  uint32_t both = want.stx_mask & live.stx_mask;
  if (both & (STATX_TYPE | STATX_MODE)) field("stx_mode", want.stx_mode, live.stx_mode, true);
  bool dir = S_ISDIR(want.stx_mode);
  if ((both & STATX_NLINK) && !dir) field("stx_nlink", want.stx_nlink, live.stx_nlink);
  if (both & STATX_UID) field("stx_uid", want.stx_uid, live.stx_uid);
  if (both & STATX_GID) field("stx_gid", want.stx_gid, live.stx_gid);
  if ((both & STATX_SIZE) && !dir && !S_ISCHR(want.stx_mode) && !S_ISBLK(want.stx_mode)) {
    field("stx_size", want.stx_size, live.stx_size);
  }
  return field.s;
}

}  // namespace fay::replay
