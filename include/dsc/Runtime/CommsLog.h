//===- CommsLog.h - DeepSpeed's comms_logger for a backend's collectives -===//
//
// With DeepSpeed's `comms_logger` enabled, the CPU backend times every
// collective of the compiled step it runs (for the kinds asked for) and
// records it here: its kind, its message size, its group's size and its
// latency (the wait for the other ranks included, as DeepSpeed measures
// it). `verbose` prints each as it completes; summary() gives DeepSpeed's
// log_summary table: per operation and message size, the count, total
// and average latency, and the average algorithmic and bus bandwidth.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_COMMSLOG_H
#define DSC_RUNTIME_COMMSLOG_H

#include "dsc/Runtime/Runtime.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>

namespace dsc::rt {

class CommsLog {
public:
  struct Options {
    bool verbose = false;
    /// Names the step function (@micro_step, ...) in each record.
    bool debug = false;
    /// DeepSpeed's prof_all: every operation; else those of `ops`.
    bool all = true;
    std::set<std::string> ops;
  };
  /// The operation names records carry (DeepSpeed's names for them).
  static const std::set<std::string> &operationNames();
  /// `out`: where verbose lines go (as they complete).
  CommsLog(Options options, std::ostream &out)
      : options(options), verboseOut(out) {}

  /// Whether operation `op` ("all_reduce", "recv", ...) is logged.
  bool wants(const std::string &op) const {
    return options.all || options.ops.count(op) != 0;
  }
  /// One operation `op` (of `kind`, which sets its bus bandwidth) over a
  /// group of `groupSize` ranks, on a message of `bytes` bytes (the whole
  /// tensor it reduces, gathers, scatters or exchanges; a broadcast's,
  /// send's or receive's tensor), which took `seconds`; `function` is the
  /// step function that ran it. Thread-safe (overlap_comm's thread records
  /// too).
  void record(const std::string &op, CollectiveKind kind,
              const std::string &function, int64_t bytes, int groupSize,
              double seconds);
  /// DeepSpeed's summary table; "" when nothing was recorded.
  std::string summary() const;

  /// The algorithmic and bus bandwidth in Gbit/s of a collective of `kind`
  /// on a `bytes`-byte message over `n` ranks in `seconds` (nccl-tests'
  /// convention, as DeepSpeed's calc_bw_log: the bus bandwidth scales the
  /// algorithmic one by 2(n-1)/n for an all-reduce, (n-1)/n for all-gather,
  /// reduce-scatter and all-to-all, 1 otherwise).
  static std::pair<double, double> bandwidthGbps(CollectiveKind kind,
                                                 int64_t bytes, int n,
                                                 double seconds);

private:
  struct Stat {
    int64_t count = 0;
    double seconds = 0, algbw = 0, busbw = 0;
  };
  Options options;
  std::ostream &verboseOut;
  mutable std::mutex mutex;
  /// By record name, then message size.
  std::map<std::string, std::map<int64_t, Stat>> stats;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_COMMSLOG_H
