// Which files a traced program maps from its start: in-process probes patch a function when the
// runtime starts in a process, so a library the program only loads later (dlopen: a plugin, a
// Python extension module) would never be patched. fay keeps probes on such libraries on the
// kernel's path (host.cc): slower, never missing a call.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <utility>

#include "common/status.h"

namespace fay::inproc {

using FileId = std::pair<dev_t, ino_t>;

// The executable and every shared library its loader resolves for it (the loader's own
// --list, what ldd prints, without running the program); for a static executable, itself. An
// error for a script (its interpreter's files are not known here).
Expected<std::set<FileId>> FilesAtStart(const std::string& exe);
// The files process `pid` maps now.
Expected<std::set<FileId>> FilesMapped(pid_t pid);

// The file's id, or an error naming it.
Expected<FileId> IdOf(const std::string& path);
// Whether `path` is a program (it asks for a loader: PT_INTERP), which starts with the runtime
// when the command execs it, rather than a library or a static executable.
bool IsProgram(const std::string& path);
// Whether `path` is a 64-bit ELF file.
bool IsElf64(const std::string& path);

}  // namespace fay::inproc
