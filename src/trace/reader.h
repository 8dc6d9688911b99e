// Reads a .fay trace: whole-file iteration in file order, or seeking by time range and thread
// through the footer index. A file without a footer (cut short by a crash or a full disk) is
// walked chunk by chunk and read up to its last whole chunk.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "schema/syscall_event.h"
#include "trace/bytes.h"
#include "trace/end_state.h"
#include "trace/file_io.h"
#include "trace/format.h"
#include "trace/zstd_codec.h"

namespace fay::trace {

// One chunk the reader knows of: from the footer, or from walking the chunk headers.
struct DecodeSinks;  // trace/event_codec.h
struct BlobEntry;    // trace/event_codec.h

struct ChunkRef {
  uint64_t offset = 0;  // of the chunk header
  ChunkType type = ChunkType::kEvents;
  uint32_t seq = 0;
  uint32_t stored_length = 0;
  uint32_t raw_length = 0;
  uint32_t count = 0;  // records (events chunk), blobs (blob chunk) or entries (end state)
  // From the footer (indexed == true) for events chunks; unknown when walking.
  bool indexed = false;
  uint64_t first_ns = 0;
  uint64_t last_ns = 0;
  std::vector<int32_t> tids;
  uint16_t stream = 0;  // events chunk: from the footer, or from its header when walking
};

// Which events ForEach delivers. A syscall matches when [entry, exit] overlaps [from, to].
struct ReadFilter {
  uint64_t from_ns = 0;
  uint64_t to_ns = std::numeric_limits<uint64_t>::max();
  std::vector<int32_t> tids;  // empty: every thread
  // Parallel readers split the events chunks: the k-th events chunk in file order is read only
  // when k % shards == shard. Each chunk decodes on its own, so any split gives every event once.
  uint32_t shard = 0;
  uint32_t shards = 1;

  bool Matches(const SyscallEvent& ev) const;
  bool Matches(const ProcessEvent& ev) const;
  bool MayMatch(const ChunkRef& chunk) const;  // false only when the index rules the chunk out
};

struct ReaderStats {
  // Known at Open, over every chunk found.
  uint64_t file_bytes = 0;
  uint64_t chunks = 0;  // header and footer included
  uint64_t event_chunks = 0;
  uint64_t blob_chunks = 0;
  uint64_t bytes_raw = 0;     // chunk payloads before compression
  uint64_t bytes_stored = 0;  // chunk payloads as stored
  // Distinct blobs known: all of them with a footer, those read so far without.
  uint64_t blobs = 0;
  uint64_t blob_bytes = 0;
  // From the last ForEach.
  uint64_t syscall_events = 0;
  uint64_t process_events = 0;
  uint64_t lost_events = 0;
  std::map<int32_t, uint64_t> lost_by_cpu;  // -1: loss records that name no CPU
  uint64_t bytes_captured = 0;              // sum of the delivered buffers' byte counts
  uint64_t blob_bytes_referenced = 0;       // the part of bytes_captured stored as blob references
  uint64_t chunks_skipped = 0;              // events chunks the index ruled out
};

// The exit status of every command that reads a trace and could not read all of it: truncated,
// damaged or structurally invalid (docs/FORMAT.md 7.4). The output covers the part before.
inline constexpr int kIncompleteExit = 1;

// Bounds on what a chunk may claim (docs/FORMAT.md 4.1): an events chunk's raw payload, in all
// and per record. The reference writer closes an events chunk at 64 KiB and stores at most 32
// bytes of a buffer inline, so its records take a few KiB at most.
inline constexpr uint64_t kMaxEventsChunkRaw = 16 << 20;
inline constexpr uint64_t kMaxRecordRaw = 1 << 20;
// One blob: the kernel moves at most 0x7ffff000 bytes in one call.
inline constexpr uint64_t kMaxBlobSize = 0x7ffff000;
// zstd cannot expand more: its densest block (RLE) turns 4 bytes into 128 KiB.
inline constexpr uint64_t kMaxZstdRatio = 32768;

class Reader {
 public:
  using SyscallFn = std::function<void(const SyscallEvent&)>;
  using ProcessFn = std::function<void(const ProcessEvent&)>;
  // Owns the event it is handed: it may move the buffers out.
  using TakingSyscallFn = std::function<void(SyscallEvent&&)>;

