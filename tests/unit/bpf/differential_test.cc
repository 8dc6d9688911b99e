// Differential tests: the kernel's aggregates against the user-space interpreter's on the same
// events. For each case two live queries run at once, scoped to a forked child with a known
// workload: the aggregate itself, and a `select` streaming every field the aggregate reads. The
// streamed rows become Events for an Interpreter of the aggregate's plan, whose window must
// equal the kernel's, key for key and state byte for byte. Exact counts pin both to the truth.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bpf/runtime.h"
#include "bpf_test_util.h"
#include "engine/interpreter.h"
#include "query_test_util.h"

namespace fay::bpf {
namespace {

using testing::AggText;
using testing::FindRow;
using testing::RowsText;

// --- The workload: a process, a second thread and a forked kid, each with its own comm, so that
// fork tracking, pid versus tid and string keys all matter.

constexpr const char* kMainComm = "fayd-main";
constexpr const char* kKidComm = "fayd-kid";
constexpr int kMainGetppid = 37, kKidGetppid = 11;
constexpr int kMainMissing = 25, kKidMissing = 6;  // openat of missing paths, 5 names each
constexpr int kMainExists = 3;                     // O_CREAT|O_EXCL on /dev/null: EEXIST
constexpr int kMainReads = 41, kKidReads = 5;
constexpr int kMainWrites = 20, kKidWrites = 3;
constexpr const char* kMissingDir = "/nonexistent/fay-diff/";
constexpr int kMainBadPtr = 2;  // openat of an unreadable address: EFAULT, and str() reads ""
constexpr const char* kThreadComm = "fayd-thr";
constexpr int kThreadGetppid = 7;  // a second thread of the main process

// 41 distinct sizes in 0..299, including a zero-byte read.
int MainReadSize(int i) {
  return (i * 37) % 300;
}
constexpr int kKidReadSize = 4096;
int WriteSize(int i) {
  return 1 << (i % 13);
}

std::string MissingPath(bool kid, int i) {
  return fmt::format("{}{}{}", kMissingDir, kid ? 'k' : 'm', i % 5);
}

// Raw syscalls only, so that libc adds nothing the expectations do not know about.
void Workload(bool kid) {
  static char buf[8192];
  for (int i = 0; i < (kid ? kKidGetppid : kMainGetppid); ++i) syscall(SYS_getppid);
  for (int i = 0; i < (kid ? kKidMissing : kMainMissing); ++i) {
    std::string path = MissingPath(kid, i);
    syscall(SYS_openat, AT_FDCWD, path.c_str(), O_RDONLY);
  }
  if (!kid) {
    for (int i = 0; i < kMainExists; ++i)
      syscall(SYS_openat, AT_FDCWD, "/dev/null", O_WRONLY | O_CREAT | O_EXCL, 0600);
    for (int i = 0; i < kMainBadPtr; ++i) syscall(SYS_openat, AT_FDCWD, 8, O_RDONLY);
  }
  int zero = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/dev/zero", O_RDONLY));
  for (int i = 0; i < (kid ? kKidReads : kMainReads); ++i)
    syscall(SYS_read, zero, buf, kid ? kKidReadSize : MainReadSize(i));
  syscall(SYS_close, zero);
  int null = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_WRONLY));
  for (int i = 0; i < (kid ? kKidWrites : kMainWrites); ++i)
    syscall(SYS_write, null, buf, WriteSize(i));
  syscall(SYS_close, null);
}

// /proc/PID/syscall starts with the number of the call the task is blocked in.
bool WaitBlockedInRead(pid_t pid) {
  std::string path = fmt::format("/proc/{}/syscall", pid);
  for (int i = 0; i < 5000; ++i) {
    std::ifstream in(path);
    std::string nr;
    if (in >> nr && nr == "0") return true;
    usleep(1000);
  }
  return false;
}

// The forked child: waits for `go`, runs the workload, forks a kid that runs its own.
[[noreturn]] void ChildMain(int go_fd) {
  prctl(PR_SET_NAME, kMainComm);
  char c;
  if (read(go_fd, &c, 1) != 1) _exit(2);
  Workload(false);
  std::thread thread([] {
    prctl(PR_SET_NAME, kThreadComm);
    for (int i = 0; i < kThreadGetppid; ++i) syscall(SYS_getppid);
  });
  thread.join();
  pid_t kid = fork();
  if (kid == 0) {
    prctl(PR_SET_NAME, kKidComm);
    Workload(true);
    _exit(0);
  }
  int status = 0;
  if (kid < 0 || waitpid(kid, &status, 0) != kid || !WIFEXITED(status)) _exit(3);
  _exit(WEXITSTATUS(status));
}

// --- The cases.

struct CaseRun {
  std::unique_ptr<Plan> agg_plan, sel_plan;
  std::unique_ptr<LiveQuery> agg, sel;
  ResultSet kernel, oracle;
  ResultSet next_window;  // with `every`: a second read right after the first
  RunStats agg_stats, sel_stats, oracle_stats;
  size_t streamed = 0;
  std::string error;  // a setup failure of this case
};

