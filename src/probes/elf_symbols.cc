#include "probes/elf_symbols.h"

#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "probes/read_file.h"

namespace fay {
namespace {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfCloser>;

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Library directories also hold linker scripts named like libraries (libc.so); skip them.
bool IsElfFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  char magic[4] = {};
  return fd.valid() && ::read(fd.get(), magic, 4) == 4 && std::memcmp(magic, ELFMAG, 4) == 0;
}

Expected<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return ErrnoError("cannot resolve " + path);
  return std::string(buf);
}

std::vector<std::string> ReadDirNames(const std::string& dir);

constexpr const char* kLibDirs[] = {"/lib/x86_64-linux-gnu",
                                    "/usr/lib/x86_64-linux-gnu",
                                    "/lib64",
                                    "/usr/lib64",
                                    "/lib",
                                    "/usr/lib",
                                    "/usr/local/lib"};

}  // namespace

Expected<std::string> ResolveBinaryPath(std::string_view path_or_name) {
  std::string name(path_or_name);
  if (name.empty()) return Error(Code::kInvalidArgument, "empty binary path");
  if (name.find('/') != std::string::npos) {
    if (!IsRegularFile(name)) return Error(Code::kNotFound, "no such binary '" + name + "'");
    return RealPath(name);
  }
  if (const char* path_env = std::getenv("PATH")) {
    std::string_view dirs(path_env);
    while (!dirs.empty()) {
      size_t colon = dirs.find(':');
      std::string dir(dirs.substr(0, colon));
      dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
      if (dir.empty()) continue;
      std::string candidate = dir + "/" + name;
      if (IsRegularFile(candidate) && ::access(candidate.c_str(), X_OK) == 0) {
        return RealPath(candidate);
      }
    }
  }
  // Libraries: the exact file, then NAME.so, then the lowest-versioned NAME.so.* in the
  // directories ld.so searches by default ("libc" and "libc.so" both find libc.so.6).
  std::string stem =
      name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0 ? name : name + ".so";
  for (const char* dir : kLibDirs) {
    for (const std::string& candidate : {name, stem}) {
      std::string full = std::string(dir) + "/" + candidate;
      if (IsRegularFile(full) && IsElfFile(full)) return RealPath(full);
    }
    std::vector<std::string> versioned;
    for (const auto& entry : ReadDirNames(dir))
      if (entry.rfind(stem + ".", 0) == 0) versioned.push_back(entry);
    std::sort(versioned.begin(), versioned.end(), [](const auto& a, const auto& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    for (const auto& v : versioned) {
      std::string full = std::string(dir) + "/" + v;
      if (IsRegularFile(full) && IsElfFile(full)) return RealPath(full);
    }
  }
  return Error(Code::kNotFound, "no such binary '" + name +
                                    "' (not a path, not on $PATH, not a library in the "
                                    "standard directories)");
}

Expected<std::vector<ElfSymbol>> ReadFunctionSymbols(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return Error(Code::kInternal, "libelf init failed");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return Error(Code::kNotFound, "no such binary '" + path + "'");
    return ErrnoError("cannot open " + path);
  }
  ElfPtr elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) {
    return Error(Code::kInvalidArgument, "'" + path + "' is not an ELF executable or library");
  }
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf.get(), &ehdr)) {
    return Error(Code::kInvalidArgument, "'" + path + "': bad ELF header: " + elf_errmsg(-1));
  }
  if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) {
    return Error(Code::kInvalidArgument,
                 "'" + path + "' is an ELF file but not an executable or shared library");
  }

  std::vector<GElf_Phdr> loads;
  size_t nphdr = 0;
  if (elf_getphdrnum(elf.get(), &nphdr) == 0) {
    for (size_t i = 0; i < nphdr; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) {
        loads.push_back(ph);
      }
    }
  }

  std::vector<ElfSymbol> out;
  for (Elf64_Word table : {SHT_SYMTAB, SHT_DYNSYM}) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf.get(), scn)) != nullptr) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != table || shdr.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      size_t count = shdr.sh_size / shdr.sh_entsize;
      for (size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
        if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0 || sym.st_size == 0 ||
            sym.st_shndx == SHN_UNDEF) {
          continue;
        }
        const char* name = elf_strptr(elf.get(), shdr.sh_link, sym.st_name);
        if (!name || !*name) continue;
        const GElf_Phdr* seg = nullptr;
        for (const auto& ph : loads) {
          if (sym.st_value >= ph.p_vaddr && sym.st_value < ph.p_vaddr + ph.p_memsz) {
            seg = &ph;
            break;
          }
        }
        if (!seg) continue;
        out.push_back(
            {name, sym.st_value, sym.st_size, sym.st_value - seg->p_vaddr + seg->p_offset});
      }
    }
  }
  return out;
}

namespace {

std::vector<std::string> ReadDirNames(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

}  // namespace

}  // namespace fay
