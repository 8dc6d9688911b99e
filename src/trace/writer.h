// Writes a .fay trace off the caller's critical path. Append copies the event into a bounded
// queue and returns; a background thread encodes, compresses and writes chunks. When the queue
// is full Append blocks (backpressure), so nothing is ever dropped silently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <variant>

#include "common/status.h"
#include "schema/syscall_event.h"
#include "trace/bytes.h"
#include "trace/event_codec.h"
#include "trace/file_io.h"
#include "trace/file_sink.h"
#include "trace/flight.h"
#include "trace/footer.h"
#include "trace/format.h"
#include "trace/recent_blobs.h"
#include "trace/zstd_codec.h"

namespace fay::trace {

struct WriterOptions {
  size_t chunk_bytes = 64 << 10;      // raw event bytes that close an events chunk
  size_t blob_chunk_bytes = 1 << 20;  // raw bytes that close a blob chunk
  size_t queue_events = 65536;        // Append blocks beyond this many queued events...
  size_t queue_bytes = 64 << 20;      // ...or this many queued buffer bytes
  int zstd_level = 3;
  // A chunk is written at least this often, so a kill -9 loses little.
  std::chrono::milliseconds flush_interval{1000};
  std::string writer_name = "fay";  // stored in the header, for people debugging a file
  // Encode, compress and write on the caller's thread instead of a thread of the writer's own
  // (writes still go out in the background, see FileSink). For a caller with a thread to itself
  // and millions of small events: handing each event to another core costs more in cache
  // misses than encoding it. The caller then calls Tick() now and then, and uses the writer
  // from one thread at a time.
  bool encode_on_caller = false;
  // encode_on_caller only: independent encoders, each used by one caller thread at a time (the
  // eBPF recorder's consumers, one per ring). Each lane builds, compresses and checksums its own
  // chunks and keeps its own blob store; only appending a finished chunk to the file is shared.
  // A thread's events must all go through one lane, which keeps them in order.
  size_t lanes = 1;
  // Flight recorder (`fay record --flight`): chunks go to a ring of flight->ring_bytes() in
  // memory instead of `path`, and each dump flight asks for writes the ring as a trace of its
  // own (trace/flight.h). Not owned; outlives the writer.
  FlightControl* flight = nullptr;
};

struct WriterStats {
  uint64_t syscall_events = 0;  // written to chunks (or pending in the current chunk); after a
                                // failed write, only those in the file
  uint64_t process_events = 0;
  uint64_t lost_events = 0;        // reported through AppendLoss
  uint64_t dropped_events = 0;     // appended but never to reach the file, because it failed
  uint64_t chunks = 0;             // chunks written, header included
  uint64_t bytes_raw = 0;          // chunk payload bytes before compression
  uint64_t bytes_stored = 0;       // chunk payload bytes after compression
  uint64_t file_bytes = 0;         // bytes in the file so far
  uint64_t blobs_stored = 0;       // distinct payloads put in the blob store
  uint64_t blobs_deduped = 0;      // payloads found already stored
  uint64_t bytes_captured = 0;     // buffer bytes appended (sum of CapturedBuffer::bytes sizes)
  uint64_t bytes_blob_stored = 0;  // distinct blob bytes, before compression
};

class Writer {
  struct Key {};  // keeps construction to Create

