// The in-process eBPF interpreter: programs assembled with fay's own Emitter, run by it, with
// exact results; and random arithmetic programs run both by it and by the kernel
// (BPF_PROG_TEST_RUN on a socket filter), which must agree to the bit.
#include "inproc/interpreter.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "bpf/emitter.h"
#include "bpf/program.h"
#include "inproc/helpers.h"
#include "inproc/shm_maps.h"

namespace fay::inproc {
namespace {

using namespace fay::bpf;

Interpreter Make(
    const Emitter& e, Helpers h = {},
    std::function<uint64_t(int)> maps = [](int) { return uint64_t{0}; }) {
  auto insns = e.Finish();
  EXPECT_TRUE(insns.ok()) << insns.status().message();
  auto in = Interpreter::Prepare(*insns, maps, h);
  EXPECT_TRUE(in.ok()) << in.status().message();
  return std::move(in).value();
}

TEST(Interpreter, ArithmeticJumpsAndTheStack) {
  Emitter e;
  Label loop = e.NewLabel(), done = e.NewLabel();
  e.MovImm(R0, 0);
  e.MovImm(R2, 10);
  e.Bind(loop);  // r0 = 10 + 9 + ... + 1
  e.Alu(BPF_ADD, R0, R2);
  e.AluImm(BPF_SUB, R2, 1);
  e.JmpIfImm(BPF_JNE, R2, 0, loop);
  e.StoreImm(8, R10, -8, -3);
  e.Load(8, R3, R10, -8);
  e.Alu(BPF_MUL, R0, R3);  // -165
  e.JmpIfImm(BPF_JSGT, R0, 0, done);
  e.AluImm(BPF_XOR, R0, 0xff);
  e.Bind(done);
  e.Exit();
  EXPECT_EQ(static_cast<int64_t>(Make(e).Run(0)), (-165) ^ 0xff);
}

TEST(Interpreter, TheContextHelpersMapsAndAtomics) {
  struct Env {
    uint64_t value = 40;
  } env;
  Helpers h;
  h.env = &env;
  // map_lookup_elem(map, key): the map is a uint64_t here, returned by address.
  h.fns[BPF_FUNC_map_lookup_elem] = [](void*, const uint64_t a[5]) { return a[0]; };
  h.fns[BPF_FUNC_ktime_get_ns] = [](void* env, const uint64_t*) {
    return static_cast<Env*>(env)->value;
  };
  uint64_t counter = 5;
  Emitter e;
  e.Mov(R6, R1);  // ctx
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Mov(R7, R0);  // 40
  e.LdMap(R1, 3);
  e.Mov(R2, R10);
  e.Call(BPF_FUNC_map_lookup_elem);
  e.MovImm(R1, 2);
  e.AtomicAdd64(R0, 0, R1);  // counter 7
  e.Load(4, R0, R6, 0);      // ctx's first u32
  e.Alu(BPF_ADD, R0, R7);
  e.Exit();
  uint32_t ctx = 2;
  Interpreter in = Make(e, h, [&](int slot) {
    return slot == 3 ? reinterpret_cast<uint64_t>(&counter) : uint64_t{0};
  });
  EXPECT_EQ(in.Run(reinterpret_cast<uint64_t>(&ctx)), 42u);
  EXPECT_EQ(counter, 7u);
}

TEST(Interpreter, SubprogramsAndBpfLoop) {
  Emitter e;
  Label twice = e.NewLabel(), cb = e.NewLabel();
  // main: r6 = twice(21); bpf_loop(5, cb, &stack slot); return r6 + slot
  e.StoreImm(8, R10, -8, 0);
  e.MovImm(R1, 21);
  e.CallFunc(twice);
  e.Mov(R6, R0);
  e.MovImm(R1, 5);
  e.LdFunc(R2, cb);
  e.Mov(R3, R10);
  e.AluImm(BPF_ADD, R3, -8);
  e.MovImm(R4, 0);
  e.Call(181);  // bpf_loop
  e.Load(8, R1, R10, -8);
  e.Alu(BPF_ADD, R6, R1);
  e.Mov(R0, R6);
  e.Exit();
  e.BeginFunc(twice);
  e.Mov(R0, R1);
  e.Alu(BPF_ADD, R0, R1);
  e.Exit();
  e.BeginFunc(cb);  // *ctx += index; stop after index 3
  e.Load(8, R3, R2, 0);
  e.Alu(BPF_ADD, R3, R1);
  e.Store(8, R2, 0, R3);
  e.MovImm(R0, 0);
  Label go = e.NewLabel();
  e.JmpIfImm(BPF_JNE, R1, 3, go);
  e.MovImm(R0, 1);
  e.Bind(go);
  e.Exit();
  EXPECT_EQ(Make(e).Run(0), 42u + 0 + 1 + 2 + 3);
}

TEST(Interpreter, RefusesWhatItCannotRun) {
  Emitter e;
  e.Call(BPF_FUNC_get_current_pid_tgid);
  e.Exit();
  auto insns = e.Finish();
  auto in = Interpreter::Prepare(
      *insns, [](int) { return uint64_t{0}; }, Helpers{});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(), "instruction 0: helper 14 is not provided in the process");
  Emitter k;
  k.CallKfunc(1234);
  k.Exit();
  in = Interpreter::Prepare(
      *k.Finish(), [](int) { return uint64_t{0}; }, Helpers{});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(),
            "instruction 0: a kernel function call (kfunc), which runs only in the kernel");
  Emitter m;
  m.LdMap(R1, 9);
  m.MovImm(R0, 0);
  m.Exit();
  in = Interpreter::Prepare(
      *m.Finish(), [](int) { return uint64_t{0}; }, Helpers{});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().message(), "instruction 0: map 9 is not provided");
}

