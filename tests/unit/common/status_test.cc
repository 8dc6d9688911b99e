#include "common/status.h"

#include <gtest/gtest.h>

namespace fay {
namespace {

Expected<int> Half(int v) {
  if (v % 2) return Error(Code::kInvalidArgument, "odd");
  return v / 2;
}

Status UseHalf(int v, int* out) {
  FAY_ASSIGN_OR_RETURN(*out, Half(v));
  return Status::Ok();
}

TEST(Status, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(UseHalf(4, &out).ok());
  EXPECT_EQ(out, 2);
  Status st = UseHalf(3, &out);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "odd");
}

TEST(Status, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoError("open", ENOENT).code(), Code::kNotFound);
  EXPECT_EQ(ErrnoError("bpf", EPERM).code(), Code::kPermission);
  EXPECT_EQ(ErrnoError("open", ENOENT).message(), "open: No such file or directory");
}

}  // namespace
}  // namespace fay