  // Fails when the file is not a fay trace, has a newer major version, or its header chunk is
  // unreadable. Damage further on is reported by ForEach, after the events before it.
  static Expected<Reader> Open(const std::string& path);

  Reader(Reader&&) noexcept = default;
  Reader& operator=(Reader&&) noexcept = default;

  const RecordingInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  uint16_t version_major() const { return major_; }
  uint16_t version_minor() const { return minor_; }
  const std::string& writer() const { return writer_; }
  const std::vector<ChunkRef>& chunks() const { return chunks_; }

  bool has_footer() const { return has_footer_; }
  // No footer and the data ends at (or inside) a chunk: the writer never finished.
  bool truncated() const { return truncated_; }
  // Offset and sequence number of the last whole chunk (the header chunk at worst).
  uint64_t last_chunk_offset() const { return last_chunk_offset_; }
  uint32_t last_chunk_seq() const { return last_chunk_seq_; }
  // "truncated after chunk N at offset X (...)", or empty.
  std::string TruncationMessage() const;
  // What every command prints about a truncated trace, the same words everywhere: "PATH is
  // truncated after chunk N at offset X (...); everything before it was read". Empty when the
  // trace is not truncated. Commands exit with kIncompleteExit after it (docs/FORMAT.md 7.4).
  std::string TruncationNotice() const;
  // Damage found while walking the chunk headers at Open; ForEach returns it after the events
  // before it.
  const Status& damage() const { return damage_; }

  // The end state section (docs/FORMAT.md 4.7), read at Open: the final state of every path the
  // recording changed. Empty when the trace has none (every trace before minor 4, and a later
  // one nobody added it to) or when its chunk does not read back; then end_state_error() says
  // why. A bad end state does not touch the events, so it is not damage(): a caller that needs
  // the section (replay --verify, info) checks end_state_error() itself.
  const std::optional<EndState>& end_state() const { return end_state_; }
  const std::string& end_state_error() const { return end_state_error_; }

  // Calls back in file order; stops at the first unreadable chunk and returns its error (the
  // events before it were delivered). A truncated file is not an error: see truncated().
  Status ForEach(const SyscallFn& on_syscall, const ProcessFn& on_process = {});
  Status ForEach(const ReadFilter& filter, const SyscallFn& on_syscall,
                 const ProcessFn& on_process = {});
  // As ForEach, but each event is the callback's to keep: a caller that stores every event
  // (the replay schedule) moves its buffers instead of copying every captured byte once more.
  Status ForEachTaking(const ReadFilter& filter, const TakingSyscallFn& on_syscall,
                       const ProcessFn& on_process = {});

  ReaderStats stats() const { return stats_; }

  using BufferPredicate = std::function<bool(const SyscallEvent&, const CapturedBuffer&)>;
  // From now on, buffers stored as blobs come back in CapturedBuffer::shared, pointing into
  // the decoded blob chunk (which they keep alive) instead of a copy each in `bytes`: a caller
  // keeping the whole trace (the replay) holds each distinct content once.
  void ShareBlobs(bool on) { share_blobs_ = on; }
  // From now on, buffers stored as blobs are not read: they come back as CapturedBuffer::stored
  // references (their size and hash), checked against the blob index but with no byte read.
  // For callers that look only at sizes (fay info): a trace's bytes are mostly its blobs.
  // Damage inside a blob chunk then goes unseen.
  void SkipBlobs(bool on) {
    leave_unread_ =
        on ? [](const SyscallEvent&, const CapturedBuffer&) { return true; } : BufferPredicate();
  }
  // As SkipBlobs, for the buffers `which` picks (none once reset): their bytes are fetched
  // later, when needed, with FetchShared.
  void LeaveUnread(BufferPredicate which) { leave_unread_ = std::move(which); }
  // The bytes of a buffer left unread, as ShareBlobs would have given them.
  Status FetchShared(const StoredBlob& ref, CapturedBuffer::SharedBytes* out);

 private:
  struct BlobLoc {
    uint32_t chunk = 0;  // index into chunks_
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  struct CachedChunk {
    uint32_t chunk = 0;
    std::shared_ptr<const Bytes> raw;
  };