// --- Exact values: the interpreter agreeing with the kernel is not enough if both are wrong.

std::vector<Value> Keys(std::initializer_list<Value> v) {
  return v;
}

constexpr int kAllGetppid = kMainGetppid + kThreadGetppid + kKidGetppid;

void CheckGetppidCountByComm(const CaseRun* run, pid_t) {
  ASSERT_EQ(run->kernel.rows.size(), 3u) << RowsText(run->kernel);
  const Row* main = FindRow(run->kernel, Keys({std::string(kMainComm)}));
  const Row* thread = FindRow(run->kernel, Keys({std::string(kThreadComm)}));
  const Row* kid = FindRow(run->kernel, Keys({std::string(kKidComm)}));
  ASSERT_TRUE(main && thread && kid) << RowsText(run->kernel);
  EXPECT_EQ(main->aggs[0].Count(), uint64_t{kMainGetppid});
  EXPECT_EQ(thread->aggs[0].Count(), uint64_t{kThreadGetppid});
  EXPECT_EQ(kid->aggs[0].Count(), uint64_t{kKidGetppid});
  EXPECT_EQ(run->agg_stats.events_seen, uint64_t{kAllGetppid});
}

void CheckKeyless(const CaseRun* run, pid_t main_pid) {
  ASSERT_EQ(run->kernel.rows.size(), 1u) << RowsText(run->kernel);
  const Row& r = run->kernel.rows[0];
  EXPECT_TRUE(r.keys.empty());
  EXPECT_EQ(r.aggs[0].Count(), uint64_t{kAllGetppid});
  EXPECT_EQ(r.aggs[1].Scalar(), main_pid);  // the kid's pid is larger, barring wraparound
  EXPECT_GT(r.aggs[2].Scalar(), main_pid);  // the thread's or the kid's tid
  EXPECT_EQ(r.aggs[3].DistinctEstimate(), 3u);
}

void CheckOpenatFailsByPath(const CaseRun* run, pid_t main_pid) {
  // 5 missing names per process, EEXIST on /dev/null, and "" for the unreadable address.
  ASSERT_EQ(run->kernel.rows.size(), 12u) << RowsText(run->kernel);
  const Row* bad = FindRow(run->kernel, Keys({std::string(kMainComm), std::string()}));
  ASSERT_TRUE(bad) << RowsText(run->kernel);
  EXPECT_EQ(bad->aggs[0].Count(), uint64_t{kMainBadPtr});
  EXPECT_EQ(run->agg_stats.read_errors, uint64_t{kMainBadPtr});
  for (int i = 0; i < 5; ++i) {
    const Row* m = FindRow(run->kernel, Keys({std::string(kMainComm), MissingPath(false, i)}));
    const Row* k = FindRow(run->kernel, Keys({std::string(kKidComm), MissingPath(true, i)}));
    ASSERT_TRUE(m && k) << "name " << i << "\n" << RowsText(run->kernel);
    EXPECT_EQ(m->aggs[0].Count(), uint64_t{kMainMissing / 5});
    EXPECT_EQ(k->aggs[0].Count(), i == 0 ? 2u : 1u);
    EXPECT_EQ(m->aggs[1].DistinctEstimate(), 1u);
  }
  const Row* exists =
      FindRow(run->kernel, Keys({std::string(kMainComm), std::string("/dev/null")}));
  ASSERT_TRUE(exists) << RowsText(run->kernel);
  EXPECT_EQ(exists->aggs[0].Count(), uint64_t{kMainExists});
}

void CheckReadScalars(const CaseRun* run, pid_t main_pid) {
  const Row* main = FindRow(run->kernel, Keys({std::string(kMainComm)}));
  const Row* kid = FindRow(run->kernel, Keys({std::string(kKidComm)}));
  ASSERT_TRUE(main && kid) << RowsText(run->kernel);
  int64_t sum = 0, mn = 1 << 30, mx = 0;
  for (int i = 0; i < kMainReads; ++i) {
    sum += MainReadSize(i);
    mn = std::min<int64_t>(mn, MainReadSize(i));
    mx = std::max<int64_t>(mx, MainReadSize(i));
  }
  EXPECT_EQ(main->aggs[0].Scalar(), sum);
  EXPECT_EQ(main->aggs[1].Scalar(), mn);
  EXPECT_EQ(main->aggs[2].Scalar(), mx);
  EXPECT_EQ(main->aggs[3].Count(), uint64_t{kMainReads});  // /dev/zero fills every read
  EXPECT_EQ(main->aggs[3].Scalar(), sum / kMainReads);
  EXPECT_EQ(main->aggs[4].Scalar(), sum);
  EXPECT_EQ(kid->aggs[0].Scalar(), int64_t{kKidReads} * kKidReadSize);
  EXPECT_EQ(kid->aggs[1].Scalar(), kKidReadSize);
  EXPECT_EQ(kid->aggs[2].Scalar(), kKidReadSize);
}