// Random straight-line arithmetic over six registers, then a fold into 32 bits: the kernel's
// result (a socket filter's return value) and the interpreter's must be the same.
int TestRun(int prog_fd, uint32_t* retval) {
  uint8_t packet[64] = {};
  bpf_attr attr{};
  attr.test.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.test.data_in = reinterpret_cast<uint64_t>(packet);
  attr.test.data_size_in = sizeof packet;
  attr.test.repeat = 1;
  int rc = static_cast<int>(syscall(SYS_bpf, BPF_PROG_TEST_RUN, &attr, sizeof attr));
  *retval = attr.test.retval;
  return rc;
}

// r0..r5 = random 64-bit values (ld_imm64), so nothing depends on what R1 starts as.
void LoadRandomRegisters(std::vector<bpf_insn>* p, std::mt19937_64& rng) {
  for (uint8_t r = 0; r <= 5; ++r) {
    uint64_t v = rng();
    bpf_insn a{}, b{};
    a.code = BPF_LD | BPF_DW | BPF_IMM;
    a.dst_reg = r;
    a.imm = static_cast<int32_t>(v & 0xffffffffu);
    b.imm = static_cast<int32_t>(v >> 32);
    p->push_back(a);
    p->push_back(b);
  }
}

// r0 = fold(r0 ^ r1 ^ ... ^ r5) into 32 bits: the test run's return value is 32 bits.
void FoldRegisters(std::vector<bpf_insn>* p) {
  for (uint8_t r = 1; r <= 5; ++r) p->push_back(bpf_insn{BPF_ALU64 | BPF_X | BPF_XOR, 0, r, 0, 0});
  p->push_back(bpf_insn{BPF_ALU64 | BPF_X | BPF_MOV, 1, 0, 0, 0});
  p->push_back(bpf_insn{BPF_ALU64 | BPF_K | BPF_RSH, 1, 0, 0, 32});
  p->push_back(bpf_insn{BPF_ALU64 | BPF_X | BPF_XOR, 0, 1, 0, 0});
}

// `op` in 32 or 64 bits, on a register or a constant, between random registers of r0-r5.
bpf_insn RandomAlu(uint8_t op, std::mt19937_64& rng) {
  bool is64 = rng() % 2, imm = op == BPF_NEG || rng() % 2;
  int32_t v = static_cast<int32_t>(rng());
  if (op == BPF_LSH || op == BPF_RSH || op == BPF_ARSH) v &= is64 ? 63 : 31;
  if (op == BPF_NEG) v = 0;
  bpf_insn i{};
  i.code = static_cast<uint8_t>((is64 ? BPF_ALU64 : BPF_ALU) | (imm ? BPF_K : BPF_X) | op);
  i.dst_reg = static_cast<uint8_t>(rng() % 6);
  i.src_reg = imm ? 0 : static_cast<uint8_t>(rng() % 6);
  i.imm = imm ? v : 0;
  return i;
}

