//===- SwapBench.cpp - dsc-run swap-bench: the swap file's bandwidth ------===//

#include "SwapBench.h"

#include "dsc/Runtime/SwapQueues.h"
#include "dsc/Support/Error.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace dsc {

namespace {

void requireSwapFile(const TrainConfig &train) {
  if (train.offloadNvmePath.empty())
    throw Error("swap-bench: the config has no swap file: it needs "
                "zero_optimization.offload_optimizer device \"nvme\" with an "
                "nvme_path");
}

std::string fileLine(const TrainConfig &train, const rt::SwapTimes &t,
                     int64_t mib, int64_t transferMib) {
  return "swap file in " + train.offloadNvmePath + " (" +
         (t.direct ? "O_DIRECT"
                   : "page cache: the file system refuses O_DIRECT") +
         "): " + std::to_string(mib) + " MiB in transfers of " +
         std::to_string(transferMib) + " MiB";
}

} // namespace

void printSwapBench(const TrainConfig &train, int64_t mib, int64_t transferMib,
                    int64_t repeats, std::ostream &os) {
  requireSwapFile(train);
  const AioOptions &configured = train.aio;
  AioOptions peer;
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
  os << fileLine(train, best[0], mib, transferMib) << ", best of " << repeats
     << ", the two alternating\n";
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

void printSwapTune(const TrainConfig &train, int64_t mib, int64_t transferMib,
                   int64_t repeats, std::ostream &os) {
  requireSwapFile(train);
  const AioOptions &configured = train.aio;
  struct Shape {
    AioOptions aio;
    rt::SwapTimes best;
    double seconds() const { return best.writeSeconds + best.readSeconds; }
  };
  std::vector<Shape> shapes;
  for (int64_t block : {128 << 10, 256 << 10, 512 << 10, 1 << 20})
    for (int64_t depth : {4, 8, 16, 32})
      for (int64_t threads : {1, 2}) {
        Shape s;
        s.aio.blockSize = block;
        s.aio.queueDepth = depth;
        s.aio.threads = threads;
        shapes.push_back(s);
      }
  auto same = [](const AioOptions &a, const AioOptions &b) {
    return a.blockSize == b.blockSize && a.queueDepth == b.queueDepth &&
           a.threads == b.threads && a.singleSubmit == b.singleSubmit &&
           a.overlapEvents == b.overlapEvents;
  };
  if (std::none_of(shapes.begin(), shapes.end(),
                   [&](const Shape &s) { return same(s.aio, configured); }))
    shapes.push_back(Shape{configured, {}});
  const int64_t bytes = mib << 20, transfer = transferMib << 20;
  // Whole sweeps repeated, the best of each shape kept: a disk's slow
  // moments then fall on different shapes each time.
  for (int64_t r = 0; r < repeats; ++r)
    for (Shape &s : shapes) {
      const rt::SwapTimes t =
          rt::timeSwapQueues(train.offloadNvmePath, bytes, transfer, s.aio, 1);
      if (r == 0) {
        s.best = t;
        continue;
      }
      s.best.writeSeconds = std::min(s.best.writeSeconds, t.writeSeconds);
      s.best.readSeconds = std::min(s.best.readSeconds, t.readSeconds);
    }
  std::stable_sort(shapes.begin(), shapes.end(),
                   [](const Shape &a, const Shape &b) {
                     return a.seconds() < b.seconds();
                   });
  auto gbps = [&](double seconds) { return double(bytes) / seconds / 1e9; };
  os << fileLine(train, shapes[0].best, mib, transferMib) << ", "
     << shapes.size() << " queue shapes (" << shapes[0].best.engine
     << "), best of " << repeats
     << "; ranked by write + read, what an update swaps\n";
  char line[256];
  std::snprintf(line, sizeof line, "%10s %11s %7s %10s %10s %12s\n",
                "block_size", "queue_depth", "threads", "write GB/s",
                "read GB/s", "write+read s");
  os << line;
  const Shape *mine = nullptr;
  for (const Shape &s : shapes) {
    const bool isConfigured = same(s.aio, configured);
    if (isConfigured)
      mine = &s;
    std::snprintf(line, sizeof line, "%10lld %11lld %7lld %10.3f %10.3f %12.4f%s\n",
                  (long long)s.aio.blockSize, (long long)s.aio.queueDepth,
                  (long long)s.aio.threads, gbps(s.best.writeSeconds),
                  gbps(s.best.readSeconds), s.seconds(),
                  !isConfigured ? ""
                  : s.aio.singleSubmit || !s.aio.overlapEvents
                      ? "  (the config's: single_submit or no overlap_events)"
                      : "  (the config's)");
    os << line;
  }
  if (shapes[0].best.engine != "io_uring")
    os << "note: the transfers were blocking pread/pwrite calls (DSC_SWAP_IO="
          "threads, or a kernel without io_uring): queue_depth has no effect "
          "there, so shapes that differ only in it differ by noise\n";
  const AioOptions &best = shapes[0].aio;
  os << "best: \"aio\": {\"block_size\": " << best.blockSize
     << ", \"queue_depth\": " << best.queueDepth
     << ", \"intra_op_parallelism\": " << best.threads
     << ", \"single_submit\": " << (best.singleSubmit ? "true" : "false")
     << ", \"overlap_events\": " << (best.overlapEvents ? "true" : "false")
     << "}\n";
  std::snprintf(line, sizeof line,
                "the config's queues take %.2fx the best's write + read time\n",
                mine->seconds() / shapes[0].seconds());
  os << line;
}

} // namespace dsc