// Every read returns what it asked for, so each aggregate of args.count and ret is the state of
// the known sizes, byte for byte.
void CheckReadSketches(const CaseRun* run, pid_t) {
  std::vector<int64_t> main_sizes, kid_sizes(kKidReads, kKidReadSize);
  for (int i = 0; i < kMainReads; ++i) main_sizes.push_back(MainReadSize(i));
  for (const auto& [comm, sizes] : {std::pair{kMainComm, main_sizes}, {kKidComm, kid_sizes}}) {
    const Row* row = FindRow(run->kernel, Keys({std::string(comm)}));
    ASSERT_TRUE(row) << comm << "\n" << RowsText(run->kernel);
    ASSERT_EQ(row->aggs.size(), run->agg_plan->aggs.size());
    for (size_t a = 0; a < row->aggs.size(); ++a) {
      AggState want(SpecOf(*run->agg_plan->aggs[a].item));
      for (int64_t v : sizes) want.Update(v);
      EXPECT_TRUE(row->aggs[a] == want) << comm << " aggregate " << a << ": kernel "
                                        << AggText(row->aggs[a]) << ", want " << AggText(want);
    }
  }
}

void CheckOpenatWhereLogic(const CaseRun* run, pid_t main_pid) {
  ASSERT_EQ(run->kernel.rows.size(), 3u) << RowsText(run->kernel);
  const Row* m = FindRow(run->kernel, Keys({int64_t{2}, std::string(kMainComm)}));
  const Row* k = FindRow(run->kernel, Keys({int64_t{2}, std::string(kKidComm)}));
  const Row* e = FindRow(run->kernel, Keys({int64_t{17}, std::string(kMainComm)}));
  ASSERT_TRUE(m && k && e) << RowsText(run->kernel);
  EXPECT_EQ(m->aggs[0].Count(), uint64_t{kMainMissing});
  EXPECT_EQ(k->aggs[0].Count(), uint64_t{kKidMissing});
  EXPECT_EQ(e->aggs[0].Count(), uint64_t{kMainExists});
  EXPECT_EQ(m->aggs[1].DistinctEstimate(), 5u);
  EXPECT_EQ(e->aggs[1].DistinctEstimate(), 1u);
}

void CheckReadWriteByProbe(const CaseRun* run, pid_t main_pid) {
  int main_reads = 0, main_writes = 0, kid_writes = 0;
  for (int i = 0; i < kMainReads; ++i) main_reads += MainReadSize(i) > 8;
  for (int i = 0; i < kMainWrites; ++i) main_writes += WriteSize(i) > 8;
  for (int i = 0; i < kKidWrites; ++i) kid_writes += WriteSize(i) > 8;
  const Row* mr = FindRow(run->kernel, Keys({std::string("syscall:read"), std::string(kMainComm)}));
  const Row* mw =
      FindRow(run->kernel, Keys({std::string("syscall:write"), std::string(kMainComm)}));
  const Row* kr = FindRow(run->kernel, Keys({std::string("syscall:read"), std::string(kKidComm)}));
  ASSERT_TRUE(mr && mw && kr) << RowsText(run->kernel);
  EXPECT_EQ(mr->aggs[0].Count(), uint64_t(main_reads));
  EXPECT_EQ(mw->aggs[0].Count(), uint64_t(main_writes));
  EXPECT_EQ(kr->aggs[0].Count(), uint64_t{kKidReads});
  EXPECT_EQ(
      FindRow(run->kernel, Keys({std::string("syscall:write"), std::string(kKidComm)})) != nullptr,
      kid_writes > 0);
}

void CheckStrGlob(const CaseRun* run, pid_t main_pid) {
  ASSERT_EQ(run->kernel.rows.size(), 5u) << RowsText(run->kernel);
  for (int i = 0; i < 5; ++i) {
    const Row* r = FindRow(run->kernel, Keys({MissingPath(false, i), int64_t{main_pid}}));
    ASSERT_TRUE(r) << RowsText(run->kernel);
    EXPECT_EQ(r->aggs[0].Count(), uint64_t{kMainMissing / 5});
  }
}

void CheckEveryWindowReadsTheWholeWindow(const CaseRun* run, pid_t main_pid) {
  ASSERT_EQ(run->kernel.rows.size(), 2u) << RowsText(run->kernel);
  const Row* kid = FindRow(run->kernel, Keys({std::string(kKidComm)}));
  const Row* thread = FindRow(run->kernel, Keys({std::string(kThreadComm)}));
  ASSERT_TRUE(kid && thread) << RowsText(run->kernel);
  EXPECT_EQ(kid->aggs[0].Count(), uint64_t{kKidGetppid});
  EXPECT_NE(kid->aggs[2].Scalar(), main_pid);
  EXPECT_EQ(thread->aggs[0].Count(), uint64_t{kThreadGetppid});
  EXPECT_EQ(thread->aggs[2].Scalar(), main_pid);  // min(pid): the thread's tgid
  EXPECT_NE(thread->aggs[1].Scalar(), main_pid);  // max(tid): its own
  // Nothing ran since: the other buffer is empty, and the one read was cleared.
  EXPECT_TRUE(run->next_window.rows.empty()) << RowsText(run->next_window);
}

