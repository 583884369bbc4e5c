//===- PipelineChunks.h - The model chunks of an interleaved stage -*- C++ -*-===//
//
// An interleaved pipeline stage (-dsc-pipeline-stage chunks=v) holds v
// model chunks in one training step until -dsc-split-stage-step cuts them
// apart. The chunks share no work: each op serves one of them, which the
// boundary values it depends on tell (chunk k's `stage_input.k` and
// `stage_output_grad.k`, ".k" left out for chunk 0). Passes between the two
// keep the chunks apart with these labels (a bucket of gradients must not
// mix two chunks, which the schedule runs at different times).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TRANSFORMS_PIPELINECHUNKS_H
#define DSC_TRANSFORMS_PIPELINECHUNKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::dsc {

/// Labels: an op that depends on no chunk's boundary value (parameters and
/// tokens alone) serves none; one that depends on two chunks' is mixed.
inline constexpr int64_t kNoChunk = -1, kMixedChunks = -2;

/// The chunk index in `name` if it is `base` (chunk 0) or `base.k`.
std::optional<int64_t> chunkOfName(StringRef name, StringRef base);

/// The chunk whose boundary value argument `arg` of `fn` is
/// (`stage_input(.k)`, `stage_output_grad(.k)`), or kNoChunk.
int64_t pipelineChunkOfArgument(func::FuncOp fn, unsigned arg);

/// `a` and `b` together: the same chunk, kNoChunk with either, else mixed.
int64_t joinPipelineChunks(int64_t a, int64_t b);

/// Every op of `fn`'s body labelled with its chunk, in program order: its
/// own label (`own`, kNoChunk if none) joined with its operands'.
DenseMap<Operation *, int64_t>
labelPipelineChunks(func::FuncOp fn,
                    function_ref<int64_t(Operation *)> own = nullptr);

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PIPELINECHUNKS_H
