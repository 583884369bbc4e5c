//===- SwapFileTest.cpp - ZeRO-Infinity's swap file -----------------------===//
//
// The swap file round-trips tensors of every length at the plan's 4 KiB
// offsets with every shape of request queue (aio's block size, queue
// depth, threads, single submits, overlapped events; io_uring and blocking
// calls), its two views (the step's direct transfers, checkpoints'
// mapping) agree, direct writes leave no page cache behind (mincore on
// the file's mapping), which buffered writes would, and a failed request
// leaves the queues usable.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/SwapFile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fcntl.h>
#include <iterator>
#include <cstring>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <vector>

using dsc::rt::AioOptions;
using dsc::rt::SwapFile;
using dsc::rt::SwapIo;

namespace {

/// $TMPDIR, else /tmp: the O_DIRECT tests skip where its file system
/// refuses O_DIRECT or is tmpfs.
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

/// Sets DSC_SWAP_IO for one scope.
struct SwapIoEnv {
  explicit SwapIoEnv(const char *v) : set(v != nullptr) {
    if (v)
      setenv("DSC_SWAP_IO", v, 1);
  }
  ~SwapIoEnv() {
    if (set)
      unsetenv("DSC_SWAP_IO");
  }
  bool set;
};

struct Queues {
  const char *name;
  AioOptions aio;
  const char *env; ///< DSC_SWAP_IO
};

void PrintTo(const Queues &q, std::ostream *os) { *os << q.name; }

AioOptions aio(int64_t block, int64_t depth, int64_t threads, bool single,
               bool overlap) {
  AioOptions a;
  a.blockSize = block;
  a.queueDepth = depth;
  a.threads = threads;
  a.singleSubmit = single;
  a.overlapEvents = overlap;
  return a;
}

class SwapQueues : public ::testing::TestWithParam<Queues> {};

TEST_P(SwapQueues, RoundTripEveryLengthAndAgreeWithTheMapping) {
  SwapIoEnv env(GetParam().env);
  const int64_t block = GetParam().aio.blockSize;
  // Within a block, whole blocks, and runs split unevenly over threads.
  const int64_t lengths[] = {1,         100,           4096,
                             4097,      block + 12,    7 * block - 5,
                             3 * block, (1 << 20) + 12};
  const int n = int(std::size(lengths));
  std::vector<int64_t> offsets;
  int64_t cursor = 0;
  for (int64_t l : lengths) {
    offsets.push_back(cursor);
    cursor += (l + 4095) / 4096 * 4096;
  }
  SwapFile f(scratchDir(), cursor, GetParam().aio);
  if (GetParam().env) {
    EXPECT_TRUE(!f.direct() ||
                f.queues()->engine() == SwapIo::Engine::BlockingCalls);
  }
  for (int i = 0; i < n; ++i) {
    std::vector<char> v = pattern(lengths[i], i);
    f.write(offsets[i], v.data(), lengths[i]);
  }
  for (int i = 0; i < n; ++i) {
    std::vector<char> want = pattern(lengths[i], i), got(want.size());
    f.read(offsets[i], got.data(), lengths[i]);
    EXPECT_EQ(got, want) << "length " << lengths[i];
    EXPECT_EQ(std::memcmp(f.mapped() + offsets[i], want.data(), want.size()), 0)
        << "the mapping of length " << lengths[i];
  }
  // What a checkpoint writes through the mapping, the step reads.
  std::memset(f.mapped() + offsets[5], 7, size_t(lengths[5]));
  std::vector<char> got(static_cast<size_t>(lengths[5]));
  f.read(offsets[5], got.data(), lengths[5]);
  EXPECT_EQ(got, std::vector<char>(got.size(), 7));
}

TEST_P(SwapQueues, AFailedRequestIsAnErrorAndLeavesTheQueuesUsable) {
  SwapIoEnv env(GetParam().env);
  const int64_t bytes = 16 * GetParam().aio.blockSize;
  // The queues on a file of `bytes` (SwapFile itself refuses transfers
  // past its end before any request).
  std::string path = scratchDir() + "/dsc-swapio-XXXXXX";
  const int fd = mkstemp(path.data());
  ASSERT_GE(fd, 0);
  unlink(path.c_str());
  ASSERT_EQ(ftruncate(fd, off_t(bytes)), 0);
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) != 0) {
    close(fd);
    GTEST_SKIP() << scratchDir() << " does not allow O_DIRECT";
  }
  {
    SwapIo io(fd, GetParam().aio, "test file");
    // Reading past the end: the last requests find nothing.
    std::vector<char> big(size_t(2 * bytes));
    try {
      io.transfer(false, 0, big.data(), 2 * bytes);
      ADD_FAILURE() << "no error";
    } catch (const std::exception &e) {
      EXPECT_NE(std::string(e.what()).find("reading the swap file"),
                std::string::npos)
          << e.what();
    }
    std::vector<char> v = pattern(bytes, 3), back(v.size());
    io.transfer(true, 0, v.data(), bytes);
    io.transfer(false, 0, back.data(), bytes);
    EXPECT_EQ(back, v);
  }
  close(fd);
}

TEST(SwapFile, ATransferPastTheReservedSpaceIsAnError) {
  SwapFile f(scratchDir(), 8192);
  std::vector<char> v(8192 + 1);
  try {
    f.write(0, v.data(), int64_t(v.size()));
    FAIL() << "no error";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("outside its 8192 bytes"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Aio, SwapQueues,
    ::testing::Values(
        Queues{"DeepSpeedDefaults", AioOptions(), nullptr},
        Queues{"SmallBlocksThreeThreads", aio(8192, 3, 3, false, true),
               nullptr},
        Queues{"SingleSubmitsWholeQueues", aio(4096, 4, 2, true, false),
               nullptr},
        Queues{"BlockingCalls", aio(8192, 8, 3, false, true), "threads"}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(SwapFile, AnUnknownEngineIsAnError) {
  SwapIoEnv env("libaio");
  try {
    SwapFile f(scratchDir(), 8192);
    if (!f.direct())
      GTEST_SKIP() << scratchDir() << " does not allow O_DIRECT";
    FAIL() << "no error";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("DSC_SWAP_IO='libaio'"),
              std::string::npos)
        << e.what();
  }
}

TEST(SwapFile, DirectWritesLeaveNoPageCache) {
  const int64_t bytes = 8 << 20;
  // tmpfs accepts O_DIRECT (Linux 6.6 and later) but its file is page
  // cache: there is nothing to bypass.
  struct statfs fs {};
  if (statfs(scratchDir().c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC)
    GTEST_SKIP() << scratchDir() << " is tmpfs: its pages are the file";
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