void CheckRawSyscalls(const CaseRun* run, pid_t main_pid) {
  const Row* getppid = FindRow(run->kernel, Keys({std::string("syscall:getppid"), int64_t{0}}));
  const Row* enoent = FindRow(run->kernel, Keys({std::string("syscall:openat"), int64_t{2}}));
  const Row* eexist = FindRow(run->kernel, Keys({std::string("syscall:openat"), int64_t{17}}));
  const Row* efault = FindRow(run->kernel, Keys({std::string("syscall:openat"), int64_t{14}}));
  ASSERT_TRUE(getppid && enoent && eexist && efault) << RowsText(run->kernel);
  EXPECT_EQ(efault->aggs[0].Count(), uint64_t{kMainBadPtr});
  EXPECT_EQ(getppid->aggs[0].Count(), uint64_t{kAllGetppid});
  EXPECT_EQ(enoent->aggs[0].Count(), uint64_t{kMainMissing + kKidMissing});
  EXPECT_EQ(eexist->aggs[0].Count(), uint64_t{kMainExists});
}

void CheckOpenatSigned(const CaseRun* run, pid_t) {
  const Row* main = FindRow(run->kernel, Keys({std::string(kMainComm)}));
  ASSERT_TRUE(main) << RowsText(run->kernel);
  // ENOENT, EEXIST, EFAULT, and the two successful opens of /dev/zero and /dev/null.
  EXPECT_EQ(main->aggs[3].Count(), uint64_t{kMainMissing + kMainExists + kMainBadPtr + 2});
  EXPECT_EQ(main->aggs[1].Scalar(), -17);
  EXPECT_GE(main->aggs[2].Scalar(), 0);
}

void CheckArithKeys(const CaseRun* run, pid_t) {
  ASSERT_EQ(run->kernel.rows.size(), 3u) << RowsText(run->kernel);
  // ret -2, errno 2: -2 >> 1 == -1 (arithmetic), -2 / 3 == 0, -2 % 5 == -2, (2 << 2) | 1 == 9.
  const Row* enoent =
      FindRow(run->kernel, Keys({int64_t{-1}, int64_t{0}, int64_t{-2}, int64_t{9}}));
  // ret -17, errno 17: -9, -5, -2, 69.
  const Row* eexist =
      FindRow(run->kernel, Keys({int64_t{-9}, int64_t{-5}, int64_t{-2}, int64_t{69}}));
  // ret -14, errno 14: -7, -4, -4, 57.
  const Row* efault =
      FindRow(run->kernel, Keys({int64_t{-7}, int64_t{-4}, int64_t{-4}, int64_t{57}}));
  ASSERT_TRUE(enoent && eexist && efault) << RowsText(run->kernel);
  EXPECT_EQ(efault->aggs[0].Count(), uint64_t{kMainBadPtr});
  EXPECT_EQ(efault->aggs[1].Scalar(), int64_t{kMainBadPtr} * 43);
  EXPECT_EQ(efault->aggs[2].Scalar(), 13);  // ~-14
  EXPECT_EQ(enoent->aggs[0].Count(), uint64_t{kMainMissing + kKidMissing});
  EXPECT_EQ(enoent->aggs[1].Scalar(), int64_t{kMainMissing + kKidMissing} * 7);
  EXPECT_EQ(enoent->aggs[2].Scalar(), 1);  // ~-2
  EXPECT_EQ(eexist->aggs[0].Count(), uint64_t{kMainExists});
  EXPECT_EQ(eexist->aggs[1].Scalar(), int64_t{kMainExists} * 52);
  EXPECT_EQ(eexist->aggs[2].Scalar(), 16);  // ~-17
}

void CheckStrTruncated(const CaseRun* run, pid_t) {
  ASSERT_EQ(run->kernel.rows.size(), 2u) << RowsText(run->kernel);
  // str(p, 20) keeps 19 bytes and the NUL.
  const Row* missing = FindRow(run->kernel, Keys({std::string(kMissingDir).substr(0, 19)}));
  const Row* null = FindRow(run->kernel, Keys({std::string("/dev/null")}));
  ASSERT_TRUE(missing && null) << RowsText(run->kernel);
  EXPECT_EQ(missing->aggs[0].Count(), uint64_t{kMainMissing + kKidMissing});
  EXPECT_EQ(missing->aggs[1].DistinctEstimate(), 1u);
  EXPECT_EQ(null->aggs[0].Count(), uint64_t{kMainExists + 2});  // plus one O_WRONLY open each
}

void CheckTracepointFork(const CaseRun* run, pid_t main_pid) {
  ASSERT_EQ(run->kernel.rows.size(), 1u) << RowsText(run->kernel);
  const Row& r = run->kernel.rows[0];
  EXPECT_EQ(r.keys, Keys({std::string(kMainComm), std::string(kMainComm), int64_t{main_pid}}));
  EXPECT_EQ(r.aggs[0].Count(), 2u);  // the thread, then the kid
  EXPECT_GT(r.aggs[1].Scalar(), main_pid);
}

