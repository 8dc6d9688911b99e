#include "probes/uprobe_provider.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "probes/elf_symbols.h"

// Known functions in this test binary, to check symbol lookup and file offsets exactly.
extern "C" __attribute__((noinline, used)) int fay_uprobe_target(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}
extern "C" int fay_uprobe_alias(int x) __attribute__((alias("fay_uprobe_target"), nothrow));

namespace fay {
namespace {

std::string SelfPath() {
  char buf[PATH_MAX];
  EXPECT_NE(realpath("/proc/self/exe", buf), nullptr);
  return buf;
}

// The bytes at file_offset in path must be the code the function runs in memory.
void ExpectCodeAt(const std::string& path, uint64_t file_offset, const void* fn) {
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  unsigned char file_bytes[16];
  ASSERT_EQ(pread(fd, file_bytes, sizeof file_bytes, static_cast<off_t>(file_offset)), 16);
  close(fd);
  EXPECT_EQ(std::memcmp(file_bytes, fn, sizeof file_bytes), 0) << path << " @" << file_offset;
}

TEST(ElfSymbols, FindsOwnFunctionWithFileOffset) {
  auto symbols = ReadFunctionSymbols(SelfPath());
  ASSERT_TRUE(symbols.ok()) << symbols.status().message();
  const ElfSymbol* target = nullptr;
  for (const auto& s : *symbols)
    if (s.name == "fay_uprobe_target") target = &s;
  ASSERT_NE(target, nullptr);
  EXPECT_GT(target->size, 0u);
  ExpectCodeAt(SelfPath(), target->file_offset, reinterpret_cast<const void*>(&fay_uprobe_target));
  EXPECT_EQ(fay_uprobe_target(2), 7);
}

TEST(ElfSymbols, Errors) {
  EXPECT_EQ(ReadFunctionSymbols("/no/such/file").status().code(), Code::kNotFound);
  auto text = ReadFunctionSymbols("/etc/passwd");
  EXPECT_EQ(text.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "'/etc/passwd' is not an ELF executable or library");
}

TEST(ResolveBinaryPath, PathsProgramsAndLibraries) {
  auto abs = ResolveBinaryPath("/proc/self/exe");
  ASSERT_TRUE(abs.ok());
  EXPECT_EQ(*abs, SelfPath());
  char sh[PATH_MAX];
  ASSERT_NE(realpath("/bin/sh", sh), nullptr);
  setenv("PATH", "/nonexistent:/bin", 1);
  auto prog = ResolveBinaryPath("sh");
  ASSERT_TRUE(prog.ok()) << prog.status().message();
  EXPECT_EQ(*prog, sh);
  char libc[PATH_MAX];
  ASSERT_NE(realpath("/lib/x86_64-linux-gnu/libc.so.6", libc), nullptr);
  for (const char* name : {"libc", "libc.so.6", "libc.so"}) {
    auto lib = ResolveBinaryPath(name);
    ASSERT_TRUE(lib.ok()) << name << ": " << lib.status().message();
    EXPECT_EQ(*lib, libc) << name;  // libc.so is a linker script: skipped for libc.so.6
  }
  auto missing = ResolveBinaryPath("no-such-program-xyz");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(ResolveBinaryPath("/no/such/bin").status().message(), "no such binary '/no/such/bin'");
}

TEST(UprobeProvider, ResolvesOwnFunction) {
  UprobeProvider provider(ProbeKind::kUprobe);
  auto probes = provider.Resolve("/proc/self/exe:fay_uprobe_target");
  ASSERT_TRUE(probes.ok()) << probes.status().message();
  ASSERT_EQ(probes->size(), 1u);
  const ProbeInfo& p = (*probes)[0];
  EXPECT_EQ(p.name, "uprobe:" + SelfPath() + ":fay_uprobe_target");
  EXPECT_EQ(p.kind, ProbeKind::kUprobe);
  EXPECT_EQ(p.path, SelfPath());
  EXPECT_EQ(p.symbol, "fay_uprobe_target");
  ExpectCodeAt(p.path, p.file_offset, reinterpret_cast<const void*>(&fay_uprobe_target));

  std::vector<std::string> names;
  for (size_t i = CommonFields().size(); i < p.fields.size(); ++i)
    names.push_back(p.fields[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "func",
                                             "ustack", "kstack"}));
  const Field* arg3 = p.FindField("arg3");
  EXPECT_EQ(arg3->source, FieldSource::kUprobeArg);
  EXPECT_EQ(arg3->index, 3);
  EXPECT_EQ(arg3->type, Type::Int(true));
  const Field* func = p.FindField("func");
  EXPECT_EQ(func->source, FieldSource::kFunc);
  EXPECT_EQ(func->type, Type::Str(64));
  EXPECT_EQ(p.FindField("retval"), nullptr);
}

TEST(UprobeProvider, UretprobeHasRetvalAndLatency) {
  UprobeProvider provider(ProbeKind::kUretprobe);
  auto probes = provider.Resolve("/proc/self/exe:fay_uprobe_target");
  ASSERT_TRUE(probes.ok());
  const ProbeInfo& p = (*probes)[0];
  EXPECT_EQ(p.name, "uretprobe:" + SelfPath() + ":fay_uprobe_target");
  EXPECT_EQ(p.kind, ProbeKind::kUretprobe);
  ASSERT_NE(p.FindField("retval"), nullptr);
  EXPECT_EQ(p.FindField("retval")->source, FieldSource::kUprobeRet);
  ASSERT_NE(p.FindField("latency"), nullptr);
  EXPECT_EQ(p.FindField("latency")->source, FieldSource::kLatency);
  EXPECT_EQ(p.FindField("arg0")->source, FieldSource::kUprobeArg);
}

TEST(UprobeProvider, AliasesAtOneAddressAreOneProbe) {
  UprobeProvider provider(ProbeKind::kUprobe);
  auto both = provider.Resolve("/proc/self/exe:fay_uprobe_*");
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->size(), 1u);
  // Either name may come first in the symbol table; each alone still resolves.
  auto alias = provider.Resolve("/proc/self/exe:fay_uprobe_alias");
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ((*alias)[0].symbol, "fay_uprobe_alias");
  EXPECT_EQ((*alias)[0].file_offset, (*both)[0].file_offset);
}

