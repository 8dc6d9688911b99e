// Appends JSON text to a string, value by value: the JSON exporters write millions of small
// objects, and building a document per event (then destroying it) cost more than the rest of
// the conversion together. Strings are escaped per RFC 8259; bytes that are not valid UTF-8
// (a comm or a path is just bytes) become U+FFFD, so the output always parses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/syscall_event.h"

namespace fay::trace {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  JsonWriter& Key(std::string_view key);

  void Int(int64_t v);
  void Uint(uint64_t v);
  void Double(double v);
  void Bool(bool v);
  void Null();
  void String(std::string_view s);

 private:
  static constexpr int kMaxDepth = 16;
  void BeforeValue();
  void Quote(std::string_view s);
  void Open(char c);
  void Close(char c);

  std::string& out_;
  int depth_ = 0;
  bool fresh_[kMaxDepth + 1] = {true};  // no value yet at this level
  bool after_key_ = false;
};

// The kind-specific members of a process event (parent and thread for a fork, path for an
// exec, status for an exit), as JSON Lines and the Chrome export both write them.
// "fork", "exec", "exit" or "signal".
std::string_view ProcessKindName(ProcessEventKind kind);
void ProcessDetails(const ProcessEvent& ev, JsonWriter& j);

}  // namespace fay::trace