// x / 0 == 0 and x % 0 == x, as in eBPF; literals beyond 32 bits survive the immediates.
void CheckDivZeroAndBigLiterals(const CaseRun* run, pid_t) {
  const Row* main = FindRow(run->kernel, Keys({std::string(kMainComm)}));
  const Row* kid = FindRow(run->kernel, Keys({std::string(kKidComm)}));
  ASSERT_TRUE(main && kid) << RowsText(run->kernel);
  int64_t sum = 0;
  for (int i = 0; i < kMainReads; ++i) sum += MainReadSize(i);
  EXPECT_EQ(main->aggs[0].Count(), uint64_t{kMainReads});
  EXPECT_EQ(main->aggs[1].Scalar(), 0);
  EXPECT_EQ(main->aggs[2].Scalar(), sum);
  EXPECT_EQ(main->aggs[3].Scalar(), -sum);
  EXPECT_EQ(main->aggs[4].Scalar(), sum + kMainReads * 0x7fffffff00LL);
  EXPECT_EQ(kid->aggs[4].Scalar(), kKidReads * (kKidReadSize + 0x7fffffff00LL));
}

// The first keys fill the map; the kernel and the interpreter refuse the same later ones.
void CheckMapFull(const CaseRun* run, pid_t) {
  ASSERT_EQ(run->kernel.rows.size(), 3u) << RowsText(run->kernel);
  uint64_t kept = 0;
  for (const Row& r : run->kernel.rows) kept += r.aggs[0].Count();
  // Every openat of the workload: missing paths, EEXIST, bad pointers, /dev/zero, /dev/null.
  uint64_t all = kMainMissing + kMainExists + kMainBadPtr + 2 + kKidMissing + 2;
  EXPECT_EQ(kept + run->agg_stats.map_full, all);
  EXPECT_GT(run->agg_stats.map_full, 0u);
  for (int i = 0; i < 3; ++i)  // the first three names the main process opens
    EXPECT_NE(FindRow(run->kernel, Keys({MissingPath(false, i)})), nullptr)
        << RowsText(run->kernel);
}

void CheckTracepointSwitch(const CaseRun* run, pid_t) {
  // The main process blocks in wait4 for its kid at least once.
  bool main_seen = false;
  for (const Row& r : run->kernel.rows) main_seen |= r.keys[0] == Value(std::string(kMainComm));
  EXPECT_TRUE(main_seen) << RowsText(run->kernel);
}

void CheckReadUnsignedArith(const CaseRun* run, pid_t) {
  // Rows are split by cpu; fold them per (hundreds, uid).
  std::map<int64_t, std::pair<uint64_t, int64_t>> want, got;  // hundreds -> count, sum
  std::map<int64_t, int64_t> want_min;
  auto add = [&](int64_t n) {
    if (n % 2 != 1 && n <= 250) return;
    auto& w = want[n / 100];
    ++w.first;
    w.second += 2 * n;
    auto [it, fresh] = want_min.emplace(n / 100, n - 100);
    if (!fresh) it->second = std::min(it->second, n - 100);
  };
  for (int i = 0; i < kMainReads; ++i) add(MainReadSize(i));
  for (int i = 0; i < kKidReads; ++i) add(kKidReadSize);
  std::map<int64_t, int64_t> got_min;
  for (const Row& r : run->kernel.rows) {
    ASSERT_EQ(r.keys.size(), 3u);
    EXPECT_EQ(r.keys[1], Value(int64_t{getuid()}));
    int64_t h = std::get<int64_t>(r.keys[0]);
    got[h].first += r.aggs[0].Count();
    got[h].second += r.aggs[1].Scalar();
    auto [it, fresh] = got_min.emplace(h, r.aggs[2].Scalar());
    if (!fresh) it->second = std::min(it->second, r.aggs[2].Scalar());
  }
  EXPECT_EQ(got, want) << RowsText(run->kernel);
  EXPECT_EQ(got_min, want_min) << RowsText(run->kernel);
}

struct DiffCase {
  const char* name;
  const char* aggregate;
  const char* select;  // the same source, streaming every field the aggregate reads
  void (*check)(const CaseRun* run, pid_t main_pid);
  uint32_t max_keys = 10240;  // of the aggregate
};

