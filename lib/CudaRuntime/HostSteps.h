//===- HostSteps.h - ZeRO-Offload's host side of the CUDA backend -*- C++ -*-===//
//
// ZeRO-Offload on the CUDA backend: the optimizer state, master weights and
// gradient copies live in rt::Storage's host arena, which is page-locked
// once (cudaHostRegister) so that the copies between the memories are
// asynchronous and can be graph nodes; the instructions placed on the host
// (the updates, ZeRO-Infinity's swaps) run with the CPU backend's kernels
// (rt::runOnHost) from host nodes of the function's CUDA graph, on the
// lanes of include/dsc/Codegen/StepLanes.h.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_CUDARUNTIME_HOSTSTEPS_H
#define DSC_LIB_CUDARUNTIME_HOSTSTEPS_H

#include "dsc/Runtime/Runtime.h"

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace dsc::rt {

/// The host arenas page-locked for this backend, unlocked when it goes.
class PinnedHostArenas {
public:
  PinnedHostArenas() = default;
  PinnedHostArenas(const PinnedHostArenas &) = delete;
  PinnedHostArenas &operator=(const PinnedHostArenas &) = delete;
  ~PinnedHostArenas();
  /// Page-locks `storage`'s host arena (once per arena); returns its bytes
  /// if this call locked it, else 0. Throws Error with one line when the
  /// driver refuses.
  size_t pin(const Program &program, Storage &storage);

private:
  std::vector<void *> pinned;
};

/// Runs host instructions from CUDA graph host nodes, which cannot throw
/// or call CUDA: the first failure is kept and the rest of the call's
/// host instructions are skipped; rethrow() reports it once the stream has
/// synchronised.
class HostInstructions {
public:
  /// The userData of a host node that runs instruction `instr` of the
  /// function the graph belongs to (stable while this object lives).
  void *task(size_t instr);
  /// cudaHostFn_t of such a node.
  static void node(void *task);
  /// Before launching a graph with host nodes: what they run on.
  void begin(const Program &program, const Function &fn, Storage &storage,
             const RngContext &rng, int localRanks);
  /// Throws the first failure since begin(), naming its instruction.
  void rethrow();

private:
  struct Task {
    HostInstructions *owner;
    size_t instr;
  };
  void run(size_t instr);
  std::deque<Task> tasks;
  const Program *program = nullptr;
  const Function *fn = nullptr;
  Storage *storage = nullptr;
  RngContext rng;
  int localRanks = 1;
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string failure;
};

} // namespace dsc::rt

#endif // DSC_LIB_CUDARUNTIME_HOSTSTEPS_H
