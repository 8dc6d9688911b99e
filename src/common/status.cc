#include "common/status.h"

#include <cstring>

namespace fay {

Status ErrnoError(const std::string& what, int err) {
  Code code = Code::kIo;
  if (err == EPERM || err == EACCES) code = Code::kPermission;
  if (err == ENOENT) code = Code::kNotFound;
  if (err == EINVAL) code = Code::kInvalidArgument;
  if (err == EOPNOTSUPP || err == ENOSYS) code = Code::kUnsupported;
  return Status(code, what + ": " + std::strerror(err));
}

}  // namespace fay