const DiffCase kCases[] = {
    {"getppid_count_by_comm", "syscall:getppid | count() by comm", "syscall:getppid | select comm",
     CheckGetppidCountByComm},
    {"keyless", "syscall:getppid | count(), min(pid), max(tid), distinct(comm) as comms",
     "syscall:getppid | select pid, tid, comm", CheckKeyless},
    {"openat_fails_by_path",
     "syscall:openat | where ret < 0 | count() as fails, distinct(tid) as tids by comm, "
     "str(args.filename) as path",
     "syscall:openat | select comm, tid, ret, str(args.filename)", CheckOpenatFailsByPath},
    {"read_scalars",
     "syscall:read | where ret >= 0 | sum(args.count), min(args.count), max(args.count), "
     "avg(ret), sum(ret) as got by comm",
     "syscall:read | select comm, args.count, ret", CheckReadScalars},
    {"read_sketches",
     "syscall:read | hist(args.count), lhist(args.count, 0, 300, 25), quantile(args.count, 0.5) "
     "as p50, quantile(ret, 0.99) as p99, distinct(args.count) as sizes by comm",
     "syscall:read | select comm, args.count, ret", CheckReadSketches},
    {"openat_where_logic",
     "syscall:openat | where (ret == -2 && comm == \"fayd-*\") || errno in (13, 17) | count(), "
     "distinct(str(args.filename)) as paths by errno, comm",
     "syscall:openat | select comm, ret, errno, str(args.filename)", CheckOpenatWhereLogic},
    {"rw_by_probe",
     "syscall:read, syscall:write | where comm in (\"fayd-main\", \"fayd-k?d\") && "
     "args.count > 8 | count(), hist(ret), max(args.fd) as fd by probe, comm",
     "syscall:read, syscall:write | select comm, args.count, ret, args.fd", CheckReadWriteByProbe},
    {"str_glob",
     "syscall:openat | where str(args.filename) == \"/nonexistent/fay-diff/m*\" | count() by "
     "str(args.filename) as path, pid",
     "syscall:openat | select pid, str(args.filename)", CheckStrGlob},
    {"every_window",
     "syscall:getppid | where comm != \"fayd-m*\" | count(), max(tid), min(pid) by comm | "
     "every 1s",
     "syscall:getppid | select comm, tid, pid", CheckEveryWindowReadsTheWholeWindow},
    {"raw_syscalls",
     "syscall:* | where ret < 0 || probe == \"syscall:getppid\" | count() by probe, errno",
     "syscall:* | select ret, errno", CheckRawSyscalls},
    {"openat_signed",
     "syscall:openat | sum(ret), min(ret), max(ret), avg(ret), hist(ret), lhist(ret, -20, 10, 3), "
     "quantile(ret, 0.9) as p90 by comm",
     "syscall:openat | select comm, ret", CheckOpenatSigned},
    {"arith_keys",
     "syscall:openat | where !(ret >= 0) && (errno ^ 1) != 0 | count(), sum(-ret * 3 + 1) as s, "
     "max(~ret) as inv by ret >> 1 as half, ret / 3 as third, ret % 5 as rem, "
     "((errno << 2) | 1) as bits",
     "syscall:openat | select ret, errno", CheckArithKeys},
    {"read_unsigned_arith",
     "syscall:read | where args.count % 2 == 1 || args.count > 250 | count(), "
     "sum(args.count * 2) as dbl, min(args.count - 100) as below by args.count / 100 as hundreds, "
     "uid, cpu",
     "syscall:read | select args.count, uid, cpu", CheckReadUnsignedArith},
    {"str_truncated",
     "syscall:openat | where str(args.filename, 20) in (\"/nonexistent/fay-di\", \"/dev/n?ll\") | "
     "count(), distinct(str(args.filename, 20)) as d by str(args.filename, 20) as p",
     "syscall:openat | select str(args.filename)", CheckStrTruncated},
    {"tracepoint_fork",
     "tracepoint:sched:sched_process_fork | where parent_comm == \"fayd-*\" | count(), "
     "max(child_pid) as kid by parent_comm, child_comm, parent_pid",
     "tracepoint:sched:sched_process_fork | select parent_comm, child_comm, parent_pid, child_pid",
     CheckTracepointFork},
    {"tracepoint_switch",
     "tracepoint:sched:sched_switch | where prev_comm == \"fayd-*\" | count(), "
     "distinct(next_comm) as nexts by prev_comm, prev_state",
     "tracepoint:sched:sched_switch | select prev_comm, prev_state, next_comm",
     CheckTracepointSwitch},
    {"div_zero_big_literals",
     "syscall:read | where args.count < 0x100000000 && args.count != 0xffffffff && "
     "ret > -0x80000001 && args.count >= 0 | count(), "
     "sum(args.count / (args.fd - args.fd)) as z, sum(args.count % (args.fd - args.fd)) as m, "
     "sum(ret / -1) as neg, sum(args.count + 0x7fffffff00) as big by comm",
     "syscall:read | select comm, args.count, args.fd, ret", CheckDivZeroAndBigLiterals},
    {"map_full", "syscall:openat | count() by str(args.filename) as path",
     "syscall:openat | select str(args.filename)", CheckMapFull, 3},
};

