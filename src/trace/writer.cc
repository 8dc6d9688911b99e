#include "trace/writer.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "trace/crc32c.h"
#include "trace/header_codec.h"

namespace fay::trace {

Expected<std::unique_ptr<Writer>> Writer::Create(const std::string& path, const RecordingInfo& info,
                                                 WriterOptions options) {
  if (options.chunk_bytes == 0 || options.queue_events == 0)
    return Error(Code::kInvalidArgument, "trace writer: chunk_bytes and queue_events must be > 0");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create trace file " + path);
  auto w = std::make_unique<Writer>(Key{}, path, OwnedFd(fd), std::move(options));
  FAY_RETURN_IF_ERROR(w->WriteHeader(info));
  if (!w->opts_.encode_on_caller) w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

Writer::Writer(Key, const std::string& path, OwnedFd fd, WriterOptions options)
    : path_(path),
      sink_(std::move(fd), "writing " + path),
      opts_(std::move(options)),
      compressor_(opts_.zstd_level) {}

Writer::~Writer() {
  Close();
}

Status Writer::WriteHeader(const RecordingInfo& info) {
  Bytes pre;
  PutRaw(pre, kFileMagic, sizeof(kFileMagic));
  PutU16(pre, kFormatMajor);
  PutU16(pre, kFormatMinor);
  PutU32(pre, 0);  // flags
  FAY_RETURN_IF_ERROR(sink_.Append(pre.data(), pre.size()));
  offset_ = pre.size();
  stats_.file_bytes = offset_;
  uint32_t fields = 0;
  Bytes header = EncodeHeader(info, opts_.writer_name, &fields);
  uint64_t at;
  uint32_t seq, stored;
  // Uncompressed, so `xxd` shows the recording's command line and host at a glance.
  Status st = WriteChunk(ChunkType::kHeader, Codec::kNone, header, fields, &at, &seq, &stored);
  // Into the file now, so that a path that cannot take data fails here.
  if (st.ok()) st = sink_.Flush();
  published_ = stats_;
  return st;
}

bool Writer::BatchReady() const {
  return queue_.size() >= std::min(kBatchEvents, opts_.queue_events) ||
         queued_bytes_ >= std::min(kBatchBytes, opts_.queue_bytes);
}

bool Writer::Push(Item item) {
  return Enqueue(std::span<Item>(&item, 1));
}

bool Writer::AppendBatch(std::vector<Item>* items) {
  bool ok = Enqueue(*items);
  items->clear();
  return ok;
}

bool Writer::Enqueue(std::span<Item> items) {
  if (items.empty()) return true;
  if (opts_.encode_on_caller) {
    if (RefusedOnCaller(items.size())) return false;
    return EncodeNow(items);
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
      if (pending_index_.records > 0 && !thread_failed_ && chunk_deadline_ < until)
        until = chunk_deadline_;
      not_empty_.wait_until(lk, until, ready);
      batch.swap(queue_);
      queued_bytes_ = 0;
      done = closing_ && batch.empty();
    }
    not_full_.notify_all();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (thread_failed_) {
        stats_.dropped_events += batch.size() - i;
        break;
      }
      Encode(batch[i]);
    }
    batch.clear();
    FlushIfDue();
    if (done && !thread_failed_) Finish();
    {
      std::lock_guard lk(mu_);
      published_ = stats_;
    }
    if (done) return;
  }
}

void Writer::FlushIfDue() {
  auto now = std::chrono::steady_clock::now();
  if (!thread_failed_ && pending_index_.records > 0 && now >= chunk_deadline_) FlushEvents();
  // What the sink stages reaches the file at least as often, so a kill -9 loses little.
  if (!thread_failed_ && now >= sink_deadline_) {
    if (Status st = sink_.Flush(); !st.ok()) Fail(st);
    sink_deadline_ = now + opts_.flush_interval;
  }
}

