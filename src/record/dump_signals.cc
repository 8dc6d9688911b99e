#include "record/dump_signals.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cctype>

#include "trace/flight.h"

namespace fay::record {
namespace {

std::atomic<int> g_pipe{-1};

void OnDumpSignal(int sig) {
  int saved = errno;
  uint8_t b = static_cast<uint8_t>(sig);
  int fd = g_pipe.load(std::memory_order_relaxed);
  if (fd >= 0) (void)!::write(fd, &b, 1);  // a full pipe already holds a request
  errno = saved;
}

}  // namespace

int ParseSignal(const std::string& name) {
  if (name.empty()) return 0;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) {
    int n = std::atoi(name.c_str());
    return n > 0 && n < NSIG && std::to_string(n) == name ? n : 0;
  }
  std::string up;
  for (char c : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up.rfind("SIG", 0) == 0) up = up.substr(3);
  for (int s = 1; s < NSIG; ++s) {
    const char* abbrev = sigabbrev_np(s);
    if (abbrev && up == abbrev) return s;
  }
  return 0;
}

bool IsDumpSignal(int sig) {
  return sig == SIGUSR1 || sig == SIGUSR2 || (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

Expected<std::unique_ptr<DumpSignals>> DumpSignals::Start(const std::vector<int>& signals,
                                                          trace::FlightControl* flight) {
  if (g_pipe.load() >= 0) return Error(Code::kInternal, "dump signals are already handled");
  auto d = std::make_unique<DumpSignals>(Key{}, signals, flight);
  if (!d->read_) return ErrnoError("a pipe for the dump signals");
  return d;
}

DumpSignals::DumpSignals(Key, const std::vector<int>& signals, trace::FlightControl* flight)
    : signals_(signals) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  read_.reset(fds[0]);
  write_.reset(fds[1]);
  // The reader blocks; only the handler's end must never block.
  ::fcntl(read_.get(), F_SETFL, 0);
  g_pipe.store(write_.get());
  thread_ = std::thread([this, flight] {
    uint8_t b;
    while (::read(read_.get(), &b, 1) == 1 && b != 0)
      flight->Request(fmt::format(
          "signal {}", sigabbrev_np(b) ? std::string("SIG") + sigabbrev_np(b) : std::to_string(b)));
  });
  struct sigaction sa {};
  sa.sa_handler = OnDumpSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : signals_) sigaction(s, &sa, nullptr);
}

DumpSignals::~DumpSignals() {
  // Ignored rather than put back: the recording is over, and a late signal must not kill fay
  // while it prints what it wrote (the default action of SIGUSR1 is to terminate).
  for (int s : signals_) signal(s, SIG_IGN);
  if (thread_.joinable()) {
    uint8_t stop = 0;
    // Blocking is fine here: the reader drains the pipe.
    ::fcntl(write_.get(), F_SETFL, 0);
    (void)!::write(write_.get(), &stop, 1);
    thread_.join();
  }
  g_pipe.store(-1);
}

}  // namespace fay::record