// A select row as an Event of the aggregate plan: the fields the select streamed, zero or empty
// for the rest (the aggregate must not read those).
Expected<Event> ToEvent(const Plan& agg, const Plan& sel, int sel_probe,
                        const std::vector<Value>& row) {
  if (sel_probe < 0 || static_cast<size_t>(sel_probe) >= sel.probes.size())
    return Error(Code::kInternal, fmt::format("select record of unknown probe {}", sel_probe));
  const std::string& name = sel.probes[sel_probe].name;
  Event ev;
  ev.probe_index = -1;
  for (size_t i = 0; i < agg.probes.size(); ++i)
    if (agg.probes[i].name == name) ev.probe_index = static_cast<int>(i);
  if (ev.probe_index < 0) return Error(Code::kInternal, "probe not in the aggregate: " + name);
  const ProbeInfo& probe = agg.probes[ev.probe_index];
  for (const Field& f : probe.fields) {
    if (f.type.kind == TypeKind::kString)
      ev.values.emplace_back(std::string());
    else
      ev.values.emplace_back(int64_t{0});
  }
  ev.user_strings.resize(probe.fields.size());
  auto index_of = [&](const std::string& field) -> Expected<size_t> {
    const Field* f = probe.FindField(field);
    if (!f) return Error(Code::kInternal, "no field " + field + " in " + probe.name);
    return static_cast<size_t>(f - probe.fields.data());
  };
  for (size_t k = 0; k < sel.keys.size(); ++k) {
    const Expr& e = *sel.keys[k].expr;
    if (e.kind == ExprKind::kField) {
      FAY_ASSIGN_OR_RETURN(size_t i, index_of(e.name));
      ev.values[i] = row[k];
    } else if (e.kind == ExprKind::kCall && e.name == "str" && !e.kids.empty()) {
      FAY_ASSIGN_OR_RETURN(size_t i, index_of(e.kids[0]->name));
      const auto* s = std::get_if<std::string>(&row[k]);
      if (!s) return Error(Code::kInternal, "str() column is not a string");
      ev.user_strings[i] = *s;
    } else {
      return Error(Code::kInternal, "select column is not a field or str(): " + e.text);
    }
  }
  return ev;
}

void PrintTo(const DiffCase& c, std::ostream* os) {
  *os << c.name;
}

// The runs happen once per test binary, in SetUpTestSuite: one forked workload serves every case
// that the test filter selects (ctest runs each test in its own process, so usually one case).
class DifferentialTest : public ::testing::TestWithParam<DiffCase> {
 protected:
  static void SetUpTestSuite();

  // The finished run of the current case, or null after recording a failure.
  static const CaseRun* Run(const std::string& name) {
    EXPECT_TRUE(setup_error_.empty()) << setup_error_;
    if (!setup_error_.empty()) return nullptr;
    auto it = runs_->find(name);
    EXPECT_TRUE(it != runs_->end()) << "case " << name << " did not run";
    if (it == runs_->end()) return nullptr;
    EXPECT_TRUE(it->second.error.empty()) << it->second.error;
    return it->second.error.empty() ? &it->second : nullptr;
  }

  static std::map<std::string, CaseRun>* runs_;
  static std::string setup_error_, skip_reason_;
  static pid_t main_pid_;
};

std::map<std::string, CaseRun>* DifferentialTest::runs_ = new std::map<std::string, CaseRun>();
std::string DifferentialTest::setup_error_;
std::string DifferentialTest::skip_reason_;
pid_t DifferentialTest::main_pid_ = 0;

#define FAY_DIFF_RUN(run)                                  \
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_; \
  const CaseRun* run = Run(GetParam().name);               \
  if (!run) return

// Names of the cases some selected test of this suite will run.
std::vector<const DiffCase*> SelectedCases() {
  std::vector<const DiffCase*> out;
  const ::testing::UnitTest& ut = *::testing::UnitTest::GetInstance();
  for (const DiffCase& c : kCases) {
    bool wanted = false;
    for (int s = 0; s < ut.total_test_suite_count() && !wanted; ++s) {
      const ::testing::TestSuite& suite = *ut.GetTestSuite(s);
      if (std::string(suite.name()).find("DifferentialTest") == std::string::npos) continue;
      for (int t = 0; t < suite.total_test_count() && !wanted; ++t) {
        const ::testing::TestInfo& info = *suite.GetTestInfo(t);
        std::string name = info.name();
        wanted = info.should_run() && name.size() > strlen(c.name) &&
                 name.compare(name.size() - strlen(c.name) - 1, std::string::npos,
                              std::string("/") + c.name) == 0;
      }
    }
    if (wanted) out.push_back(&c);
  }
  return out;
}

Status LoadAndAttach(const char* text, uint32_t max_keys, pid_t child, std::unique_ptr<Plan>& plan,
                     std::unique_ptr<LiveQuery>& live) {
  PlanOptions plan_options;
  plan_options.max_keys = max_keys;
  auto p = CompileQuery(text, testing::Catalog(), plan_options);
  if (!p.ok()) return Error(p.status().code(), std::string(text) + "\n" + p.status().message());
  plan = std::make_unique<Plan>(std::move(p).value());
  CodegenOptions options;
  options.scoped = true;
  auto l = LiveQuery::Load(*plan, options);
  if (!l.ok()) return Error(l.status().code(), std::string(text) + "\n" + l.status().message());
  live = std::move(l).value();
  FAY_RETURN_IF_ERROR(live->AddScopePid(child));
  return live->Attach();
}