  Reader() = default;
  Status ReadPreamble();
  Status ReadHeaderChunk();
  // True when the trailer and footer check out, and the index describes the file's chunks
  // exactly. *problem receives why not when the file has a valid trailer (structural damage,
  // not a file cut short).
  bool TryFooter(std::string* problem);
  // The chunks between two indexed ones (or the last one and the footer): only types this
  // reader does not know may lie there, each with the next sequence number, and, before the
  // footer, one end state chunk.
  bool WalkGap(uint64_t from, uint64_t to, bool before_footer, uint32_t* seq,
               std::vector<ChunkRef>* out, std::string* problem);
  // Fills end_state_ or end_state_error_ from the end state chunk among chunks_, if any.
  void ReadEndState();
  void WalkChunks(uint64_t from);
  // What the header's own counts and the file permit a chunk to hold once decompressed: a claim
  // beyond is refused before anything is allocated for it.
  Status CheckClaim(const ChunkRef& c, const ChunkHeader& h, const uint8_t* payload) const;
  // The footer's index against a blob chunk's own entries, once, when first loaded.
  Status CheckBlobIndex(uint32_t index, const std::vector<BlobEntry>& entries);
  // Reads, checks and decompresses a chunk; *header receives its decoded header.
  Status LoadChunk(const ChunkRef& c, ChunkHeader* header, Bytes* raw);
  Expected<std::shared_ptr<const Bytes>> BlobChunk(uint32_t index);
  // Without a footer: learns a blob chunk's hashes. A large zstd chunk is read as a stream,
  // hashing each blob as it passes, so that a chunk claiming a gigabyte costs a window, not a
  // gigabyte, until a blob of it is used (blob_index.cc).
  Status IndexBlobChunk(uint32_t index);
  // LoadChunk's first half: the stored bytes, their header and CRC checked, the claim bounded.
  Status ReadStored(const ChunkRef& c, ChunkHeader* header, Bytes* buf);
  // Walk's order for a file of several streams (see kMaxStreams): each stream's events in file
  // order, the streams merged by time.
  Status WalkMerged(const ReadFilter& filter, const DecodeSinks& sinks);
  Status Walk(const ReadFilter& filter, const std::function<void(SyscallEvent&)>& on_syscall,
              const ProcessFn& on_process);
  // Where blob h lies, and its chunk's bytes; checks that the reference names its size.
  Expected<std::pair<BlobLoc, std::shared_ptr<const Bytes>>> FindBlob(const Hash128& h,
                                                                      uint64_t size);
  Status CheckBlob(const Hash128& h, uint64_t size);              // known, and of that size
  Expected<BlobLoc> LocateBlob(const Hash128& h, uint64_t size);  // CheckBlob's find
  Status ResolveBlob(const Hash128& h, uint64_t size, std::vector<uint8_t>* out);
  Status SharedBlob(const Hash128& h, uint64_t size, CapturedBuffer::SharedBytes* out);
  std::string Where(const ChunkRef& c) const;
  bool AddBlob(const Hash128& h, BlobLoc loc);  // false when h is known already

  std::string path_;
  OwnedFd fd_;
  uint16_t major_ = 0;
  uint16_t minor_ = 0;
  std::string writer_;
  RecordingInfo info_;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;       // first byte after the header chunk
  std::vector<ChunkRef> chunks_;  // blob, events, end state and unknown chunks, in file order
  bool has_footer_ = false;
  bool truncated_ = false;
  bool footer_at_end_ = false;  // walking found the footer, only a trailer after it
  uint64_t last_chunk_offset_ = 0;
  uint32_t last_chunk_seq_ = 0;
  uint64_t valid_end_ = 0;  // end of the last whole chunk
  Status damage_;
  std::optional<EndState> end_state_;
  std::string end_state_error_;
  std::unordered_map<Hash128, BlobLoc, Hash128Hasher> blobs_;
  // Per chunk index (footer only): how many of blobs_ point into it, and whether its entries
  // were checked against them.
  std::vector<uint32_t> indexed_blobs_;
  std::vector<bool> index_checked_;
  std::deque<CachedChunk> cache_;  // recently decompressed blob chunks
  bool share_blobs_ = false;
  BufferPredicate leave_unread_;  // buffers left as `stored` references; none when empty
  // Per chunk index: a blob chunk that buffers shared out of it still hold.
  std::vector<std::weak_ptr<const Bytes>> live_chunks_;
  std::unique_ptr<Decompressor> zstd_ = std::make_unique<Decompressor>();
  ReaderStats stats_;
};

}  // namespace fay::trace