 public:
  // Creates (truncating) path and writes the preamble and header chunk before returning, so an
  // unwritable path is reported here.
  static Expected<std::unique_ptr<Writer>> Create(const std::string& path,
                                                  const RecordingInfo& info,
                                                  WriterOptions options = {});
  Writer(Key, const std::string& path, OwnedFd fd, WriterOptions options);
  ~Writer();  // closes if Close was not called
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Queue one event. Blocks while the queue is full. Returns false (and counts the event as
  // dropped) once the writer has failed or been closed.
  bool Append(SyscallEvent ev);
  bool Append(ProcessEvent ev);
  // Queues events in one go, in order, taking the queue's lock once for all of them (a
  // recorder hands over thousands a millisecond). Moves them out and clears *items; false when
  // the writer has failed or been closed (then none of them was taken).
  using Item = std::variant<SyscallEvent, ProcessEvent, LossRecord>;
  bool AppendBatch(std::vector<Item>* items, size_t lane = 0);
  // As AppendBatch, for calls alone: an encode_on_caller writer encodes them where they lie,
  // without wrapping each in an Item (the eBPF recorder's two million events a second).
  bool AppendSyscalls(std::vector<SyscallEvent>* events, size_t lane = 0);
  // encode_on_caller writers only, on the encoding thread: hashes bytes and puts them in the
  // blob store now (once per distinct content), for a CapturedBuffer::stored that an event
  // appended later carries. Spares the caller a copy of the bytes. Not with a flight ring (see
  // trace/flight.h): the blob could be evicted before the call that needs it.
  StoredBlob StoreBlobNow(const uint8_t* data, size_t n, size_t lane = 0);
  // With encode_on_caller: writes what is due (a chunk older than flush_interval) when no
  // event comes to do it. Otherwise nothing.
  void Tick(size_t lane = 0);
  // Records that `count` events were lost at the source around time_ns.
  bool AppendLoss(uint64_t time_ns, uint64_t count, int32_t cpu = -1);

  // Drains the queue, writes the last chunks, the footer and the trailer. The first write error
  // (e.g. ENOSPC) is returned here; the file is then readable up to its last whole chunk.
  // Calling it again returns the same status.
  Status Close();
  bool failed() const;

  // The writer thread wakes when this much is queued, or after kBatchWait.
  static constexpr size_t kBatchEvents = 512;
  static constexpr size_t kBatchBytes = 1 << 20;
  static constexpr std::chrono::milliseconds kBatchWait{20};
  WriterStats stats() const;
  const std::string& path() const { return path_; }

 private:
  // What one encoder owns: the chunks it is building and the blobs it has stored. Touched by
  // one thread at a time (the writer's thread, or the caller that owns the lane).
  struct Lane {
    Lane(int zstd_level, uint16_t s) : compressor(zstd_level), stream(s) {}
    Compressor compressor;
    uint16_t stream;  // of its events chunks (see kMaxStreams)
    EventEncoder encoder;
    Bytes events_raw;
    Bytes blobs_raw;
    // blobs_raw's CRC32C, extended by each blob as it is copied in: its bytes are in the cache
    // then, and a chunk stored as it is needs no second pass over them.
    uint32_t blobs_crc = 0;
    Bytes scratch;
    EventChunkIndex pending_index;
    std::unordered_set<int32_t> pending_tids;
    int32_t last_tid_added = 0;     // pending_tids holds it already (0: none yet)
    uint32_t pending_syscalls = 0;  // syscall events in the events chunk being built
    std::vector<BlobEntry> pending_blobs;
    bool blobs_flushed = false;  // a blob chunk was written since the last events chunk
    uint32_t blob_skip = 0;      // blob chunks still to store without trying zstd
    uint32_t blob_skip_run = 0;  // the last such run's length (doubles while data stays random)
    RecentBlobs recent_blobs;
    uint64_t flight_group = 1;    // flight mode: the ring's group its chunks belong to
    uint64_t dumps_seen = 0;      // flight mode: dump requests it has finished its chunks for
    uint64_t last_record_ns = 0;  // the latest time of a record it encoded
    std::chrono::steady_clock::time_point chunk_deadline;
    WriterStats stats;  // the event and blob counters; the file's are in file_stats_
  };

  Status WriteHeader(const RecordingInfo& info);
  bool Push(Item item);                              // one event, through Enqueue
  bool Enqueue(std::span<Item> items, size_t lane);  // moves them out
  bool BatchReady() const;                           // with mu_ held
  void Run();
  void Encode(Lane& l, const Item& item);
  void EncodeSyscall(Lane& l, const SyscallEvent& ev);
  void IndexRecord(Lane& l, uint64_t first, uint64_t last);
  bool EncodeNow(size_t lane, std::span<const Item> items);  // encode_on_caller: on the caller
  // encode_on_caller, once closed or failed: counts n events as dropped and says so.
  bool RefusedOnCaller(size_t n);
  // Encodes n events with encode(i), then writes what is due and publishes the stats.
  template <typename Fn>
  bool EncodeEach(size_t lane, size_t n, Fn&& encode);
  void FlushIfDue(Lane& l);
  // Flight mode, on the lane's thread: finishes its chunks for a dump asked for since, and
  // writes the dump once every lane has.
  void ServeDumps(Lane& l);
  // Takes the reasons of requests up to `upto` and the ring's chunks, and writes them as a dump:
  // on a thread of its own when `background`, so the lane goes on recording.
  void WriteDump(uint64_t upto, bool background);
  void JoinDumps();
  void StoreBlob(Lane& l, const Hash128& h, const uint8_t* data, size_t n);
  void FlushEvents(Lane& l);
  void FlushBlobs(Lane& l);
  void FinishLane(Lane& l);
  void Finish();
  // Compresses raw (with the lane's compressor) and appends it as one chunk at the end of the
  // file. `indexed` runs under the file's lock with where the chunk starts, its sequence number
  // and its stored length, so that the footer lists chunks in file order. `syscalls`: the
  // syscall events an events chunk holds. `raw_crc`: raw's CRC32C when the caller has it
  // (stored as it is, raw is the payload).
  template <typename Indexed>
  Status WriteChunk(Lane* l, ChunkType type, Codec codec, const Bytes& raw, uint32_t count,
                    uint32_t syscalls, Indexed&& indexed,
                    std::optional<uint32_t> raw_crc = std::nullopt);
  void Fail(Lane* l, const Status& st);
  void NoteDurable();  // with file_mu_ held: moves whole_end_ past the staged chunks now in file
  void Publish(size_t lane);  // copies the lane's and the file's counters for stats()
  bool failing() const { return failing_.load(std::memory_order_acquire); }

  const std::string path_;
  const WriterOptions opts_;

  // Shared with producers, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<Item> queue_;
  size_t queued_bytes_ = 0;
  bool closing_ = false;
  bool failed_ = false;
  uint64_t dropped_ = 0;
  std::vector<WriterStats> published_;  // per lane, then the file's counters last
  Status error_;

  std::thread thread_;
  bool closed_ = false;  // touched only by the owner calling Close
  std::vector<std::unique_ptr<Lane>> lanes_;
  // Set once a write failed: every lane stops encoding.
  std::atomic<bool> failing_{false};

  // The file, shared by the lanes: guarded by file_mu_.
  std::mutex file_mu_;
  FileSink sink_;
  Footer footer_;
  uint64_t offset_ = 0;  // end of the last whole chunk written
  uint32_t next_seq_ = 0;
  std::chrono::steady_clock::time_point sink_deadline_;
  // Chunks appended to the sink but perhaps not yet in the file (end offset, seq + 1), and the
  // last one known to be: where a failed trace is cut.
  struct StagedChunk {
    uint64_t end = 0;       // file offset just past it
    uint32_t chunks = 0;    // whole chunks in the file once it is there (its seq + 1)
    uint32_t events = 0;    // events it holds (0 for blob chunks)
    uint32_t syscalls = 0;  // of which syscalls
  };
  std::deque<StagedChunk> staged_chunks_;

  // Flight mode: the ring, the header every dump starts from, and which lane has finished its
  // chunks for which request (guarded by dump_mu_).
  std::unique_ptr<FlightRing> ring_;
  RecordingInfo info_;
  std::mutex dump_mu_;
  std::vector<uint64_t> dump_acks_;
  std::atomic<uint64_t> dumps_served_{0};  // written under dump_mu_
  uint32_t dumps_written_ = 0;
  std::vector<std::thread> dump_threads_;
  // Requests whose dump is on disk: while a later one is not, no chunk evicts.
  std::atomic<uint64_t> dumps_done_{0};
  uint64_t whole_end_ = 0;
  uint32_t whole_chunks_ = 0;
  // Chunks, bytes and file size; and, after a failure, the events the file lost (subtracted
  // from the lanes' counts, in wrapping arithmetic, when the counters are summed).
  WriterStats file_stats_;
};

}  // namespace fay::trace
