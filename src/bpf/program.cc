#include "bpf/program.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "bpf/map.h"

namespace fay::bpf {

namespace {

constexpr size_t kLogSize = 4 << 20;
constexpr int kLogTailLines = 15;

std::string KernelName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (out.size() == BPF_OBJ_NAME_LEN - 1) break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    out += ok ? c : '_';
  }
  return out;
}

// The last `n` non-empty lines of the verifier log: the reason is always at the end, the
// rest is the path that led there.
std::string LogTail(const std::string& log, int n) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    if (end > start) lines.push_back(log.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  size_t first = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0;
  for (size_t i = first; i < lines.size(); ++i) {
    if (!out.empty()) out += '\n';
    out += "  " + lines[i];
  }
  return out;
}

// A program with subprograms (bpf_loop callbacks) must describe each function to the kernel
// in BTF. fay's own code needs no more than that: main is `int f(void *ctx)`, each callback
// `static int f(u64 index, void *ctx)`, and each global function `int f(u64)`.
struct FuncBtf {
  std::unique_ptr<btf, void (*)(btf*)> handle{nullptr, btf__free};
  std::vector<bpf_func_info> info;
};

Expected<FuncBtf> BuildFuncBtf(const ProgramSpec& spec) {
  FuncBtf out;
  out.handle.reset(btf__new_empty());
  btf* b = out.handle.get();
  if (!b) return Error(Code::kInternal, "cannot allocate BTF for a probe program");
  int i32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
  int u64 = btf__add_int(b, "unsigned long long", 8, 0);
  int ptr = btf__add_ptr(b, 0);
  int main_proto = btf__add_func_proto(b, i32);
  btf__add_func_param(b, "ctx", ptr);
  int cb_proto = btf__add_func_proto(b, i32);
  btf__add_func_param(b, "index", u64);
  btf__add_func_param(b, "ctx", ptr);
  int global_proto = btf__add_func_proto(b, i32);
  btf__add_func_param(b, "arg", u64);
  int main_fn = btf__add_func(b, "main", BTF_FUNC_GLOBAL, main_proto);
  if (i32 < 0 || u64 < 0 || ptr < 0 || main_fn < 0)
    return Error(Code::kInternal, "cannot build BTF for a probe program");
  out.info.push_back({0, static_cast<uint32_t>(main_fn)});
  for (size_t i = 0; i < spec.func_starts.size(); ++i) {
    bool global = i < spec.func_global.size() && spec.func_global[i];
    std::string name = fmt::format("{}{}", global ? "fn" : "cb", i);
    int fn = global ? btf__add_func(b, name.c_str(), BTF_FUNC_GLOBAL, global_proto)
                    : btf__add_func(b, name.c_str(), BTF_FUNC_STATIC, cb_proto);
    if (fn < 0) return Error(Code::kInternal, "cannot build BTF for a probe program");
    out.info.push_back({static_cast<uint32_t>(spec.func_starts[i]), static_cast<uint32_t>(fn)});
  }
  if (btf__load_into_kernel(b) != 0)
    return BpfError("cannot load the BTF that describes probe program " + spec.name, errno);
  return out;
}

}  // namespace

Expected<Program> Program::Load(const ProgramSpec& spec, const std::vector<int>& map_fds) {
  if (spec.insns.empty())
    return Error(Code::kInternal, fmt::format("probe program {} has no instructions", spec.name));
  std::vector<bpf_insn> insns = spec.insns;
  for (const MapReloc& r : spec.relocs) {
    if (r.insn + 1 >= insns.size() || insns[r.insn].code != (BPF_LD | BPF_DW | BPF_IMM))
      return Error(Code::kInternal,
                   fmt::format("probe program {}: map relocation at {} is not a ld_imm64",
                               spec.name, r.insn));
    if (r.map_index < 0 || static_cast<size_t>(r.map_index) >= map_fds.size())
      return Error(Code::kInternal,
                   fmt::format("probe program {}: map relocation at {} names map {} of {}",
                               spec.name, r.insn, r.map_index, map_fds.size()));
    insns[r.insn].src_reg = BPF_PSEUDO_MAP_FD;
    insns[r.insn].imm = map_fds[r.map_index];
  }

  std::string kname = KernelName(spec.name);
  // Loading without a log is markedly faster for large programs; the log is only worth its
  // cost when there is a rejection to explain.
  LIBBPF_OPTS(bpf_prog_load_opts, fast);
  FuncBtf funcs;
  if (!spec.func_starts.empty()) {
    FAY_ASSIGN_OR_RETURN(funcs, BuildFuncBtf(spec));
    fast.prog_btf_fd = btf__fd(funcs.handle.get());
    fast.func_info = funcs.info.data();
    fast.func_info_cnt = static_cast<uint32_t>(funcs.info.size());
    fast.func_info_rec_size = sizeof(bpf_func_info);
  }
  fast.attach_btf_id = spec.attach_btf_id;
  fast.expected_attach_type = spec.expected_attach_type;
  int fd = bpf_prog_load(spec.type, kname.c_str(), "GPL", insns.data(), insns.size(), &fast);
  if (fd >= 0) {
    Program p;
    p.fd_.reset(fd);
    p.name_ = spec.name;
    p.type_ = spec.type;
    return p;
  }
  int err = errno;

  std::string log(kLogSize, '\0');
  LIBBPF_OPTS(bpf_prog_load_opts, verbose, .log_level = 1, .log_size = kLogSize,
              .log_buf = log.data());
  verbose.prog_btf_fd = fast.prog_btf_fd;
  verbose.func_info = fast.func_info;
  verbose.func_info_cnt = fast.func_info_cnt;
  verbose.func_info_rec_size = fast.func_info_rec_size;
  verbose.attach_btf_id = fast.attach_btf_id;
  verbose.expected_attach_type = fast.expected_attach_type;
  fd = bpf_prog_load(spec.type, kname.c_str(), "GPL", insns.data(), insns.size(), &verbose);
  if (fd >= 0) {
    // A transient failure (e.g. EAGAIN past libbpf's retries); the second attempt took.
    Program p;
    p.fd_.reset(fd);
    p.name_ = spec.name;
    p.type_ = spec.type;
    return p;
  }
  err = errno;
  log.resize(std::strlen(log.c_str()));

  if (log.empty()) {
    if (err == EPERM || err == EACCES)
      return BpfError(fmt::format("cannot load probe program {}", spec.name), err);
    if (err == EINVAL && spec.type != BPF_PROG_TYPE_UNSPEC)
      return Error(Code::kUnsupported,
                   fmt::format("cannot load probe program {}: {} (this kernel may lack the "
                               "program type or an instruction fay emitted)",
                               spec.name, std::strerror(err)));
    return BpfError(fmt::format("cannot load probe program {}", spec.name), err);
  }
  Status st(Code::kVerifier, fmt::format("the kernel verifier rejected probe program {}: {}",
                                         spec.name, std::strerror(err)));
  st.Append("verifier log (last lines):");
  st.Append(LogTail(log, kLogTailLines));
  st.Append(
      "hint: this is a fay code generation bug; `fay explain` shows the bytecode, please "
      "report it with that listing");
  return st;
}

}  // namespace fay::bpf
