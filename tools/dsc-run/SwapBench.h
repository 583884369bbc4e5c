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

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_SWAPBENCH_H
