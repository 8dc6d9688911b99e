#include "probes/symbolizer.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "probes/elf_symbols.h"
#include "probes/read_file.h"

namespace fay {

// The functions of one file, by where their code lies in the file.
struct Symbolizer::SymbolTable {
  struct Func {
    uint64_t file_offset = 0;
    uint64_t size = 0;
    std::string name;  // demangled
  };
  struct Segment {
    uint64_t vaddr = 0, filesz = 0, offset = 0;
  };
  std::vector<Func> funcs;  // sorted by file_offset, one per offset
  std::vector<Segment> loads;
  bool is_exec = false;  // ET_EXEC: addresses are absolute

  // The function covering FILE_OFFSET, or null.
  const Func* Find(uint64_t file_offset) const {
    auto it = std::upper_bound(funcs.begin(), funcs.end(), file_offset,
                               [](uint64_t off, const Func& f) { return off < f.file_offset; });
    if (it == funcs.begin()) return nullptr;
    --it;
    return file_offset - it->file_offset < it->size ? &*it : nullptr;
  }

  // The file offset of virtual address VADDR, when a loaded segment holds it.
  bool OffsetOf(uint64_t vaddr, uint64_t* off) const {
    for (const auto& s : loads) {
      if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) {
        *off = vaddr - s.vaddr + s.offset;
        return true;
      }
    }
    return false;
  }
};

namespace {

using Table = std::unique_ptr<Symbolizer::SymbolTable>;

std::string Demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

size_t LeadingUnderscores(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && s[n] == '_') ++n;
  return n;
}

// Of several names for one address ("write", "__write", "__libc_write"), the one a reader knows:
// fewest leading underscores, then shortest, then alphabetical.
bool Preferred(const std::string& a, const std::string& b) {
  size_t ua = LeadingUnderscores(a), ub = LeadingUnderscores(b);
  if (ua != ub) return ua < ub;
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

// Program headers and type of an ELF file; false when it is not one.
bool ReadLayout(const std::string& path, Symbolizer::SymbolTable* t) {
  if (elf_version(EV_CURRENT) == EV_NONE) return false;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  Elf* elf = elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr);
  if (!elf) return false;
  bool ok = false;
  GElf_Ehdr ehdr;
  size_t nphdr = 0;
  if (elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &ehdr) && elf_getphdrnum(elf, &nphdr) == 0) {
    ok = true;
    t->is_exec = ehdr.e_type == ET_EXEC;
    for (size_t i = 0; i < nphdr; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
        t->loads.push_back({ph.p_vaddr, ph.p_filesz, ph.p_offset});
    }
  }
  elf_end(elf);
  return ok;
}

Table LoadTable(const std::string& path) {
  auto t = std::make_unique<Symbolizer::SymbolTable>();
  if (!ReadLayout(path, t.get())) return t;  // not ELF: an empty table names nothing
  auto syms = ReadFunctionSymbols(path);
  if (!syms.ok()) return t;
  std::vector<ElfSymbol> v = std::move(syms).value();
  std::sort(v.begin(), v.end(), [](const ElfSymbol& a, const ElfSymbol& b) {
    if (a.file_offset != b.file_offset) return a.file_offset < b.file_offset;
    return Preferred(a.name, b.name);
  });
  for (const auto& s : v) {
    if (!t->funcs.empty() && t->funcs.back().file_offset == s.file_offset) {
      t->funcs.back().size = std::max(t->funcs.back().size, s.size);
      continue;
    }
    t->funcs.push_back({s.file_offset, s.size, s.name});
  }
  for (auto& f : t->funcs) f.name = Demangle(f.name);
  return t;
}

uint64_t InodeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

void DropNonUserTail(std::vector<uint64_t>* frames) {
#if defined(__x86_64__)
  constexpr uint64_t kUserLimit = uint64_t{1} << 56;
  while (!frames->empty() && frames->back() >= kUserLimit) frames->pop_back();
#else
  (void)frames;
#endif
}

std::string HexAddress(uint64_t addr) {
  return fmt::format("0x{:016x}", addr);
}

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

