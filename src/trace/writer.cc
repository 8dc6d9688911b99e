#include "trace/writer.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "trace/crc32c.h"
#include "trace/header_codec.h"

namespace fay::trace {

namespace {

// Sums counters. A file's counters may hold what a failure took back from the lanes' counts,
// as a wrapped negative number: unsigned addition brings the sum right.
void AddStats(WriterStats* into, const WriterStats& s) {
  into->syscall_events += s.syscall_events;
  into->process_events += s.process_events;
  into->lost_events += s.lost_events;
  into->dropped_events += s.dropped_events;
  into->chunks += s.chunks;
  into->bytes_raw += s.bytes_raw;
  into->bytes_stored += s.bytes_stored;
  into->file_bytes += s.file_bytes;
  into->blobs_stored += s.blobs_stored;
  into->blobs_deduped += s.blobs_deduped;
  into->bytes_captured += s.bytes_captured;
  into->bytes_blob_stored += s.bytes_blob_stored;
}

}  // namespace

Expected<std::unique_ptr<Writer>> Writer::Create(const std::string& path, const RecordingInfo& info,
                                                 WriterOptions options) {
  if (options.chunk_bytes == 0 || options.queue_events == 0)
    return Error(Code::kInvalidArgument, "trace writer: chunk_bytes and queue_events must be > 0");
  if (options.lanes == 0 || options.lanes > kMaxStreams ||
      (options.lanes > 1 && !options.encode_on_caller))
    return Error(Code::kInvalidArgument,
                 "trace writer: lanes must be 1, or up to 256 with encode_on_caller");
  int fd;
  if (options.flight) {
    // Eviction frees whole chunks: smaller blob chunks let a small ring keep nearer its size.
    options.blob_chunk_bytes = std::min<size_t>(
        options.blob_chunk_bytes, std::max<uint64_t>(64 << 10, options.flight->ring_bytes() / 16));
    // Nothing goes to `path` until a dump; a place that cannot take one is said now.
    std::string probe = fmt::format("{}.probe.{}", path, ::getpid());
    fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("cannot create flight dumps at " + path);
    ::close(fd);
    ::unlink(probe.c_str());
    fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("opening /dev/null");
  } else {
    // A trace is written with pwrite(2) (and the end state appended by reopening it), so a FIFO,
    // pipe, socket or terminal cannot take it. Said before anything runs: the first write would
    // fail later, often only at the end (and opening a FIFO waits for a reader, through SIGTERM).
    const std::string why = fmt::format(
        "cannot write a trace to {}: it is not a regular file or device that can seek (a pipe, "
        "FIFO, socket or terminal); write it to a file, then read it with `fay dump`",
        path);
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
      return Error(Code::kInvalidArgument, why);
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("cannot create trace file " + path);
    if (::lseek(fd, 0, SEEK_CUR) < 0 && errno == ESPIPE) {
      ::close(fd);
      return Error(Code::kInvalidArgument, why);
    }
  }
  auto w = std::make_unique<Writer>(Key{}, path, OwnedFd(fd), std::move(options));
  FAY_RETURN_IF_ERROR(w->WriteHeader(info));
  if (!w->opts_.encode_on_caller) w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

Writer::Writer(Key, const std::string& path, OwnedFd fd, WriterOptions options)
    : path_(path), opts_(std::move(options)), sink_(std::move(fd), "writing " + path) {
  for (size_t i = 0; i < opts_.lanes; ++i)
    lanes_.push_back(std::make_unique<Lane>(opts_.zstd_level, static_cast<uint16_t>(i)));
  published_.resize(opts_.lanes + 1);
  if (opts_.flight) {
    ring_ = std::make_unique<FlightRing>(opts_.flight->ring_bytes());
    dump_acks_.resize(opts_.lanes);
  }
}

Writer::~Writer() {
  Close();
}

Status Writer::WriteHeader(const RecordingInfo& info) {
  if (ring_) {
    info_ = info;  // each dump's header starts from it
    uint32_t fields = 0;
    // Preamble, header chunk (with the flight fields and a reason of up to 4 KiB), the footer
    // chunk's header and fixed part, trailer.
    ring_->SetReserve(kPreambleSize + 2 * kChunkHeaderSize + kTrailerSize + 64 + 4096 + 128 +
                      EncodeHeader(info, opts_.writer_name, &fields).size());
    return Status::Ok();
  }
  Bytes pre;
  PutRaw(pre, kFileMagic, sizeof(kFileMagic));
  PutU16(pre, kFormatMajor);
  PutU16(pre, kFormatMinor);
  PutU32(pre, 0);  // flags
  FAY_RETURN_IF_ERROR(sink_.Append(pre.data(), pre.size()));
  offset_ = pre.size();
  file_stats_.file_bytes = offset_;
  uint32_t fields = 0;
  Bytes header = EncodeHeader(info, opts_.writer_name, &fields);
  // Uncompressed, so `xxd` shows the recording's command line and host at a glance.
  Status st = WriteChunk(nullptr, ChunkType::kHeader, Codec::kNone, header, fields, 0,
                         [](uint64_t, uint32_t, uint32_t) {});
  // Into the file now, so that a path that cannot take data fails here.
  if (st.ok()) st = sink_.Flush();
  Publish(0);
  return st;
}

bool Writer::BatchReady() const {
  return queue_.size() >= std::min(kBatchEvents, opts_.queue_events) ||
         queued_bytes_ >= std::min(kBatchBytes, opts_.queue_bytes);
}

bool Writer::Push(Item item) {
  return Enqueue(std::span<Item>(&item, 1), 0);
}

bool Writer::AppendBatch(std::vector<Item>* items, size_t lane) {
  bool ok = Enqueue(*items, lane);
  items->clear();
  return ok;
}

bool Writer::Enqueue(std::span<Item> items, size_t lane) {
  if (items.empty()) return true;
  if (opts_.encode_on_caller) {
    if (RefusedOnCaller(items.size())) return false;
    return EncodeNow(lane, items);
  }
  size_t bytes = 0;
  for (const Item& item : items) {
    if (const auto* ev = std::get_if<SyscallEvent>(&item))
      bytes += sizeof(SyscallEvent) + ev->CapturedBytes();
    else if (const auto* pe = std::get_if<ProcessEvent>(&item))
      bytes += sizeof(ProcessEvent) + pe->path.size();
    else
      bytes += sizeof(LossRecord);
  }
  std::unique_lock lk(mu_);
  not_full_.wait(lk, [&] {
    return failed_ || closing_ ||
           (queue_.size() < opts_.queue_events &&
            (queue_.empty() || queued_bytes_ + bytes <= opts_.queue_bytes));
  });
  if (failed_ || closing_) {
    dropped_ += items.size();
    return false;
  }
  for (Item& item : items) queue_.push_back(std::move(item));
  queued_bytes_ += bytes;
  if (BatchReady()) not_empty_.notify_one();
  return true;
}

bool Writer::Append(SyscallEvent ev) {
  return Push(std::move(ev));
}

bool Writer::Append(ProcessEvent ev) {
  return Push(std::move(ev));
}

bool Writer::AppendLoss(uint64_t time_ns, uint64_t count, int32_t cpu) {
  return Push(LossRecord{time_ns, count, cpu});
}

void Writer::Run() {
  Lane& l = *lanes_[0];
  std::deque<Item> batch;
  for (;;) {
    bool done;
    {
      std::unique_lock lk(mu_);
      // Waking per event would cost the recorder a futex call and a context switch on every
      // syscall; the thread instead takes the queue in batches, or whatever is there every
      // kBatchWait.
      auto ready = [&] { return BatchReady() || closing_; };
      auto until = std::chrono::steady_clock::now() + kBatchWait;
      if (l.pending_index.records > 0 && !failing() && l.chunk_deadline < until)
        until = l.chunk_deadline;
      not_empty_.wait_until(lk, until, ready);
      batch.swap(queue_);
      queued_bytes_ = 0;
      done = closing_ && batch.empty();
    }
    not_full_.notify_all();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (failing()) {
        l.stats.dropped_events += batch.size() - i;
        break;
      }
      Encode(l, batch[i]);
    }
    batch.clear();
    FlushIfDue(l);
    if (done && !failing()) Finish();
    Publish(0);
    if (done) return;
  }
}

void Writer::Publish(size_t lane) {
  WriterStats file;
  {
    std::lock_guard lk(file_mu_);
    file = file_stats_;
  }
  std::lock_guard lk(mu_);
  published_[lane] = lanes_[lane]->stats;
  published_.back() = file;
}

void Writer::FlushIfDue(Lane& l) {
  auto now = std::chrono::steady_clock::now();
  if (!failing() && l.pending_index.records > 0 && now >= l.chunk_deadline) FlushEvents(l);
  if (ring_) return ServeDumps(l);
  // What the sink stages reaches the file at least as often, so a kill -9 loses little.
  if (failing()) return;
  Status st = Status::Ok();
  {
    std::lock_guard lk(file_mu_);
    if (now < sink_deadline_) return;
    st = sink_.Flush();
    sink_deadline_ = now + opts_.flush_interval;
  }
  if (!st.ok()) Fail(&l, st);
}

bool Writer::RefusedOnCaller(size_t n) {
  if (!closed_ && !failing()) return false;
  std::lock_guard lk(mu_);
  dropped_ += n;
  return true;
}

template <typename Fn>
bool Writer::EncodeEach(size_t lane, size_t n, Fn&& encode) {
  Lane& l = *lanes_[lane];
  for (size_t i = 0; i < n; ++i) {
    if (failing()) {
      l.stats.dropped_events += n - i;
      break;
    }
    encode(l, i);
  }
  FlushIfDue(l);
  Publish(lane);
  return !failing();
}

bool Writer::EncodeNow(size_t lane, std::span<const Item> items) {
  return EncodeEach(lane, items.size(), [&](Lane& l, size_t i) { Encode(l, items[i]); });
}

void Writer::Tick(size_t lane) {
  if (opts_.encode_on_caller && !closed_) EncodeNow(lane, {});
}

bool Writer::AppendSyscalls(std::vector<SyscallEvent>* events, size_t lane) {
  if (events->empty()) return true;
  if (!opts_.encode_on_caller) {
    std::vector<Item> items;
    items.reserve(events->size());
    for (SyscallEvent& ev : *events) items.emplace_back(std::move(ev));
    events->clear();
    return Enqueue(items, lane);
  }
  bool ok =
      !RefusedOnCaller(events->size()) &&
      EncodeEach(lane, events->size(), [&](Lane& l, size_t i) { EncodeSyscall(l, (*events)[i]); });
  events->clear();
  return ok;
}

void Writer::EncodeSyscall(Lane& l, const SyscallEvent& ev) {
  l.encoder.Syscall(
      ev,
      [this, &l](const Hash128& h, const std::vector<uint8_t>& b) {
        StoreBlob(l, h, b.data(), b.size());
      },
      &l.events_raw);
  if (failing()) {  // a blob chunk failed to write
    ++l.stats.dropped_events;
    return;
  }
  if (ev.tid != l.last_tid_added) {
    l.pending_tids.insert(ev.tid);
    l.last_tid_added = ev.tid;
  }
  ++l.stats.syscall_events;
  ++l.pending_syscalls;
  l.stats.bytes_captured += ev.CapturedBytes();
  IndexRecord(l, ev.entry_ns, ev.LastNs());
}

void Writer::Encode(Lane& l, const Item& item) {
  uint64_t first, last;
  if (const auto* ev = std::get_if<SyscallEvent>(&item)) {
    EncodeSyscall(l, *ev);
    return;
  } else if (const auto* pe = std::get_if<ProcessEvent>(&item)) {
    l.encoder.Process(*pe, &l.events_raw);
    first = last = pe->time_ns;
    l.pending_tids.insert(pe->tid);
    l.last_tid_added = pe->tid;
    ++l.stats.process_events;
  } else {
    const auto& loss = std::get<LossRecord>(item);
    l.encoder.Loss(loss, &l.events_raw);
    first = last = loss.time_ns;
    l.stats.lost_events += loss.count;
  }
  IndexRecord(l, first, last);
}

void Writer::IndexRecord(Lane& l, uint64_t first, uint64_t last) {
  EventChunkIndex& idx = l.pending_index;
  l.last_record_ns = std::max(l.last_record_ns, last);
  if (idx.records == 0) {
    idx.first_ns = first;
    idx.last_ns = last;
    l.chunk_deadline = std::chrono::steady_clock::now() + opts_.flush_interval;
  } else {
    idx.first_ns = std::min(idx.first_ns, first);
    idx.last_ns = std::max(idx.last_ns, last);
  }
  ++idx.records;
  // A blob chunk went out while this event was encoded: write the events that reference it
  // now, or a full disk could leave megabytes of blobs on it and not one readable event.
  if (l.events_raw.size() >= opts_.chunk_bytes || l.blobs_flushed) FlushEvents(l);
}

StoredBlob Writer::StoreBlobNow(const uint8_t* data, size_t n, size_t lane) {
  Hash128 h = HashBlob(data, n);
  if (!failing()) StoreBlob(*lanes_[lane], h, data, n);
  return StoredBlob{h.lo, h.hi, n};
}

void Writer::StoreBlob(Lane& l, const Hash128& h, const uint8_t* data, size_t n) {
  // Each lane keeps its own store: a payload two lanes see is stored twice, which the reader
  // takes (the first copy wins), rather than every lane taking a lock per buffer.
  // The payload is copied in while the memory of recent blobs is fetched, and taken back out
  // when it turns out to be one of them: most payloads are new, and the look-up is a miss.
  l.recent_blobs.Prefetch(h);
  // A blob chunk holds either blobs up to blob_chunk_bytes or a single larger blob.
  if (!l.blobs_raw.empty() && l.blobs_raw.size() + n > opts_.blob_chunk_bytes) FlushBlobs(l);
  const size_t mark = l.blobs_raw.size();
  PutU64(l.blobs_raw, h.lo);
  PutU64(l.blobs_raw, h.hi);
  PutVarint(l.blobs_raw, n);
  const size_t at = l.blobs_raw.size();
  PutRaw(l.blobs_raw, data, n);
  if (!l.recent_blobs.Insert(h)) {
    l.blobs_raw.resize(mark);
    ++l.stats.blobs_deduped;
    return;
  }
  l.blobs_crc = Crc32c(l.blobs_raw.data() + mark, l.blobs_raw.size() - mark, l.blobs_crc);
  l.pending_blobs.push_back(BlobEntry{h, static_cast<uint32_t>(at), static_cast<uint32_t>(n)});
  ++l.stats.blobs_stored;
  l.stats.bytes_blob_stored += n;
}

void Writer::FlushBlobs(Lane& l) {
  if (l.pending_blobs.empty() || failing()) return;
  // Random or already-compressed data tends to stay that way: after a chunk that zstd would not
  // shrink, the next ones are stored as they are without asking, up to 16 chunks at a time.
  Codec codec = Codec::kNone;
  if (l.blob_skip > 0) {
    --l.blob_skip;
  } else if (l.compressor.Worthwhile(l.blobs_raw)) {
    codec = Codec::kZstd;
    l.blob_skip_run = 0;
  } else {
    l.blob_skip_run = std::min(16u, std::max(1u, l.blob_skip_run * 2));
    l.blob_skip = l.blob_skip_run;
  }
  Status st = WriteChunk(
      &l, ChunkType::kBlobs, codec, l.blobs_raw, static_cast<uint32_t>(l.pending_blobs.size()), 0,
      [&](uint64_t offset, uint32_t seq, uint32_t stored) {
        BlobChunkIndex idx;
        idx.offset = offset;
        idx.seq = seq;
        idx.stored_length = stored;
        idx.raw_length = static_cast<uint32_t>(l.blobs_raw.size());
        idx.blobs = std::move(l.pending_blobs);
        footer_.blobs.push_back(std::move(idx));
      },
      l.blobs_crc);
  if (!st.ok()) return Fail(&l, st);
  l.pending_blobs.clear();
  l.blobs_raw.clear();
  l.blobs_crc = 0;
  l.blobs_flushed = true;
}

void Writer::FlushEvents(Lane& l) {
  if (l.pending_index.records == 0 || failing()) return;
  // Blobs go first: every blob an events chunk references sits earlier in the file.
  FlushBlobs(l);
  if (failing()) return;
  Status st =
      WriteChunk(&l, ChunkType::kEvents, Codec::kZstd, l.events_raw, l.pending_index.records,
                 l.pending_syscalls, [&](uint64_t offset, uint32_t seq, uint32_t stored) {
                   EventChunkIndex& idx = l.pending_index;
                   idx.offset = offset;
                   idx.seq = seq;
                   idx.stored_length = stored;
                   idx.raw_length = static_cast<uint32_t>(l.events_raw.size());
                   idx.tids.assign(l.pending_tids.begin(), l.pending_tids.end());
                   idx.stream = l.stream;
                   std::sort(idx.tids.begin(), idx.tids.end());
                   footer_.events.push_back(std::move(idx));
                 });
  if (!st.ok()) return Fail(&l, st);
  l.blobs_flushed = false;
  l.pending_index = EventChunkIndex{};
  l.pending_syscalls = 0;
  l.pending_tids.clear();
  l.last_tid_added = 0;
  l.events_raw.clear();
  l.encoder.Reset();
  if (ring_) {
    // Between events chunks the lane may move to the ring's newest group; it then forgets its
    // blobs, so that no later chunk references one that an eviction of this group removes.
    uint64_t g = ring_->group();
    if (g != l.flight_group) {
      l.flight_group = g;
      l.recent_blobs.Clear();
    }
  }
}

void Writer::FinishLane(Lane& l) {
  FlushEvents(l);
  FlushBlobs(l);
  if (failing() && l.pending_index.records > 0) {
    // Another lane's write failed first: these never reach the file.
    l.stats.dropped_events += l.pending_index.records;
    l.stats.syscall_events -= l.pending_syscalls;
    l.pending_index = EventChunkIndex{};
    l.pending_syscalls = 0;
  }
}

void Writer::Finish() {
  for (auto& l : lanes_) FinishLane(*l);
  if (failing()) return;
  if (ring_) {
    // Dumps still being written first; then the one at exit, if asked for, and any pending.
    JoinDumps();
    if (opts_.flight->dump_on_exit()) opts_.flight->Request("the recording ended", true);
    const uint64_t req = opts_.flight->requested();
    bool due;
    {
      std::lock_guard lk(dump_mu_);
      due = req > dumps_served_;
      dumps_served_ = req;
    }
    if (due) WriteDump(req, false);
    return;
  }
  Bytes footer;
  {
    std::lock_guard lk(file_mu_);
    footer = EncodeFooter(footer_);
  }
  uint64_t footer_offset = 0;
  Status st = WriteChunk(lanes_[0].get(), ChunkType::kFooter, Codec::kZstd, footer,
                         static_cast<uint32_t>(footer_.events.size() + footer_.blobs.size()), 0,
                         [&](uint64_t offset, uint32_t, uint32_t) { footer_offset = offset; });
  if (!st.ok()) return Fail(lanes_[0].get(), st);
  uint8_t trailer[kTrailerSize];
  {
    std::lock_guard lk(file_mu_);
    EncodeTrailer(Trailer{footer_offset, next_seq_}, trailer);
    st = sink_.Append(trailer, sizeof(trailer));
    if (st.ok()) st = sink_.Flush();
    if (st.ok()) {
      offset_ += sizeof(trailer);
      file_stats_.file_bytes = offset_;
    }
  }
  if (!st.ok()) Fail(lanes_[0].get(), st);
}

template <typename Indexed>
Status Writer::WriteChunk(Lane* l, ChunkType type, Codec codec, const Bytes& raw, uint32_t count,
                          uint32_t syscalls, Indexed&& indexed, std::optional<uint32_t> raw_crc) {
  if (raw.size() > UINT32_MAX)
    return Error(Code::kInvalidArgument,
                 fmt::format("a {} chunk of {} bytes exceeds the 4 GiB chunk limit",
                             ChunkTypeName(type), raw.size()));
  // Compressed and checksummed outside the file's lock: that is the lane's work.
  const Bytes* payload = &raw;
  if (codec == Codec::kZstd) {
    FAY_RETURN_IF_ERROR(l->compressor.Compress(raw, &l->scratch));
    payload = &l->scratch;
  }
  ChunkHeader h;
  h.type = type;
  h.codec = codec;
  if (type == ChunkType::kEvents) h.flags = l->stream;
  h.stored_length = static_cast<uint32_t>(payload->size());
  h.raw_length = static_cast<uint32_t>(raw.size());
  h.count = count;
  h.payload_crc =
      codec == Codec::kNone && raw_crc ? *raw_crc : Crc32c(payload->data(), payload->size());
  std::lock_guard lk(file_mu_);
  // Another lane's write failed and the file was cut back: nothing more may follow.
  if (failing()) return Error(Code::kIo, "writing " + path_ + ": recording stopped");
  if (ring_) {
    // Into the flight ring, with its index entry, instead of the file.
    indexed(0, 0, h.stored_length);
    FlightChunk c;
    c.header = h;
    // The compressed payload moves into the ring rather than being copied: a blob chunk is up
    // to a sixteenth of the ring, and two of them at once would be memory the ring does not count.
    if (l && payload == &l->scratch)
      c.payload = std::make_shared<const Bytes>(std::move(l->scratch));
    else
      c.payload = std::make_shared<const Bytes>(*payload);
    c.group = l ? l->flight_group : 0;
    // Footer entries are varints: at most 10 bytes a number, 6 a tid delta; a blob's is its hash
    // and two numbers.
    if (type == ChunkType::kEvents) {
      c.footer_bytes = 10 * 10 + 6 * footer_.events.back().tids.size();
      c.index = std::move(footer_.events.back());
      footer_.events.pop_back();
      c.syscalls = syscalls;
    } else if (type == ChunkType::kBlobs) {
      c.footer_bytes = 6 * 10 + 36 * footer_.blobs.back().blobs.size();
      c.index = std::move(footer_.blobs.back());
      footer_.blobs.pop_back();
    }
    // After a pending trigger's moment, or while a dump is written, a chunk may not evict.
    const uint64_t since = opts_.flight->pending_since_ns();
    const uint64_t at = type == ChunkType::kEvents ? std::get<EventChunkIndex>(c.index).first_ns
                        : l                        ? l->last_record_ns
                                                   : 0;
    const bool keep = (since && at > since) || dumps_served_.load() > dumps_done_.load();
    ring_->Add(std::move(c), keep);
    ++file_stats_.chunks;
    file_stats_.bytes_raw += raw.size();
    file_stats_.bytes_stored += payload->size();
    return Status::Ok();
  }
  h.seq = next_seq_;
  uint8_t hdr[kChunkHeaderSize];
  EncodeChunkHeader(h, hdr);
  size_t total = sizeof(hdr) + payload->size();
  Status appended = sink_.Append(hdr, sizeof(hdr));
  if (appended.ok()) appended = sink_.Append(payload->data(), payload->size());
  // A chunk the sink did not take is the caller's to count as lost (see Fail).
  if (appended.ok())
    staged_chunks_.push_back(StagedChunk{offset_ + total, next_seq_ + 1,
                                         type == ChunkType::kEvents ? count : 0,
                                         type == ChunkType::kEvents ? syscalls : 0});
  NoteDurable();
  FAY_RETURN_IF_ERROR(appended);
  indexed(offset_, next_seq_, h.stored_length);
  ++next_seq_;
  offset_ += total;
  ++file_stats_.chunks;
  file_stats_.bytes_raw += raw.size();
  file_stats_.bytes_stored += payload->size();
  file_stats_.file_bytes = offset_;
  return Status::Ok();
}

void Writer::NoteDurable() {
  while (!staged_chunks_.empty() && staged_chunks_.front().end <= sink_.durable()) {
    whole_end_ = staged_chunks_.front().end;
    whole_chunks_ = staged_chunks_.front().chunks;
    staged_chunks_.pop_front();
  }
}

void Writer::Fail(Lane* l, const Status& st) {
  failing_.store(true, std::memory_order_release);
  if (l) {
    l->stats.dropped_events += l->pending_index.records;  // encoded, never to reach the file
    l->stats.syscall_events -= l->pending_syscalls;
    l->pending_index = EventChunkIndex{};
    l->pending_syscalls = 0;
  }
  uint64_t whole_end;
  uint32_t whole_chunks;
  {
    std::lock_guard lk(file_mu_);
    // Cut a partial chunk off, so the file ends on a chunk boundary (best effort: a device such
    // as /dev/full cannot be truncated, and the reader copes with a partial chunk anyway).
    NoteDurable();
    // Chunks the sink took but never got into the file: their events are lost too.
    for (const StagedChunk& c : staged_chunks_) {
      file_stats_.dropped_events += c.events;
      file_stats_.syscall_events -= c.syscalls;
    }
    staged_chunks_.clear();
    if (sink_.Truncate(whole_end_)) file_stats_.file_bytes = whole_end_;
    whole_end = whole_end_;
    whole_chunks = whole_chunks_;
  }
  Status err(st.code(), fmt::format("{}; recording stopped, the trace is readable up to offset {} "
                                    "({} whole chunks)",
                                    st.message(), whole_end, whole_chunks));
  std::lock_guard lk(mu_);
  if (failed_) return;  // the first error is the one reported
  failed_ = true;
  error_ = err;
  dropped_ += queue_.size();
  queue_.clear();
  queued_bytes_ = 0;
  not_full_.notify_all();
}

Status Writer::Close() {
  if (closed_) {
    std::lock_guard lk(mu_);
    return error_;
  }
  closed_ = true;
  {
    std::lock_guard lk(mu_);
    closing_ = true;
  }
  not_empty_.notify_all();
  not_full_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (opts_.encode_on_caller) {
    Finish();  // when failing, only counts what the lanes still hold as dropped
    for (size_t i = 0; i < lanes_.size(); ++i) Publish(i);
  }
  JoinDumps();  // a failed writer skipped Finish, which joins them
  if (failed()) {
    std::lock_guard lk(mu_);
    return error_;
  }
  Status st;
  {
    std::lock_guard lk(file_mu_);
    st = sink_.Close();
  }
  std::lock_guard lk(mu_);
  if (!st.ok() && !failed_) {
    failed_ = true;
    error_ = st;
  }
  return error_;
}

void Writer::ServeDumps(Lane& l) {
  const uint64_t req = opts_.flight->requested();
  if (l.dumps_seen == req || failing()) return;
  if (ClockNs(CLOCK_MONOTONIC) < opts_.flight->last_request_ns() + FlightControl::kSettleNs) return;
  // The trigger's own call may sit in the chunk being built: it goes into the ring first.
  FlushEvents(l);
  l.dumps_seen = req;
  uint64_t upto;
  {
    std::lock_guard lk(dump_mu_);
    dump_acks_[l.stream] = req;
    upto = *std::min_element(dump_acks_.begin(), dump_acks_.end());
    if (upto <= dumps_served_) return;
    dumps_served_ = upto;
  }
  WriteDump(upto, true);
}

void Writer::WriteDump(uint64_t upto, bool background) {
  auto done = [this, upto] {
    std::lock_guard lk(dump_mu_);
    if (dumps_done_.load() < upto) dumps_done_.store(upto);
  };
  std::vector<std::string> reasons = opts_.flight->TakeReasons(upto);
  if (reasons.empty()) return done();
  std::vector<FlightChunk> chunks = ring_->Snapshot();
  FlightRing::Stats rs = ring_->stats();
  RecordingInfo info = info_;
  // Requests that came while the lanes finished their chunks share one dump.
  info.flight_reason = reasons[0];
  if (reasons.size() > 1) info.flight_reason += fmt::format(" (and {} more)", reasons.size() - 1);
  info.flight_ring_bytes = opts_.flight->ring_bytes();
  // Only what went before the window: the chunks that could not evict came after the trigger.
  info.flight_evicted_syscalls = rs.evicted_syscalls - rs.dropped_syscalls;
  FlightDumpResult r;
  bool first = true;
  for (const FlightChunk& c : chunks) {
    const auto* e = std::get_if<EventChunkIndex>(&c.index);
    if (!e) continue;
    info.flight_from_ns = first ? e->first_ns : std::min(info.flight_from_ns, e->first_ns);
    info.flight_to_ns = std::max(info.flight_to_ns, e->last_ns);
    first = false;
    r.syscalls += c.syscalls;
  }
  {
    std::lock_guard lk(dump_mu_);
    info.flight_dump = ++dumps_written_;
    r.path = opts_.flight->NextPath();
  }
  r.reason = info.flight_reason;
  r.from_ns = info.flight_from_ns;
  r.to_ns = info.flight_to_ns;
  // The chunks are the ring's own (shared): nothing evicts until this is on disk (see keep in
  // WriteChunk), so the dump costs no second copy.
  auto write = [this, info = std::move(info), chunks = std::move(chunks), r = std::move(r),
                done]() mutable {
    Status st = WriteFlightDump(r.path, info, opts_.writer_name, chunks, &r.bytes);
    if (!st.ok()) r.error = st.message();
    opts_.flight->AddResult(std::move(r));
    chunks.clear();
    done();
  };
  if (!background) return write();
  std::lock_guard lk(dump_mu_);
  dump_threads_.emplace_back(std::move(write));
}

void Writer::JoinDumps() {
  std::vector<std::thread> writing;
  {
    std::lock_guard lk(dump_mu_);
    writing.swap(dump_threads_);
  }
  for (std::thread& t : writing) t.join();
}

bool Writer::failed() const {
  std::lock_guard lk(mu_);
  return failed_;
}

WriterStats Writer::stats() const {
  std::lock_guard lk(mu_);
  WriterStats s;
  for (const WriterStats& p : published_) AddStats(&s, p);
  s.dropped_events += dropped_;
  return s;
}

}  // namespace fay::trace
