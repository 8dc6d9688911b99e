#include "inproc/patcher.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <span>

#include <fmt/format.h>

#include "common/clock.h"
#include "inproc/relocate.h"

namespace fay::inproc {
namespace {

void Put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// The trampoline's head: save what the function may still need (its argument registers, rax
// for varargs, r10 for a static chain, r11, and xmm0-7 for floating-point arguments), call
// handler(context, regs), restore. At the function's entry rsp is 8 off a 16-byte boundary;
// 9 pushes and 128 bytes of xmm put it back on one for the call.
std::vector<uint8_t> EntryHead(EntryHandler handler, void* context) {
  std::vector<uint8_t> c = {
      0x57,                                      // push rdi
      0x56,                                      // push rsi
      0x52,                                      // push rdx
      0x51,                                      // push rcx
      0x50,                                      // push rax
      0x41, 0x50,                                // push r8
      0x41, 0x51,                                // push r9
      0x41, 0x52,                                // push r10
      0x41, 0x53,                                // push r11
      0x48, 0x89, 0xe6,                          // mov rsi, rsp: the EntryRegs
      0x48, 0x81, 0xec, 0x80, 0x00, 0x00, 0x00,  // sub rsp, 128
  };
  for (uint8_t i = 0; i < 8; ++i) {
    // movdqu [rsp + 16*i], xmm_i
    c.insert(c.end(), {0xf3, 0x0f, 0x7f, static_cast<uint8_t>(0x44 | (i << 3)), 0x24,
                       static_cast<uint8_t>(16 * i)});
  }
  c.insert(c.end(), {0x48, 0xbf});  // mov rdi, context
  Put64(c, reinterpret_cast<uint64_t>(context));
  c.insert(c.end(), {0x48, 0xb8});  // mov rax, handler
  Put64(c, reinterpret_cast<uint64_t>(handler));
  c.insert(c.end(), {0xff, 0xd0});  // call rax
  for (uint8_t i = 0; i < 8; ++i) {
    // movdqu xmm_i, [rsp + 16*i]
    c.insert(c.end(), {0xf3, 0x0f, 0x6f, static_cast<uint8_t>(0x44 | (i << 3)), 0x24,
                       static_cast<uint8_t>(16 * i)});
  }
  c.insert(c.end(), {
                        0x48, 0x81, 0xc4, 0x80, 0x00, 0x00, 0x00,  // add rsp, 128
                        0x41, 0x5b,                                // pop r11
                        0x41, 0x5a,                                // pop r10
                        0x41, 0x59,                                // pop r9
                        0x41, 0x58,                                // pop r8
                        0x58,                                      // pop rax
                        0x59,                                      // pop rcx
                        0x5a,                                      // pop rdx
                        0x5e,                                      // pop rsi
                        0x5f,                                      // pop rdi
                    });
  return c;
}

}  // namespace

// Everything below the public API: the shadow stack and the landing stub of return probes.
struct ReturnProbe {
  EntryHandler on_entry;
  ReturnHandler on_return;
  void* context;
  bool entry_record;
  // Cleared when its patch goes. A thread may still be inside the function, its frame on a
  // shadow stack pointing here: the probe is kept for it (never freed), and says nothing.
  std::atomic<bool> live{true};
};

namespace {

struct ShadowFrame {
  uint64_t ret;   // where the function was to return
  uint64_t slot;  // the stack slot that held it: orders frames, finds the one returning
  const ReturnProbe* probe;
  EntryRecord entry;  // filled only for a probe that keeps it
};

struct ShadowStack {
  ShadowFrame frames[kShadowDepth];
  int depth = 0;
};

// Each thread's shadow stack is mapped on its first return probe and unmapped when it exits:
// in thread-local storage its 8 KiB would not fit the room a library loaded with dlopen gets
// (fay -p loads the runtime so).
thread_local ShadowStack* t_shadow = nullptr;
pthread_key_t g_shadow_key = PTHREAD_KEYS_MAX;  // until created
pthread_once_t g_shadow_once = PTHREAD_ONCE_INIT;

ShadowStack* Shadow() {
  if (t_shadow) return t_shadow;
  pthread_once(&g_shadow_once, [] {
    if (pthread_key_create(&g_shadow_key, [](void* p) {
          // Frames still on it (a probed function around the thread's exit path) will land on it:
          // kept then. Otherwise a probed call later in the exit maps a fresh one.
          if (static_cast<ShadowStack*>(p)->depth > 0) return;
          t_shadow = nullptr;
          munmap(p, sizeof(ShadowStack));
        }) != 0)
      g_shadow_key = PTHREAD_KEYS_MAX;
  });
  void* p = mmap(nullptr, sizeof(ShadowStack), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  t_shadow = static_cast<ShadowStack*>(p);  // zeroed: depth 0
  // Past glibc's 32 inline keys, pthread_setspecific callocs, which a probe running inside
  // malloc must not: the stack is then never unmapped (a leak per thread).
  if (g_shadow_key < 32) pthread_setspecific(g_shadow_key, p);
  return t_shadow;
}
// Set while this thread runs a probe's handlers: a probed function they call (clock_gettime,
// malloc) runs unprobed, as a kernel uprobe does not fire inside a BPF program, instead of
// recursing without end.
thread_local bool t_in_handler = false;
std::atomic<uint64_t> g_too_deep{0}, g_skipped{0};

uint64_t MonotonicNs() {
  return ClockNs(CLOCK_MONOTONIC);
}
std::atomic<uint64_t (*)()> g_entry_clock{&MonotonicNs};

uint64_t LandingAddress();

// The entry handler of a return probe: the probe's own, then the return address swapped for
// the landing stub's, kept on the thread's shadow stack.
void EnterForReturn(void* context, const EntryRegs* regs) {
  const auto* probe = static_cast<const ReturnProbe*>(context);
  if (t_in_handler) return;
  t_in_handler = true;
  if (probe->on_entry) probe->on_entry(probe->context, regs);
  ShadowStack* shadow = Shadow();
  if (!shadow || shadow->depth == kShadowDepth) {
    g_too_deep.fetch_add(1, std::memory_order_relaxed);
    t_in_handler = false;
    return;
  }
  // The return address sits right above the registers the trampoline pushed.
  auto* slot = reinterpret_cast<uint64_t*>(reinterpret_cast<uint64_t>(regs) + sizeof(EntryRegs));
  ShadowFrame& f = shadow->frames[shadow->depth];
  f.ret = *slot;
  f.slot = reinterpret_cast<uint64_t>(slot);
  f.probe = probe;
  if (probe->entry_record) {
    f.entry.ns = g_entry_clock.load(std::memory_order_relaxed)();
    f.entry.args[0] = regs->rdi;
    f.entry.args[1] = regs->rsi;
    f.entry.args[2] = regs->rdx;
    f.entry.args[3] = regs->rcx;
    f.entry.args[4] = regs->r8;
    f.entry.args[5] = regs->r9;
  }
  // Counted in only once whole: a signal handler running a probed function meanwhile pushes
  // above it.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ++shadow->depth;
  *slot = LandingAddress();
  t_in_handler = false;
}

// Called by the landing stub with the function's return registers saved at `saved` (xmm0, xmm1,
// rdx, rax); returns where the function was to return.
extern "C" uint64_t FayInprocLanding(const uint64_t* saved) {
  const uint64_t slot = reinterpret_cast<uint64_t>(saved) + 48 - 8;
  ShadowStack& s = *t_shadow;  // mapped by the entry that sent the function here
  // This call's frame is the one whose return address sat in this slot. Any above it never
  // returned (a longjmp went past them, or a signal handler that ran on another stack did):
  // found by the slot, not by comparing addresses, which an alternate signal stack reorders.
  int at = s.depth - 1;
  while (at >= 0 && s.frames[at].slot != slot) --at;
  if (at < 0) {
    // Only frames this thread pushed land here: the stack is not what it was. Nowhere is
    // safe to return to; say why rather than jump at random.
    static constexpr char kMsg[] = "fay: in-process return probe lost its frame; aborting\n";
    (void)!write(2, kMsg, sizeof kMsg - 1);
    abort();
  }
  g_skipped.fetch_add(static_cast<uint64_t>(s.depth - 1 - at), std::memory_order_relaxed);
  // The frame is copied before it is given up: a signal handler that runs a probed function
  // from here on may take its place.
  const ShadowFrame f = s.frames[at];
  std::atomic_signal_fence(std::memory_order_seq_cst);
  s.depth = at;
  if (f.probe->live.load(std::memory_order_acquire) && !t_in_handler) {
    t_in_handler = true;
    f.probe->on_return(f.probe->context, saved[5], f.probe->entry_record ? &f.entry : nullptr,
                       slot + 8);
    t_in_handler = false;
  }
  return f.ret;
}

// Return registers saved, FayInprocLanding called, registers restored, jmp to its answer.
std::vector<uint8_t> LandingCode() {
  std::vector<uint8_t> c = {
      0x50,                                // push rax
      0x52,                                // push rdx
      0x48, 0x83, 0xec, 0x20,              // sub rsp, 32
      0xf3, 0x0f, 0x7f, 0x04, 0x24,        // movdqu [rsp], xmm0
      0xf3, 0x0f, 0x7f, 0x4c, 0x24, 0x10,  // movdqu [rsp+16], xmm1
      0x48, 0x89, 0xe7,                    // mov rdi, rsp
      0x48, 0xb8,                          // mov rax, FayInprocLanding
  };
  Put64(c, reinterpret_cast<uint64_t>(&FayInprocLanding));
  c.insert(c.end(), {
                        0xff, 0xd0,                          // call rax
                        0x49, 0x89, 0xc3,                    // mov r11, rax
                        0xf3, 0x0f, 0x6f, 0x04, 0x24,        // movdqu xmm0, [rsp]
                        0xf3, 0x0f, 0x6f, 0x4c, 0x24, 0x10,  // movdqu xmm1, [rsp+16]
                        0x48, 0x83, 0xc4, 0x20,              // add rsp, 32
                        0x5a,                                // pop rdx
                        0x58,                                // pop rax
                        0x41, 0xff, 0xe3,                    // jmp r11
                    });
  return c;
}

// One landing stub for the process, made on first use and never unmapped: a thread may be
// inside a probed function whenever the probes go.
uint64_t LandingAddress() {
  static const uint64_t landing = [] {
    auto block = CodeBlock::MapNear(reinterpret_cast<uint64_t>(&FayInprocLanding), 4096);
    if (!block.ok()) return uint64_t{0};
    if (!block->Write(0, LandingCode()).ok() || !block->Seal().ok()) return uint64_t{0};
    uint64_t at = block->address();
    block->Release();
    return at;
  }();
  return landing;
}

}  // namespace

void SetEntryClock(uint64_t (*now)()) {
  g_entry_clock.store(now ? now : &MonotonicNs, std::memory_order_relaxed);
}

ReturnProbeStats ReturnStats() {
  return {g_too_deep.load(), g_skipped.load()};
}

EntryPatch::EntryPatch(Key, uint64_t address, std::vector<uint8_t> original, CodeBlock block)
    : address_(address), original_(std::move(original)), block_(std::move(block)) {}

Expected<std::unique_ptr<EntryPatch>> EntryPatch::InstallReturn(uint64_t address, size_t size,
                                                                EntryHandler on_entry,
                                                                ReturnHandler on_return,
                                                                void* context, bool entry_record) {
  if (LandingAddress() == 0) return Error(Code::kIo, "cannot map the return probes' landing stub");
  auto probe = std::make_unique<ReturnProbe>();
  probe->on_entry = on_entry;
  probe->entry_record = entry_record;
  probe->on_return = on_return;
  probe->context = context;
  FAY_ASSIGN_OR_RETURN(std::unique_ptr<EntryPatch> p,
                       Install(address, size, &EnterForReturn, probe.get()));
  p->return_probe_ = std::move(probe);
  return p;
}

Expected<std::unique_ptr<EntryPatch>> EntryPatch::Install(uint64_t address, size_t size,
                                                          EntryHandler handler, void* context) {
  std::span<const uint8_t> function(reinterpret_cast<const uint8_t*>(address), size);
  FAY_ASSIGN_OR_RETURN(CodeBlock block, CodeBlock::MapNear(address, 4096));
  std::vector<uint8_t> head = EntryHead(handler, context);
  FAY_ASSIGN_OR_RETURN(Prologue p,
                       RelocatePrologue(function, address, block.address() + head.size()));
  FAY_RETURN_IF_ERROR(block.Write(0, head));
  FAY_RETURN_IF_ERROR(block.Write(head.size(), p.trampoline));
  FAY_RETURN_IF_ERROR(block.Seal());
  FAY_ASSIGN_OR_RETURN(std::vector<uint8_t> jump, JumpTo(address, block.address()));
  std::vector<uint8_t> original(function.begin(), function.begin() + p.length);
  // The jump covers the first 5 bytes; the rest of the displaced instructions stay as they were
  // and are never reached from the entry (only the trampoline runs their copies).
  FAY_RETURN_IF_ERROR(PokeCode(address, jump));
  return std::make_unique<EntryPatch>(Key{}, address, std::move(original), std::move(block));
}

Status EntryPatch::Remove() {
  if (!installed_) return Status::Ok();
  // Only over our own jump: a library unloaded since (dlclose) leaves the address unmapped or
  // holding another mapping's bytes, which must not be written. Read without touching the
  // address directly, so that an unmapped one is an error, not a fault.
  FAY_ASSIGN_OR_RETURN(std::vector<uint8_t> jump, JumpTo(address_, block_.address()));
  std::vector<uint8_t> now(jump.size());
  iovec local{now.data(), now.size()}, remote{reinterpret_cast<void*>(address_), now.size()};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(now.size()) ||
      now != jump) {
    installed_ = false;
    return Error(Code::kNotFound,
                 fmt::format("the function at {:#x} no longer holds the patch (unloaded?): left "
                             "as it is",
                             address_));
  }
  FAY_RETURN_IF_ERROR(PokeCode(address_, std::span<const uint8_t>(original_.data(), kJumpBytes)));
  installed_ = false;
  return Status::Ok();
}

EntryPatch::~EntryPatch() {
  (void)Remove();
  if (return_probe_) {
    // Kept for frames still in flight (see ReturnProbe): one small leak per return probe.
    return_probe_->live.store(false, std::memory_order_release);
    (void)return_probe_.release();
  }
}

}  // namespace fay::inproc