bool Symbolizer::Remember(int32_t tgid, std::chrono::nanoseconds max_age) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = processes_.find(tgid);
  if (it != processes_.end() && max_age > std::chrono::nanoseconds::zero() &&
      std::chrono::steady_clock::now() - it->second.read_at < max_age) {
    it->second.pinned = true;
    return true;
  }
  const bool known = RememberLocked(tgid) || it != processes_.end();
  if (auto now = processes_.find(tgid); now != processes_.end()) now->second.pinned = true;
  return known;
}

bool Symbolizer::Knows(int32_t tgid) const {
  std::lock_guard<std::mutex> lock(mu_);
  return processes_.count(tgid) > 0;
}

void Symbolizer::SetFallbackBinary(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  fallback_ = path;
}

void Symbolizer::OnMmap(int32_t tgid, uint64_t start, uint64_t len, uint64_t pgoff, uint64_t inode,
                        const std::string& path) {
  if (tgid <= 0 || len == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  // A process that ran before the records started: its other mappings from /proc first.
  if (!processes_.count(tgid)) RememberLocked(tgid);
  ProcessMaps& pm = processes_[tgid];
  pm.read_at = std::chrono::steady_clock::now();
  gone_.erase(tgid);
  const uint64_t end = start + len;
  // A new mapping replaces whatever it covers (MAP_FIXED over a reservation, as ld.so maps a
  // library's segments).
  std::erase_if(pm.mappings, [&](const Mapping& m) { return m.start < end && start < m.end; });
  Mapping m{start, end, pgoff, inode, path};
  auto at = std::upper_bound(pm.mappings.begin(), pm.mappings.end(), start,
                             [](uint64_t a, const Mapping& x) { return a < x.start; });
  pm.mappings.insert(at, std::move(m));
  BoundLocked();
}

void Symbolizer::OnExec(int32_t tgid) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessMaps& pm = processes_[tgid];
  pm.mappings.clear();
  pm.reread_on_miss = true;
  pm.read_at = std::chrono::steady_clock::now();
  gone_.erase(tgid);
  BoundLocked();
}

void Symbolizer::OnFork(int32_t child, int32_t parent) {
  std::lock_guard<std::mutex> lock(mu_);
  // A parent that ran before the records started: its maps from /proc, while it runs.
  if (!processes_.count(parent)) RememberLocked(parent);
  auto p = processes_.find(parent);
  if (p == processes_.end()) return;
  // Over whatever a dead process of the same pid left.
  ProcessMaps pm = p->second;
  pm.read_at = std::chrono::steady_clock::now();
  pm.pinned = false;
  pm.reread_on_miss = true;
  processes_[child] = std::move(pm);
  gone_.erase(child);
  BoundLocked();
}

void Symbolizer::BoundLocked() {
  if (processes_.size() <= kMaxProcesses) return;
  // The least recently seen tenth goes, so that a busy machine's exits cost a sort now and then.
  std::vector<std::pair<std::chrono::steady_clock::time_point, int32_t>> by_age;
  by_age.reserve(processes_.size());
  for (const auto& [tgid, pm] : processes_)
    if (!pm.pinned) by_age.emplace_back(pm.read_at, tgid);
  const size_t drop = std::min(by_age.size(), processes_.size() - kMaxProcesses * 9 / 10);
  std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(drop),
                   by_age.end());
  for (size_t i = 0; i < drop; ++i) processes_.erase(by_age[i].second);
}

bool Symbolizer::RememberLocked(int32_t tgid) {
  if (tgid <= 0) return false;
  auto text = ReadWholeFile(fmt::format("/proc/{}/maps", tgid));
  // A zombie (exited, not yet reaped) still has the file, but empty.
  if (!text.ok() || text->empty()) return false;
  ProcessMaps pm;
  size_t pos = 0;
  const std::string& s = *text;
  while (pos < s.size()) {
    size_t eol = s.find('\n', pos);
    if (eol == std::string::npos) eol = s.size();
    std::string line = s.substr(pos, eol - pos);
    pos = eol + 1;
    // start-end perms offset dev inode   path
    unsigned long long start, end, offset, inode;
    char perms[8];
    unsigned dev_major, dev_minor;
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset,
                    &dev_major, &dev_minor, &inode, &path_at) < 7)
      continue;
    if (path_at <= 0 || static_cast<size_t>(path_at) >= line.size() || line[path_at] != '/')
      continue;  // anonymous, [heap], [stack], [vdso]
    std::string path = line.substr(path_at);
    const std::string deleted = " (deleted)";
    if (path.size() > deleted.size() &&
        path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
      path.resize(path.size() - deleted.size());
    pm.mappings.push_back({start, end, offset, inode, std::move(path)});
  }
  std::sort(pm.mappings.begin(), pm.mappings.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  pm.read_at = std::chrono::steady_clock::now();
  if (auto old = processes_.find(tgid); old != processes_.end()) pm.pinned = old->second.pinned;
  processes_[tgid] = std::move(pm);
  gone_.erase(tgid);
  BoundLocked();
  return true;
}

