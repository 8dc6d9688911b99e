// The end state section of a .fay trace (docs/FORMAT.md 4.7, minor 4): the final state of every
// path the recorded program changed, noted once the recording is over, so that
// `fay replay --verify` can compare the replayed tree against it. This file holds its types, its
// payload encoding, and the in-place addition of the section to a complete trace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trace/format.h"

namespace fay::trace {

enum class EndKind : uint8_t { kAbsent = 0, kFile = 1, kDir = 2, kSymlink = 3, kOther = 4 };

std::string_view EndKindName(EndKind k);

struct EndXattr {
  std::string name;
  Hash128 value_hash;  // HashBlob (XXH3-128) of the value, as the blob store hashes buffers
  uint64_t size = 0;   // of the value
  bool operator==(const EndXattr&) const = default;
};

// A field the kind does not carry stays empty or zero: it is not stored, and CheckEndState
// refuses it, so that an entry reads back exactly as it was written.
struct EndEntry {
  std::string path;  // absolute, as the recording machine named it
  EndKind kind = EndKind::kAbsent;
  uint32_t mode = 0;             // every kind but kAbsent: st_mode & 07777
  uint64_t size = 0;             // kFile: st_size
  Hash128 content{};             // kFile: HashBlob (XXH3-128) of the whole content
  std::string target;            // kSymlink: readlink
  std::vector<EndXattr> xattrs;  // every kind but kAbsent: sorted by name; empty when none or
                                 // not readable
  // Which attributes the recording alone fixes, so a replay must reproduce them: bit 0 size and
  // content, bit 1 mode, bit 2 xattrs (replay/end_state_check.h). The rest were noted as found.
  uint8_t determined = 0;
  // kFile, minor 5: the whole content, kept for a file the program wrote through a shared
  // mapping (no call holds those bytes), so a replay can give the file what it held. At most
  // kMaxKeptContent bytes, equal to size; absent (has_kept false) otherwise.
  bool has_kept = false;
  std::string kept;
  bool operator==(const EndEntry&) const = default;
};

// The most content an entry keeps: an entry stays within kMaxEndEntryRaw.
inline constexpr uint64_t kMaxKeptContent = 512 << 10;

// A symlink the recorded program met (resolved through, listed, stat'ed) before changing it:
// what it pointed to then, noted when the recorder first met it. --prepare makes it as a
// symlink; a listing says only DT_LNK and a followed stat says nothing of it.
struct MetSymlink {
  std::string path;    // absolute, as the recording machine named it
  std::string target;  // readlink, non-empty
  bool operator==(const MetSymlink&) const = default;
};

struct EndState {
  std::vector<EndEntry> entries;     // sorted by path (bytes, unsigned), each path once
  uint64_t skipped = 0;              // changed paths not noted (e.g. unreadable), counted
  std::vector<MetSymlink> symlinks;  // minor 5: sorted by path, each once
  bool operator==(const EndState&) const = default;
};

// The format minor that added the section, and the one that added its met symlinks.
inline constexpr uint16_t kEndStateMinor = 4;
inline constexpr uint16_t kMetSymlinksMinor = 5;

// Bounds a reader holds an end state chunk's header to before decompressing (FORMAT.md 4.1): a
// Linux path or link target is at most 4 KiB and a file's xattr names at most 64 KiB, so one
// entry encodes to well under kMaxEndEntryRaw; the smallest entry ("/", absent) takes 4 bytes.
inline constexpr uint64_t kMaxEndEntryRaw = 1 << 20;
inline constexpr uint64_t kMinEndEntryRaw = 4;

// OK when `s` is what the encoding can carry and read back the same: absolute paths without NUL,
// strictly ascending; known kinds; modes within 07777; xattr names non-empty and strictly
// ascending; no field set that the entry's kind does not carry.
Status CheckEndState(const EndState& s);

// The raw chunk payload (varints, like the footer). Encodes `s` as given: CheckEndState first.
std::string EncodeEndState(const EndState& s);
// Refuses anything malformed or out of order, naming the entry and payload byte. Every count is
// held to the bytes left before anything is allocated for it.
Expected<EndState> DecodeEndState(std::string_view payload);

// Adds the section to a complete trace (one with a footer and trailer), in place: the end state
// chunk goes where the footer was, and the footer (its sequence number one higher) and a new
// trailer follow it. Refuses a trace without a footer, a damaged one, one that already has an
// end state (readable or not), and a state CheckEndState refuses.
//
// A file of an earlier minor has its preamble's minor raised to kEndStateMinor first: it then
// holds a minor 4 addition, and a file of minor 4 without the section is still a valid one.
//
// Crash safety: the file is first cut back to the old footer's offset and synced (a footer-less
// trace, which reads as truncated after its last data chunk, nothing recorded lost); then the
// new chunks are written there and synced. A crash in the second step leaves a footer-less trace
// too, its end state readable when its chunk is whole. A write that fails (a full disk) puts the
// old footer and trailer back. Not for a trace another process is writing.
Status AppendEndState(const std::string& trace_path, const EndState& s);

}  // namespace fay::trace
