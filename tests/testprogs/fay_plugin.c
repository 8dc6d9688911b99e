// libfay_plugin.so: the library plugin_calls dlopens after start.
#include "common.h"

FAY_PROBE_TARGET long fay_plugin_target(long a, long b) {
  __asm__ volatile("" : "+r"(a), "+r"(b)::"memory");
  return a + b;
}
