// Shared fixtures for the bpf runtime tests: privilege check, tracefs, tiny probe programs.
#pragma once

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "bpf/emitter.h"
#include "bpf/map.h"
#include "bpf/program.h"

namespace fay::bpf::testing {

// Empty when bpf() works here, else why it does not.
inline std::string BpfUnavailableReason() {
  auto m = Map::Create(BPF_MAP_TYPE_ARRAY, "probe_priv", 4, 8, 1);
  if (m.ok() || m.status().code() != Code::kPermission) return "";
  return "bpf() is not permitted for this user: " + m.status().message();
}

#define FAY_SKIP_WITHOUT_BPF()                                      \
  do {                                                              \
    std::string _why = ::fay::bpf::testing::BpfUnavailableReason(); \
    if (!_why.empty()) GTEST_SKIP() << _why;                        \
  } while (0)

inline std::string TracefsRoot() {
  struct stat st;
  if (stat("/sys/kernel/tracing/events", &st) == 0) return "/sys/kernel/tracing";
  if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0)
    return "/sys/kernel/tracing";
  if (stat("/sys/kernel/debug/tracing/events", &st) == 0) return "/sys/kernel/debug/tracing";
  return "";
}

// Id of tracepoint SUBSYS:NAME, or -1.
inline int TracepointId(const std::string& subsys, const std::string& name) {
  std::string root = TracefsRoot();
  if (root.empty()) return -1;
  std::ifstream in(root + "/events/" + subsys + "/" + name + "/id");
  int id = -1;
  in >> id;
  return in ? id : -1;
}

// Emits: if (current tgid != tgid) return 0;
inline void EmitTgidFilter(Emitter& e, uint32_t tgid, Label out) {
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.AluImm(BPF_RSH, R0, 32);
  e.JmpIfImm(BPF_JNE, R0, static_cast<int32_t>(tgid), out);
}

// As EmitTgidFilter for this test process, leaving the current pid_tgid in R6.
inline void EmitOnlyThisProcess(Emitter& e, Label out) {
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.Mov(R6, R0);
  e.AluImm(BPF_RSH, R0, 32);
  e.JmpIfImm(BPF_JNE, R0, getpid(), out);
}

// Emits: (*counter_map[0])++, for an array or per-CPU array of u64 at map index `map`.
inline void EmitBumpCounter(Emitter& e, int map, Label out) {
  e.StoreImm(4, R10, -4, 0);
  e.LdMap(R1, map);
  e.Mov(R2, R10);
  e.AluImm(BPF_ADD, R2, -4);
  e.Call(BPF_FUNC_map_lookup_elem);
  e.JmpIfImm(BPF_JEQ, R0, 0, out);
  e.MovImm(R1, 1);
  e.AtomicAdd64(R0, 0, R1);
}

// A program counting its invocations by process `tgid` into map 0 (a u64 array).
inline ProgramSpec CounterProgram(bpf_prog_type type, const std::string& name, uint32_t tgid) {
  Emitter e;
  Label out = e.NewLabel();
  EmitTgidFilter(e, tgid, out);
  EmitBumpCounter(e, 0, out);
  e.Bind(out);
  e.MovImm(R0, 0);
  e.Exit();
  auto insns = e.Finish();
  EXPECT_TRUE(insns.ok()) << insns.status().message();
  return ProgramSpec{type, name, insns.ok() ? *insns : std::vector<bpf_insn>{}, e.relocs()};
}

// Sum over CPUs of the u64 at key 0.
inline uint64_t SumCounter(const Map& m) {
  uint32_t key = 0;
  auto slices = m.LookupPerCpu(&key);
  EXPECT_TRUE(slices.ok()) << slices.status().message();
  uint64_t sum = 0;
  if (!slices.ok()) return 0;
  for (const auto& s : *slices) {
    uint64_t v = 0;
    std::memcpy(&v, s.data(), sizeof(v));
    sum += v;
  }
  return sum;
}

}  // namespace fay::bpf::testing
