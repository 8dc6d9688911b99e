// Helpers for the replay tests: a scratch directory and a builder of recorded events, so a test
// can write the trace it needs (hostile ones included) without recording anything.
#pragma once

#include <fcntl.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "schema/syscall_event.h"
#include "schema/syscall_table.h"

namespace fay::replay::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fay-replay-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

// Builds a sequence of calls of one thread (or several), each 10 ns long and 10 ns apart unless
// told otherwise.
class Events {
 public:
  explicit Events(int32_t pid = 100) : pid_(pid) {}

  SyscallEvent& Add(int nr, std::vector<uint64_t> args, int64_t ret, int32_t tid = 0) {
    SyscallEvent ev;
    ev.pid = pid_;
    ev.tid = tid ? tid : pid_;
    ev.nr = nr;
    for (size_t i = 0; i < args.size() && i < 6; ++i) ev.args[i] = args[i];
    ev.ret = ret;
    ev.entry_ns = now_ += 10;
    ev.exit_ns = now_ += 10;
    events_.push_back(std::move(ev));
    return events_.back();
  }
  // A path (or any NUL-terminated string) argument captured at entry.
  static SyscallEvent& Str(SyscallEvent& ev, int arg, const std::string& s) {
    CapturedBuffer b;
    b.arg = static_cast<uint8_t>(arg);
    b.dir = BufferDir::kIn;
    b.addr = 0x1000 + arg;
    b.bytes.assign(s.begin(), s.end());
    b.bytes.push_back(0);
    b.length = b.bytes.size();
    ev.args[arg] = b.addr;
    ev.buffers.push_back(std::move(b));
    return ev;
  }
  static SyscallEvent& Data(SyscallEvent& ev, int arg, const std::string& s,
                            BufferDir dir = BufferDir::kIn) {
    CapturedBuffer b;
    b.arg = static_cast<uint8_t>(arg);
    b.dir = dir;
    b.addr = 0x2000 + arg;
    b.bytes.assign(s.begin(), s.end());
    b.length = b.bytes.size();
    ev.args[arg] = b.addr;
    ev.buffers.push_back(std::move(b));
    return ev;
  }

  SyscallEvent& OpenAt(const std::string& path, uint64_t flags, int64_t ret, uint64_t mode = 0644) {
    return Str(Add(sysno::openat, {static_cast<uint64_t>(AT_FDCWD), 0, flags, mode}, ret), 1, path);
  }
  SyscallEvent& Write(int fd, const std::string& data) {
    return Data(Add(sysno::write, {static_cast<uint64_t>(fd), 0, data.size()},
                    static_cast<int64_t>(data.size())),
                1, data);
  }
  SyscallEvent& Read(int fd, const std::string& data, uint64_t count) {
    return Data(
        Add(sysno::read, {static_cast<uint64_t>(fd), 0, count}, static_cast<int64_t>(data.size())),
        1, data, BufferDir::kOut);
  }
  SyscallEvent& Close(int fd, int64_t ret = 0) {
    return Add(sysno::close, {static_cast<uint64_t>(fd)}, ret);
  }
  SyscallEvent& Path1(int nr, const std::string& path, int64_t ret,
                      std::vector<uint64_t> more = {}) {
    std::vector<uint64_t> args{0};
    args.insert(args.end(), more.begin(), more.end());
    return Str(Add(nr, args, ret), 0, path);
  }
  SyscallEvent& Path2(int nr, const std::string& a, const std::string& b, int64_t ret) {
    SyscallEvent& ev = Add(nr, {0, 0}, ret);
    Str(ev, 0, a);
    return Str(ev, 1, b);
  }

  std::vector<SyscallEvent>& events() { return events_; }
  uint64_t now() const { return now_; }
  void set_now(uint64_t ns) { now_ = ns; }

 private:
  int32_t pid_;
  uint64_t now_ = 1000;
  std::vector<SyscallEvent> events_;
};

}  // namespace fay::replay::testing
