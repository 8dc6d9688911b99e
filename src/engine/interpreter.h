// The user-space interpreter of a Plan: the differential oracle for the kernel path and the engine
// for offline sources. It evaluates the probe part (predicate, sample, keys, partial aggregation)
// on decoded events with the same semantics as the generated eBPF.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "common/status.h"
#include "engine/value.h"
#include "query/plan.h"

namespace fay {

class Interpreter {
 public:
  // The plan (and the query it points into) must outlive the interpreter.
  explicit Interpreter(const Plan& plan, uint64_t sample_seed = kDefaultSampleSeed);
  // Not copyable or movable: last_ points into groups_.
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // kAggregate: folds one event into the current window.
  void Process(const Event& e);
  // The window's rows, ordered by key tuple; resets the states. Without keys there is always
  // exactly one row (with empty keys), even when nothing matched.
  ResultSet TakeWindow(uint64_t window_end_ns);
  // The window's rows as they stand, without resetting them (`snapshot`).
  ResultSet PeekWindow(uint64_t window_end_ns) const;
  // kSelect: the selected columns, or nullopt when the event is filtered out (or not evaluable).
  std::optional<std::vector<Value>> Select(const Event& e);
  // An event of state pipeline `state` (Plan::states; its probe_index is into that plan's
  // probes) at time `now_ns`: stores its value, as the pipeline's probe does. The query's own
  // events read those values; give each event to the query before its state pipelines, so a
  // probe that does both reads the value from before its own event. True when it stored one.
  bool Remember(size_t state, const Event& e);

  // Folds another interpreter's current window into this one (same plan): the parallel
  // readers of a trace each run one interpreter over their chunks, then merge.
  void Merge(Interpreter& other);

  const RunStats& stats() const { return stats_; }
  // The first evaluation error (events that fail to evaluate are dropped), or Ok.
  const Status& first_error() const { return first_error_; }

  static constexpr uint64_t kDefaultSampleSeed = 0x66617921;

 private:
  bool Admit(const Event& e);  // counts, state reads, predicate, sample
  // Without keys and with nothing matched, the window's one row of empty aggregates into *rs.
  bool EmptyWindow(ResultSet* rs) const;
  // The event's state reads into state_values_, taking each value read; false when one is
  // missing or expired.
  bool ReadStates(const Event& e);
  // The admitted event `in`, with its state values when the plan reads states.
  const Event& Current(const Event& in) const {
    return plan_.state_reads.empty() ? in : with_states_;
  }
  bool Fail(const Status& st);
  bool UpdateAgg(AggState& state, const AggSlot& slot, const Event& e);

  const Plan& plan_;
  RunStats stats_;
  Status first_error_;
  // Sampling draws from its own PRNG: keeps probability num/den, not the probe's exact choices.
  std::mt19937_64 rng_;
  using Groups = std::map<std::vector<Value>, std::vector<AggState>>;
  Groups groups_;
  // Scratch reused across events, and the group the previous event went to: consecutive events
  // mostly share their key (one process's calls come in runs), which saves the map lookup.
  std::vector<Value> key_;
  Value arg_;
  Groups::iterator last_ = groups_.end();
  // State across probes, as the probe's maps keep it: per state pipeline, key -> {value, time}.
  struct Stored {
    Value value;
    uint64_t time_ns = 0;
  };
  // Keys as the probe stores them: ints, and strings cut to the remembered key's width.
  std::vector<std::map<std::vector<Value>, Stored>> states_;
  std::vector<Value> state_values_;
  Event with_states_;
  std::vector<std::mt19937_64> state_rngs_;
};

}  // namespace fay
