// A signal's kernel_siginfo, printed as strace prints it: the fields that its signal and code
// give meaning to, names for the codes ("{si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=42, ...}").
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace fay {

// `info` holds the first bytes of a kernel_siginfo (x86-64 layout; 48 are enough, fewer print
// what they hold). An empty one prints "{si_signo=SIG...}" from `signo` alone.
std::string FormatSiginfo(int signo, std::span<const uint8_t> info);

// The line strace prints for a signal delivered to a traced thread:
// "--- SIGCHLD {si_signo=SIGCHLD, ...} ---".
std::string SignalLine(int signo, std::span<const uint8_t> info);

}  // namespace fay