bool Writer::RefusedOnCaller(size_t n) {
  if (!closed_ && !thread_failed_) return false;
  std::lock_guard lk(mu_);
  dropped_ += n;
  return true;
}

template <typename Fn>
bool Writer::EncodeEach(size_t n, Fn&& encode) {
  for (size_t i = 0; i < n; ++i) {
    if (thread_failed_) {
      stats_.dropped_events += n - i;
      break;
    }
    encode(i);
  }
  FlushIfDue();
  std::lock_guard lk(mu_);
  published_ = stats_;
  return !thread_failed_;
}

bool Writer::EncodeNow(std::span<const Item> items) {
  return EncodeEach(items.size(), [&](size_t i) { Encode(items[i]); });
}

void Writer::Tick() {
  if (opts_.encode_on_caller && !closed_) EncodeNow({});
}

bool Writer::AppendSyscalls(std::vector<SyscallEvent>* events) {
  if (events->empty()) return true;
  if (!opts_.encode_on_caller) {
    std::vector<Item> items;
    items.reserve(events->size());
    for (SyscallEvent& ev : *events) items.emplace_back(std::move(ev));
    events->clear();
    return Enqueue(items);
  }
  bool ok = !RefusedOnCaller(events->size()) &&
            EncodeEach(events->size(), [&](size_t i) { EncodeSyscall((*events)[i]); });
  events->clear();
  return ok;
}

void Writer::EncodeSyscall(const SyscallEvent& ev) {
  encoder_.Syscall(
      ev,
      [this](const Hash128& h, const std::vector<uint8_t>& b) { StoreBlob(h, b.data(), b.size()); },
      &events_raw_);
  if (thread_failed_) {  // a blob chunk failed to write
    ++stats_.dropped_events;
    return;
  }
  if (ev.tid != last_tid_added_) {
    pending_tids_.insert(ev.tid);
    last_tid_added_ = ev.tid;
  }
  ++stats_.syscall_events;
  ++pending_syscalls_;
  stats_.bytes_captured += ev.CapturedBytes();
  IndexRecord(ev.entry_ns, std::max(ev.entry_ns, ev.exit_ns));
}

void Writer::Encode(const Item& item) {
  uint64_t first, last;
  if (const auto* ev = std::get_if<SyscallEvent>(&item)) {
    EncodeSyscall(*ev);
    return;
  } else if (const auto* pe = std::get_if<ProcessEvent>(&item)) {
    encoder_.Process(*pe, &events_raw_);
    first = last = pe->time_ns;
    pending_tids_.insert(pe->tid);
    last_tid_added_ = pe->tid;
    ++stats_.process_events;
  } else {
    const auto& loss = std::get<LossRecord>(item);
    encoder_.Loss(loss, &events_raw_);
    first = last = loss.time_ns;
    stats_.lost_events += loss.count;
  }
  IndexRecord(first, last);
}

void Writer::IndexRecord(uint64_t first, uint64_t last) {
  EventChunkIndex& idx = pending_index_;
  if (idx.records == 0) {
    idx.first_ns = first;
    idx.last_ns = last;
    chunk_deadline_ = std::chrono::steady_clock::now() + opts_.flush_interval;
  } else {
    idx.first_ns = std::min(idx.first_ns, first);
    idx.last_ns = std::max(idx.last_ns, last);
  }
  ++idx.records;
  // A blob chunk went out while this event was encoded: write the events that reference it
  // now, or a full disk could leave megabytes of blobs on it and not one readable event.
  if (events_raw_.size() >= opts_.chunk_bytes || blobs_flushed_) FlushEvents();
}

StoredBlob Writer::StoreBlobNow(const uint8_t* data, size_t n) {
  Hash128 h = HashBlob(data, n);
  if (!thread_failed_) StoreBlob(h, data, n);
  return StoredBlob{h.lo, h.hi, n};
}

