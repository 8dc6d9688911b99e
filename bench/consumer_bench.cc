// consumer_bench MIX CONSUMERS [CALLS]: how fast `fay record --backend ebpf`'s consumers turn ring
// records into a trace, apart from the traced program. On a machine of two CPUs a live recording
// cannot show it: the program and its probes need one CPU, so a second consumer has none.
//
// It prepares, for 8 simulated threads, the records the probes would put in the rings (the wire
// layout of record/ebpf/probes.h), each thread's in the share of ring tid % CONSUMERS as the
// probes choose. Then CONSUMERS threads each feed their share through the recorder's Assembler
// into their lane of one trace::Writer, as the recorder's consumers do. The trace goes to
// /dev/null: the storage's speed is measured by W2 and W5, this is the consumers' own.
//   MIX calls:   whole calls without buffers, staged 17 to a batch record (W1's records);
//   MIX buffers: a read of 4 KiB each, its buffer a fragment ahead of the call (W5's records),
//                every buffer different, so each is hashed, stored and written.
// Prints: consumed E events (B bytes of buffers) in S s with T consumers: X M events/s, Y MB/s
#include <fmt/core.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "record/ebpf/ebpf_recorder.h"
#include "record/ebpf/probes.h"
#include "schema/syscall_table.h"
#include "trace/writer.h"

namespace {

using namespace fay;
using namespace fay::record::ebpf;

constexpr int kThreads = 8;

struct Share {
  std::vector<uint8_t> bytes;   // records back to back
  std::vector<uint32_t> sizes;  // each record's length
  void Add(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    sizes.push_back(static_cast<uint32_t>(n));
  }
};

WireCall Call(int tid, uint64_t i, bool read) {
  WireCall w{};
  w.type = kRecCall;
  w.cpu = static_cast<uint16_t>(tid % 2);
  w.tgid = 1000;
  w.tid = static_cast<uint32_t>(1000 + tid);
  w.ppid = 999;
  w.entry_ns = 1'000'000'000ull + i * 500;
  w.exit_ns = w.entry_ns + 200;
  w.nr = read ? sysno::read : sysno::getppid;
  if (read) {
    w.args[0] = 3;
    w.args[1] = 0x7f0000001000ull;
    w.args[2] = 4096;
  }
  w.ret = read ? 4096 : 999;
  std::memcpy(w.comm, "bench", 6);
  return w;
}

std::vector<Share> Prepare(bool buffers, uint64_t calls, int consumers) {
  std::vector<Share> shares(static_cast<size_t>(consumers));
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  std::vector<uint8_t> rec;
  for (int t = 0; t < kThreads; ++t) {
    Share& s = shares[static_cast<size_t>((1000 + t) % consumers)];
    uint64_t mine = calls / kThreads;
    if (!buffers) {
      constexpr int kPerBatch = 17;  // 17 WireCalls fill a 2 KiB staging area
      for (uint64_t i = 0; i < mine; i += kPerBatch) {
        int n = static_cast<int>(std::min<uint64_t>(kPerBatch, mine - i));
        WireBatch b{kRecBatch, static_cast<uint32_t>(n * sizeof(WireCall))};
        rec.assign(reinterpret_cast<uint8_t*>(&b), reinterpret_cast<uint8_t*>(&b) + sizeof b);
        for (int k = 0; k < n; ++k) {
          WireCall w = Call(t, i + static_cast<uint64_t>(k), false);
          rec.insert(rec.end(), reinterpret_cast<uint8_t*>(&w),
                     reinterpret_cast<uint8_t*>(&w) + sizeof w);
        }
        s.Add(rec.data(), rec.size());
      }
      continue;
    }
    for (uint64_t i = 0; i < mine; ++i) {
      WireFragHeader h{};
      h.type = kRecFrag;
      h.tid = static_cast<uint32_t>(1000 + t);
      h.arg = 1;
      h.dir = static_cast<uint8_t>(BufferDir::kOut);
      h.total = kFragBytes;
      h.addr = 0x7f0000001000ull;
      h.len = kFragBytes;
      rec.resize(sizeof h + kFragBytes);
      std::memcpy(rec.data(), &h, sizeof h);
      for (size_t at = sizeof h; at < rec.size(); at += 8) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;  // xorshift64: nothing repeats
        std::memcpy(rec.data() + at, &rng, 8);
      }
      s.Add(rec.data(), rec.size());
      WireCall w = Call(t, i, true);
      s.Add(&w, sizeof w);
    }
  }
  return shares;
}

int Run(const std::string& mix, int consumers, uint64_t calls) {
  bool buffers = mix == "buffers";
  std::vector<Share> shares = Prepare(buffers, calls, consumers);
  trace::WriterOptions wo;
  wo.encode_on_caller = true;
  wo.zstd_level = 1;  // as the recorder
  wo.lanes = static_cast<size_t>(consumers);
  RecordingInfo info;
  auto writer = trace::Writer::Create("/dev/null", info, wo);
  if (!writer.ok()) {
    fmt::print(stderr, "consumer_bench: {}\n", writer.status().message());
    return 1;
  }
  trace::Writer& w = **writer;
  std::vector<uint64_t> events(shares.size());
  auto consume = [&](size_t lane) {
    Assembler a;
    a.set_blob_store([&w, lane](const uint8_t* d, size_t n) { return w.StoreBlobNow(d, n, lane); });
    Assembler::Out out;
    const Share& s = shares[lane];
    size_t at = 0;
    for (uint32_t n : s.sizes) {
      a.Feed(s.bytes.data() + at, n, &out);
      at += n;
      if (out.syscalls.size() >= 256) {
        events[lane] += out.syscalls.size();
        w.AppendSyscalls(&out.syscalls, lane);
      }
    }
    events[lane] += out.syscalls.size();
    w.AppendSyscalls(&out.syscalls, lane);
  };
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t i = 1; i < shares.size(); ++i) threads.emplace_back(consume, i);
  consume(0);
  for (std::thread& t : threads) t.join();
  Status closed = w.Close();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!closed.ok()) {
    fmt::print(stderr, "consumer_bench: {}\n", closed.message());
    return 1;
  }
  uint64_t total = 0;
  for (uint64_t e : events) total += e;
  uint64_t bytes = w.stats().bytes_captured;
  if (total != calls / kThreads * kThreads || w.stats().syscall_events != total) {
    fmt::print(stderr, "consumer_bench: {} events consumed, {} written, want {}\n", total,
               w.stats().syscall_events, calls / kThreads * kThreads);
    return 1;
  }
  fmt::print(stderr,
             "consumed {} events ({} bytes of buffers) in {:.3f} s with {} consumers: {:.2f} M "
             "events/s, {:.0f} MB/s\n",
             total, bytes, s, consumers, total / s / 1e6, bytes / s / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::string(argv[1]) != "calls" && std::string(argv[1]) != "buffers")) {
    fmt::print(stderr, "usage: consumer_bench calls|buffers CONSUMERS [CALLS]\n");
    return 2;
  }
  int consumers = std::atoi(argv[2]);
  uint64_t calls = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  if (consumers < 1 || consumers > static_cast<int>(kMaxRings)) {
    fmt::print(stderr, "consumer_bench: CONSUMERS must be 1 to {}\n", kMaxRings);
    return 2;
  }
  if (calls == 0) calls = std::string(argv[1]) == "calls" ? 2'000'000 : 65'536;
  return Run(argv[1], consumers, calls);
}
