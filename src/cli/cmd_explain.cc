// fay explain QUERY: the plan and an annotated listing of every generated eBPF program.
#include <fmt/core.h>

#include "bpf/btf_offsets.h"
#include "bpf/codegen/codegen.h"
#include "bpf/disasm.h"
#include "cli/commands.h"
#include "inproc/patchability.h"
#include "probes/catalog.h"
#include "probes/tracefs.h"
#include "query/compile.h"
#include "query/planner.h"

namespace fay::cli {
namespace {

struct ExplainOptions {
  std::string query;
  bool scoped = false;
};

const char* ProgTypeName(bpf_prog_type t) {
  switch (t) {
    case BPF_PROG_TYPE_TRACEPOINT:
      return "tracepoint";
    case BPF_PROG_TYPE_KPROBE:
      return "kprobe (uprobe)";
    case BPF_PROG_TYPE_PERF_EVENT:
      return "perf_event";
    case BPF_PROG_TYPE_RAW_TRACEPOINT:
      return "raw_tracepoint";
    default:
      return "?";
  }
}

int RunExplain(const ExplainOptions& opt) {
  if (Status st = EnsureTracefs(); !st.ok()) {
    fmt::print(stderr, "fay: {}\n", st.message());
    return 1;
  }
  SystemCatalog catalog;
  auto plan = CompileQuery(opt.query, catalog);
  if (!plan.ok()) {
    fmt::print(stderr, "{}\n", plan.status().message());
    return 1;
  }
  fmt::print("{}", DescribePlan(*plan));
  // Whether each user function could take an in-process probe (docs/INPROCESS.md): the kernel
  // uprobe runs it today either way.
  bool heading = false;
  for (const ProbeInfo& p : plan->probes) {
    if ((p.kind != ProbeKind::kUprobe && p.kind != ProbeKind::kUretprobe) || p.symbol_size == 0)
      continue;
    if (!heading) fmt::print("  in-process patching (docs/INPROCESS.md):\n");
    heading = true;
    if (!plan->states.empty()) {
      fmt::print(
          "    the query remembers state across probes, which the kernel keeps: every "
          "uprobe stays on the kernel's path\n");
      break;
    }
    auto can = inproc::CheckPatchable(p.path, p.file_offset, p.symbol_size, p.symbol_address);
    if (can.ok())
      fmt::print("    {}: possible, the jump displaces {} of its {} bytes\n", p.symbol, *can,
                 p.symbol_size);
    else
      fmt::print("    {}: not possible: {}\n", p.symbol, can.status().message());
  }
  bpf::CodegenOptions copt;
  copt.scoped = opt.scoped;
  // The same task_struct offsets a live query uses, so the listing is the code that would run.
  if (auto off = bpf::TaskStructOffsets(); off.ok()) {
    copt.task_comm_offset = off->comm;
    copt.task_pid_offset = off->pid;
    copt.task_tgid_offset = off->tgid;
  }
  auto gen = bpf::Generate(*plan, copt);
  if (!gen.ok()) {
    fmt::print(stderr, "fay: {}\n", gen.status().message());
    return 1;
  }
  fmt::print("\nmaps:\n");
  for (const auto& m : gen->maps)
    if (m.used)
      fmt::print("  {:<14} type {:>2}  key {:>3}  value {:>5}  entries {}\n", m.name,
                 static_cast<int>(m.type), m.key_size, m.value_size, m.max_entries);
  for (const auto& p : gen->programs) {
    fmt::print("\nprogram {} ({}, {} instructions)", p.name, ProgTypeName(p.type), p.insns.size());
    if (p.type == BPF_PROG_TYPE_RAW_TRACEPOINT)
      fmt::print(" at raw tracepoint {}", p.attach.name);
    else if (!p.attach.category.empty())
      fmt::print(" at {}:{}", p.attach.category, p.attach.name);
    fmt::print("\n{}", bpf::Disassemble(p.insns, p.comments));
  }
  return 0;
}

}  // namespace

Runner RegisterExplain(CLI::App& app) {
  auto opt = std::make_shared<ExplainOptions>();
  auto* cmd = app.add_subcommand("explain", "Show a query's plan and its generated eBPF");
  cmd->add_option("query", opt->query, "the query")->required();
  cmd->add_flag("--scoped", opt->scoped, "show the code as `-c`/`-p` would generate it");
  return [opt] { return RunExplain(*opt); };
}

}  // namespace fay::cli
