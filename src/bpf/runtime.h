// A loaded query: the maps and programs the code generator produced, created in the kernel and
// attached. Every kernel object is owned here, so destruction (or the death of the process)
// detaches everything.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "bpf/attach.h"
#include "bpf/codegen/codegen.h"
#include "bpf/map.h"
#include "bpf/program.h"
#include "bpf/ringbuf.h"
#include "engine/value.h"
#include "query/plan.h"

namespace fay::bpf {

class LiveQuery {
 public:
  using RowCallback = std::function<void(std::vector<Value> row, int probe_index)>;

  // Creates the maps and loads (verifies) every program; attaches nothing yet.
  static Expected<std::unique_ptr<LiveQuery>> Load(const Plan& plan, const CodegenOptions& options);

  // Adds a process (and, with descendants, its live children) to the traced tree.
  // `pending_exec`: the process only counts once it has exec'd (a `-c` child held before exec).
  Status AddScopePid(pid_t pid, bool pending_exec = false);
  Status Attach();
  void Detach();

  // kAggregate: merges the per-CPU states of the current window. With `every`, swaps the
  // double-buffered maps first and clears the window it read.
  Expected<ResultSet> ReadWindow(uint64_t window_end_ns);
  // kSelect: decodes ring-buffer records. Returns the number consumed.
  Expected<int> PollEvents(int timeout_ms, const RowCallback& cb);

  RunStats Stats() const;
  const GeneratedQuery& generated() const { return gen_; }
  size_t attached_links() const { return links_.size(); }

 private:
  LiveQuery(const Plan& plan) : plan_(plan) {}
  Status LoadWith(const CodegenOptions& options);
  Expected<std::vector<Value>> DecodeSlots(const uint8_t* data) const;
  Expected<ResultSet> ReadMap(const Map& map, const Map* cache, bool clear, uint64_t window_end_ns);

  const Plan& plan_;
  GeneratedQuery gen_;
  std::optional<Map> maps_[kMapCount];
  std::vector<Program> programs_;
  std::vector<Link> links_;
  std::unique_ptr<RingBufferReader> ring_;
  const RowCallback* row_cb_ = nullptr;
  uint64_t window_ = 0;
  RunStats ring_errors_;
};

}  // namespace fay::bpf
