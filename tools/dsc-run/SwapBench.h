//===- SwapBench.h - dsc-run swap-bench: the swap file's bandwidth -*- C++ -*-===//
//
// Times ZeRO-Infinity's swap file in a config's nvme_path with the request
// queues of its `aio` section against one request at a time (blocking
// pread/pwrite, one thread), alternating, as DeepSpeed's ds_io sweeps
// its libaio settings: which queue shape a drive wants, before training.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_SWAPBENCH_H
#define DSC_TOOLS_DSCRUN_SWAPBENCH_H

#include "dsc/Frontend/Config.h"

#include <ostream>

namespace dsc {

/// Writes and reads `mib` MiB in transfers of `transferMib` MiB through a
/// swap file in `train`'s nvme_path, `repeats` times with each queue
/// shape, and prints the best bandwidths and their ratio. Throws
/// dsc::Error without an NVMe offload or when the file cannot be made.
void printSwapBench(const TrainConfig &train, int64_t mib, int64_t transferMib,
                    int64_t repeats, std::ostream &os);

/// `swap-bench --tune`, as DeepSpeed's ds_nvme_tune: writes and reads
/// `mib` MiB through the swap file with each of 32 queue shapes (block_size
/// 128 KiB to 1 MiB, queue_depth 4 to 32, 1 or 2 threads; whole sweeps
/// `repeats` times, the best of each kept) and the config's own, ranks
/// them by write + read time, and prints the fastest as an `aio` section.
void printSwapTune(const TrainConfig &train, int64_t mib, int64_t transferMib,
                   int64_t repeats, std::ostream &os);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_SWAPBENCH_H