void Writer::StoreBlob(const Hash128& h, const uint8_t* data, size_t n) {
  if (!seen_blobs_.Insert(h)) {
    ++stats_.blobs_deduped;
    return;
  }
  // A blob chunk holds either blobs up to blob_chunk_bytes or a single larger blob.
  if (!blobs_raw_.empty() && blobs_raw_.size() + n > opts_.blob_chunk_bytes) FlushBlobs();
  PutU64(blobs_raw_, h.lo);
  PutU64(blobs_raw_, h.hi);
  PutVarint(blobs_raw_, n);
  pending_blobs_.push_back(
      BlobEntry{h, static_cast<uint32_t>(blobs_raw_.size()), static_cast<uint32_t>(n)});
  PutRaw(blobs_raw_, data, n);
  ++stats_.blobs_stored;
  stats_.bytes_blob_stored += n;
}

void Writer::FlushBlobs() {
  if (pending_blobs_.empty() || thread_failed_) return;
  BlobChunkIndex idx;
  // Random or already-compressed data tends to stay that way: after a chunk that zstd would not
  // shrink, the next ones are stored as they are without asking, up to 16 chunks at a time.
  Codec codec = Codec::kNone;
  if (blob_skip_ > 0) {
    --blob_skip_;
  } else if (compressor_.Worthwhile(blobs_raw_)) {
    codec = Codec::kZstd;
    blob_skip_run_ = 0;
  } else {
    blob_skip_run_ = std::min(16u, std::max(1u, blob_skip_run_ * 2));
    blob_skip_ = blob_skip_run_;
  }
  Status st =
      WriteChunk(ChunkType::kBlobs, codec, blobs_raw_, static_cast<uint32_t>(pending_blobs_.size()),
                 &idx.offset, &idx.seq, &idx.stored_length);
  if (!st.ok()) return Fail(st);
  idx.raw_length = static_cast<uint32_t>(blobs_raw_.size());
  idx.blobs = std::move(pending_blobs_);
  footer_.blobs.push_back(std::move(idx));
  pending_blobs_.clear();
  blobs_raw_.clear();
  blobs_flushed_ = true;
}

void Writer::FlushEvents() {
  if (pending_index_.records == 0 || thread_failed_) return;
  // Blobs go first: every blob an events chunk references sits earlier in the file.
  FlushBlobs();
  if (thread_failed_) return;
  EventChunkIndex& idx = pending_index_;
  Status st = WriteChunk(ChunkType::kEvents, Codec::kZstd, events_raw_, idx.records, &idx.offset,
                         &idx.seq, &idx.stored_length);
  if (!st.ok()) return Fail(st);
  idx.raw_length = static_cast<uint32_t>(events_raw_.size());
  idx.tids.assign(pending_tids_.begin(), pending_tids_.end());
  std::sort(idx.tids.begin(), idx.tids.end());
  footer_.events.push_back(std::move(idx));
  blobs_flushed_ = false;
  pending_index_ = EventChunkIndex{};
  pending_syscalls_ = 0;
  pending_tids_.clear();
  last_tid_added_ = 0;
  events_raw_.clear();
  encoder_.Reset();
}

void Writer::Finish() {
  FlushEvents();
  FlushBlobs();
  if (thread_failed_) return;
  uint64_t footer_offset;
  uint32_t seq, stored;
  Bytes footer = EncodeFooter(footer_);
  Status st = WriteChunk(ChunkType::kFooter, Codec::kZstd, footer,
                         static_cast<uint32_t>(footer_.events.size() + footer_.blobs.size()),
                         &footer_offset, &seq, &stored);
  if (!st.ok()) return Fail(st);
  uint8_t trailer[kTrailerSize];
  EncodeTrailer(Trailer{footer_offset, next_seq_}, trailer);
  st = sink_.Append(trailer, sizeof(trailer));
  if (st.ok()) st = sink_.Flush();
  if (!st.ok()) return Fail(st);
  offset_ += sizeof(trailer);
  stats_.file_bytes = offset_;
}

