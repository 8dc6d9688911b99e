// Program: a loaded, verified BPF program built from fay's own bytecode.
#pragma once

#include <linux/bpf.h>

#include <string>
#include <vector>

#include "bpf/emitter.h"
#include "bpf/fd.h"
#include "common/status.h"

namespace fay::bpf {

struct ProgramSpec {
  bpf_prog_type type = BPF_PROG_TYPE_UNSPEC;
  std::string name;
  std::vector<bpf_insn> insns;
  std::vector<MapReloc> relocs;
  // Instruction indexes where subprograms (callbacks) start, after the main program at 0.
  std::vector<size_t> func_starts;
  std::vector<bool> func_global;  // per subprogram: see Emitter::BeginFunc
  // BPF_PROG_TYPE_TRACING programs: what they attach to (a vmlinux BTF type id) and how.
  uint32_t attach_btf_id = 0;
  bpf_attach_type expected_attach_type = static_cast<bpf_attach_type>(0);
};

class Program {
 public:
  Program() = default;
  Program(Program&&) noexcept = default;
  Program& operator=(Program&&) noexcept = default;

  // Patches each MapReloc (insn index -> map_fds[map_index]) and loads with license "GPL".
  // A verifier rejection returns Code::kVerifier with the tail of the verifier log; EPERM
  // returns Code::kPermission with the fix.
  static Expected<Program> Load(const ProgramSpec& spec, const std::vector<int>& map_fds);

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  bpf_prog_type type() const { return type_; }

 private:
  UniqueFd fd_;
  std::string name_;
  bpf_prog_type type_ = BPF_PROG_TYPE_UNSPEC;
};

}  // namespace fay::bpf
