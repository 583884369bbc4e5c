//===- MemoryPlan.h - Static arena planning of a step Program --*- C++ -*-===//
//
// Liveness-based placement of every buffer of a lowered step (rt::Program) in
// one static arena, and the memory report built from it (`dsc-run estimate`,
// `dsc-run train --memory-report`, `dsc-opt -dsc-memory-report`).
//
// Plain C++ over the runtime's Program: no MLIR, so the planner can be
// tested and used next to the runtime alone.
//
// Layout of the arena (all offsets multiples of 64 bytes):
//
// ZeRO-Offload's host buffers (Buffer::host) have an arena of their own,
// laid out the same way.
//
//   [0, persistentBytes)   every Param, GradAcc, OptState, Input and Output
//                          buffer, one after the other in buffer-id order,
//                          but the transient outputs
//   [persistentBytes, ...) the Temp buffers; each entry function's temps are
//                          packed by liveness, and since the driver runs one
//                          function at a time all functions share this range;
//                          a transient output (transientOutputs) is packed
//                          with its function's temps, live until it returns
//
// So the driver must read an output before it calls the next function.
//
// See MemoryPlan.cpp for the packing algorithm and why it is not optimal.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_MEMORYPLAN_H
#define DSC_PROGRAM_MEMORYPLAN_H

#include "dsc/Program/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

/// Every buffer starts on a cache line (and on any vector width we use).
inline constexpr int64_t kArenaAlignment = 64;

/// Temp-region facts of one entry function.
struct FunctionMemory {
  std::string name;
  int64_t tempBytes = 0;  ///< extent of its temps above persistentBytes
  int64_t liveBytes = 0;  ///< most temp bytes live at one instruction: a
                          ///< lower bound for tempBytes
  int numTemps = 0;
};

/// One memory's arena, laid out as above.
struct ArenaPlan {
  int64_t persistentBytes = 0;   ///< aligned end of the persistent region
  int64_t arenaBytes = 0;        ///< max over its buffers of offset + bytes
  std::vector<FunctionMemory> functions; ///< in Program::functions order
};

/// The device arena, and (ZeRO-Offload) the host arena that holds the host
/// buffers (Buffer::host), planned the same way on their own; every other
/// field is the device arena's.
struct MemoryPlan {
  std::vector<int64_t> offsets;  ///< per buffer id, absolute in its arena
  int64_t persistentBytes = 0;   ///< aligned end of the persistent region
  int64_t arenaBytes = 0;        ///< max over buffers of offset + bytes
  std::vector<FunctionMemory> functions; ///< in Program::functions order
  ArenaPlan host;                ///< empty without host buffers
  /// ZeRO-Infinity: the swap file holding the NVMe-resident buffers
  /// (Buffer::nvme), whose offsets are in it; 0 without them.
  int64_t nvmeBytes = 0;
};

/// Alignment of every buffer in the NVMe swap file (a page: reads and
/// writes of whole pages).
constexpr int64_t kNvmeAlignment = 4096;

/// Per buffer id: an Output that exactly one function writes and no other
/// function names. Its value is valid from the return of that function to
/// the next call of any function.
std::vector<bool> transientOutputs(const rt::Program &program);

/// Plans `program`. Fails (false, `error` set) only for programs the
/// lowering never produces: a Temp buffer used by two functions.
bool planMemory(const rt::Program &program, MemoryPlan &plan,
                std::string &error);

/// Writes the plan into the program (Buffer::offset, Program::arenaBytes,
/// Program::hostArenaBytes); rt::Storage then allocates one arena per
/// memory.
void applyMemoryPlan(rt::Program &program, const MemoryPlan &plan);

/// Checks a planned program: every offset aligned and inside the arena,
/// persistent buffers disjoint from everything, and any two Temp buffers of
/// one function whose live ranges (first to last instruction that names
/// them, inclusive) intersect are disjoint in memory.
bool verifyMemoryPlan(const rt::Program &program, std::string &error);

/// The categories of the report. With padding and workspace defined as
/// below, parameters + gradients + optimizerState + inputsOutputs + padding
/// + activations + workspace == peakBytes exactly.
struct MemoryReport {
  int64_t peakBytes = 0;      ///< the arena: everything the step needs
  int64_t parameters = 0;     ///< Param buffers
  int64_t gradients = 0;      ///< GradAcc buffers (gradient accumulators)
  int64_t optimizerState = 0; ///< OptState buffers (exp_avg, exp_avg_sq, ...)
  int64_t inputsOutputs = 0;  ///< Input and persistent Output buffers
  int64_t padding = 0;        ///< alignment padding of the persistent region
  /// Saved activations: Temp buffers written by a forward instruction and
  /// read by a backward one (Instr::backward) of the same function.
  int64_t activations = 0;
  /// The rest of the temp arena: (arena - persistent region) - activations,
  /// i.e. forward values not kept for the backward, gradients in flight,
  /// optimizer temporaries and packing fragmentation.
  int64_t workspace = 0;
  int64_t parameterCount = 0; ///< elements of the Param buffers (of the
                              ///< weight, for 4-bit ones)
  int64_t persistentBytes = 0;
  int64_t tempBytes = 0;      ///< the temp arena: peakBytes - persistent
  /// Saved activations by Instr::layer of the forward instruction that wrote
  /// them; index = layer. Those of untagged instructions (embeddings, final
  /// norm, head, loss) are in activationsOutsideLayers.
  std::vector<int64_t> layers;
  int64_t activationsOutsideLayers = 0;
  std::vector<FunctionMemory> functions;
  int64_t measuredPeakBytes = -1; ///< from rt::Storage after a run; -1: none
  /// A pipeline stage's driver keeps, in host memory outside the arena,
  /// what each micro-batch's backward reads of its forward, once per
  /// micro-batch in flight (rt::pipelineStashOf); 0 without a pipeline.
  /// Interleaved, a micro-batch in flight is one through one model chunk.
  int64_t pipelineStashBytes = 0;
  int64_t pipelineInFlight = 0;
  int64_t pipelineChunks = 1;
  /// ZeRO-Offload: the host arena (Buffer::host), outside peakBytes and
  /// every category above: offloaded parameter shards (ZeRO-3's
  /// offload_param; parameterCount counts them too), the fp32 master
  /// weights, the optimizer state and the rest (the gradients and scalars
  /// copied over, padding).
  int64_t hostPeakBytes = 0;
  int64_t hostParameters = 0;
  int64_t hostMasterWeights = 0;
  int64_t hostOptimizerState = 0;
  int64_t hostWorkspace = 0;
  /// ZeRO-Infinity: the swap file (Buffer::nvme), outside both arenas:
  /// the parameter shards (offload_param device nvme; parameterCount
  /// counts them too), the fp32 master weights and the optimizer state on
  /// NVMe.
  int64_t nvmeBytes = 0;
  int64_t nvmeParameters = 0;
  int64_t nvmeMasterWeights = 0;
  int64_t nvmeOptimizerState = 0;
};

MemoryReport reportMemory(const rt::Program &program, const MemoryPlan &plan);

/// The human-readable table (bytes and MiB per category, per layer, per
/// function) and the JSON object with the keys documented in README.md.
std::string formatMemoryTable(const MemoryReport &report);
std::string formatMemoryJson(const MemoryReport &report);

} // namespace dsc

#endif // DSC_PROGRAM_MEMORYPLAN_H
