// What `fay replay --root DIR` accepts. The trace's creates, unlinks, renames and truncations run
// for real inside DIR, so DIR must be a directory nothing else needs:
//   - never `/` (however it is spelt: `//`, `/./`, a symlink or bind mount of it), nor the
//     directories the running system or the user's files live in: /bin, /boot, /dev, /etc,
//     /home, /lib*, /opt, /proc, /root, /run, /sbin, /srv, /sys, /usr, /var, the user's home
//     and every directory above it. They are compared by device and inode, so any path that
//     resolves to one of them is refused, and no flag allows them;
//   - otherwise an empty directory, or one holding kRootMarker: fay replay writes it at the
//     top of every root it replays into, so a second replay into the same tree is accepted;
//   - any other non-empty directory only with --allow-nonempty-root (and then it is not marked:
//     the next replay needs the flag again).
#pragma once

#include <string>

#include "common/status.h"
#include "replay/sandbox.h"

namespace fay::replay {

// The file at the top of a tree fay replay made.
inline constexpr const char* kRootMarker = ".fay-replay-root";

struct RootVerdict {
  bool mark = false;   // empty, or marked already: write (or keep) the marker
  bool empty = false;  // nothing in it: what it will hold, --prepare and the replay make
};

// `given` is the --root argument as the user typed it (for the messages).
Expected<RootVerdict> CheckRoot(const Sandbox& sandbox, const std::string& given,
                                bool allow_nonempty);

// Writes kRootMarker at the top of the root (kept if it is there).
Status MarkRoot(const Sandbox& sandbox);

}  // namespace fay::replay