// Reads both queries of a finished case and runs the interpreter over the streamed events.
void Collect(CaseRun& run) {
  auto rs = run.agg->ReadWindow(1);
  if (!rs.ok()) {
    run.error = "ReadWindow: " + rs.status().message();
    return;
  }
  run.kernel = std::move(rs).value();
  testing::SortRows(run.kernel);
  if (run.agg_plan->every_ns) {
    auto next = run.agg->ReadWindow(2);
    if (!next.ok()) {
      run.error = "second ReadWindow: " + next.status().message();
      return;
    }
    run.next_window = std::move(next).value();
  }

  Interpreter interp(*run.agg_plan);
  std::string convert_error;
  LiveQuery::RowCallback on_row = [&](std::vector<Value> row, int probe, uint64_t) {
    ++run.streamed;
    auto ev = ToEvent(*run.agg_plan, *run.sel_plan, probe, row);
    if (!ev.ok()) {
      if (convert_error.empty()) convert_error = ev.status().message();
      return;
    }
    interp.Process(*ev);
  };
  auto n = run.sel->PollEvents(-1, on_row);
  if (!n.ok()) {
    run.error = "PollEvents: " + n.status().message();
    return;
  }
  if (!convert_error.empty()) run.error = "building events: " + convert_error;
  if (!interp.first_error().ok()) run.error = "interpreter: " + interp.first_error().message();
  run.oracle = interp.TakeWindow(1);
  run.oracle_stats = interp.stats();
  run.agg_stats = run.agg->Stats();
  run.sel_stats = run.sel->Stats();
}

void DifferentialTest::SetUpTestSuite() {
  static bool done = false;
  if (done) return;
  done = true;
  skip_reason_ = testing::BpfUnavailableReason();
  if (skip_reason_.empty() && testing::TracefsRoot().empty())
    skip_reason_ = "tracefs is not available";
  std::vector<const DiffCase*> cases = SelectedCases();
  if (!skip_reason_.empty() || cases.empty()) return;

  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) {
    setup_error_ = fmt::format("pipe: {}", strerror(errno));
    return;
  }
  fflush(nullptr);
  pid_t child = fork();
  if (child < 0) {
    setup_error_ = fmt::format("fork: {}", strerror(errno));
    return;
  }
  if (child == 0) {
    close(go[1]);
    ChildMain(go[0]);
  }
  close(go[0]);
  main_pid_ = child;
  // Attach only once the child sits in its read of `go`: the queries attach one after the
  // other, and a read entered between two attachments would be seen by one query only.
  if (!WaitBlockedInRead(child)) setup_error_ = "the workload child never blocked on its pipe";

  for (const DiffCase* c : cases) {
    CaseRun& run = (*runs_)[c->name];
    Status st = LoadAndAttach(c->aggregate, c->max_keys, child, run.agg_plan, run.agg);
    if (st.ok()) st = LoadAndAttach(c->select, 10240, child, run.sel_plan, run.sel);
    if (!st.ok()) run.error = st.message();
  }

  // Everything is attached: let the child run, and wait for it (it waits for its kid).
  if (write(go[1], "g", 1) != 1) setup_error_ = "cannot release the child";
  close(go[1]);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    setup_error_ = fmt::format("the workload child failed (status {:#x})", status);

  // Closing a tracepoint perf event waits for an RCU grace period; closing them from parallel
  // threads shares the waits.
  std::vector<std::thread> detach;
  for (auto& [name, run] : *runs_) {
    if (run.agg) detach.emplace_back([&r = run] { r.agg->Detach(); });
    if (run.sel) detach.emplace_back([&r = run] { r.sel->Detach(); });
  }
  for (auto& t : detach) t.join();
  for (auto& [name, run] : *runs_)
    if (run.error.empty()) Collect(run);
}

TEST_P(DifferentialTest, KernelMatchesInterpreter) {
  FAY_DIFF_RUN(run);
  const ResultSet& k = run->kernel;
  const ResultSet& o = run->oracle;
  std::string both = "kernel:\n" + RowsText(k) + "interpreter:\n" + RowsText(o);
  EXPECT_EQ(run->sel_stats.dropped, 0u);
  EXPECT_GT(run->streamed, 0u) << "the select query saw no event of the workload";
  EXPECT_EQ(run->streamed, run->sel_stats.events_matched);
  // Both queries saw the same events, and agree on which passed the predicate.
  EXPECT_EQ(run->agg_stats.events_seen, run->sel_stats.events_seen);
  EXPECT_EQ(run->agg_stats.events_matched, run->oracle_stats.events_matched) << both;
  EXPECT_EQ(run->agg_stats.map_full, run->oracle_stats.map_full);
  ASSERT_EQ(k.rows.size(), o.rows.size()) << both;
  for (size_t r = 0; r < k.rows.size(); ++r) {
    const Row& kr = k.rows[r];
    const Row& orow = o.rows[r];
    EXPECT_EQ(kr.keys, orow.keys) << "row " << r << "\n" << both;
    ASSERT_EQ(kr.aggs.size(), orow.aggs.size());
    for (size_t a = 0; a < kr.aggs.size(); ++a)
      EXPECT_TRUE(kr.aggs[a] == orow.aggs[a])
          << "row " << r << " aggregate " << a << ": kernel " << AggText(kr.aggs[a])
          << ", interpreter " << AggText(orow.aggs[a]) << "\n"
          << both;
  }
}

TEST_P(DifferentialTest, ExactValues) {
  FAY_DIFF_RUN(run);
  ASSERT_NE(GetParam().check, nullptr);
  GetParam().check(run, main_pid_);
}

INSTANTIATE_TEST_SUITE_P(Workload, DifferentialTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fay::bpf
