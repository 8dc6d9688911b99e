// Golden tests of the generated eBPF: the plan and the disassembly of every program of a set of
// representative queries, compared with tests/unit/bpf/golden/<name>.txt. Run with
// FAY_UPDATE_GOLDEN=1 to rewrite the files after an intended codegen change, then review the
// diff. Field offsets come from this kernel's tracefs formats, so the goldens are per kernel.
// Every query is also loaded, so a verifier rejection fails the test with the verifier's log.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "bpf/codegen/codegen.h"
#include "bpf/disasm.h"
#include "bpf/runtime.h"
#include "bpf_test_util.h"
#include "query/planner.h"
#include "query_test_util.h"

namespace fay::bpf {
namespace {

constexpr uint32_t kSelfTgid = 4242;

struct GoldenCase {
  const char* name;  // golden file stem
  const char* query;
  bool scoped = false;
  PlanOptions plan_options = {};
};

std::string GoldenPath(const std::string& name) {
  return std::string(FAY_SOURCE_DIR) + "/tests/unit/bpf/golden/" + name + ".txt";
}

bool UpdateGoldens() {
  const char* v = std::getenv("FAY_UPDATE_GOLDEN");
  return v && *v && std::string(v) != "0";
}

const char* MapTypeName(bpf_map_type t) {
  switch (t) {
    case BPF_MAP_TYPE_HASH:
      return "hash";
    case BPF_MAP_TYPE_ARRAY:
      return "array";
    case BPF_MAP_TYPE_PERCPU_HASH:
      return "percpu_hash";
    case BPF_MAP_TYPE_PERCPU_ARRAY:
      return "percpu_array";
    case BPF_MAP_TYPE_STACK_TRACE:
      return "stack_trace";
    case BPF_MAP_TYPE_RINGBUF:
      return "ringbuf";
    default:
      return "other";
  }
}

const char* ProgTypeName(bpf_prog_type t) {
  switch (t) {
    case BPF_PROG_TYPE_TRACEPOINT:
      return "tracepoint";
    case BPF_PROG_TYPE_KPROBE:
      return "kprobe";
    case BPF_PROG_TYPE_PERF_EVENT:
      return "perf_event";
    case BPF_PROG_TYPE_RAW_TRACEPOINT:
      return "raw_tracepoint";
    default:
      return "other";
  }
}

void PrintTo(const GoldenCase& c, std::ostream* os) {
  *os << c.name;
}

// The listing with each map load showing its map slot and name. The generator leaves the
// ld_imm64 immediate at 0 until the loader patches in the fd, so the relocations carry the slot.
std::string Listing(const GeneratedQuery& gen, const GeneratedProgram& p) {
  std::vector<bpf_insn> insns = p.insns;
  auto comments = p.comments;
  for (const MapReloc& r : p.relocs) {
    if (r.insn >= insns.size()) continue;
    insns[r.insn].imm = r.map_index;
    if (r.map_index >= 0 && r.map_index < kMapCount)
      comments.emplace_back(r.insn, gen.maps[r.map_index].name);
  }
  return Disassemble(insns, comments);
}

std::string Render(const GoldenCase& c, const Plan& plan, const GeneratedQuery& gen) {
  std::string out = fmt::format("query: {}\noptions: scoped={} self_tgid={}\n\n", c.query, c.scoped,
                                c.scoped ? 0 : kSelfTgid);
  out += DescribePlan(plan);
  out += "\nmaps:\n";
  for (int i = 0; i < kMapCount; ++i) {
    const MapDesc& m = gen.maps[i];
    if (!m.used) continue;
    out += fmt::format("  [{}] {:<12} {:<12} key {} value {} entries {}\n", i, m.name,
                       MapTypeName(m.type), m.key_size, m.value_size, m.max_entries);
  }
  out += fmt::format("scratch entry offset: {}\n", gen.scratch_entry_off);
  for (const GeneratedProgram& p : gen.programs) {
    out += fmt::format("\nprogram {} ({}, {} insns, {} map relocs)\n", p.name, ProgTypeName(p.type),
                       p.insns.size(), p.relocs.size());
    out += Listing(gen, p);
  }
  return out;
}

// The first line where a and b differ, for a readable failure.
std::string FirstDifference(const std::string& want, const std::string& got) {
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
    if (ea && eb) return "identical";
    if (ea || eb || la != lb)
      return fmt::format("line {}:\n  golden:    {}\n  generated: {}", line,
                         ea ? "<end of file>" : la, eb ? "<end of output>" : lb);
  }
}

class CodegenGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(CodegenGoldenTest, MatchesGoldenAndLoads) {
  const GoldenCase& c = GetParam();
  if (testing::TracefsRoot().empty()) GTEST_SKIP() << "tracefs is not available";
  auto plan = testing::CompileOrDie(c.query, c.plan_options);
  ASSERT_NE(plan, nullptr);
  CodegenOptions options;
  options.scoped = c.scoped;
  options.self_tgid = c.scoped ? 0 : kSelfTgid;
  auto gen = Generate(*plan, options);
  ASSERT_TRUE(gen.ok()) << gen.status().message();
  ASSERT_FALSE(gen->programs.empty());
  std::string got = Render(c, *plan, *gen);

