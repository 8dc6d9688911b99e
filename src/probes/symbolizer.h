// Names user-space addresses of other processes: "func+0x1a", from the process's memory map
// (/proc/TGID/maps) and the function symbols of the mapped files (libelf).
//
// An address is translated to an offset in the mapped file (addr - start + file offset), and the
// symbol is the one whose code covers that file offset, so non-PIE executables, PIE executables
// and shared libraries are handled alike. Maps are cached per process and symbol tables per file.
// A process that has exited has no maps: take a snapshot while it runs (Remember), feed it the
// kernel's mapping records as they come (OnMmap, OnExec, OnFork: probes/mmap_events.h), or let
// addresses of unknown processes fall back to a non-PIE executable (SetFallbackBinary).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace fay {

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Reads /proc/TGID/maps now and caches it, replacing an older snapshot, unless the cached one
  // is younger than MAX_AGE. Returns whether a snapshot is cached: false when the process is
  // gone (or a zombie) and was never remembered; an older snapshot is kept when it is gone.
  bool Remember(int32_t tgid, std::chrono::nanoseconds max_age = std::chrono::nanoseconds::zero());
  // Whether a snapshot of TGID's maps is cached.
  bool Knows(int32_t tgid) const;

  // The kernel's records of a process's life (probes/mmap_events.h), in the order they
  // happened: an executable mapping of PATH at [start, start + len) from file offset pgoff; an
  // exec, which drops the old image's mappings; a fork, whose child starts with its parent's.
  // They keep the maps of a process that exits before anything reads /proc. At most
  // kMaxProcesses are kept: past that the least recently seen of those nothing asked about go.
  void OnMmap(int32_t tgid, uint64_t start, uint64_t len, uint64_t pgoff, uint64_t inode,
              const std::string& path);
  void OnExec(int32_t tgid);
  void OnFork(int32_t child, int32_t parent);
  static constexpr size_t kMaxProcesses = 8192;

  // The executable to name addresses of processes whose maps were never seen, when it is a
  // non-PIE executable (ET_EXEC: its addresses are absolute). Ignored otherwise.
  void SetFallbackBinary(const std::string& path);

  // "func+0x1a" (C++ names demangled) when ADDR lies in a function of a file TGID maps; else
  // "0x00007f...". An unknown TGID is remembered first, if it still runs.
  std::string Name(int32_t tgid, uint64_t addr);
  // The same as Name, or "" when the frame has no name (the caller prints the address).
  // `return_address`: ADDR is a return address (every frame of a stack but the innermost), so
  // the call lies just before it; the function is looked up at ADDR - 1.
  std::string FrameName(int32_t tgid, uint64_t addr, bool return_address = false);
  // FrameName for each frame of a user stack, innermost first.
  std::vector<std::string> StackNames(int32_t tgid, const std::vector<uint64_t>& frames);

  struct SymbolTable;  // the functions of one file (symbolizer.cc)

 private:
  struct Mapping {
    uint64_t start = 0, end = 0, offset = 0;
    uint64_t inode = 0;
    std::string path;
  };
  struct ProcessMaps {
    std::vector<Mapping> mappings;  // file-backed only, sorted by start
    bool reread_on_miss = true;     // a miss may re-read the maps once (dlopen since)
    std::chrono::steady_clock::time_point read_at;
    // Asked for (a row named from it, or Remember): never evicted by the bound, which only
    // drops the records of processes nothing asked about.
    bool pinned = false;
  };
  bool RememberLocked(int32_t tgid);
  void BoundLocked();
  const SymbolTable* TableLocked(const std::string& path, uint64_t inode);
  std::string LookupLocked(int32_t tgid, uint64_t addr, uint64_t lookup_addr);

  mutable std::mutex mu_;
  std::map<int32_t, ProcessMaps> processes_;
  std::set<int32_t> gone_;  // maps unreadable when first needed: not retried by lookups
  std::map<std::string, std::unique_ptr<SymbolTable>> tables_;  // by path
  std::string fallback_;
};

// The frame-pointer walk of a user stack ends where a saved frame pointer is garbage, and its
// last "return address" may be garbage too. On x86-64 user space lies below 2^56 even with
// 5-level paging, so trailing frames at or above that are certainly not return addresses: they
// are dropped. Other architectures keep every frame (arm64 return addresses may carry PAC bits).
void DropNonUserTail(std::vector<uint64_t>* frames);

// "0x00007f1234567890": how an address without a name prints.
std::string HexAddress(uint64_t addr);

}  // namespace fay
