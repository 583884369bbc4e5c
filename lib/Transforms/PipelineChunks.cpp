//===- PipelineChunks.cpp - The model chunks of an interleaved stage ------===//

#include "dsc/Transforms/PipelineChunks.h"

#include "dsc/Dialect/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;

std::optional<int64_t> mlir::dsc::chunkOfName(StringRef name,
                                              StringRef base) {
  if (!name.consume_front(base))
    return std::nullopt;
  if (name.empty())
    return 0;
  int64_t k;
  if (!name.consume_front(".") || name.getAsInteger(10, k))
    return std::nullopt;
  return k;
}

int64_t mlir::dsc::pipelineChunkOfArgument(func::FuncOp fn, unsigned arg) {
  auto state = fn.getArgAttrOfType<StateAttr>(arg, kStateAttrName);
  if (!state || state.getKind() != StateKind::activation)
    return kNoChunk;
  if (auto k = chunkOfName(state.getName(), "stage_input"))
    return *k;
  return chunkOfName(state.getName(), "stage_output_grad").value_or(kNoChunk);
}

int64_t mlir::dsc::joinPipelineChunks(int64_t a, int64_t b) {
  return a == kNoChunk ? b : b == kNoChunk || a == b ? a : kMixedChunks;
}

DenseMap<Operation *, int64_t>
mlir::dsc::labelPipelineChunks(func::FuncOp fn,
                               function_ref<int64_t(Operation *)> own) {
  DenseMap<Operation *, int64_t> chunkOf;
  for (Operation &op : fn.getBody().front().without_terminator()) {
    int64_t label = own ? own(&op) : kNoChunk;
    for (Value operand : op.getOperands())
      label = joinPipelineChunks(
          label, isa<BlockArgument>(operand)
                     ? pipelineChunkOfArgument(
                           fn, cast<BlockArgument>(operand).getArgNumber())
                     : chunkOf.lookup(operand.getDefiningOp()));
    chunkOf[&op] = label;
  }
  return chunkOf;
}
