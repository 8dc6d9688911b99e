// The bpf layer's file descriptors are fay's common UniqueFd.
#pragma once

#include "common/unique_fd.h"

namespace fay::bpf {
using fay::UniqueFd;
}  // namespace fay::bpf