  std::string path = GoldenPath(c.name);
  if (UpdateGoldens()) {
    std::ofstream out(path, std::ios::trunc);
    ASSERT_TRUE(out) << "cannot write " << path;
    out << got;
  } else {
    std::ifstream in(path);
    ASSERT_TRUE(in) << "missing golden " << path << "; run with FAY_UPDATE_GOLDEN=1 to create it";
    std::stringstream want;
    want << in.rdbuf();
    EXPECT_TRUE(want.str() == got)
        << "generated code differs from " << path << " at " << FirstDifference(want.str(), got)
        << "\nIf the change is intended, rerun with FAY_UPDATE_GOLDEN=1 and review the diff.";
  }

  // The verifier must accept every program as generated.
  FAY_SKIP_WITHOUT_BPF();
  auto live = LiveQuery::Load(*plan, options);
  ASSERT_TRUE(live.ok()) << "query: " << c.query << "\n" << live.status().message();
  EXPECT_EQ((*live)->generated().programs.size(), gen->programs.size());
}

// `fay explain` prints the generator's bytecode as is; every map load must say which map it loads,
// or the listing cannot be read.
TEST(CodegenListingTest, MapLoadsNameTheirMap) {
  if (testing::TracefsRoot().empty()) GTEST_SKIP() << "tracefs is not available";
  auto plan = testing::CompileOrDie("syscall:getppid | count() by comm");
  ASSERT_NE(plan, nullptr);
  auto gen = Generate(*plan, CodegenOptions{});
  ASSERT_TRUE(gen.ok()) << gen.status().message();
  ASSERT_EQ(gen->programs.size(), 1u);
  std::string listing = Disassemble(gen->programs[0].insns, gen->programs[0].comments);
  EXPECT_NE(listing.find(fmt::format("map[{}]", static_cast<int>(kMapScratch))), std::string::npos)
      << listing;
  EXPECT_NE(listing.find(fmt::format("map[{}]", static_cast<int>(kMapAggA))), std::string::npos)
      << listing;
}

// Several syscall probes below the raw-syscalls threshold attach one program pair each; syscall:*
// goes through raw_syscalls.
const GoldenCase kCases[] = {
    {"count_by_comm", "syscall:getppid | count() by comm"},
    {"openat_fails_by_path",
     "syscall:openat | where ret < 0 | count() as fails by comm, str(args.filename) as path | "
     "top 10"},
    {"hist_latency_by_probe", "syscall:read, syscall:pread64 | hist(latency) by probe"},
    {"every_window",
     "syscall:read, syscall:pread64 | where comm == \"postgres\" | hist(latency) by probe | "
     "every 1s"},
    {"sample_percent", "syscall:getppid | sample 10% | count() by pid"},
    {"select_fields", "syscall:write | select time, pid, comm, args.count, ret"},
    {"select_str",
     "syscall:openat | where str(args.filename, 128) == \"/etc/*\" | select time, tid, "
     "str(args.filename, 128) as path, ret, errno"},
    {"scalar_aggs",
     "syscall:read | where ret > 0 | sum(ret), min(ret), max(ret), avg(ret) by comm, uid"},
    {"sketch_aggs",
     "syscall:read | lhist(args.count, 0, 4096, 256), quantile(latency, 0.99), distinct(tid) as "
     "tids, "
     "distinct(comm) as comms by cpu"},
    {"where_logic_in_glob",
     "syscall:openat | where (comm in (\"bash\", \"z?h\") || comm == \"post*\") && "
     "errno not in (2, 13) && (args.flags & 0x40) != 0 | count() by comm, errno"},
    {"distinct_str",
     "syscall:openat | distinct(str(args.filename)) as files, distinct(pid) as procs"},
    {"scoped", "syscall:getppid | count() by comm", true},
    {"raw_syscalls", "syscall:* | sample 1% | count() by comm | for 5s"},
    {"raw_syscalls_errors",
     "syscall:* | where ret < 0 && errno not in (11, 4) | count() by probe, errno | top 20", true},
    {"tracepoint_sched_switch",
     "tracepoint:sched:sched_switch | where prev_comm == \"post*\" | count() by prev_state, "
     "next_comm"},
    {"interval", "interval:1s | count() | every 5s"},
    // Boundary lengths of string compares, each of which the verifier once refused for an
    // unreachable instruction: the all-matching glob (alone, in a list, on a record array), a
    // literal exactly as long as the buffer holds, and a list decided at compile time.
    {"string_compare_boundaries",
     "syscall:openat | where comm == \"*\" && comm != \"abcdefghijklmno\" && comm in (\"x\", "
     "\"*\") "
     "&& str(args.filename, 26) == \"/nonexistent/fay-testprog\" && str(args.filename, 8) == "
     "\"1234567*\" | count() by comm == \"*\" as all"},
    {"tracepoint_glob_all", "tracepoint:sched:sched_switch | where prev_comm == \"*\" | count()"},
    // A long int list is a balanced search, which the verifier walks one path at a time.
    {"int_in_search",
     "syscall:getppid | where pid in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, "
     "987, 4294967296, -7) | count()"},
    // A field at different places on the probes sharing a raw program: a dispatch on the probe.
    {"per_probe_field",
     "syscall:open, syscall:openat | where ret < 0 | count() by str(args.filename), args.flags"},
    // uretprobe latency keyed by thread and stack pointer; execve's path read at entry.
    {"execve_path_at_entry", "syscall:execve | select str(args.filename), ret"},
    // State across probes: a wakeup remembers its time by the wakee, a switch takes it (the
    // value read once, before the where); and a value kept for its time, read by a syscall.
    {"state_runqlat",
     "tracepoint:sched:sched_wakeup | remember time as woke by args.pid;"
     "tracepoint:sched:sched_switch | where args.next_comm == \"a\" | "
     "hist(time - woke[args.next_pid])"},
    // Two tables from one program (syscount): each its own maps and cache, one after the other.
    {"tables_syscount",
     "syscall:* | where ret < 0 | (count() by probe | top 10), (count(), max(latency) by comm) | "
     "every 1s"},
    // Tables reading a state: the read once, before the where, then each table's keys from it.
    {"tables_state",
     "syscall:getppid | remember 1 as seen; syscall:getppid | (count() by comm), "
     "(count(), sum(seen[tid]) by seen[tid] > 0)"},
    // BTF member chains (the current task's, a syscall's user struct), join(argv) at entry, ksym.
    {"btf_join_ksym",
     "syscall:execve, syscall:execveat | select curtask.real_parent.tgid, curtask.comm, "
     "join(args.argv, 64), ksym(args.filename), ret"},
    {"user_struct_at_exit", "syscall:clock_nanosleep | count() by args.rqtp.tv_nsec, kstack"},
    // Triggers: `after` reads one and drops the event while it is unset; `until` reads it as 0
    // while unset (an optional read: no drop, no stat) and drops the event once it is set.
    {"trigger_after_until",
     "syscall:openat | where errno == 2 | trigger t for 1s; syscall:close | trigger u; "
     "syscall:getpid | after u | until t | count()"},
    // A string key: built in the state's layout at the start of scratch, zeroed, then the string.
    {"state_string_key",
     "syscall:openat | remember time as t by comm, str(args.filename); syscall:close | "
     "count() by t[comm, \"/tmp/x\"]"},
    // A string value: stored before its time, copied out to scratch by the read, then a key.
    {"state_string_value",
     "syscall:openat | remember str(args.filename) as f by pid for 1s; syscall:close | "
     "count() by f[pid]"},
    {"state_ttl",
     "syscall:openat | remember args.flags as fl by pid, tid for 1s; syscall:read | count() by "
     "fl[pid, tid]",
     true},
};

INSTANTIATE_TEST_SUITE_P(Queries, CodegenGoldenTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fay::bpf
