#include "probes/tracefs.h"

#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>

#include "common/strings.h"
#include "probes/read_file.h"

namespace fay {
namespace {

constexpr long kTracefsMagic = 0x74726163;  // TRACEFS_MAGIC from linux/magic.h

bool IsTracefs(const char* path) {
  struct statfs st;
  return ::statfs(path, &st) == 0 && st.f_type == kTracefsMagic;
}

bool ParseInt(std::string_view s, int* out) {
  s = Trim(s);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// "field:const char * filename;\toffset:24;\tsize:8;\tsigned:0;"
Expected<FormatField> ParseFieldLine(std::string_view line) {
  FormatField f;
  bool have_offset = false, have_size = false;
  size_t pos = 0;
  while (pos < line.size()) {
    size_t semi = line.find(';', pos);
    if (semi == std::string_view::npos) semi = line.size();
    std::string_view part = Trim(line.substr(pos, semi - pos));
    pos = semi + 1;
    if (part.empty()) continue;
    size_t colon = part.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = part.substr(0, colon);
    std::string_view value = Trim(part.substr(colon + 1));
    if (key == "field" || key == "field special") {
      size_t sp = value.find_last_of(" \t");
      if (sp == std::string_view::npos) {
        return Error(Code::kIo, "malformed field declaration '" + std::string(value) + "'");
      }
      std::string_view type = Trim(value.substr(0, sp));
      std::string_view name = value.substr(sp + 1);
      size_t bracket = name.find('[');
      if (bracket != std::string_view::npos) {
        std::string_view len = name.substr(bracket + 1);
        if (!len.empty() && len.back() == ']') len.remove_suffix(1);
        int n = 0;
        f.array_len = ParseInt(len, &n) ? n : 0;
        name = name.substr(0, bracket);
      }
      if (type.rfind("__data_loc", 0) == 0) {
        f.is_data_loc = true;
        f.array_len = 0;
      }
      f.c_type = std::string(type);
      f.name = std::string(name);
    } else if (key == "offset") {
      have_offset = ParseInt(value, &f.offset);
    } else if (key == "size") {
      have_size = ParseInt(value, &f.size);
    } else if (key == "signed") {
      int s = 0;
      if (ParseInt(value, &s)) f.is_signed = s != 0;
    }
  }
  if (f.name.empty() || !have_offset || !have_size) {
    return Error(Code::kIo, "malformed format line '" + std::string(Trim(line)) + "'");
  }
  return f;
}

Expected<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return ErrnoError("cannot list " + path);
  std::vector<std::string> out;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      std::string full = path + "/" + e->d_name;
      is_dir = ::stat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) out.emplace_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<std::string> FindTracefs() {
  for (const char* path : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    if (IsTracefs(path)) return std::string(path);
  }
  return std::nullopt;
}

Status EnsureTracefs() {
  if (FindTracefs()) return Status::Ok();
  struct stat st;
  if (::stat(kTracefsPath, &st) != 0) {
    return Error(Code::kUnsupported, std::string("tracefs is not available: ") + kTracefsPath +
                                         " does not exist (kernel built without CONFIG_TRACING?)");
  }
  if (::geteuid() != 0) {
    return Error(Code::kPermission,
                 std::string("tracefs is not mounted and mounting it needs root; run:\n  ") +
                     kTracefsMountFix);
  }
  if (::mount("nodev", kTracefsPath, "tracefs", 0, nullptr) != 0) {
    int err = errno;
    return Error(err == EPERM ? Code::kPermission : Code::kIo,
                 std::string("cannot mount tracefs at ") + kTracefsPath + ": " +
                     std::strerror(err) + "; run:\n  " + kTracefsMountFix);
  }
  return Status::Ok();
}

Expected<std::string> TracefsRoot() {
  FAY_RETURN_IF_ERROR(EnsureTracefs());
  auto root = FindTracefs();
  if (!root) return Error(Code::kInternal, "tracefs mounted but not found");
  return *root;
}

Expected<EventFormat> ParseEventFormat(std::string_view text) {
  EventFormat ev;
  bool have_id = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    std::string_view t = Trim(line);
    if (t.rfind("name:", 0) == 0) {
      ev.name = std::string(Trim(t.substr(5)));
    } else if (t.rfind("ID:", 0) == 0) {
      have_id = ParseInt(t.substr(3), &ev.id);
    } else if (t.rfind("field:", 0) == 0 || t.rfind("field special:", 0) == 0) {
      FAY_ASSIGN_OR_RETURN(FormatField f, ParseFieldLine(t));
      ev.fields.push_back(std::move(f));
    } else if (t.rfind("print fmt:", 0) == 0) {
      break;
    }
  }
  if (!have_id) return Error(Code::kIo, "event format has no ID line");
  return ev;
}

Expected<EventFormat> ReadEventFormat(const std::string& root, const std::string& category,
                                      const std::string& name) {
  // Formats do not change while fay runs, and a query may name a probe twice (overlapping
  // globs) or compile twice: each file is read and parsed once per process.
  static std::mutex mu;
  static std::map<std::string, EventFormat> cache;
  std::string path = root + "/events/" + category + "/" + name + "/format";
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(path); it != cache.end()) return it->second;
  }
  FAY_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  auto ev = ParseEventFormat(text);
  if (!ev.ok()) return Error(Code::kIo, path + ": " + ev.status().message());
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(path, *ev);
  return ev;
}

Expected<std::vector<std::string>> ListEventCategories(const std::string& root) {
  return ListDir(root + "/events");
}

Expected<std::vector<std::string>> ListEvents(const std::string& root,
                                              const std::string& category) {
  return ListDir(root + "/events/" + category);
}

}  // namespace fay
