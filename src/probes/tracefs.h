// tracefs: where it is mounted, mounting it when fay may, event formats and event listings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace fay {

inline constexpr const char* kTracefsPath = "/sys/kernel/tracing";
inline constexpr const char* kTracefsMountFix = "sudo mount -t tracefs nodev /sys/kernel/tracing";

// The mount point of tracefs if it is mounted (/sys/kernel/tracing, or the debugfs compatibility
// path /sys/kernel/debug/tracing); nullopt otherwise.
std::optional<std::string> FindTracefs();

// Makes sure tracefs is mounted: mounts it at /sys/kernel/tracing when running as root,
// otherwise kPermission carrying the exact command to run.
Status EnsureTracefs();

// EnsureTracefs() and then the mount point.
Expected<std::string> TracefsRoot();

// One `field:` line of an event format file.
struct FormatField {
  std::string name;    // "filename", "prev_comm"
  std::string c_type;  // "const char *", "char", "__data_loc char[]" (array suffix removed)
  int offset = 0;
  int size = 0;
  bool is_signed = false;
  bool is_data_loc = false;  // `__data_loc TYPE[] name`: a u32 (len << 16 | offset) descriptor
  // -1 when not an array; otherwise the element count ("char prev_comm[16]" -> 16, "[]" -> 0).
  int array_len = -1;

  bool is_common() const { return name.rfind("common_", 0) == 0; }
};

struct EventFormat {
  std::string name;  // "sys_enter_openat"
  int id = -1;
  std::vector<FormatField> fields;  // in file order, common_* fields included
};

// Parses the text of an events/CATEGORY/NAME/format file.
Expected<EventFormat> ParseEventFormat(std::string_view text);

// Reads and parses events/CATEGORY/NAME/format below the tracefs root.
Expected<EventFormat> ReadEventFormat(const std::string& root, const std::string& category,
                                      const std::string& name);

// Event categories (subsystems) below root/events, sorted.
Expected<std::vector<std::string>> ListEventCategories(const std::string& root);
// Event names within one category, sorted.
Expected<std::vector<std::string>> ListEvents(const std::string& root, const std::string& category);

}  // namespace fay
