// Function symbols of ELF executables and shared libraries (libelf), and binary path lookup.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace fay {

struct ElfSymbol {
  std::string name;
  uint64_t address = 0;      // st_value
  uint64_t size = 0;         // st_size
  uint64_t file_offset = 0;  // where the code lives in the file: what uprobe attach wants
};

// FUNC symbols with nonzero value and size from .symtab, then .dynsym, in table order. The same
// address may appear under several names (aliases, or both tables). kNotFound when the file is
// missing, kInvalidArgument when it is not an ELF file.
Expected<std::vector<ElfSymbol>> ReadFunctionSymbols(const std::string& path);

// Resolves the PATH part of a uprobe spec to an absolute, symlink-free path:
//   - containing '/': that file;
//   - otherwise a program on $PATH ("bash"),
//   - or a shared library in the standard directories: "libc", "libc.so", "libc.so.6".
// kNotFound "no such binary" when nothing exists.
Expected<std::string> ResolveBinaryPath(std::string_view path_or_name);

}  // namespace fay