Status Writer::WriteChunk(ChunkType type, Codec codec, const Bytes& raw, uint32_t count,
                          uint64_t* offset, uint32_t* seq, uint32_t* stored) {
  if (raw.size() > UINT32_MAX)
    return Error(Code::kInvalidArgument,
                 fmt::format("a {} chunk of {} bytes exceeds the 4 GiB chunk limit",
                             ChunkTypeName(type), raw.size()));
  const Bytes* payload = &raw;
  if (codec == Codec::kZstd) {
    FAY_RETURN_IF_ERROR(compressor_.Compress(raw, &scratch_));
    payload = &scratch_;
  }
  ChunkHeader h;
  h.type = type;
  h.codec = codec;
  h.seq = next_seq_;
  h.stored_length = static_cast<uint32_t>(payload->size());
  h.raw_length = static_cast<uint32_t>(raw.size());
  h.count = count;
  h.payload_crc = Crc32c(payload->data(), payload->size());
  uint8_t hdr[kChunkHeaderSize];
  EncodeChunkHeader(h, hdr);
  size_t total = sizeof(hdr) + payload->size();
  Status appended = sink_.Append(hdr, sizeof(hdr));
  if (appended.ok()) appended = sink_.Append(payload->data(), payload->size());
  // A chunk the sink did not take is the caller's to count as lost (see Fail).
  if (appended.ok())
    staged_chunks_.push_back(StagedChunk{offset_ + total, next_seq_ + 1,
                                         type == ChunkType::kEvents ? count : 0,
                                         type == ChunkType::kEvents ? pending_syscalls_ : 0});
  NoteDurable();
  FAY_RETURN_IF_ERROR(appended);
  *offset = offset_;
  *seq = next_seq_++;
  *stored = h.stored_length;
  offset_ += total;
  ++stats_.chunks;
  stats_.bytes_raw += raw.size();
  stats_.bytes_stored += payload->size();
  stats_.file_bytes = offset_;
  return Status::Ok();
}

void Writer::NoteDurable() {
  while (!staged_chunks_.empty() && staged_chunks_.front().end <= sink_.durable()) {
    whole_end_ = staged_chunks_.front().end;
    whole_chunks_ = staged_chunks_.front().chunks;
    staged_chunks_.pop_front();
  }
}

void Writer::Fail(const Status& st) {
  thread_failed_ = true;
  stats_.dropped_events += pending_index_.records;  // encoded, never to reach the file
  stats_.syscall_events -= pending_syscalls_;
  pending_syscalls_ = 0;
  // Cut a partial chunk off, so the file ends on a chunk boundary (best effort: a device such as
  // /dev/full cannot be truncated, and the reader copes with a partial chunk anyway).
  NoteDurable();
  // Chunks the sink took but never got into the file: their events are lost too.
  for (const StagedChunk& c : staged_chunks_) {
    stats_.dropped_events += c.events;
    stats_.syscall_events -= c.syscalls;
  }
  staged_chunks_.clear();
  if (sink_.Truncate(whole_end_)) stats_.file_bytes = whole_end_;
  Status err(st.code(), fmt::format("{}; recording stopped, the trace is readable up to offset {} "
                                    "({} whole chunks)",
                                    st.message(), whole_end_, whole_chunks_));
  std::lock_guard lk(mu_);
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
    if (!thread_failed_) Finish();
    std::lock_guard lk(mu_);
    published_ = stats_;
  }
  std::lock_guard lk(mu_);
  if (!failed_) {
    Status st = sink_.Close();
    if (!st.ok()) {
      failed_ = true;
      error_ = st;
    }
  }
  return error_;
}

bool Writer::failed() const {
  std::lock_guard lk(mu_);
  return failed_;
}

WriterStats Writer::stats() const {
  std::lock_guard lk(mu_);
  WriterStats s = published_;
  s.dropped_events += dropped_;
  return s;
}

}  // namespace fay::trace
