// Names the calling thread as `top -H`, perf and /proc/PID/task/TID/comm show it, so that a user
// (or a profile) can tell fay's consumer from its governor. At most 15 characters are kept.
#pragma once

#include <pthread.h>

namespace fay {

inline void NameThisThread(const char* name) {
  (void)pthread_setname_np(pthread_self(), name);
}

}  // namespace fay
