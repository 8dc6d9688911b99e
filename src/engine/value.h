// Values, events and result sets shared by the kernel reader, the interpreter and the output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/aggregate.h"

namespace fay {

// A user stack: its addresses, innermost first, and the process they belong to. `names` is
// empty (not symbolized) or parallel to `frames`, "" for a frame without a name. Stacks compare
// by frames, then process, as the kernel keys them; names follow from those.
// Stack::tgid of a kernel stack (kstack): its frames belong to no process.
inline constexpr int32_t kKernelStackTgid = -1;

struct Stack {
  std::vector<uint64_t> frames;
  std::vector<std::string> names;
  int32_t tgid = 0;

  friend bool operator==(const Stack& a, const Stack& b) {
    return a.frames == b.frames && a.tgid == b.tgid;
  }
  friend bool operator<(const Stack& a, const Stack& b) {
    if (a.frames != b.frames) return a.frames < b.frames;
    return a.tgid < b.tgid;
  }
};

// Ints are carried as int64_t; a Slot's Type says whether to print them unsigned.
using Value = std::variant<int64_t, std::string, Stack>;

// One event as the interpreter sees it: a value for each field of its probe.
struct Event {
  int probe_index = 0;        // into Plan::probes
  std::vector<Value> values;  // parallel to ProbeInfo::fields
  // For user_ptr fields: the string str() reads at that address (empty when unreadable).
  std::vector<std::string> user_strings;  // parallel to ProbeInfo::fields; may be empty
  // When the probe fired: the call's entry, or its exit for a probe at the exit. States keep
  // values for a time by it (remember ... for D).
  uint64_t time_ns = 0;
  // The values of the plan's state reads (Plan::state_reads) for this event, when it has any.
  const std::vector<Value>* state_values = nullptr;
};

struct Row {
  std::vector<Value> keys;     // parallel to Plan::keys
  std::vector<AggState> aggs;  // parallel to Plan::aggs
};

// Which hosts a cluster window covers (src/cluster): every host expected, those that answered,
// and why each other one did not ("h17: deadline").
struct Coverage {
  uint32_t answered = 0;
  uint32_t expected = 0;
  std::vector<std::string> missing;  // "NAME: reason", one per host that did not answer
  bool truncated = false;            // a merge hit its key bound
};

// The aggregated result of one window.
struct ResultSet {
  uint64_t window_end_ns = 0;  // CLOCK_REALTIME ns
  std::vector<Row> rows;
  std::optional<Coverage> coverage;  // set for cluster queries only
  // Printed because the plan's snapshot trigger fired (window_end_ns: when), not at a window's
  // or the run's end.
  bool snapshot = false;
};

// Counters reported in the end-of-run summary.
struct RunStats {
  uint64_t events_seen = 0;     // probe invocations in scope
  uint64_t events_matched = 0;  // passed where/sample
  uint64_t dropped = 0;         // ring buffer full (select)
  uint64_t map_full = 0;        // aggregate key not inserted: map full
  uint64_t read_errors = 0;     // str()/stack reads that failed
  // Printed only when non-zero (so the summary line keeps its shape):
  uint64_t map_busy = 0;    // a probe nested on the same CPU found the map's bucket locked
  uint64_t map_errors = 0;  // any other refused insert, e.g. no memory for a new key
  uint64_t no_entry = 0;    // returns whose entry was never seen (calls in flight at attach)
  uint64_t state_full = 0;  // a state pipeline's value not stored: its map held --max-keys
  uint64_t no_state = 0;    // events dropped because a state they read was not there

  // Partial runs (readers of one trace, several traces) add up.
  RunStats& operator+=(const RunStats& o) {
    events_seen += o.events_seen;
    events_matched += o.events_matched;
    dropped += o.dropped;
    map_full += o.map_full;
    read_errors += o.read_errors;
    map_busy += o.map_busy;
    map_errors += o.map_errors;
    no_entry += o.no_entry;
    state_full += o.state_full;
    no_state += o.no_state;
    return *this;
  }
};

}  // namespace fay
