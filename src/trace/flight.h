// The flight recorder behind `fay record --flight SIZE`: the writer's finished chunks go into a
// bounded ring in memory instead of a file, and each dump writes what the ring holds as a
// complete `.fay` (header, the chunks, a footer, a trailer) that every command reads.
//
// Two rules keep every dump readable:
// - Blobs before use. A lane stores a buffer once and later events point at it, so evicting a
//   blob chunk could orphan events that stay. Chunks are therefore tagged with a *group*: a lane
//   forgets the blobs it stored whenever it moves to a newer group (only at an events chunk's
//   end), so an events chunk references blobs of its own group only, and eviction removes whole
//   groups, oldest first.
// - Bounded memory. A group closes after an eighth of SIZE, so the ring holds between about
//   seven eighths of SIZE and SIZE of compressed chunks (plus each lane's chunk being built).
// - The moments before the trigger stay. A request has a time (the matching call's, the
//   signal's arrival). Until its dump is written, chunks of calls after that time, and any chunk
//   while a dump is being written, never evict: those that do not fit are dropped, with the
//   rest of their group. Chunks of calls before it still make room as usual. The dump is written
//   on a thread of its own, so the recorder does not stall, from the ring's own chunks, so it
//   costs no second SIZE.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "schema/syscall_event.h"
#include "trace/bytes.h"
#include "trace/footer.h"
#include "trace/format.h"

namespace fay::trace {

// One finished chunk, as it would have been written: header fields and stored payload.
struct FlightChunk {
  ChunkHeader header;
  std::shared_ptr<const Bytes> payload;
  std::variant<std::monostate, EventChunkIndex, BlobChunkIndex> index;
  uint64_t group = 0;
  uint32_t syscalls = 0;  // events chunks: the syscall records in it
  // The most its entry adds to a dump's footer: counted against the ring's size with the chunk,
  // so that a dump, footer and all, is never larger than the ring.
  uint64_t footer_bytes = 0;

  uint64_t DumpBytes() const { return kChunkHeaderSize + payload->size() + footer_bytes; }
};

// What a dump wrote, for the summary line.
struct FlightDumpResult {
  std::string path;
  std::string reason;
  uint64_t bytes = 0;
  uint64_t syscalls = 0;
  uint64_t from_ns = 0, to_ns = 0;  // the window the dump covers (CLOCK_MONOTONIC)
  std::string error;                // non-empty: this dump failed
};

// Shared by `fay record` (which asks for dumps, from any thread or a signal's watcher) and the
// trace writer (whose lanes finish their chunks before a dump is written).
class FlightControl {
 public:
  // `output`: the first dump's path; the n-th is numbered before the extension (a.fay, a.2.fay).
  FlightControl(uint64_t ring_bytes, std::string output, uint32_t max_dumps);

  uint64_t ring_bytes() const { return ring_bytes_; }
  // Whether the end of the recording writes a dump too (`--dump-on exit`).
  void set_dump_on_exit(bool on) { dump_on_exit_ = on; }
  bool dump_on_exit() const { return dump_on_exit_; }
  // Asks for a dump (thread-safe). A request that arrives while another is still to be
  // written is folded into it. False once max_dumps dumps were asked for, unless `always`
  // (the dump at exit).
  // `at_ns` (CLOCK_MONOTONIC): the moment the dump is about; 0 is now.
  bool Request(const std::string& reason, bool always = false, uint64_t at_ns = 0);
  uint64_t requested() const { return requested_.load(std::memory_order_acquire); }
  // The moment of the earliest request no dump has taken yet, or 0.
  uint64_t pending_since_ns() const { return pending_since_ns_.load(std::memory_order_acquire); }
  // When the last request came (CLOCK_MONOTONIC ns). Lanes write a dump only kSettleNs after
  // it: a call made just before a signal may still sit in a probe's staging area or the ring,
  // and the dump must hold it.
  uint64_t last_request_ns() const { return last_request_ns_.load(std::memory_order_acquire); }
  static constexpr uint64_t kSettleNs = 100'000'000;

  // The writer's side: the reasons of requests up to `upto` not yet taken, and the next path.
  std::vector<std::string> TakeReasons(uint64_t upto);
  std::string NextPath();
  void AddResult(FlightDumpResult r);
  std::vector<FlightDumpResult> results() const;
  uint64_t refused() const;  // requests past max_dumps

 private:
  const uint64_t ring_bytes_;
  const std::string output_;
  const uint32_t max_dumps_;
  bool dump_on_exit_ = false;
  std::atomic<uint64_t> requested_{0};
  std::atomic<uint64_t> last_request_ns_{0};
  std::atomic<uint64_t> pending_since_ns_{0};
  mutable std::mutex mu_;
  std::vector<std::pair<uint64_t, std::string>> reasons_;  // (request number, reason)
  uint64_t taken_ = 0;                                     // requests whose reasons a dump took
  uint32_t paths_ = 0;
  uint64_t refused_ = 0;
  std::vector<FlightDumpResult> results_;
};

// The ring of finished chunks. Thread-safe.
class FlightRing {
 public:
  explicit FlightRing(uint64_t capacity) : capacity_(capacity) {}
  // What every dump adds besides the chunks (preamble, header chunk, footer chunk's header,
  // trailer): kept free of chunks.
  void SetReserve(uint64_t bytes);

  // The group a lane adopts when it closes an events chunk.
  uint64_t group() const;
  // Takes a chunk of a lane's `group`, first evicting whole groups, oldest first, until it fits.
  // A chunk of a group evicted or cut short is dropped at once. `keep` (it came after a pending
  // trigger, or a dump is being written): nothing is evicted for it; if it does not fit it is
  // dropped, and its group is cut short.
  void Add(FlightChunk c, bool keep = false);
  // The chunks held now, in the order they were added.
  std::vector<FlightChunk> Snapshot() const;

  struct Stats {
    uint64_t bytes = 0;             // held now, as they would be in a dump
    uint64_t peak_bytes = 0;        // most ever held
    uint64_t evicted_chunks = 0;    // dropped, oldest first
    uint64_t evicted_syscalls = 0;  // syscall records in them
    uint64_t dropped_syscalls = 0;  // of which, dropped by `keep`: recorded after a trigger
  };
  Stats stats() const;

 private:
  void EvictOldestGroup();                     // with mu_ held
  void Drop(const FlightChunk& c, bool kept);  // with mu_ held: counts it, cuts its group
  uint64_t Room() const { return capacity_ > reserve_ ? capacity_ - reserve_ : 0; }

  const uint64_t capacity_;
  uint64_t reserve_ = 0;
  mutable std::mutex mu_;
  std::deque<FlightChunk> chunks_;
  uint64_t group_ = 1;
  uint64_t group_bytes_ = 0;
  uint64_t evicted_upto_ = 0;  // every group up to this one is gone
  std::set<uint64_t> cut_;     // later groups that lost a chunk: the rest of each is dropped
  Stats stats_;
};

// Writes chunks (from FlightRing::Snapshot) as a complete trace at `path`: through a temporary
// file renamed into place, so a reader never sees half a dump. `info` carries the flight fields.
// Fills *bytes with the file's size.
Status WriteFlightDump(const std::string& path, const RecordingInfo& info,
                       const std::string& writer_name, const std::vector<FlightChunk>& chunks,
                       uint64_t* bytes);

}  // namespace fay::trace