TEST(UprobeProvider, LibcGlobAndOffsets) {
  UprobeProvider provider(ProbeKind::kUprobe);
  auto probes = provider.Resolve("libc:mall*");
  ASSERT_TRUE(probes.ok()) << probes.status().message();
  const ProbeInfo* malloc_probe = nullptr;
  for (const auto& p : *probes) {
    EXPECT_EQ(p.symbol.rfind("mall", 0), 0u) << p.symbol;
    if (p.symbol == "malloc") malloc_probe = &p;
  }
  ASSERT_NE(malloc_probe, nullptr);
  EXPECT_EQ(malloc_probe->path.substr(malloc_probe->path.size() - 10), "/libc.so.6");
  ExpectCodeAt(malloc_probe->path, malloc_probe->file_offset,
               reinterpret_cast<const void*>(&malloc));
}

TEST(UprobeProvider, Errors) {
  UprobeProvider provider(ProbeKind::kUprobe);
  auto missing = provider.Resolve("/no/such/bin:main");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().message(), "no such binary '/no/such/bin'");
  EXPECT_EQ(provider.Resolve("/etc/passwd:main").status().code(), Code::kInvalidArgument);
  auto nosym = provider.Resolve("/proc/self/exe:fay_no_such_function");
  EXPECT_EQ(nosym.status().code(), Code::kNotFound);
  EXPECT_EQ(nosym.status().message(), "no function 'fay_no_such_function' in " + SelfPath());
  EXPECT_EQ(provider.Resolve("/proc/self/exe").status().code(), Code::kInvalidArgument);
  auto near = provider.Nearest("/proc/self/exe:fay_uprobe_targt", 1);
  EXPECT_EQ(near, (std::vector<std::string>{"uprobe:" + SelfPath() + ":fay_uprobe_target"}));
}

}  // namespace
}  // namespace fay
