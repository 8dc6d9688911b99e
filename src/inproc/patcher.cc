#include "inproc/patcher.h"

#include <cstring>
#include <span>

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
      0x41, 0x50,                                // push r8
      0x41, 0x51,                                // push r9
      0x50,                                      // push rax
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
                        0x58,                                      // pop rax
                        0x41, 0x59,                                // pop r9
                        0x41, 0x58,                                // pop r8
                        0x59,                                      // pop rcx
                        0x5a,                                      // pop rdx
                        0x5e,                                      // pop rsi
                        0x5f,                                      // pop rdi
                    });
  return c;
}

}  // namespace

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
  FAY_RETURN_IF_ERROR(PokeCode(address_, std::span<const uint8_t>(original_.data(), kJumpBytes)));
  installed_ = false;
  return Status::Ok();
}

EntryPatch::~EntryPatch() {
  (void)Remove();
}

}  // namespace fay::inproc