TEST(Interpreter, AgreesWithTheKernelOnRandomArithmetic) {
  std::mt19937_64 rng(20261128);
  int compared = 0;
  for (int n = 0; n < 200; ++n) {
    std::vector<bpf_insn> p;
    LoadRandomRegisters(&p, rng);
    static const uint8_t kOps[] = {BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV,  BPF_MOD, BPF_OR, BPF_AND,
                                   BPF_XOR, BPF_LSH, BPF_RSH, BPF_ARSH, BPF_MOV, BPF_NEG};
    for (int k = 0; k < 40; ++k) {
      uint8_t op = kOps[rng() % std::size(kOps)];
      bpf_insn i = RandomAlu(op, rng);
      if (op == BPF_DIV || op == BPF_MOD) i.off = static_cast<int16_t>(rng() % 2);  // sdiv
      p.push_back(i);
    }
    FoldRegisters(&p);
    p.push_back(bpf_insn{BPF_ALU | BPF_K | BPF_MOV, 1, 0, 0, 0});  // w1 = 0 (untouched r1 use)
    p.push_back(bpf_insn{BPF_JMP | BPF_EXIT, 0, 0, 0, 0});
    // R1 starts as the context pointer in the kernel: load every register first (done above),
    // so nothing depends on it.
    ProgramSpec spec;
    spec.type = BPF_PROG_TYPE_SOCKET_FILTER;
    spec.name = "fay_interp_diff";
    spec.insns = p;
    auto prog = Program::Load(spec, {});
    if (!prog.ok()) continue;  // a form the verifier refuses (signed division on an old CPU)
    uint32_t kernel = 0;
    ASSERT_EQ(TestRun(prog->fd(), &kernel), 0) << strerror(errno);
    auto in = Interpreter::Prepare(
        p, [](int) { return uint64_t{0}; }, Helpers{});
    ASSERT_TRUE(in.ok()) << in.status().message();
    EXPECT_EQ(static_cast<uint32_t>(in->Run(0)), kernel) << "program " << n;
    ++compared;
  }
  EXPECT_GE(compared, 190);
}

