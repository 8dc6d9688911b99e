// Reader::IndexBlobChunk: a footer-less trace's blob chunk indexed without holding it. A blob
// chunk is entries of {hash lo u64, hash hi u64, size varint, bytes}; each entry's bytes are
// hashed as they stream past and checked against the entry's hash, as DecodeBlobs checks them.
#include <xxhash.h>

#include <fmt/format.h>

#include <cstring>

#include "trace/event_codec.h"
#include "trace/reader.h"

namespace fay::trace {
namespace {

// Chunks up to this size are decoded whole and cached, as the events that follow usually
// need them; past it a chunk is streamed (a 40 KB file could claim 1.3 GB of zeros).
constexpr uint64_t kIndexWholeMax = 16u << 20;

struct XxhFree {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

// Parses entries from raw pieces of any size.
class EntryStream {
 public:
  explicit EntryStream(std::function<void(const BlobEntry&)> on_entry)
      : state_(XXH3_createState()), on_entry_(std::move(on_entry)) {}

  Status Feed(const uint8_t* p, size_t n) {
    while (n > 0) {
      if (left_ > 0) {  // an entry's bytes
        size_t take = std::min<uint64_t>(left_, n);
        XXH3_128bits_update(state_.get(), p, take);
        p += take, n -= take, pos_ += take, left_ -= take;
        if (left_ == 0) FAY_RETURN_IF_ERROR(Finish());
        continue;
      }
      head_.push_back(*p++), --n, ++pos_;
      if (head_.size() < 17) continue;
      uint8_t last = head_.back();
      if (last & 0x80) {
        if (head_.size() == 16 + 10)
          return Error(Code::kIo, fmt::format("blob {} at payload byte {}: its size is not a "
                                              "varint",
                                              entries_, start_));
        continue;
      }
      uint64_t size = 0;
      for (size_t i = 16; i < head_.size(); ++i)
        size |= uint64_t{head_[i] & 0x7fu} << (7 * (i - 16));
      std::memcpy(&entry_.hash.lo, head_.data(), 8);
      std::memcpy(&entry_.hash.hi, head_.data() + 8, 8);
      if (size > UINT32_MAX)
        return Error(Code::kIo, fmt::format("blob {} at payload byte {} claims {} bytes", entries_,
                                            start_, size));
      entry_.offset = static_cast<uint32_t>(pos_);
      entry_.size = static_cast<uint32_t>(size);
      XXH3_128bits_reset(state_.get());
      left_ = size;
      head_.clear();
      if (size == 0) FAY_RETURN_IF_ERROR(Finish());
    }
    return Status::Ok();
  }

  // After the last piece: the chunk must end between entries.
  Expected<uint32_t> End() const {
    if (left_ > 0 || !head_.empty())
      return Error(Code::kIo, fmt::format("blob {} at payload byte {} runs past the end of the "
                                          "chunk",
                                          entries_, start_));
    return entries_;
  }

 private:
  Status Finish() {
    XXH128_hash_t h = XXH3_128bits_digest(state_.get());
    if (Hash128{h.low64, h.high64} != entry_.hash)
      return Error(Code::kIo, fmt::format("blob {} at payload byte {}: content does not match "
                                          "its hash {}",
                                          entries_, start_, HashHex(entry_.hash)));
    on_entry_(entry_);
    ++entries_;
    start_ = pos_;
    return Status::Ok();
  }

  std::unique_ptr<XXH3_state_t, XxhFree> state_;
  std::function<void(const BlobEntry&)> on_entry_;
  std::vector<uint8_t> head_;  // the hash and size varint, as they come
  BlobEntry entry_;
  uint64_t left_ = 0;   // bytes of the current entry still to come
  uint64_t pos_ = 0;    // raw payload bytes seen
  uint64_t start_ = 0;  // where the current entry began
  uint32_t entries_ = 0;
};

}  // namespace

Status Reader::IndexBlobChunk(uint32_t index) {
  const ChunkRef& c = chunks_[index];
  if (c.raw_length <= kIndexWholeMax) return BlobChunk(index).status();
  ChunkHeader h;
  Bytes buf;
  FAY_RETURN_IF_ERROR(ReadStored(c, &h, &buf));
  std::vector<BlobEntry> entries;
  EntryStream stream([&](const BlobEntry& e) { entries.push_back(e); });
  const uint8_t* payload = buf.data() + kChunkHeaderSize;
  Status st = h.codec == Codec::kNone
                  ? stream.Feed(payload, h.stored_length)
                  : zstd_->Stream(payload, h.stored_length, h.raw_length,
                                  [&](const uint8_t* p, size_t n) { return stream.Feed(p, n); });
  if (!st.ok()) return Error(Code::kIo, Where(c) + ": " + st.message());
  auto count = stream.End();
  if (!count.ok()) return Error(Code::kIo, Where(c) + ": " + count.status().message());
  if (*count != h.count)
    return Error(Code::kIo, fmt::format("{}: chunk header says {} blobs, payload holds {}",
                                        Where(c), h.count, *count));
  for (const BlobEntry& e : entries) AddBlob(e.hash, BlobLoc{index, e.offset, e.size});
  return Status::Ok();
}

}  // namespace fay::trace