const Symbolizer::SymbolTable* Symbolizer::TableLocked(const std::string& path, uint64_t inode) {
  // Keyed by inode too: a file replaced since (a rebuilt binary) is another table.
  std::string key = path + '\0' + std::to_string(inode);
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second.get();
  Table t;
  // The file at PATH must still be the one mapped, or its symbols would name the wrong code.
  if (InodeOf(path) == inode)
    t = LoadTable(path);
  else
    t = std::make_unique<SymbolTable>();
  return tables_.emplace(key, std::move(t)).first->second.get();
}

std::string Symbolizer::LookupLocked(int32_t tgid, uint64_t addr, uint64_t lookup_addr) {
  auto pit = processes_.find(tgid);
  if (pit == processes_.end() && !gone_.count(tgid)) {
    if (RememberLocked(tgid))
      pit = processes_.find(tgid);
    else
      gone_.insert(tgid);
  }
  if (pit == processes_.end()) {
    // Never seen running: a non-PIE executable's addresses still name themselves.
    if (fallback_.empty()) return "";
    const SymbolTable* t = TableLocked(fallback_, InodeOf(fallback_));
    uint64_t off = 0, addr_off = 0;
    if (!t->is_exec || !t->OffsetOf(lookup_addr, &off) || !t->OffsetOf(addr, &addr_off)) return "";
    const SymbolTable::Func* f = t->Find(off);
    if (!f) return "";
    return fmt::format("{}+0x{:x}", f->name, addr_off - f->file_offset);
  }
  pit->second.pinned = true;  // rows are named from it: kept past the bound
  auto find = [&](const ProcessMaps& pm) -> const Mapping* {
    auto it = std::upper_bound(pm.mappings.begin(), pm.mappings.end(), lookup_addr,
                               [](uint64_t a, const Mapping& m) { return a < m.start; });
    if (it == pm.mappings.begin()) return nullptr;
    --it;
    return lookup_addr < it->end ? &*it : nullptr;
  };
  const Mapping* m = find(pit->second);
  if (!m && pit->second.reread_on_miss) {
    // A library loaded since the snapshot (dlopen): look once more while the process runs.
    pit->second.reread_on_miss = false;
    if (RememberLocked(tgid)) {
      pit = processes_.find(tgid);
      pit->second.reread_on_miss = false;
      m = find(pit->second);
    }
  }
  if (!m) return "";
  const SymbolTable* t = TableLocked(m->path, m->inode);
  const SymbolTable::Func* f = t->Find(lookup_addr - m->start + m->offset);
  if (!f) return "";
  return fmt::format("{}+0x{:x}", f->name, addr - m->start + m->offset - f->file_offset);
}

std::string Symbolizer::FrameName(int32_t tgid, uint64_t addr, bool return_address) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t lookup = return_address && addr > 0 ? addr - 1 : addr;
  return LookupLocked(tgid, addr, lookup);
}

std::string Symbolizer::Name(int32_t tgid, uint64_t addr) {
  std::string n = FrameName(tgid, addr);
  return n.empty() ? HexAddress(addr) : n;
}

std::vector<std::string> Symbolizer::StackNames(int32_t tgid, const std::vector<uint64_t>& frames) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  out.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    uint64_t a = frames[i];
    out.push_back(LookupLocked(tgid, a, i > 0 && a > 0 ? a - 1 : a));
  }
  return out;
}

}  // namespace fay
