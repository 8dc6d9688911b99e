#include "trace/file_sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fay::trace {
namespace {

class FileSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/fay_sink_XXXXXX";  // a disk file system, where O_DIRECT applies
    int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    path_ = tmpl;
    fd_ = fd;
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::vector<uint8_t> Contents() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
    return v;
  }
  std::string path_;
  int fd_ = -1;
};

TEST_F(FileSinkTest, OddSizedAppendsAcrossSegmentsReadBackExactly) {
  FileSink sink(OwnedFd(fd_), "test");
  std::vector<uint8_t> want;
  // Pieces of awkward sizes, several segments in all, one larger than the staging buffer.
  for (size_t n : {size_t{16}, size_t{1602}, size_t{4095}, size_t{1} << 20, size_t{9} << 20,
                   size_t{77}, size_t{3} << 20}) {
    auto piece = Pattern(n, static_cast<uint32_t>(want.size()));
    ASSERT_TRUE(sink.Append(piece.data(), piece.size()).ok());
    want.insert(want.end(), piece.begin(), piece.end());
  }
  EXPECT_EQ(sink.size(), want.size());
  EXPECT_LE(sink.durable(), want.size());
  EXPECT_EQ(sink.durable() % FileSink::kBlock, 0u);  // only whole blocks went out so far
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_EQ(sink.durable(), want.size());
  EXPECT_EQ(Contents(), want);
}

TEST_F(FileSinkTest, FlushThenAppendRewritesThePartialBlock) {
  FileSink sink(OwnedFd(fd_), "test");
  std::vector<uint8_t> want;
  for (int round = 0; round < 5; ++round) {
    auto piece = Pattern(3000 + round * 1000, round);
    ASSERT_TRUE(sink.Append(piece.data(), piece.size()).ok());
    want.insert(want.end(), piece.begin(), piece.end());
    ASSERT_TRUE(sink.Flush().ok());
    EXPECT_EQ(Contents(), want) << "after round " << round;
  }
  auto big = Pattern(FileSink::kSegment + 123, 99);
  ASSERT_TRUE(sink.Append(big.data(), big.size()).ok());
  want.insert(want.end(), big.begin(), big.end());
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_EQ(Contents(), want);
}

TEST_F(FileSinkTest, SegmentsStartSmallSoASmallTraceIsWrittenAsItGrows) {
  FileSink sink(OwnedFd(fd_), "test");
  std::vector<uint8_t> want;
  // First segment, then one twice as long: both go out without a Flush.
  for (size_t n : {FileSink::kFirstSegment, 2 * FileSink::kFirstSegment, size_t{100}}) {
    auto piece = Pattern(n, static_cast<uint32_t>(n));
    ASSERT_TRUE(sink.Append(piece.data(), piece.size()).ok());
    want.insert(want.end(), piece.begin(), piece.end());
  }
  const uint64_t handed = 3 * FileSink::kFirstSegment;
  for (int i = 0; i < 5000 && sink.durable() < handed; ++i) usleep(1000);
  EXPECT_EQ(sink.durable(), handed);  // the last 100 bytes are still staged
  EXPECT_EQ(Contents(), std::vector<uint8_t>(want.begin(), want.begin() + handed));
  ASSERT_TRUE(sink.Flush().ok());
  EXPECT_EQ(Contents(), want);
}

TEST_F(FileSinkTest, TruncateCutsToWhatIsDurable) {
  FileSink sink(OwnedFd(fd_), "test");
  auto piece = Pattern(10000, 1);
  ASSERT_TRUE(sink.Append(piece.data(), piece.size()).ok());
  ASSERT_TRUE(sink.Flush().ok());
  auto more = Pattern(500, 2);
  ASSERT_TRUE(sink.Append(more.data(), more.size()).ok());  // staged, not in the file
  EXPECT_TRUE(sink.Truncate(10400));                        // no further than the file goes
  EXPECT_EQ(Contents(), piece);
  EXPECT_TRUE(sink.Truncate(4096));
  EXPECT_EQ(Contents(), std::vector<uint8_t>(piece.begin(), piece.begin() + 4096));
}

}  // namespace
}  // namespace fay::trace
