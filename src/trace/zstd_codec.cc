#include "trace/zstd_codec.h"

#include <fmt/core.h>

namespace fay::trace {

Status Compressor::Compress(const Bytes& raw, Bytes* out) {
  return Compress(raw.data(), raw.size(), out);
}

bool Compressor::Worthwhile(const Bytes& raw) {
  constexpr size_t kSample = 64 << 10;
  if (raw.size() <= kSample) return true;
  if (!Compress(raw.data(), kSample, &sample_).ok()) return true;
  return sample_.size() * 10 < kSample * 9;
}

Status Compressor::Compress(const uint8_t* data, size_t size, Bytes* out) {
  if (!ctx_) return Error(Code::kInternal, "zstd: cannot create a compression context");
  out->resize(ZSTD_compressBound(size));
  size_t n = ZSTD_compressCCtx(ctx_.get(), out->data(), out->size(), data, size, level_);
  if (ZSTD_isError(n)) return Error(Code::kInternal, fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  out->resize(n);
  return Status::Ok();
}

Status Decompressor::Decompress(const uint8_t* data, size_t n, size_t raw_length, Bytes* out) {
  if (!ctx_) return Error(Code::kInternal, "zstd: cannot create a decompression context");
  out->resize(raw_length);
  size_t got = ZSTD_decompressDCtx(ctx_.get(), out->data(), out->size(), data, n);
  if (ZSTD_isError(got)) return Error(Code::kIo, fmt::format("zstd: {}", ZSTD_getErrorName(got)));
  if (got != raw_length)
    return Error(Code::kIo, fmt::format("zstd: {} bytes after decompression, header says {}", got,
                                        raw_length));
  return Status::Ok();
}

}  // namespace fay::trace
