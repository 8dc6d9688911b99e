// A tracee address space made of byte regions, for capture and printer tests.
#pragma once

#include <array>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "schema/syscall_capture.h"
#include "schema/syscall_event.h"
#include "schema/syscall_table.h"

namespace fay::testing {

class FakeMemory : public TraceeMemory {
 public:
  void Map(uint64_t addr, std::vector<uint8_t> bytes) { regions_[addr] = std::move(bytes); }
  void Unmap(uint64_t addr) { regions_.erase(addr); }
  std::vector<uint8_t>& At(uint64_t addr) { return regions_.at(addr); }

  size_t Read(uint64_t addr, void* dst, size_t len) override {
    ++reads;
    auto it = regions_.upper_bound(addr);
    if (it == regions_.begin()) return 0;
    --it;
    uint64_t off = addr - it->first;
    if (off >= it->second.size()) return 0;
    size_t n = std::min<uint64_t>(len, it->second.size() - off);
    std::memcpy(dst, it->second.data() + off, n);
    return n;
  }

  int reads = 0;

 private:
  std::map<uint64_t, std::vector<uint8_t>> regions_;
};

// Builds a SyscallEvent the way a recorder would: arguments, entry capture, the kernel's
// writes, the return value, exit capture.
class Call {
 public:
  explicit Call(std::string_view name) { ev.nr = SyscallNumber(name); }

  // Places bytes at addr (or at the next free address when addr is 0) and returns the address.
  uint64_t Put(const void* data, size_t n, uint64_t addr = 0) {
    if (addr == 0) {
      addr = next_;
      next_ += (n / 0x1000 + 2) * 0x1000;
    }
    const auto* p = static_cast<const uint8_t*>(data);
    mem.Map(addr, std::vector<uint8_t>(p, p + n));
    return addr;
  }
  uint64_t Str(std::string_view s, uint64_t addr = 0) {
    std::string z(s);
    return Put(z.c_str(), z.size() + 1, addr);
  }
  template <typename T>
  uint64_t Obj(const T& v, uint64_t addr = 0) {
    return Put(&v, sizeof v, addr);
  }

  Call& Args(std::initializer_list<uint64_t> a) {
    size_t i = 0;
    for (uint64_t v : a) ev.args[i++] = v;
    return *this;
  }

  SyscallEvent Run(int64_t ret, const std::function<void(FakeMemory&)>& kernel = {},
                   uint64_t max_buffer = 0) {
    CaptureAtEntry(ev.nr, ev.args, mem, max_buffer, &ev.buffers);
    if (kernel) kernel(mem);
    ev.ret = ret;
    CaptureAtExit(ev.nr, ev.args, ret, mem, max_buffer, &ev.buffers);
    return ev;
  }

  FakeMemory mem;
  SyscallEvent ev;

 private:
  uint64_t next_ = 0x10000;
};

}  // namespace fay::testing
