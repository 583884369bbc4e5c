//===- SwapBench.cpp - dsc-run swap-bench: the swap file's bandwidth ------===//

#include "SwapBench.h"

#include "dsc/Runtime/SwapQueues.h"
#include "dsc/Support/Error.h"

#include <algorithm>
#include <cstdio>

namespace dsc {

void printSwapBench(const TrainConfig &train, int64_t mib, int64_t transferMib,
                    int64_t repeats, std::ostream &os) {
  if (train.offloadNvmePath.empty())
    throw Error("swap-bench: the config has no swap file: it needs "
                "zero_optimization.offload_optimizer device \"nvme\" with an "
                "nvme_path");
  rt::AioOptions configured;
  configured.blockSize = train.aio.blockSize;
  configured.queueDepth = train.aio.queueDepth;
  configured.threads = train.aio.threads;
  configured.singleSubmit = train.aio.singleSubmit;
  configured.overlapEvents = train.aio.overlapEvents;
  rt::AioOptions peer;
  peer.blockSize = configured.blockSize;
  peer.queueDepth = 1;
  peer.threads = 1;
  peer.blockingCalls = true;
  const int64_t bytes = mib << 20, transfer = transferMib << 20;
  rt::SwapTimes best[2];
  for (int64_t r = 0; r < repeats; ++r)
    for (int k = 0; k < 2; ++k) {
      const rt::SwapTimes t =
          rt::timeSwapQueues(train.offloadNvmePath, bytes, transfer,
                             k == 0 ? configured : peer, 1);
      if (r == 0) {
        best[k] = t;
        continue;
      }
      best[k].writeSeconds = std::min(best[k].writeSeconds, t.writeSeconds);
      best[k].readSeconds = std::min(best[k].readSeconds, t.readSeconds);
    }
  auto gbps = [&](double seconds) { return double(bytes) / seconds / 1e9; };
  char line[256];
  os << "swap file in " << train.offloadNvmePath << " ("
     << (best[0].direct ? "O_DIRECT" : "page cache: the file system refuses "
                                       "O_DIRECT")
     << "): " << mib << " MiB in transfers of " << transferMib
     << " MiB, best of " << repeats << ", the two alternating\n";
  std::snprintf(line, sizeof line, "%-64s %10s %10s\n", "queues",
                "write GB/s", "read GB/s");
  os << line;
  const std::string shape =
      "aio: " + best[0].engine + ", block_size " +
      std::to_string(configured.blockSize) + ", queue_depth " +
      std::to_string(configured.queueDepth) + ", " +
      std::to_string(configured.threads) + " thread(s)";
  std::snprintf(line, sizeof line, "%-64s %10.3f %10.3f\n", shape.c_str(),
                gbps(best[0].writeSeconds), gbps(best[0].readSeconds));
  os << line;
  std::snprintf(line, sizeof line, "%-64s %10.3f %10.3f\n",
                "one request at a time (pread/pwrite, 1 thread)",
                gbps(best[1].writeSeconds), gbps(best[1].readSeconds));
  os << line;
  std::snprintf(line, sizeof line, "%-64s %9.2fx %9.2fx\n", "ratio",
                best[1].writeSeconds / best[0].writeSeconds,
                best[1].readSeconds / best[0].readSeconds);
  os << line;
}

} // namespace dsc
