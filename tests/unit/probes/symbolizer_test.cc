#include "probes/symbolizer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "probes/elf_symbols.h"

// Functions of this test binary (a PIE executable) with known names and sizes.
extern "C" __attribute__((noipa, used)) long fay_symbolizer_target(long a, long b) {
  __asm__ volatile("" : "+r"(a), "+r"(b)::"memory");
  return a * 3 + b;
}

namespace fay {
namespace {

__attribute__((noipa, used)) int CxxTarget(int x) {
  __asm__ volatile("" : "+r"(x)::"memory");
  return x + 1;
}

uint64_t Addr(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, n);
}

// The symbol named NAME in PATH (its size, as the ELF records it).
ElfSymbol SymbolOf(const std::string& path, const std::string& name) {
  auto syms = ReadFunctionSymbols(path);
  EXPECT_TRUE(syms.ok()) << syms.status().message();
  if (syms.ok())
    for (const auto& s : *syms)
      if (s.name == name) return s;
  ADD_FAILURE() << "no symbol " << name << " in " << path;
  return {};
}

// A child that shares this process's mappings and waits until the returned fd is closed.
pid_t ForkWaiting(int* release_fd) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    char c;
    while (read(fds[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(fds[0]);
  *release_fd = fds[1];
  return pid;
}

// A pid that no longer exists: a child, exited and reaped.
pid_t ReapedPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST(Symbolizer, NamesFunctionsOfThisPieExecutable) {
  Symbolizer sym;
  const int32_t self = getpid();
  const uint64_t target = Addr(reinterpret_cast<void*>(&fay_symbolizer_target));
  EXPECT_EQ(sym.Name(self, target), "fay_symbolizer_target+0x0");
  EXPECT_EQ(sym.Name(self, target + 3), "fay_symbolizer_target+0x3");
  EXPECT_TRUE(sym.Knows(self));  // the first lookup read the maps

  // C++ names are demangled.
  const uint64_t cxx = Addr(reinterpret_cast<void*>(&CxxTarget));
  EXPECT_EQ(sym.Name(self, cxx + 1), "fay::(anonymous namespace)::CxxTarget(int)+0x1");
}

TEST(Symbolizer, NamesFunctionsOfSharedLibraries) {
  Symbolizer sym;
  void* w = dlsym(RTLD_DEFAULT, "write");
  ASSERT_NE(w, nullptr);
  // libc.so.6 calls this code both "write" and "__write": the name without underscores wins.
  EXPECT_EQ(sym.Name(getpid(), Addr(w)), "write+0x0");
  EXPECT_EQ(sym.Name(getpid(), Addr(w) + 0x10), "write+0x10");
  void* gp = dlsym(RTLD_DEFAULT, "getppid");
  ASSERT_NE(gp, nullptr);
  EXPECT_EQ(sym.Name(getpid(), Addr(gp) + 2), "getppid+0x2");
}

TEST(Symbolizer, ReturnAddressesAreLookedUpJustBeforeThemselves) {
  Symbolizer sym;
  const int32_t self = getpid();
  ElfSymbol s = SymbolOf(SelfExe(), "fay_symbolizer_target");
  ASSERT_GT(s.size, 0u);
  const uint64_t start = Addr(reinterpret_cast<void*>(&fay_symbolizer_target));
  const uint64_t end = start + s.size;  // the first byte after the function
  // A call that is the function's last instruction returns to END.
  EXPECT_EQ(sym.FrameName(self, end, /*return_address=*/true),
            fmt::format("fay_symbolizer_target+{:#x}", s.size));
  EXPECT_NE(sym.FrameName(self, end, /*return_address=*/false),
            fmt::format("fay_symbolizer_target+{:#x}", s.size));
  // A stack: the innermost frame is exact, the others are return addresses.
  auto names = sym.StackNames(self, {start, end});
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "fay_symbolizer_target+0x0");
  EXPECT_EQ(names[1], fmt::format("fay_symbolizer_target+{:#x}", s.size));
}

TEST(Symbolizer, UnknownAddressesPrintAsHex) {
  Symbolizer sym;
  const int32_t self = getpid();
  void* anon = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  EXPECT_EQ(sym.Name(self, Addr(anon) + 8), fmt::format("0x{:016x}", Addr(anon) + 8));
  EXPECT_EQ(sym.FrameName(self, Addr(anon) + 8), "");
  munmap(anon, 4096);
  EXPECT_EQ(sym.Name(self, 0x10), "0x0000000000000010");
  EXPECT_EQ(HexAddress(0x7f0000001234), "0x00007f0000001234");
  // No such process, no fallback binary.
  pid_t gone = ReapedPid();
  const uint64_t target = Addr(reinterpret_cast<void*>(&fay_symbolizer_target));
  EXPECT_FALSE(sym.Remember(gone));
  EXPECT_FALSE(sym.Knows(gone));
  EXPECT_EQ(sym.Name(gone, target), fmt::format("0x{:016x}", target));
  EXPECT_EQ(sym.Name(0, target), fmt::format("0x{:016x}", target));
  EXPECT_EQ(sym.Name(-5, target), fmt::format("0x{:016x}", target));
}

TEST(Symbolizer, RememberedMapsOutliveTheProcess) {
  Symbolizer sym;
  int release = -1;
  pid_t child = ForkWaiting(&release);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(sym.Remember(child));
  EXPECT_TRUE(sym.Knows(child));
  close(release);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The child was a fork of this process: the same code at the same addresses.
  const uint64_t target = Addr(reinterpret_cast<void*>(&fay_symbolizer_target));
  EXPECT_EQ(sym.Name(child, target + 4), "fay_symbolizer_target+0x4");
  void* w = dlsym(RTLD_DEFAULT, "write");
  EXPECT_EQ(sym.Name(child, Addr(w) + 1), "write+0x1");
}

// The kernel's records alone name the addresses of a process that exited unseen: its mapping
// of this executable, as an exec and an mmap record give it, and a child forked from it.
TEST(Symbolizer, MappingRecordsNameAProcessThatExitedUnseen) {
  Symbolizer sym;
  const pid_t gone = ReapedPid();
  const std::string exe = SelfExe();
  const ElfSymbol s = SymbolOf(exe, "fay_symbolizer_target");
  struct stat st {};
  ASSERT_EQ(stat(exe.c_str(), &st), 0);
  // The process mapped the file's page holding the function at a made-up base.
  const uint64_t base = 0x7a0000000000ull, page_off = s.file_offset & ~uint64_t{4095};
  sym.OnExec(gone);
  sym.OnMmap(gone, base, 8192, page_off, st.st_ino, exe);
  const uint64_t at = base + (s.file_offset - page_off) + 4;
  EXPECT_EQ(sym.Name(gone, at), "fay_symbolizer_target+0x4");
  // A child starts with its parent's mappings; an exec drops them.
  const pid_t child = ReapedPid();
  sym.OnFork(child, gone);
  EXPECT_EQ(sym.Name(child, at), "fay_symbolizer_target+0x4");
  sym.OnExec(child);
  EXPECT_EQ(sym.Name(child, at), fmt::format("0x{:016x}", at));
  // A later mapping over the same range replaces it: the file offset moves by a page.
  sym.OnMmap(gone, base, 8192, page_off + 4096, st.st_ino, exe);
  EXPECT_NE(sym.Name(gone, at), "fay_symbolizer_target+0x4");
}

TEST(Symbolizer, SnapshotsAreKeptAndRefreshedByAge) {
  Symbolizer sym;
  int release = -1;
  pid_t child = ForkWaiting(&release);
  ASSERT_GT(child, 0);
  ASSERT_TRUE(sym.Remember(child));
  close(release);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  // Young enough: not read again. Gone: the old snapshot stays.
  EXPECT_TRUE(sym.Remember(child, std::chrono::hours(1)));
  EXPECT_TRUE(sym.Remember(child));
  EXPECT_TRUE(sym.Knows(child));
  Symbolizer fresh;
  EXPECT_FALSE(fresh.Remember(child, std::chrono::hours(1)));
}

TEST(Symbolizer, FilesMappedAfterTheSnapshotAreFoundOnAMiss) {
  Symbolizer sym;
  const int32_t self = getpid();
  ASSERT_TRUE(sym.Remember(self));
  // Map the page of this executable that holds the target again, elsewhere (as dlopen would).
  ElfSymbol s = SymbolOf(SelfExe(), "fay_symbolizer_target");
  int fd = open(SelfExe().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const uint64_t page = s.file_offset & ~uint64_t{4095};
  void* p = mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(page));
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(sym.Name(self, Addr(p) + (s.file_offset - page) + 2), "fay_symbolizer_target+0x2");
  munmap(p, 8192);
}

TEST(Symbolizer, ZombiesHaveNoMaps) {
  Symbolizer sym;
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  // Exited but not reaped: /proc/PID/maps is there, and empty.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(sym.Remember(child));
  EXPECT_FALSE(sym.Knows(child));
  waitpid(child, nullptr, 0);
}

TEST(Symbolizer, FallbackBinaryNamesNonPieAddressesOfUnseenProcesses) {
  // func_calls is linked static, non-PIE (ET_EXEC): its addresses are its symbols' values.
  std::string exe = SelfExe();
  std::string func_calls = exe.substr(0, exe.rfind('/')) + "/testprogs/func_calls";
  ASSERT_EQ(access(func_calls.c_str(), R_OK), 0)
      << func_calls << " is missing: build the testprogs target";
  ElfSymbol s = SymbolOf(func_calls, "fay_target");
  ASSERT_GT(s.size, 3u);
  pid_t gone = ReapedPid();

  Symbolizer sym;
  EXPECT_EQ(sym.Name(gone, s.address + 3), fmt::format("0x{:016x}", s.address + 3));
  sym.SetFallbackBinary(func_calls);
  EXPECT_EQ(sym.Name(gone, s.address + 3), "fay_target+0x3");
  EXPECT_EQ(sym.FrameName(gone, s.address + s.size, true), fmt::format("fay_target+{:#x}", s.size));
  // Addresses outside the executable stay unnamed.
  EXPECT_EQ(sym.Name(gone, 0x7f0000001000), "0x00007f0000001000");

  // A PIE executable's addresses depend on where it was loaded: no fallback from it.
  Symbolizer pie;
  pie.SetFallbackBinary(exe);
  ElfSymbol own = SymbolOf(exe, "fay_symbolizer_target");
  const uint64_t target = Addr(reinterpret_cast<void*>(&fay_symbolizer_target));
  EXPECT_EQ(pie.Name(gone, target), fmt::format("0x{:016x}", target));
  EXPECT_EQ(pie.Name(gone, own.address), fmt::format("0x{:016x}", own.address));
}

TEST(Symbolizer, DropsTrailingFramesOutsideUserSpace) {
  std::vector<uint64_t> f = {0x401552, 0xbe552274c0854800, 0x401ba4, 0xffffffff81000000,
                             0x0100000000000000};
  DropNonUserTail(&f);
#if defined(__x86_64__)
  // Only the tail goes: a bad frame in the middle is the kernel's word, kept as it is.
  EXPECT_EQ(f, (std::vector<uint64_t>{0x401552, 0xbe552274c0854800, 0x401ba4}));
  std::vector<uint64_t> edge = {0x00fffffffffff000, 0x00ffffffffffffff};
  DropNonUserTail(&edge);
  EXPECT_EQ(edge.size(), 2u);
  std::vector<uint64_t> all = {0xbe552274c0854800};
  DropNonUserTail(&all);
  EXPECT_TRUE(all.empty());
#else
  EXPECT_EQ(f.size(), 5u);
#endif
}

}  // namespace
}  // namespace fay
