// fay's side of in-process probes for one live query (docs/INPROCESS.md): which of the query's
// uprobes run inside the traced command and why the others do not, the region the command's
// runtime maps (src/inproc/region.h) with the programs the kernel's verifier accepted, and the
// maps read back into every window with the kernel's (bpf::StateSource).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "bpf/runtime.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "inproc/inject.h"
#include "inproc/region.h"
#include "inproc/shm_maps.h"
#include "inproc/tsc_calibration.h"
#include "query/plan.h"

namespace fay::inproc {

enum class UprobeMode { kAuto, kInProcess, kKernel };
Expected<UprobeMode> ParseUprobeMode(const std::string& text);

struct HostOptions {
  UprobeMode mode = UprobeMode::kAuto;
  std::string command_exe;      // the -c command's executable (resolved), empty with -p
  pid_t pid = 0;                // -p
  std::string runtime_library;  // empty: next to fay's executable
};

class InprocHost : public bpf::StateSource {
 public:
  // Decides probe by probe. Null when none runs in the process (every probe on the kernel
  // path); `notes` gets one line per uprobe that could have run in the process and will not,
  // with the reason. Under kInProcess, any such probe is an error instead.
  static Expected<std::unique_ptr<InprocHost>> Create(const Plan& plan, const HostOptions& options,
                                                      std::vector<std::string>* notes);
  ~InprocHost() override;

  // By probe index: true for those the command's runtime runs.
  const std::vector<bool>& in_process() const { return in_process_; }
  // What the command's environment gets, and the descriptor it must keep.
  std::vector<std::string> Environment() const;
  int fd() const { return fd_.get(); }
  // -p: what InjectRuntime takes.
  const std::string& library() const { return library_; }
  std::string Spec() const;
  std::vector<FunctionAt> Functions() const;

  // Tells the runtimes fay is alive (call at least every 100 ms), or that the query is over.
  void Heartbeat();
  void Stop();
  // After the run: what the runtimes did, for the summary; empty when nothing to say.
  std::vector<std::string> Report(bool verbose) const;

  void SetWindow(uint64_t window) override;
  void Fold(int map, bool clear,
            const std::function<void(const uint8_t* key, const uint8_t* value)>& fn) override;
  void AddStats(RunStats* stats) const override;

  InprocHost(const Plan& plan) : plan_(plan) {}

 private:
  Status Build(const bpf::GeneratedQuery& gen, const std::vector<size_t>& programs);
  const ShmMap* MapAt(int id) const;
  void WaitForRunsInFlight() const;

  const Plan& plan_;
  std::vector<bool> in_process_;
  std::string library_;
  UniqueFd fd_;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  RegionHeader* header_ = nullptr;
  TscCalibration tsc_;
  std::vector<std::pair<int, ShmMap>> maps_;
  bool counts_matched_ = false;
  size_t patches_ = 0;
};

}  // namespace fay::inproc
