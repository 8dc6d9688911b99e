// RAII zstd contexts. One compressor lives on the writer thread, one decompressor per reader.
#pragma once

#include <zstd.h>

#include <functional>

#include <memory>

#include "common/status.h"
#include "trace/bytes.h"

namespace fay::trace {

class Compressor {
 public:
  explicit Compressor(int level) : ctx_(ZSTD_createCCtx()), level_(level) {}
  Status Compress(const Bytes& raw, Bytes* out);
  Status Compress(const uint8_t* data, size_t n, Bytes* out);
  // Whether zstd gains at least a tenth on a sample of `raw` (its first 64 KiB). Captured data
  // that is already compressed or random would cost a full compression pass for nothing.
  bool Worthwhile(const Bytes& raw);

 private:
  struct Free {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  };
  std::unique_ptr<ZSTD_CCtx, Free> ctx_;
  int level_;
  Bytes sample_;
};

class Decompressor {
 public:
  Decompressor() : ctx_(ZSTD_createDCtx()) {}
  // Fails unless the frame decompresses to exactly raw_length bytes.
  Status Decompress(const uint8_t* data, size_t n, size_t raw_length, Bytes* out);
  // The same frame handed to `piece` a window at a time, nothing kept: fails as Decompress
  // does, or with piece's first error.
  Status Stream(const uint8_t* data, size_t n, size_t raw_length,
                const std::function<Status(const uint8_t*, size_t)>& piece);

 private:
  struct Free {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
  };
  std::unique_ptr<ZSTD_DCtx, Free> ctx_;
};

}  // namespace fay::trace
