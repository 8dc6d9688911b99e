// A loaded query: the maps and programs the code generator produced, created in the kernel and
// attached. Every kernel object is owned here, so destruction (or the death of the process)
// detaches everything.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "bpf/attach.h"
#include "bpf/codegen/codegen.h"
#include "bpf/map.h"
#include "bpf/program.h"
#include "bpf/ringbuf.h"
#include "engine/value.h"
#include "probes/kernel_symbols.h"
#include "probes/mmap_events.h"
#include "probes/symbolizer.h"
#include "query/plan.h"

namespace fay::bpf {

// Aggregation states a query keeps outside the kernel (in-process probes, src/inproc/host.h),
// folded into every window with the kernel's maps.
class StateSource {
 public:
  virtual ~StateSource() = default;
  // The live window is now `window` (bit 0: kMapAggB); called after the kernel's flips.
  virtual void SetWindow(uint64_t window) = 0;
  // Every key and value of the aggregation map `map` (kMapAggA or kMapAggB) with its cache,
  // in the kernel maps' layout; `clear` empties them after.
  virtual void Fold(int map, bool clear,
                    const std::function<void(const uint8_t* key, const uint8_t* value)>& fn) = 0;
  virtual void AddStats(RunStats* stats) const = 0;
};

// Adds one copy of the stats counters (kStatCount u64, codegen.h's StatIndex) to `st`.
void AddStatCounters(const uint64_t* counters, RunStats* st);

class LiveQuery {
 public:
  // `time_ns`: when the probe ran, CLOCK_MONOTONIC.
  using RowCallback =
      std::function<void(std::vector<Value> row, int probe_index, uint64_t time_ns)>;

  // Creates the maps and loads (verifies) every program; attaches nothing yet.
  static Expected<std::unique_ptr<LiveQuery>> Load(const Plan& plan, const CodegenOptions& options);
  ~LiveQuery();

  // Adds a process (and, with descendants, its live children) to the traced tree.
  // `pending_exec`: the process only counts once it has exec'd (a `-c` child held before exec).
  Status AddScopePid(pid_t pid, bool pending_exec = false);
  // Attaches every program; `interrupted` (polled between attachments) aborts it. A probe the
  // kernel refuses, among several, is skipped and named in warnings().
  Status Attach(const std::function<bool()>& interrupted = nullptr);
  const std::vector<std::string>& warnings() const { return warnings_; }
  void Detach();
  // Probes (by index) that run elsewhere: Attach leaves them out, and every window and the
  // stats fold in what `source` holds. Before Attach.
  void SetStateSource(StateSource* source, std::vector<bool> elsewhere) {
    source_ = source;
    elsewhere_ = std::move(elsewhere);
  }
  // A held `-c` command has exec'd: detaches the program that waited for its first execve.
  void CommandStarted();

  // kAggregate: merges the per-CPU states of the current window. With `every`, swaps the
  // double-buffered maps first and clears the window it read.
  Expected<ResultSet> ReadWindow(uint64_t window_end_ns);
  // Every table's window (Plan::tables), the query's own first; one flip of `every` for all.
  Expected<std::vector<ResultSet>> ReadWindows(uint64_t window_end_ns);
  // When the trigger of state pipeline `state` (Plan::states) last fired, as the probe's
  // CLOCK_MONOTONIC ns; 0 while it has not.
  Expected<uint64_t> TriggerTime(int state) const;
  // kSelect: decodes ring-buffer records. Returns the number consumed.
  Expected<int> PollEvents(int timeout_ms, const RowCallback& cb);

  // Names user stack frames (Stack::names) when keys and rows are decoded. Give it the `-c`
  // command's executable with SetFallbackBinary, for processes that exit unseen.
  Symbolizer& symbolizer() { return *symbolizer_; }
  // Snapshots the memory maps of every process that has a stack in the current aggregation
  // state (new ones now, known ones again when their snapshot is a second old), so its frames
  // can be named after it exits. Call it every few hundred ms while the query runs; it returns
  // at once when the query has no stack key or is a select query (those name their frames as
  // each event arrives).
  void RememberStackProcesses();
  // Only the kernel's mapping records, drained (a ring read; nothing when rows name no user
  // address): for callers that must keep up more often than they walk the maps.
  void DrainMappingRecords() { DrainMappings(); }

  RunStats Stats() const;
  const GeneratedQuery& generated() const { return gen_; }
  size_t attached_links() const { return links_.size(); }

 private:
  LiveQuery(const Plan& plan) : plan_(plan) {}
  Status LoadWith(const CodegenOptions& options);
  Expected<Link> AttachUprobeGroup(const Program& prog, const Attachment& a,
                                   const std::vector<int>& probes);
  Expected<Link> AttachPoint(const Program& prog, const Attachment& a, const Plan& owner);
  // The keys (or selected columns) of `shape` (plan_, or one of its tables) from probe bytes.
  Expected<std::vector<Value>> DecodeSlots(const Plan& shape, const uint8_t* data) const;
  // The processes (tgids) of the stack keys in raw key bytes.
  void StackTgidsOf(const Plan& shape, const uint8_t* key, std::vector<int32_t>* tgids) const;
  Expected<ResultSet> ReadMap(const Plan& shape, const Map& map, const Map* cache, bool clear,
                              uint64_t window_end_ns);

  const Plan& plan_;
  StateSource* source_ = nullptr;
  std::vector<bool> elsewhere_;
  GeneratedQuery gen_;
  std::optional<Map> maps_[kMapCount];
  std::vector<Program> programs_;
  std::vector<Link> links_;
  Link start_link_;  // kScopeStart, until CommandStarted()
  // Closes start_link_ off the caller's path: a tracepoint detach waits out an RCU grace period
  // (up to 200 ms here), which would hold up the command's first window. Joined by Detach and
  // the destructor.
  std::thread start_closer_;
  std::vector<std::string> warnings_;
  std::unique_ptr<RingBufferReader> ring_;
  const RowCallback* row_cb_ = nullptr;
  uint64_t window_ = 0;
  RunStats ring_errors_;
  std::unique_ptr<Symbolizer> symbolizer_ = std::make_unique<Symbolizer>();
  // The kernel's mapping records, while rows name user addresses: a process that exits before
  // its row is printed is still named (probes/mmap_events.h).
  std::unique_ptr<MmapEvents> mmap_events_;
  void DrainMappings() {
    if (mmap_events_) mmap_events_->Drain(*symbolizer_);
  }
  std::unique_ptr<KernelSymbols> kernel_symbols_ = std::make_unique<KernelSymbols>();
};

}  // namespace fay::bpf
