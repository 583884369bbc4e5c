//===- SwapFileTest.cpp - ZeRO-Infinity's swap file -----------------------===//
//
// The swap file round-trips tensors of every length at the plan's 4 KiB
// offsets, its two views (the step's direct transfers, checkpoints'
// mapping) agree, and direct writes leave no page cache behind (mincore on
// the file's mapping), which buffered writes would.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/SwapFile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using dsc::rt::SwapFile;

namespace {

/// A directory on the file system the tests run from (tmpfs has no
/// O_DIRECT; the build directory is a real disk's).
std::string scratchDir() {
  const char *tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

size_t residentPages(const SwapFile &f, int64_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size_t(bytes) + page - 1) / page);
  EXPECT_EQ(mincore(f.mapped(), size_t(bytes), in.data()), 0);
  size_t n = 0;
  for (unsigned char c : in)
    n += c & 1;
  return n;
}

std::vector<char> pattern(int64_t bytes, int salt) {
  std::vector<char> v(static_cast<size_t>(bytes));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = char((i * 131 + size_t(salt)) % 251);
  return v;
}

TEST(SwapFile, RoundTripsEveryLengthAndAgreesWithTheMapping) {
  const int64_t lengths[] = {1, 100, 4096, 4097, SwapFile::kRequestBytes + 12};
  int64_t offsets[5], cursor = 0;
  for (int i = 0; i < 5; ++i) {
    offsets[i] = cursor;
    cursor += (lengths[i] + 4095) / 4096 * 4096;
  }
  SwapFile f(scratchDir(), cursor);
  for (int i = 0; i < 5; ++i) {
    std::vector<char> v = pattern(lengths[i], i);
    f.write(offsets[i], v.data(), lengths[i]);
  }
  for (int i = 0; i < 5; ++i) {
    std::vector<char> want = pattern(lengths[i], i), got(want.size());
    f.read(offsets[i], got.data(), lengths[i]);
    EXPECT_EQ(got, want) << "length " << lengths[i];
    EXPECT_EQ(std::memcmp(f.mapped() + offsets[i], want.data(), want.size()), 0)
        << "the mapping of length " << lengths[i];
  }
  // What a checkpoint writes through the mapping, the step reads.
  std::memset(f.mapped() + offsets[3], 7, size_t(lengths[3]));
  std::vector<char> got(static_cast<size_t>(lengths[3]));
  f.read(offsets[3], got.data(), lengths[3]);
  EXPECT_EQ(got, std::vector<char>(got.size(), 7));
}

TEST(SwapFile, DirectWritesLeaveNoPageCache) {
  const int64_t bytes = 8 << 20;
  SwapFile f(scratchDir(), bytes);
  if (!f.direct())
    GTEST_SKIP() << scratchDir() << " does not allow O_DIRECT";
  std::vector<char> v = pattern(bytes, 1);
  f.write(0, v.data(), bytes);
  std::vector<char> back(v.size());
  f.read(0, back.data(), bytes);
  EXPECT_EQ(back, v);
  // Buffered, these 2048 pages would all be cached; allow a few the
  // kernel may still hold.
  EXPECT_LT(residentPages(f, bytes), size_t(16));
}

TEST(SwapFile, AnUnalignedDirectTransferIsAnError) {
  SwapFile f(scratchDir(), 8192);
  if (!f.direct())
    GTEST_SKIP() << scratchDir() << " does not allow O_DIRECT";
  char c = 0;
  try {
    f.read(100, &c, 1);
    FAIL() << "no error";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 4096"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
