//===- CompressedAllReduce.h - DeepSpeed's 1-bit all-reduce as IR -*- C++ -*-===//
//
// Builds the error-compensated 1-bit all-reduce of DeepSpeed's
// compressed_allreduce (deepspeed/runtime/comm/nccl.py) out of dsc ops, for
// the passes that compress an optimizer's communication (-dsc-onebit-adam;
// 0/1 Adam and 1-bit LAMB reuse it):
//
//   worker: y = x + worker_error -> signs, scale      (onebit_compress)
//   all_to_all the sign chunks, all_gather the scales
//   server: the mean of the G chunks it received + server_error
//           -> signs, scale                           (onebit_decode_mean,
//                                                      onebit_compress)
//   all_gather the server chunks' signs and scales, decode (onebit_decode)
//
// A tensor of n elements is padded to P = compressedSize(n, G) elements;
// the worker error has P elements, the server error P / G.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_TRANSFORMS_COMPRESSEDALLREDUCE_H
#define DSC_LIB_TRANSFORMS_COMPRESSEDALLREDUCE_H

#include "dsc/Dialect/DscOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::dsc {

/// DeepSpeed's padding: n rounded up to a multiple of G * lcm(G, 8), so
/// every server chunk (P / G) is a whole number of sign bytes.
int64_t compressedSize(int64_t n, int64_t groupSize);

struct CompressedAllReduce {
  Value result;         ///< the group's mean of `input`, compressed twice
  Value newWorkerError; ///< [P]
  Value newServerError; ///< [P / G]
};

/// The compressed mean of `input` over the data axis (G ranks, G > 1), with
/// the error buffers `workerError` [P] and `serverError` [P / G]; `skip`
/// (optional, fp16's overflow flag) keeps both errors unchanged.
CompressedAllReduce buildCompressedAllReduce(OpBuilder &b, Location loc,
                                             Value input, Value workerError,
                                             Value serverError, Value skip,
                                             int64_t groupSize);

// What the compressed-optimizer passes (-dsc-onebit-adam,
// -dsc-zero-one-adam) share.

/// The @apply_step a compressed optimizer's pass rewrites (its warm-up or
/// full step), or null after emitting `pass`'s error: there is none yet, or
/// one of the functions in `stages` that the pass adds exists already.
func::FuncOp findWarmupStep(ModuleOp module, StringRef pass,
                            ArrayRef<StringRef> stages);

/// The #dsc.state kind of argument `i` of `fn`, if it has one.
std::optional<StateKind> stateKindOf(func::FuncOp fn, unsigned i);

/// @apply_step must be DeepSpeed's warm-up for `pass`: Adam with decoupled
/// weight decay and no bias correction, on whole (not ZeRO-sharded)
/// tensors. Emits the error and fails otherwise.
LogicalResult checkAdamWarmup(func::FuncOp apply, StringRef pass);

/// The gradient accumulators of `fn` stay local: their all-reduces go, and
/// fp16's overflow flag is all-reduced with max instead (every rank skips
/// if any rank's local gradients overflowed).
void keepGradientsLocal(func::FuncOp fn);

/// Appends an argument of `type` holding `state` (marked dsc.per_rank when
/// `perRank`: a compression error).
BlockArgument addStateArgument(func::FuncOp fn, Type type, StateAttr state,
                               bool perRank = false);
/// Appends `value` as a result holding `state`.
void addStateResult(func::FuncOp fn, Value value, StateAttr state);

/// The error buffers of one parameter's compressed all-reduce over
/// `groupSize` ranks, added to `fn` as per-rank state, and the all-reduce
/// of `input` (the parameter's shape) built at `b`; the new errors are
/// returned by `fn`. G = 1: `input` itself, nothing added.
Value compressAcrossRanks(OpBuilder &b, Location loc, func::FuncOp fn,
                          StringRef param, Value input, Value skip,
                          int64_t groupSize,
                          SmallVectorImpl<std::pair<Value, StateAttr>> &newErrors);

} // namespace mlir::dsc

#endif // DSC_LIB_TRANSFORMS_COMPRESSEDALLREDUCE_H