// The translation to x86-64 (jit.h) against the kernel and the interpreter: random programs of
// what it translates (no division), with stack stores and loads of every size, sign-extending
// moves and loads, and conditional jumps of every kind on registers and constants. Every
// register of r0-r5 is used, so rcx (r4) meets shifts by a register.
TEST(Jit, AgreesWithTheKernelAndTheInterpreterOnRandomPrograms) {
  std::mt19937_64 rng(20261129);
  int compared = 0;
  for (int n = 0; n < 300; ++n) {
    std::vector<bpf_insn> p;
    LoadRandomRegisters(&p, rng);
    static const uint8_t kOps[] = {BPF_ADD, BPF_SUB, BPF_MUL,  BPF_OR,  BPF_AND, BPF_XOR,
                                   BPF_LSH, BPF_RSH, BPF_ARSH, BPF_MOV, BPF_NEG};
    static const uint8_t kJumps[] = {BPF_JEQ,  BPF_JNE,  BPF_JGT,  BPF_JGE,  BPF_JLT, BPF_JLE,
                                     BPF_JSGT, BPF_JSGE, BPF_JSLT, BPF_JSLE, BPF_JSET};
    static const uint8_t kSizes[] = {BPF_B, BPF_H, BPF_W, BPF_DW};
    auto reg = [&] { return static_cast<uint8_t>(rng() % 6); };
    for (int k = 0; k < 40; ++k) {
      const int kind = static_cast<int>(rng() % 10);
      if (kind == 0) {  // store a register, load it back into another, maybe sign-extending
        uint8_t size = kSizes[rng() % 4];
        int16_t off = static_cast<int16_t>(-8 * (1 + rng() % 8));
        p.push_back(bpf_insn{static_cast<uint8_t>(BPF_STX | BPF_MEM | size), 10, reg(), off, 0});
        bool sx = size != BPF_DW && rng() % 2;
        p.push_back(bpf_insn{static_cast<uint8_t>(BPF_LDX | (sx ? 0x80 : BPF_MEM) | size), reg(),
                             10, off, 0});
        continue;
      }
      if (kind == 1) {  // a constant store, loaded back
        uint8_t size = kSizes[rng() % 4];
        int16_t off = static_cast<int16_t>(-8 * (1 + rng() % 8));
        p.push_back(bpf_insn{static_cast<uint8_t>(BPF_ST | BPF_MEM | size), 10, 0, off,
                             static_cast<int32_t>(rng())});
        p.push_back(bpf_insn{static_cast<uint8_t>(BPF_LDX | BPF_MEM | size), reg(), 10, off, 0});
        continue;
      }
      if (kind == 2) {  // a conditional jump over the next instruction
        bool imm = rng() % 2, is64 = rng() % 2;
        uint8_t op = kJumps[rng() % std::size(kJumps)];
        p.push_back(bpf_insn{
            static_cast<uint8_t>((is64 ? BPF_JMP : BPF_JMP32) | (imm ? BPF_K : BPF_X) | op), reg(),
            static_cast<uint8_t>(imm ? 0 : reg()), 1, imm ? static_cast<int32_t>(rng()) : 0});
        p.push_back(
            bpf_insn{BPF_ALU64 | BPF_K | BPF_ADD, reg(), 0, 0, static_cast<int32_t>(rng())});
        continue;
      }
      uint8_t op = kOps[rng() % std::size(kOps)];
      bpf_insn i = RandomAlu(op, rng);
      const bool is64 = BPF_CLASS(i.code) == BPF_ALU64, imm = BPF_SRC(i.code) == BPF_K;
      if (op == BPF_MOV && !imm && rng() % 3 == 0) {  // movsx (cpu v4)
        static const int16_t kBits[] = {8, 16, 32};
        i.off = kBits[rng() % (is64 ? 3 : 2)];
      }
      p.push_back(i);
    }
    FoldRegisters(&p);
    p.push_back(bpf_insn{BPF_JMP | BPF_EXIT, 0, 0, 0, 0});
    ProgramSpec spec;
    spec.type = BPF_PROG_TYPE_SOCKET_FILTER;
    spec.name = "fay_jit_diff";
    spec.insns = p;
    auto prog = Program::Load(spec, {});
    if (!prog.ok()) continue;  // the verifier refused (a load of a part it saw as unwritten)
    uint32_t kernel = 0;
    ASSERT_EQ(TestRun(prog->fd(), &kernel), 0) << strerror(errno);
    auto in = Interpreter::Prepare(
        p, [](int) { return uint64_t{0}; }, Helpers{}, /*translate=*/true);
    ASSERT_TRUE(in.ok()) << in.status().message();
    ASSERT_TRUE(in->translated()) << in->not_translated();
    EXPECT_EQ(static_cast<uint32_t>(in->Run(0)), kernel) << "program " << n;
    EXPECT_EQ(in->Run(0), in->Interpret(0)) << "program " << n;
    ++compared;
  }
  EXPECT_GE(compared, 250);
}

TEST(Jit, CallsHelpersWithTheirArgumentsAndLeavesDivisionToTheInterpreter) {
  Helpers h;
  static uint64_t seen[5];
  h.fns[BPF_FUNC_ktime_get_ns] = [](void*, const uint64_t a[5]) {
    std::memcpy(seen, a, sizeof seen);
    return uint64_t{7};
  };
  Emitter e;
  for (int r = 1; r <= 5; ++r) e.MovImm(static_cast<Reg>(r), 100 + r);
  e.MovImm(R6, 1000);  // callee-saved: survives the call
  e.Call(BPF_FUNC_ktime_get_ns);
  e.Alu(BPF_ADD, R0, R6);
  e.Exit();
  auto insns = e.Finish();
  ASSERT_TRUE(insns.ok());
  auto in = Interpreter::Prepare(
      *insns, [](int) { return uint64_t{0}; }, h, true);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ASSERT_TRUE(in->translated()) << in->not_translated();
  EXPECT_EQ(in->Run(0), 1007u);
  EXPECT_EQ(seen[0], 101u);
  EXPECT_EQ(seen[4], 105u);

  Emitter d;
  d.MovImm(R0, 10);
  d.AluImm(BPF_DIV, R0, 3);
  d.Exit();
  auto div = d.Finish();
  ASSERT_TRUE(div.ok());
  auto in2 = Interpreter::Prepare(
      *div, [](int) { return uint64_t{0}; }, Helpers{}, true);
  ASSERT_TRUE(in2.ok());
  EXPECT_FALSE(in2->translated());
  EXPECT_NE(in2->not_translated().find("instruction 1"), std::string::npos)
      << in2->not_translated();
  EXPECT_EQ(in2->Run(0), 3u);
}

