#include "record/recorder.h"

#include <limits.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "record/ebpf/ebpf_recorder.h"
#include "record/ptrace/ptrace_recorder.h"
#include "record/task_info.h"
#include "schema/syscall_table.h"

extern char** environ;

namespace fay::record {

RecordingInfo BaseRecordingInfo(const RecordOptions& options, const std::string& backend) {
  RecordingInfo info;
  utsname u{};
  uname(&u);
  info.host = u.nodename;
  info.kernel = u.release;
  info.arch = u.machine;
  info.backend = backend;
  info.syscall_table_version = kSyscallTableVersion;
  info.max_buffer = options.max_buffer;
  info.syscall_filter = options.syscall_filter;
  if (options.pid) {
    info.argv = ReadProcStrings(options.pid, "cmdline");
    info.env = ReadProcStrings(options.pid, "environ");
    info.cwd = ReadProcLink(options.pid, "cwd");
    info.root_pid = options.pid;
  } else {
    info.argv = options.argv;
    for (char** e = environ; e && *e; ++e) info.env.emplace_back(*e);
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd)) info.cwd = cwd;
  }
  return info;
}

OutputFile IdentifyOutput(const std::string& path) {
  OutputFile f;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return f;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.removable = true;
  return f;
}

void RemoveOutput(const std::string& path, const OutputFile& made) {
  if (!made.removable) return;
  OutputFile now = IdentifyOutput(path);
  if (now.removable && now.dev == made.dev && now.ino == made.ino) unlink(path.c_str());
}

void SayAttached(const RecordOptions& options, const std::string& path, uint64_t threads) {
  if (!options.pid || options.quiet) return;
  fmt::print(stderr, "fay: attached to process {} ({} thread{}), recording to {}\n", options.pid,
             threads, threads == 1 ? "" : "s", path);
  std::fflush(stderr);
}

Status ExitedError(pid_t pid) {
  return Error(Code::kNotFound,
               fmt::format("process {} has already exited: a zombie its parent has not reaped, "
                           "which makes no more system calls",
                           pid));
}

std::string DefaultOutputName(const RecordOptions& options) {
  std::string cmd = "pid" + std::to_string(options.pid);
  if (!options.argv.empty()) {
    cmd = options.argv[0];
    size_t slash = cmd.rfind('/');
    if (slash != std::string::npos) cmd = cmd.substr(slash + 1);
  }
  time_t now = time(nullptr);
  tm t{};
  localtime_r(&now, &t);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &t);
  // Two recordings in the same second must not overwrite each other.
  std::string name = fmt::format("fay-{}-{}.fay", cmd, stamp);
  for (int n = 2; access(name.c_str(), F_OK) == 0; ++n)
    name = fmt::format("fay-{}-{}-{}.fay", cmd, stamp, n);
  return name;
}

// execvp's PATH search, done before forking so a missing command is a clear error, not a child
// that exits 127.
Expected<std::string> ResolveCommand(const std::string& name) {
  auto usable = [](const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (usable(name)) return name;
    return Error(
        Code::kNotFound,
        fmt::format("cannot run '{}': {}", name,
                    access(name.c_str(), F_OK) == 0 ? "not an executable file" : "no such file"));
  }
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    if (usable(cand)) return cand;
    start = end + 1;
  }
  return Error(Code::kNotFound, fmt::format("cannot run '{}': command not found in PATH", name));
}

Expected<RecordResult> Record(const RecordOptions& options) {
  if (options.backend != "auto" && options.backend != "ptrace" && options.backend != "ebpf")
    return Error(Code::kInvalidArgument,
                 fmt::format("unknown backend '{}' (auto, ebpf or ptrace)", options.backend));
  if (options.argv.empty() == (options.pid == 0))
    return Error(Code::kInvalidArgument, "give either -p PID or a command after --");
  if (options.pid && IsKernelThread(options.pid))
    return Error(
        Code::kInvalidArgument,
        fmt::format("pid {} is a kernel thread: it makes no system calls to record", options.pid));
  if (options.pid && HasExited(options.pid)) return ExitedError(options.pid);
  if (options.backend == "ebpf") return RecordWithEbpf(options);
  if (options.backend == "ptrace" || options.pid) return RecordWithPtrace(options);
  // auto: eBPF where the kernel allows it (what `fay doctor` checks), else ptrace. Only a
  // refusal to load or attach the probes falls back; they come before the command runs.
  auto r = RecordWithEbpf(options);
  if (r.ok()) return r;
  Code c = r.status().code();
  if (c != Code::kPermission && c != Code::kUnsupported && c != Code::kVerifier) return r;
  std::string why = r.status().message();
  if (size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
  fmt::print(stderr, "fay: eBPF recording is not available ({}); recording with ptrace\n", why);
  RecordOptions fallback = options;
  fallback.backend = "ptrace";
  return RecordWithPtrace(fallback);
}

}  // namespace fay::record
