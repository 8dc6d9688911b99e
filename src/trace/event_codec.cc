#include "trace/event_codec.h"

#include <fmt/core.h>

#include <cstring>

namespace fay::trace {
namespace {

// Presence bits at the start of a syscall record body.
constexpr uint64_t kHasExit = 1u << 0;
constexpr uint64_t kHasContext = 1u << 1;
constexpr uint64_t kHasFlags = 1u << 2;
constexpr uint64_t kHasBuffers = 1u << 3;

// Per-buffer flag bits.
constexpr uint8_t kBufTruncated = 1u << 0;
constexpr uint8_t kBufNotCaptured = 1u << 1;
constexpr uint8_t kBufInline = 1u << 2;

size_t CommLength(const std::array<char, 16>& comm) {
  size_t n = comm.size();
  while (n > 0 && comm[n - 1] == '\0') --n;
  return n;
}

void PutHash(Bytes& out, const Hash128& h) {
  PutU64(out, h.lo);
  PutU64(out, h.hi);
}

uint64_t ArgBase(const std::array<uint64_t, 6>& args, uint8_t arg) {
  return arg < 6 ? args[arg] : 0;
}

void PutRecord(Bytes& out, RecordKind kind, const Bytes& body) {
  PutVarint(out, static_cast<uint8_t>(kind));
  PutVarint(out, body.size());
  out.insert(out.end(), body.begin(), body.end());
}

}  // namespace

void EventEncoder::Syscall(const SyscallEvent& ev, const BlobSink& blobs, Bytes* out) {
  // The recorder hands over millions of these a second: the body is written through a pointer
  // into room sized for its largest encoding, not byte by byte into a growing vector.
  constexpr size_t kFixedMax = 16 * 10 + sizeof(ev.comm);
  constexpr size_t kPerBufferMax = 7 * 10 + 16;
  size_t room = kFixedMax + ev.buffers.size() * kPerBufferMax;
  for (const CapturedBuffer& buf : ev.buffers)
    if (!buf.stored && buf.bytes.size() <= kInlineMax) room += buf.bytes.size();
  // Written in place, behind the record's kind and a one-byte length (most bodies are shorter
  // than 128 bytes), with room for a longer length should the body have to move up (see the
  // end). Encoded into a scratch buffer and appended, a record cost three times as much:
  // bench/consumer_bench took 0.39 s for 2M calls, against 0.13 s.
  const size_t at = out->size();
  out->resize(at + 1 + 10 + room);
  uint8_t* const start = out->data() + at + 2;
  uint8_t* p = start;

  ChunkCodecState::ThreadContext* known = nullptr;
  if (state_.last_ctx && state_.last_ctx_tid == ev.tid) {
    known = state_.last_ctx;
  } else if (auto it = state_.threads.find(ev.tid); it != state_.threads.end()) {
    known = &it->second;
  }
  bool new_context = !known || known->pid != ev.pid || known->ppid != ev.ppid ||
                     known->uid != ev.uid || known->comm != ev.comm;
  uint64_t bits = 0;
  if (ev.exit_ns != 0) bits |= kHasExit;
  if (new_context) bits |= kHasContext;
  if (ev.flags != 0) bits |= kHasFlags;
  if (!ev.buffers.empty()) bits |= kHasBuffers;
  p = PutVarintAt(p, bits);
  p = PutZigzagAt(p, int64_t{ev.tid} - int64_t{state_.prev_tid});
  state_.prev_tid = ev.tid;
  if (new_context) {
    p = PutZigzagAt(p, ev.pid);
    p = PutZigzagAt(p, ev.ppid);
    p = PutVarintAt(p, ev.uid);
    size_t n = CommLength(ev.comm);
    p = PutVarintAt(p, n);
    std::memcpy(p, ev.comm.data(), n);
    p += n;
    if (!known) known = &state_.threads[ev.tid];
    *known = ChunkCodecState::ThreadContext{ev.pid, ev.ppid, ev.uid, ev.comm};
  }
  state_.last_ctx_tid = ev.tid;
  state_.last_ctx = known;
  p = PutZigzagAt(p, static_cast<int64_t>(ev.entry_ns - state_.prev_time));
  state_.prev_time = ev.entry_ns;
  if (ev.exit_ns != 0) p = PutZigzagAt(p, static_cast<int64_t>(ev.exit_ns - ev.entry_ns));
  p = PutZigzagAt(p, ev.nr);
  auto& prev = state_.PrevArgs(ev.nr);
  for (int i = 0; i < 6; ++i) p = PutZigzagAt(p, static_cast<int64_t>(ev.args[i] - prev[i]));
  prev = ev.args;
  p = PutZigzagAt(p, ev.ret);
  if (ev.flags != 0) p = PutVarintAt(p, ev.flags);
  if (!ev.buffers.empty()) {
    p = PutVarintAt(p, ev.buffers.size());
    for (const CapturedBuffer& buf : ev.buffers) {
      // Stored already (CapturedBuffer::stored): its hash stands for it.
      bool inline_bytes = !buf.stored && buf.bytes.size() <= kInlineMax;
      uint64_t size = buf.stored ? buf.stored->size : buf.bytes.size();
      p = PutVarintAt(p, buf.arg);
      p = PutVarintAt(p, buf.sub);
      *p++ = static_cast<uint8_t>(buf.dir);
      p = PutZigzagAt(p, static_cast<int64_t>(buf.addr - ArgBase(ev.args, buf.arg)));
      p = PutVarintAt(p, buf.length);
      *p++ = static_cast<uint8_t>((buf.truncated ? kBufTruncated : 0) |
                                  (buf.not_captured ? kBufNotCaptured : 0) |
                                  (inline_bytes ? kBufInline : 0));
      p = PutVarintAt(p, size);
      if (inline_bytes) {
        if (!buf.bytes.empty()) std::memcpy(p, buf.bytes.data(), buf.bytes.size());
        p += buf.bytes.size();
      } else {
        Hash128 h = buf.stored ? Hash128{buf.stored->hash_lo, buf.stored->hash_hi}
                               : HashBlob(buf.bytes.data(), buf.bytes.size());
        for (uint64_t half : {h.lo, h.hi})
          for (int i = 0; i < 8; ++i) *p++ = static_cast<uint8_t>(half >> (8 * i));
        if (!buf.stored) blobs(h, buf.bytes);
      }
    }
  }
  // Minor 2 appends the CPU, only when known; older readers ignore the byte.
  if (ev.cpu >= 0) p = PutZigzagAt(p, ev.cpu);
  const size_t len = static_cast<size_t>(p - start);
  uint8_t* const head = out->data() + at;
  static_assert(static_cast<uint8_t>(RecordKind::kSyscall) < 0x80);
  head[0] = static_cast<uint8_t>(RecordKind::kSyscall);
  uint8_t len_bytes[10];
  const size_t n = static_cast<size_t>(PutVarintAt(len_bytes, len) - len_bytes);
  // A longer body (inline buffers) moves up to make room for its length's extra bytes.
  if (n > 1) std::memmove(head + 1 + n, start, len);
  std::memcpy(head + 1, len_bytes, n);
  out->resize(at + 1 + n + len);
}

void EventEncoder::Process(const ProcessEvent& ev, Bytes* out) {
  Bytes& b = body_;
  b.clear();
  if (ev.kind == ProcessEventKind::kSignal) {
    // A record kind of its own (minor 6): a reader older than it skips it.
    PutZigzag(b, static_cast<int64_t>(ev.time_ns - state_.prev_time));
    state_.prev_time = ev.time_ns;
    PutZigzag(b, ev.pid);
    PutZigzag(b, ev.tid);
    PutVarint(b, static_cast<uint32_t>(ev.signo));
    PutString(
        b, std::string_view(reinterpret_cast<const char*>(ev.siginfo.data()), ev.siginfo.size()));
    PutRecord(*out, RecordKind::kSignal, b);
    return;
  }
  PutVarint(b, static_cast<uint8_t>(ev.kind));
  PutZigzag(b, static_cast<int64_t>(ev.time_ns - state_.prev_time));
  state_.prev_time = ev.time_ns;
  PutZigzag(b, ev.pid);
  PutZigzag(b, ev.tid);
  PutZigzag(b, ev.parent_pid);
  PutU8(b, ev.is_thread ? 1 : 0);
  PutZigzag(b, ev.exit_status);
  PutString(b, ev.path);
  PutRecord(*out, RecordKind::kProcess, b);
}

void EventEncoder::Loss(const LossRecord& loss, Bytes* out) {
  Bytes& b = body_;
  b.clear();
  PutZigzag(b, static_cast<int64_t>(loss.time_ns - state_.prev_time));
  state_.prev_time = loss.time_ns;
  PutVarint(b, loss.count);
  PutZigzag(b, loss.cpu);
  PutRecord(*out, RecordKind::kLoss, b);
}

namespace {

struct PendingBlob {
  size_t buffer;
  Hash128 hash;
  uint64_t size;
};

// The thread and the syscall of the previous record: runs of one thread's calls, and of one
// syscall, are the common case, and these save the two hash lookups per record that otherwise
// dominate decoding. Pointers into unordered_map stay valid as it grows.
struct DecodeCache {
  int32_t tid = 0;
  ChunkCodecState::ThreadContext* thread = nullptr;
  int32_t nr = 0;
  std::array<uint64_t, 6>* args = nullptr;
};

bool DecodeSyscallBody(ByteReader& r, ChunkCodecState& st, DecodeCache& cache, SyscallEvent* ev,
                       std::vector<PendingBlob>* blobs) {
  uint64_t bits, uid, comm_len, u;
  int64_t s, tid_delta;
  if (!r.Varint(&bits) || !r.Zigzag(&tid_delta)) return false;
  // Unsigned, so a hostile delta wraps instead of overflowing; honest deltas come out the same.
  ev->tid =
      static_cast<int32_t>(static_cast<uint64_t>(st.prev_tid) + static_cast<uint64_t>(tid_delta));
  st.prev_tid = ev->tid;
  if (bits & kHasContext) {
    int64_t pid, ppid;
    const uint8_t* comm;
    if (!r.Zigzag(&pid) || !r.Zigzag(&ppid) || !r.Varint(&uid) || !r.Varint(&comm_len) ||
        comm_len > 16 || !r.Raw(comm_len, &comm))
      return false;
    ChunkCodecState::ThreadContext ctx;
    ctx.pid = static_cast<int32_t>(pid);
    ctx.ppid = static_cast<int32_t>(ppid);
    ctx.uid = static_cast<uint32_t>(uid);
    std::memcpy(ctx.comm.data(), comm, comm_len);
    st.threads[ev->tid] = ctx;
  }
  if (!cache.thread || cache.tid != ev->tid || (bits & kHasContext)) {
    auto it = st.threads.find(ev->tid);
    if (it == st.threads.end()) return false;  // a thread's first record must carry its context
    cache.tid = ev->tid;
    cache.thread = &it->second;
  }
  const ChunkCodecState::ThreadContext& thread = *cache.thread;
  ev->pid = thread.pid;
  ev->ppid = thread.ppid;
  ev->uid = thread.uid;
  ev->comm = thread.comm;
  if (!r.Zigzag(&s)) return false;
  ev->entry_ns = st.prev_time + static_cast<uint64_t>(s);
  st.prev_time = ev->entry_ns;
  ev->exit_ns = 0;
  if (bits & kHasExit) {
    if (!r.Zigzag(&s)) return false;
    ev->exit_ns = ev->entry_ns + static_cast<uint64_t>(s);
  }
  if (!r.Zigzag(&s)) return false;
  ev->nr = static_cast<int32_t>(s);
  if (!cache.args || cache.nr != ev->nr) {
    cache.nr = ev->nr;
    cache.args = &st.PrevArgs(ev->nr);
  }
  auto& prev = *cache.args;
  for (int i = 0; i < 6; ++i) {
    if (!r.Zigzag(&s)) return false;
    ev->args[i] = prev[i] + static_cast<uint64_t>(s);
  }
  prev = ev->args;
  if (!r.Zigzag(&ev->ret)) return false;
  ev->flags = 0;
  if (bits & kHasFlags) {
    if (!r.Varint(&u)) return false;
    ev->flags = static_cast<uint32_t>(u);
  }
  ev->buffers.clear();
  if (bits & kHasBuffers) {
    uint64_t n;
    if (!r.Varint(&n) || n > r.remaining()) return false;
    ev->buffers.resize(n);
    for (size_t i = 0; i < n; ++i) {
      CapturedBuffer& buf = ev->buffers[i];
      uint64_t arg, sub, length, size;
      uint8_t dir, flags;
      int64_t addr_delta;
      if (!r.Varint(&arg) || !r.Varint(&sub) || !r.U8(&dir) || !r.Zigzag(&addr_delta) ||
          !r.Varint(&length) || !r.U8(&flags) || !r.Varint(&size))
        return false;
      buf.arg = static_cast<uint8_t>(arg);
      buf.sub = static_cast<uint16_t>(sub);
      buf.dir = static_cast<BufferDir>(dir);
      buf.addr = ArgBase(ev->args, buf.arg) + static_cast<uint64_t>(addr_delta);
      buf.length = length;
      buf.truncated = flags & kBufTruncated;
      buf.not_captured = flags & kBufNotCaptured;
      if (flags & kBufInline) {
        const uint8_t* p;
        if (size > r.remaining() || !r.Raw(size, &p)) return false;
        buf.bytes.assign(p, p + size);
      } else {
        PendingBlob pb{i, {}, size};
        if (!r.U64(&pb.hash.lo) || !r.U64(&pb.hash.hi)) return false;
        blobs->push_back(pb);
      }
    }
  }
  ev->cpu = -1;
  if (r.remaining() > 0) {
    int64_t cpu;
    if (!r.Zigzag(&cpu) || cpu < -1 || cpu > INT32_MAX) return false;
    ev->cpu = static_cast<int32_t>(cpu);
  }
  return true;
}

bool DecodeProcessBody(ByteReader& r, ChunkCodecState& st, ProcessEvent* ev) {
  uint64_t kind;
  int64_t dt, pid, tid, parent, status;
  uint8_t is_thread;
  if (!r.Varint(&kind) || !r.Zigzag(&dt) || !r.Zigzag(&pid) || !r.Zigzag(&tid) ||
      !r.Zigzag(&parent) || !r.U8(&is_thread) || !r.Zigzag(&status) || !r.String(&ev->path))
    return false;
  // A signal has a record kind of its own: a process record never says kSignal.
  if (kind == static_cast<uint64_t>(ProcessEventKind::kSignal)) return false;
  ev->kind = static_cast<ProcessEventKind>(kind);
  ev->signo = 0;
  ev->siginfo.clear();
  ev->time_ns = st.prev_time + static_cast<uint64_t>(dt);
  st.prev_time = ev->time_ns;
  ev->pid = static_cast<int32_t>(pid);
  ev->tid = static_cast<int32_t>(tid);
  ev->parent_pid = static_cast<int32_t>(parent);
  ev->is_thread = is_thread != 0;
  ev->exit_status = static_cast<int32_t>(status);
  return true;
}

bool DecodeSignalBody(ByteReader& r, ChunkCodecState& st, ProcessEvent* ev) {
  int64_t dt, pid, tid;
  uint64_t signo;
  std::string info;
  if (!r.Zigzag(&dt) || !r.Zigzag(&pid) || !r.Zigzag(&tid) || !r.Varint(&signo) || signo > 64 ||
      !r.String(&info) || info.size() > 128)
    return false;
  ev->kind = ProcessEventKind::kSignal;
  ev->time_ns = st.prev_time + static_cast<uint64_t>(dt);
  st.prev_time = ev->time_ns;
  ev->pid = static_cast<int32_t>(pid);
  ev->tid = static_cast<int32_t>(tid);
  ev->parent_pid = 0;
  ev->is_thread = false;
  ev->exit_status = 0;
  ev->path.clear();
  ev->signo = static_cast<int32_t>(signo);
  ev->siginfo.assign(info.begin(), info.end());
  return true;
}

}  // namespace

Status DecodeEvents(const uint8_t* data, size_t n, uint32_t count, const DecodeSinks& sinks) {
  ChunkCodecState st;
  DecodeCache cache;
  ByteReader r(data, n);
  SyscallEvent sys;
  ProcessEvent proc;
  std::vector<PendingBlob> blobs;
  uint32_t index = 0;
  for (; !r.empty(); ++index) {
    size_t at = r.pos();
    // More records than the header counts: stop at the first, not after decoding them all.
    if (index == count)
      return Error(Code::kIo,
                   fmt::format("chunk header says {} records, payload holds more (record {} at "
                               "payload byte {})",
                               count, index, at));
    auto bad = [&](std::string_view what) {
      return Error(Code::kIo, fmt::format("record {} at payload byte {}: {}", index, at, what));
    };
    uint64_t kind, len;
    const uint8_t* body;
    if (!r.Varint(&kind) || !r.Varint(&len) || len > r.remaining() || !r.Raw(len, &body))
      return bad("record header runs past the end of the chunk");
    ByteReader br(body, len);
    switch (static_cast<RecordKind>(kind)) {
      case RecordKind::kSyscall: {
        blobs.clear();
        if (!DecodeSyscallBody(br, st, cache, &sys, &blobs)) return bad("malformed syscall record");
        if (sinks.want_syscall && !sinks.want_syscall(sys)) break;
        for (const PendingBlob& pb : blobs) {
          if (sinks.blob_ref && sinks.leave_unread &&
              sinks.leave_unread(sys, sys.buffers[pb.buffer])) {
            Status s = sinks.blob_ref(pb.hash, pb.size);
            if (!s.ok()) return bad(s.message());
            sys.buffers[pb.buffer].stored = StoredBlob{pb.hash.lo, pb.hash.hi, pb.size};
            continue;
          }
          if (sinks.shared_blob) {
            Status s = sinks.shared_blob(pb.hash, pb.size, &sys.buffers[pb.buffer].shared);
            if (!s.ok()) return bad(s.message());
            continue;
          }
          Status s = sinks.blob(pb.hash, pb.size, &sys.buffers[pb.buffer].bytes);
          if (!s.ok()) return bad(s.message());
        }
        if (sinks.syscall) sinks.syscall(sys);
        break;
      }
      case RecordKind::kProcess:
        if (!DecodeProcessBody(br, st, &proc)) return bad("malformed process record");
        if (sinks.process) sinks.process(proc);
        break;
      case RecordKind::kSignal:
        if (!DecodeSignalBody(br, st, &proc)) return bad("malformed signal record");
        if (sinks.process) sinks.process(proc);
        break;
      case RecordKind::kLoss: {
        int64_t dt;
        LossRecord loss;
        if (!br.Zigzag(&dt) || !br.Varint(&loss.count)) return bad("malformed loss record");
        loss.time_ns = st.prev_time + static_cast<uint64_t>(dt);
        st.prev_time = loss.time_ns;
        // Added in minor 1: absent in older files.
        if (int64_t cpu; br.remaining() > 0 && br.Zigzag(&cpu))
          loss.cpu = static_cast<int32_t>(cpu);
        if (sinks.loss) sinks.loss(loss);
        break;
      }
      default:
        break;  // a record kind from a newer minor
    }
  }
  if (index != count)
    return Error(Code::kIo,
                 fmt::format("chunk header says {} records, payload holds {}", count, index));
  return Status::Ok();
}

void EncodeBlob(const Hash128& h, const std::vector<uint8_t>& bytes, Bytes* out) {
  PutHash(*out, h);
  PutVarint(*out, bytes.size());
  PutRaw(*out, bytes.data(), bytes.size());
}

Status DecodeBlobs(const uint8_t* data, size_t n, uint32_t count, std::vector<BlobEntry>* out) {
  ByteReader r(data, n);
  out->clear();
  while (!r.empty()) {
    size_t at = r.pos();
    BlobEntry e;
    uint64_t size;
    const uint8_t* p;
    if (!r.U64(&e.hash.lo) || !r.U64(&e.hash.hi) || !r.Varint(&size) || size > r.remaining() ||
        !r.Raw(size, &p))
      return Error(Code::kIo, fmt::format("blob {} at payload byte {} runs past the end of the "
                                          "chunk",
                                          out->size(), at));
    e.offset = static_cast<uint32_t>(p - data);
    e.size = static_cast<uint32_t>(size);
    if (HashBlob(p, size) != e.hash)
      return Error(Code::kIo, fmt::format("blob {} at payload byte {}: content does not match its "
                                          "hash {}",
                                          out->size(), at, HashHex(e.hash)));
    out->push_back(e);
  }
  if (out->size() != count)
    return Error(Code::kIo,
                 fmt::format("chunk header says {} blobs, payload holds {}", count, out->size()));
  return Status::Ok();
}

}  // namespace fay::trace
