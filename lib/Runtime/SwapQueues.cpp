//===- SwapQueues.cpp - Timing ZeRO-Infinity's swap-file queues -----------===//

#include "dsc/Runtime/SwapQueues.h"

#include "SwapFile.h"

#include "dsc/Support/Error.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace dsc::rt {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

} // namespace

SwapTimes timeSwapQueues(const std::string &dir, int64_t bytes,
                         int64_t transferBytes, const AioOptions &aio,
                         int repeats) {
  if (bytes <= 0 || transferBytes <= 0 || repeats <= 0)
    throw Error("swap-file timing needs positive sizes and repeats");
  // Transfers start at 4 KiB boundaries, as the memory plan places tensors.
  const int64_t stride =
      (transferBytes + SwapFile::kAlignment - 1) / SwapFile::kAlignment *
      SwapFile::kAlignment;
  const int64_t transfers = (bytes + transferBytes - 1) / transferBytes;
  SwapFile file(dir, transfers * stride, aio);
  std::vector<char> data(static_cast<size_t>(bytes)),
      back(static_cast<size_t>(bytes));
  SwapTimes best;
  best.direct = file.direct();
  best.engine = file.queues() && file.queues()->engine() ==
                                     SwapIo::Engine::IoUring
                    ? "io_uring"
                    : "pread/pwrite";
  for (int r = 0; r < repeats; ++r) {
    // Different bytes every repeat: nothing can pass for a read.
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = char((i * 131 + size_t(r) * 7 + 1) % 251);
    auto each = [&](bool write) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < transfers; ++k) {
        const int64_t at = k * transferBytes;
        const int64_t n = std::min(transferBytes, bytes - at);
        if (write)
          file.write(k * stride, data.data() + at, n);
        else
          file.read(k * stride, back.data() + at, n);
      }
      return secondsSince(t0);
    };
    const double w = each(true), rd = each(false);
    if (std::memcmp(data.data(), back.data(), data.size()) != 0)
      throw Error("nvme_path '" + dir +
                  "': the swap file read back other bytes than were written");
    if (r == 0 || w < best.writeSeconds)
      best.writeSeconds = w;
    if (r == 0 || rd < best.readSeconds)
      best.readSeconds = rd;
  }
  return best;
}

} // namespace dsc::rt