// Lookups in array maps are inlined by the JIT (no helper call) and answer what the helper
// does: each slot's own copy of a per-slot array, the shared one, and null past the end. The
// counting helper shows which lookups were inlined: it is called only for the hash map and
// for a map reference that a jump target separates from its call.
TEST(Jit, InlinesArrayLookupsAsTheHelperAnswersThem) {
  constexpr uint32_t kSlots = 3;
  std::vector<std::vector<uint8_t>> bytes;
  auto place = [&](bpf_map_type type, uint32_t key_size) {
    MapShape shape{type, key_size, 8, 4};
    bytes.emplace_back(*ShmMap::BytesFor(shape, kSlots));
    return *ShmMap::Place(shape, kSlots, bytes.back());
  };
  const ShmMap per_slot = place(BPF_MAP_TYPE_PERCPU_ARRAY, 4);
  const ShmMap shared = place(BPF_MAP_TYPE_ARRAY, 4);
  const ShmMap hash = place(BPF_MAP_TYPE_HASH, 4);
  const ShmMap* maps[3] = {&per_slot, &shared, &hash};

  static int helper_calls;
  static HelperFn lookup;
  Helpers h = RuntimeHelpers();
  lookup = h.fns[BPF_FUNC_map_lookup_elem];
  h.fns[BPF_FUNC_map_lookup_elem] = [](void* env, const uint64_t a[5]) {
    ++helper_calls;
    return lookup(env, a);
  };
  // For map m and the key in ctx: *value += 1 and r0 = *value, or r0 = 999 with no value.
  auto program = [](int m, bool split) {
    Emitter e;
    Label miss = e.NewLabel(), go = e.NewLabel();
    e.Load(4, R2, R1, 0);
    if (split) e.JmpIfImm(BPF_JEQ, R2, 12345, go);  // never taken; makes `go` a jump target
    e.Store(4, R10, -8, R2);
    e.LdMap(R1, m);
    if (split) e.Bind(go);  // a jump lands between the reference and the call
    e.Mov(R2, R10);
    e.AluImm(BPF_ADD, R2, -8);
    e.Call(BPF_FUNC_map_lookup_elem);
    e.JmpIfImm(BPF_JEQ, R0, 0, miss);
    e.Load(8, R1, R0, 0);
    e.AluImm(BPF_ADD, R1, 1);
    e.Store(8, R0, 0, R1);
    e.Mov(R0, R1);
    e.Exit();
    e.Bind(miss);
    e.MovImm(R0, 999);
    e.Exit();
    if (!split) e.Bind(go);
    return *e.Finish();
  };
  auto address = [&](int m) { return reinterpret_cast<uint64_t>(maps[m]); };
  for (int m = 0; m < 3; ++m)
    for (bool split : {false, true}) {
      auto jit = Interpreter::Prepare(program(m, split), address, h, true);
      auto ref = Interpreter::Prepare(program(m, split), address, h, false);
      ASSERT_TRUE(jit.ok() && ref.ok());
      ASSERT_TRUE(jit->translated()) << jit->not_translated();
      for (uint32_t slot = 0; slot < kSlots; ++slot)
        for (uint32_t key = 0; key < 6; ++key) {
          SetCurrentSlot(slot);
          helper_calls = 0;
          const uint64_t got = jit->Run(reinterpret_cast<uint64_t>(&key));
          const bool inlined = helper_calls == 0;
          const uint64_t want = ref->Run(reinterpret_cast<uint64_t>(&key));
          SCOPED_TRACE(testing::Message()
                       << "map " << m << " split " << split << " slot " << slot << " key " << key);
          EXPECT_EQ(inlined, m < 2 && !split);
          if (m == 2) continue;  // the hash map is empty: both miss
          // The jit's run added 1 and the reference's another: the second sees the first's.
          EXPECT_EQ(key < 4 ? got + 1 : got, want);
          if (key >= 4) EXPECT_EQ(got, 999u);
        }
    }
  // Each slot's copy of the per-slot array counted its own runs; the shared one all of them.
  uint32_t key = 1;
  for (uint32_t slot = 0; slot < kSlots; ++slot)
    EXPECT_EQ(*static_cast<uint64_t*>(per_slot.Lookup(&key, slot)), 4u);  // 2 runs x 2 programs
  EXPECT_EQ(*static_cast<uint64_t*>(shared.Lookup(&key, 0)), 12u);
}

}  // namespace
}  // namespace fay::inproc
