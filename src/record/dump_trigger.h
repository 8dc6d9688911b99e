// A flight recorder's predicate trigger: `fay record --flight SIZE --dump-on 'syscall:openat where
// errno == 13'` asks for a dump when a recorded call matches. The predicate is the query
// language's, evaluated by the offline engine on each recorded call, so it means exactly what the
// same `where` means in `fay query -i` over the dump.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/interpreter.h"
#include "engine/offline/event_builder.h"
#include "query/plan.h"
#include "record/recorder.h"

namespace fay::trace {
class FlightControl;
}

namespace fay::record {

class DumpTrigger : public SyscallObserver {
  struct Key {};  // keeps construction to Compile

 public:
  // `text`: a syscall probe and an optional predicate, as `PROBES where PRED` or in query form
  // `PROBES | where PRED`. Calls also go to `next` (may be null), which stays the one asked for
  // FileOf. After firing, the trigger rests for `rest_ns` of the calls' own time, so that one
  // burst of matches makes one dump.
  static Expected<std::unique_ptr<DumpTrigger>> Compile(const std::string& text,
                                                        trace::FlightControl* flight,
                                                        SyscallObserver* next,
                                                        uint64_t rest_ns = 1'000'000'000);

  bool Wants(int nr) const override;
  void Observe(const SyscallEvent& ev) override;
  bool FileOf(int32_t pid, int fd, std::string* path, uint64_t* offset) const override {
    return next_ && next_->FileOf(pid, fd, path, offset);
  }
  uint64_t fired() const;
  // The system calls it matches: they must be recorded for it to fire.
  std::vector<int> Syscalls() const;

  DumpTrigger(Key, std::string text, Plan plan, trace::FlightControl* flight, SyscallObserver* next,
              uint64_t rest_ns);

 private:
  const std::string text_;
  Plan plan_;
  EventBuilder builder_;
  trace::FlightControl* flight_;
  SyscallObserver* next_;
  const uint64_t rest_ns_;
  // The recorder's consumers may call from several threads.
  mutable std::mutex mu_;
  Interpreter interp_;
  uint64_t last_fired_ns_ = 0;
  uint64_t fired_ = 0;
};

}  // namespace fay::record
