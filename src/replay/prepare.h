// --prepare: rebuilds, inside the root, the part of the recorded machine's file tree that the
// trace touched and that existed before the recording started, so that a trace recorded
// elsewhere replays against the same starting state.
//
// The trace is walked once in recorded start order, simulating working directories and fd
// tables. The first thing the trace says about a path decides whether it pre-existed:
//   pre-existing: opened without O_CREAT, found by stat/access/readlink, removed, renamed away,
//                 chmod'ed; listed by getdents64 in a directory; an ancestor of any path the
//                 trace found or created (not of one that failed with ENOENT); an O_CREAT
//                 open (without O_EXCL) whose file returned data before the trace wrote to it;
//   absent:       ENOENT, or created by the trace (mkdir, O_CREAT, symlink, link, rename target).
// What a pre-existing file held comes from the trace, up to its first modification: its type,
// mode, owner and size from stat results, its bytes from reads (at the offsets they were read
// from; the rest is a hole), a symlink's target from readlink. Paths under /proc, /sys and /dev
// are not created: replay emulates calls on them. A file recorded with st_nlink > 1 gets the
// missing links under /.fay-prepare-links in the root, so its link count verifies. The root's
// file system is synced afterwards, so write-back of the prepared files does not compete with
// the replay that follows.
//
// A trace may come from someone else, so what it says is not all restored: set-user-ID and
// set-group-ID bits are stripped (and the sticky bit of anything but a directory), the recorded
// owners are given only with PrepareOptions::keep_owners (an unprivileged replayer that may not
// give them carries on without), and a character or block device is never made. A FIFO or
// socket the trace found is made a regular file, as it always was. PreparedDiffs (verify.h)
// remembers each file made so, for --verify.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "replay/sandbox.h"
#include "replay/schedule.h"
#include "replay/verify.h"
#include "schema/syscall_event.h"
#include "trace/end_state.h"

namespace fay::replay {

struct PrepareStats {
  uint64_t dirs = 0;
  uint64_t files = 0;
  uint64_t symlinks = 0;
  uint64_t bytes = 0;            // content bytes written (known from reads)
  uint64_t existing = 0;         // already present in the root, left as they were
  uint64_t extra_links = 0;      // hard links made under /.fay-prepare-links for st_nlink
  uint64_t setid_stripped = 0;   // made without the set-id (or sticky) bits recorded
  uint64_t devices_skipped = 0;  // character and block devices not made
  uint64_t owners_not_kept = 0;  // made with an owner other than the recorded one
  // keep_owners, and the chown was refused (not root): the first error, and how many.
  uint64_t chown_refused = 0;
  std::string chown_error;
};

struct PrepareOptions {
  bool keep_owners = false;  // give files their recorded owner and group (chown)
};

Expected<PrepareStats> Prepare(const Schedule& schedule, const Sandbox& sandbox,
                               const PrepareOptions& options = {}, PreparedDiffs* diffs = nullptr);

// A path the trace changed (wrote, created, removed, renamed, chmod'ed, set xattrs on), for the
// end-state check: which of its final attributes the trace alone determines. The content of a
// file that existed before and was only appended to is not (the trace never saw its start),
// nor the mode of one it never created or chmod'ed.
struct ChangedPath {
  std::string path;
  bool content_known = false;
  bool mode_known = false;
  bool xattrs_known = false;  // created by the trace, or its xattrs set or removed by it
  bool mapped = false;        // mapped shared and writable: bytes may have come through memory
};

// The same walk over a recording as it happens (`fay record`): calls are fed as the recorder
// hands them to the trace, from any of its threads, and at the end Changed() says which paths
// the program changed, for the trace's end state. Only the calls Wants() names need be fed.
class ChangeTracker {
 public:
  explicit ChangeTracker(const std::string& cwd);
  ~ChangeTracker();
  static bool Wants(int nr);
  void Observe(const SyscallEvent& ev);
  std::vector<ChangedPath> Changed() const;
  // Process pid's fd as the calls fed so far leave it: its absolute path and offset (reads and
  // seeks are among what Wants() names for this). False for an fd it never saw opened.
  bool FileOf(int32_t pid, int fd, std::string* path, uint64_t* offset) const;
  // The symlinks the calls went through or listed (lstat'ed when first met; their targets read
  // now, for those still the same link), sorted by path: for the trace, so --prepare can make
  // them. Call once the recording is over: readlink sets a link's access time.
  // At most max_bytes of paths and targets: the end state's chunk has a bound (FORMAT.md 4.1).
  std::vector<trace::MetSymlink> MetSymlinks(size_t max_bytes = 512 << 10) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The same in two steps, so the walk can run while the trace loads (see CallStream).
class Preparer {
 public:
  Preparer();
  ~Preparer();
  // Before the walk: while the trace streams in (CallStream::streaming), allow through `gate`
  // the calls a replay may run before Apply (see Impl::MayRunEarly), making in the root the
  // directories above them. The first call that may not stops the allowing.
  void StreamTo(const Sandbox& sandbox, CallGate* gate);
  // Before Walk: the symlinks the recorder met (the trace's end state), which the walk
  // resolves paths through and --prepare makes as symlinks.
  void SetMetSymlinks(const std::vector<trace::MetSymlink>& links);
  // Simulates the calls in recorded start order; called again, starts from scratch.
  void Walk(CallStream& calls);
  // After Walk: the paths the trace changed, sorted.
  std::vector<ChangedPath> Changed() const;
  // Creates in the root what the walk found pre-existing (the schedule walked: a lazy one's
  // file contents are fetched from its trace). What was not restored as recorded goes into
  // *diffs (if given), which is then Ready().
  Expected<PrepareStats> Apply(const Sandbox& sandbox, const Schedule& schedule,
                               const PrepareOptions& options = {}, PreparedDiffs* diffs = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fay::replay
