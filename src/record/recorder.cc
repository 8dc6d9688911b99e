#include "record/recorder.h"

#include <limits.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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

Expected<RecordResult> Record(const RecordOptions& options) {
  if (options.backend != "ptrace" && options.backend != "ebpf")
    return Error(Code::kInvalidArgument,
                 fmt::format("unknown backend '{}' (ptrace or ebpf)", options.backend));
  if (options.argv.empty() == (options.pid == 0))
    return Error(Code::kInvalidArgument, "give either -p PID or a command after --");
  if (options.backend == "ebpf") return RecordWithEbpf(options);
  return RecordWithPtrace(options);
}

}  // namespace fay::record
