#include "trace/export/json_writer.h"

#include <fmt/format.h>

#include <iterator>

#include "schema/decode/siginfo.h"
#include "schema/syscall_values.h"

namespace fay::trace {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
  if (n == 3 && ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && b(i + 1) < 0x90) || (c == 0xF4 && b(i + 1) >= 0x90))) return 0;
  return n;
}

}  // namespace

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!fresh_[depth_]) out_ += ',';
  fresh_[depth_] = false;
}

void JsonWriter::Open(char c) {
  BeforeValue();
  out_ += c;
  if (depth_ < kMaxDepth) ++depth_;
  fresh_[depth_] = true;
}

void JsonWriter::Close(char c) {
  out_ += c;
  if (depth_ > 0) --depth_;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  if (!fresh_[depth_]) out_ += ',';
  fresh_[depth_] = false;
  Quote(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", v);
}

void JsonWriter::Uint(uint64_t v) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", v);
}

void JsonWriter::Double(double v) {
  BeforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", v);
}

void JsonWriter::Bool(bool v) {
  BeforeValue();
  out_ += v ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

void JsonWriter::String(std::string_view s) {
  BeforeValue();
  Quote(s);
}

void JsonWriter::Quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_ += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t n = Utf8Length(s, i);
      if (n == 0) {
        out_ += "\\ufffd";
        ++i;
      } else {
        out_.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\t':
        out_ += "\\t";
        break;
      case '\r':
        out_ += "\\r";
        break;
      default:
        if (c < 0x20) {
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 15];
        } else {
          out_ += static_cast<char>(c);
        }
    }
    ++i;
  }
  out_ += '"';
}

std::string_view ProcessKindName(ProcessEventKind kind) {
  switch (kind) {
    case ProcessEventKind::kFork:
      return "fork";
    case ProcessEventKind::kExec:
      return "exec";
    case ProcessEventKind::kExit:
      return "exit";
    case ProcessEventKind::kSignal:
      return "signal";
  }
  return "process";
}

void ProcessDetails(const ProcessEvent& ev, JsonWriter& j) {
  if (ev.kind == ProcessEventKind::kSignal) {
    j.Key("signal").String(SignalName(ev.signo));
    j.Key("info").String(FormatSiginfo(ev.signo, ev.siginfo));
  } else if (ev.kind == ProcessEventKind::kFork) {
    j.Key("parent_pid").Int(ev.parent_pid);
    j.Key("thread").Bool(ev.is_thread);
  } else if (ev.kind == ProcessEventKind::kExec) {
    j.Key("path").String(ev.path);
  } else {
    j.Key("status").Int(ev.exit_status);
  }
}

}  // namespace fay::trace
