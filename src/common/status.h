// Status and Expected<T>: the error currency of the core. Nothing below src/cli throws or exits.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace fay {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // bad user input (query, flag, path)
  kNotFound,         // probe, field, binary, symbol
  kPermission,       // privileges or kernel policy refused
  kUnsupported,      // the kernel or machine lacks a capability
  kVerifier,         // the kernel verifier rejected generated code
  kIo,               // read/write/parse failure of a file
  kInternal,         // a fay bug
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Appends "\n" + more: used to add hints and fixes below the main message.
  Status& Append(const std::string& more) {
    message_ += "\n" + more;
    return *this;
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status Error(Code code, std::string message) {
  return Status(code, std::move(message));
}
// For a failed syscall: "what: strerror(errno)".
Status ErrnoError(const std::string& what, int err = errno);

template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status status) : v_(std::move(status)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace fay

#define FAY_CONCAT_INNER(a, b) a##b
#define FAY_CONCAT(a, b) FAY_CONCAT_INNER(a, b)

// Propagates a non-ok Status out of the enclosing function.
#define FAY_RETURN_IF_ERROR(expr) \
  do {                            \
    ::fay::Status _st = (expr);   \
    if (!_st.ok()) return _st;    \
  } while (0)

// FAY_ASSIGN_OR_RETURN(auto x, MakeX()); declares x from an Expected or propagates its error.
#define FAY_ASSIGN_OR_RETURN(lhs, rexpr) \
  FAY_ASSIGN_OR_RETURN_IMPL(FAY_CONCAT(_exp_, __LINE__), lhs, rexpr)
#define FAY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
