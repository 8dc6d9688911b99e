#include "trace/zstd_codec.h"

#include <fmt/core.h>

#include <algorithm>

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
  // raw_length comes from the file: a hostile chunk may claim 4 GiB over a few bytes of payload.
  // Up to kTrustedRaw it is allocated at once (every chunk a writer makes, in one call); beyond,
  // the buffer grows only as the frame really produces bytes.
  constexpr size_t kTrustedRaw = 64 << 20;
  if (raw_length <= kTrustedRaw) {
    out->resize(raw_length);
    size_t got = ZSTD_decompressDCtx(ctx_.get(), out->data(), out->size(), data, n);
    if (ZSTD_isError(got)) return Error(Code::kIo, fmt::format("zstd: {}", ZSTD_getErrorName(got)));
    if (got != raw_length)
      return Error(Code::kIo, fmt::format("zstd: {} bytes after decompression, header says {}", got,
                                          raw_length));
    return Status::Ok();
  }
  ZSTD_DCtx_reset(ctx_.get(), ZSTD_reset_session_only);
  ZSTD_inBuffer in{data, n, 0};
  size_t pos = 0;
  out->resize(kTrustedRaw);
  for (;;) {
    ZSTD_outBuffer o{out->data(), out->size(), pos};
    size_t left = ZSTD_decompressStream(ctx_.get(), &o, &in);
    if (ZSTD_isError(left))
      return Error(Code::kIo, fmt::format("zstd: {}", ZSTD_getErrorName(left)));
    pos = o.pos;
    if (left == 0) break;  // the frame is complete
    if (pos < out->size()) {
      if (in.pos == in.size)  // room left, no input left: the frame stops short
        return Error(Code::kIo, fmt::format("zstd: frame ends after {} bytes, header says {}", pos,
                                            raw_length));
      continue;
    }
    if (out->size() == raw_length)
      return Error(Code::kIo,
                   fmt::format("zstd: more than the {} bytes the header says", raw_length));
    out->resize(std::min(raw_length, out->size() * 2));
  }
  if (pos != raw_length || in.pos != in.size)
    return Error(Code::kIo, fmt::format("zstd: {} bytes after decompression, header says {}", pos,
                                        raw_length));
  out->resize(pos);
  return Status::Ok();
}

Status Decompressor::Stream(const uint8_t* data, size_t n, size_t raw_length,
                            const std::function<Status(const uint8_t*, size_t)>& piece) {
  ZSTD_DCtx_reset(ctx_.get(), ZSTD_reset_session_only);
  Bytes window(std::min<size_t>(raw_length, 256 << 10) + 1);
  ZSTD_inBuffer in{data, n, 0};
  size_t total = 0;
  for (;;) {
    ZSTD_outBuffer o{window.data(), window.size(), 0};
    size_t left = ZSTD_decompressStream(ctx_.get(), &o, &in);
    if (ZSTD_isError(left))
      return Error(Code::kIo, fmt::format("zstd: {}", ZSTD_getErrorName(left)));
    total += o.pos;
    if (total > raw_length)
      return Error(Code::kIo,
                   fmt::format("zstd: more than the {} bytes the header says", raw_length));
    if (o.pos) FAY_RETURN_IF_ERROR(piece(window.data(), o.pos));
    if (left == 0) break;  // the frame is complete
    if (in.pos == in.size && o.pos < o.size)
      return Error(Code::kIo, fmt::format("zstd: frame ends after {} bytes, header says {}", total,
                                          raw_length));
  }
  if (total != raw_length)
    return Error(Code::kIo, fmt::format("zstd: {} bytes after decompression, header says {}", total,
                                        raw_length));
  return Status::Ok();
}

}  // namespace fay::trace
