//===- PipelineSchedule.h - Micro-batch orders of pipeline stages -*- C++ -*-===//
//
// Pipeline parallelism cuts the model into P stages (rank s holds stage s,
// or with interleaving the v model chunks s, s + P, ..., s + (v-1)P) and
// streams the m micro-batches of a step through them. A schedule is the
// order in which each stage runs the forwards and backwards of its
// micro-batches:
//
//   GPipe        all m forwards, then all m backwards (Huang et al.)
//   1F1B         P - s - 1 warm-up forwards, then one forward and one
//                backward in turn, then the remaining backwards
//                (PipeDream-Flush; DeepSpeed's TrainSchedule, Megatron's
//                non-interleaved schedule)
//   Interleaved  1F1B over v model chunks per rank (Megatron-LM's virtual
//                pipeline; m must be a multiple of P)
//
// simulatePipeline runs the orders of all stages against their data
// dependencies (a chunk's forward needs the previous chunk's forward of
// the micro-batch, its backward the next chunk's backward) and measures
// the step's length, the idle time (the bubble) and the activations each
// stage holds at most. With equal stages the bubble fraction is
// (P-1)/(m+P-1) for GPipe and 1F1B and (P-1)/(v*m+P-1) interleaved.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_PIPELINESCHEDULE_H
#define DSC_PROGRAM_PIPELINESCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

struct Program;

enum class PipelineScheduleKind { GPipe, OneFOneB, Interleaved };

/// "gpipe", "1f1b", "interleaved"; an error for another name.
PipelineScheduleKind pipelineScheduleNamed(const std::string &name);
const char *pipelineScheduleName(PipelineScheduleKind kind);

/// One unit of a stage's work: the forward or backward of a micro-batch
/// through one of the stage's model chunks (0 unless interleaved).
struct PipelineAction {
  enum Kind { Forward, Backward };
  Kind kind;
  int64_t microBatch;
  int64_t chunk;
  bool operator==(const PipelineAction &o) const {
    return kind == o.kind && microBatch == o.microBatch && chunk == o.chunk;
  }
};

struct PipelineShape {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int64_t stages = 1;       ///< P
  int64_t microBatches = 1; ///< m (gradient_accumulation_steps)
  int64_t chunks = 1;       ///< v: model chunks per stage (Interleaved)
};

/// Throws rt::Error naming what is wrong (P, m, v < 1; chunks other than 1
/// without interleaving; interleaving with m not a multiple of P).
void checkPipelineShape(const PipelineShape &shape);

/// The order in which stage `stage` (0 .. P-1) runs its 2 * m * v actions.
std::vector<PipelineAction> pipelineOrder(const PipelineShape &shape,
                                          int64_t stage);

struct PipelineTimeline {
  /// The step's length and each stage's idle time in it (time units).
  double length = 0;
  std::vector<double> idle;
  /// Per stage: the most micro-batch chunks whose forward ran and whose
  /// backward has not (activations held at once).
  std::vector<int64_t> peakInFlight;
  /// Idle time over the length of all stages together.
  double bubbleFraction = 0;
};

/// The closed forms the simulation meets (for shapes too large to
/// simulate): the bubble fraction with equal stages, and the most
/// micro-batch chunks stage `stage` holds at once (m for GPipe, min(P - s,
/// m) for 1F1B, Megatron's warm-up plus one for interleaving).
double pipelineBubbleFormula(const PipelineShape &shape);
int64_t pipelinePeakInFlight(const PipelineShape &shape, int64_t stage);

/// Runs every stage's order with a whole stage's forward taking
/// `forwardCost` and its backward `backwardCost` (a chunk 1/v of each);
/// communication is free. Throws rt::Error if the orders deadlock.
PipelineTimeline simulatePipeline(const PipelineShape &shape,
                                  double forwardCost = 1,
                                  double backwardCost = 2);

/// The same with unequal stages: `forwardCosts[c * P + s]` is the forward
/// time of chunk c of stage s (virtual stage c * P + s), its backward
/// `backwardOverForward` times that. The bubble is then the idle time of
/// a real partition, slow stages included.
PipelineTimeline simulatePipeline(const PipelineShape &shape,
                                  const std::vector<double> &forwardCosts,
                                  double backwardOverForward = 2);

/// A function or buffer of model chunk `chunk` of an interleaved stage:
/// `name` for chunk 0, else `name.chunk` (as -dsc-split-stage-step names
/// them).
std::string pipelineChunkName(const std::string &name, int64_t chunk);

/// What a compiled pipeline stage (a Program with @stage_forward, see
/// -dsc-split-stage-step) keeps of each micro-batch through model chunk
/// `chunk` from its forward until its backward: the Input and Output
/// buffers @stage_forward writes, or the driver writes for it (the
/// received `stage_input`), that @micro_step reads (chunk k > 0: the
/// functions and buffers named with ".k"). The driver holds one copy per
/// micro-batch chunk in flight.
std::vector<int> pipelineStashBuffers(const Program &prog, int64_t chunk = 0);

/// The stage's shape as its Program's metadata says (schedule, mesh
/// pipeline size, gradient accumulation, chunks) and, per model chunk, the
/// bytes of pipelineStashBuffers; {shape, -1} without @stage_forward.
struct PipelineStash {
  PipelineShape shape;
  int64_t stage = -1;
  std::vector<int64_t> bytesPerChunk;
  /// The most bytes held at once as the schedule's order runs (0 without a
  /// pipeline): pipelinePeakInFlight(shape, stage) copies with one chunk.
  int64_t peakBytes() const;
};
PipelineStash pipelineStashOf(const Program &prog);

} // namespace dsc::rt

#endif // DSC_PROGRAM_PIPELINESCHEDULE_H
