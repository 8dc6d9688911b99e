// Attaching programs to events. A Link owns every fd that keeps a program attached (perf event
// fds and bpf link fds), so dropping the Link -- or the process dying -- detaches everything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/fd.h"
#include "bpf/program.h"
#include "common/status.h"

namespace fay::bpf {

class Link {
 public:
  Link() = default;
  Link(Link&&) noexcept = default;
  Link& operator=(Link&&) noexcept = default;

  void Add(UniqueFd fd) { fds_.push_back(std::move(fd)); }
  size_t size() const { return fds_.size(); }
  // Moves every fd of `other` into this link.
  void Merge(Link&& other);

 private:
  std::vector<UniqueFd> fds_;
};

// A tracefs tracepoint by id (events/SUBSYS/NAME/id); one perf event covering every CPU.
// `name` ("sched:sched_switch") names it in errors.
Expected<Link> AttachTracepoint(const Program& prog, int tp_id, const std::string& name = "");
Expected<Link> AttachRawTracepoint(const Program& prog, const std::string& name);
// A BTF-typed raw tracepoint program (BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP): the tracepoint
// is the one its attach_btf_id named at load.
Expected<Link> AttachTypedTracepoint(const Program& prog);
// `file_offset` is the offset of the probed instruction in `path` (not its virtual address).
// From kernel 6.6's uapi, which Debian 12's libbpf and headers predate.
constexpr uint32_t kAttachUprobeMulti = 48;  // BPF_TRACE_UPROBE_MULTI
constexpr uint32_t kUprobeMultiReturn = 1;   // BPF_F_UPROBE_MULTI_RETURN

// The kernel has uprobe_multi links (6.6 and later).
bool UprobeMultiSupported();
// One uprobe_multi link: every file offset of `path` runs `prog` (loaded with expected attach
// type BPF_TRACE_UPROBE_MULTI), which reads the matching cookie. All or nothing.
Expected<Link> AttachUprobeMulti(const Program& prog, const std::string& path,
                                 const std::vector<uint64_t>& offsets,
                                 const std::vector<uint64_t>& cookies, bool retprobe);
Expected<Link> AttachUprobe(const Program& prog, const std::string& path, uint64_t file_offset,
                            bool retprobe, int pid = -1);
// One perf software event per online CPU (e.g. PERF_COUNT_SW_CPU_CLOCK), sampled at freq_hz
// when it is non-zero, else every period_ns. `cpu` >= 0 restricts it to that one CPU (an
// interval probe wants one firing per period, not one per CPU).
Expected<Link> AttachPerfSoftware(const Program& prog, uint64_t config, uint64_t freq_hz,
                                  uint64_t period_ns, int cpu = -1);

}  // namespace fay::bpf
