#include "inproc/start_files.h"

#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

extern char** environ;

namespace fay::inproc {
namespace {

// PT_INTERP's path, or "" for a static executable or a library.
std::string InterpreterOf(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  Elf64_Ehdr eh{};
  if (pread(fd, &eh, sizeof eh, 0) == sizeof eh && std::memcmp(eh.e_ident, ELFMAG, 4) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64) {
    for (int i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph{};
      if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != sizeof ph)
        break;
      if (ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz > 4096) continue;
      out.resize(ph.p_filesz);
      if (pread(fd, out.data(), ph.p_filesz, static_cast<off_t>(ph.p_offset)) !=
          static_cast<ssize_t>(ph.p_filesz))
        out.clear();
      out = out.c_str();  // up to its NUL
      break;
    }
  }
  close(fd);
  return out;
}

}  // namespace

Expected<FileId> IdOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ErrnoError(path);
  return FileId{st.st_dev, st.st_ino};
}

bool IsElf64(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char ident[EI_NIDENT] = {};
  const bool elf = pread(fd, ident, sizeof ident, 0) == sizeof ident &&
                   std::memcmp(ident, ELFMAG, 4) == 0 && ident[EI_CLASS] == ELFCLASS64;
  close(fd);
  return elf;
}

bool IsProgram(const std::string& path) {
  return !InterpreterOf(path).empty();
}

Expected<std::set<FileId>> FilesAtStart(const std::string& exe) {
  // A script's interpreter maps what it maps: not known from here.
  if (!IsElf64(exe)) return Error(Code::kUnsupported, exe + " is not an ELF program");
  std::set<FileId> out;
  FAY_ASSIGN_OR_RETURN(FileId self, IdOf(exe));
  out.insert(self);
  const std::string interp = InterpreterOf(exe);
  if (interp.empty()) return out;  // static: nothing else is mapped at start
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoError("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv = {const_cast<char*>(interp.c_str()), const_cast<char*>("--list"),
                             const_cast<char*>(exe.c_str()), nullptr};
  pid_t pid = 0;
  int err = posix_spawn(&pid, interp.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (err != 0) {
    close(pipefd[0]);
    return Error(Code::kIo, fmt::format("{} --list {}: {}", interp, exe, strerror(err)));
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error(Code::kIo, fmt::format("{} --list {} failed", interp, exe));
  // "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and "\t/lib64/ld-linux... (0x...)".
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t from = line.find("=> ");
    from = from == std::string::npos ? line.find('/') : from + 3;
    if (from == std::string::npos) continue;
    const size_t to = line.find(" (", from);
    auto id = IdOf(line.substr(from, to == std::string::npos ? std::string::npos : to - from));
    if (id.ok()) out.insert(*id);
  }
  return out;
}

Expected<std::set<FileId>> FilesMapped(pid_t pid) {
  std::ifstream maps(fmt::format("/proc/{}/maps", pid));
  if (!maps) return Error(Code::kNotFound, fmt::format("process {} is gone", pid));
  std::set<FileId> out;
  for (std::string line; std::getline(maps, line);) {
    unsigned long start, end, off, inode;
    unsigned maj, min;
    char perms[8];
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &off, &maj,
                    &min, &inode) == 7 &&
        inode != 0)
      out.insert({makedev(maj, min), static_cast<ino_t>(inode)});
  }
  return out;
}

}  // namespace fay::inproc
