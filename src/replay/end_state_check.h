// The end-state check: what a recording left on disk, and whether a replay left the same.
//
// At the end of `fay record`, the paths the program changed (ChangedPath, from the same walk
// --prepare makes) are looked at on the live file system and noted in the trace (its end-state
// section, docs/FORMAT.md). `fay replay --verify` looks at the same paths inside its root after
// the replay and compares: a path of another kind, or whose content, size, mode, symlink target
// or extended attributes differ where the trace determines them, is a mismatch, listed with
// what differs. What the trace does not determine (the start of a file that existed before and
// was only appended to) is counted apart, never called identical.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay/prepare.h"
#include "replay/sandbox.h"
#include "trace/end_state.h"

namespace fay::replay {

// Bits of EndEntry::determined.
inline constexpr uint8_t kEndContent = 1;  // size and content hash
inline constexpr uint8_t kEndMode = 2;     // permission and set-id bits
inline constexpr uint8_t kEndXattrs = 4;   // extended attributes (security.* never)

// Looks at each path inside `sb` (Sandbox::Open("/") for the live file system). A path that
// cannot be looked at (a permission, an I/O error) is counted in `skipped`, not noted.
trace::EndState NoteEndState(const Sandbox& sb, const std::vector<ChangedPath>& paths);

// Gives each file the end state kept whole (one written through a shared mapping, which no
// call holds) that content, where the replay left a regular file at its path. The count.
uint64_t RestoreKept(const trace::EndState& recorded, const Sandbox& sb);

struct EndStateReport {
  uint64_t paths = 0;         // noted in the trace
  uint64_t identical = 0;     // every determined attribute equal
  uint64_t differ = 0;        // mismatches
  uint64_t undetermined = 0;  // equal where determined, with some attribute the trace does not fix
  std::vector<std::string> listed;  // "PATH: what differs", the first max_listed
};

EndStateReport CompareEndState(const trace::EndState& recorded, const Sandbox& sb,
                               size_t max_listed);

}  // namespace fay::replay
