//===- DscOps.h - dsc operations -------------------------------*- C++ -*-===//
#ifndef DSC_DIALECT_DSCOPS_H
#define DSC_DIALECT_DSCOPS_H

#include "dsc/Dialect/DscDialect.h"
#include "dsc/Dialect/DscTraits.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::dsc {
/// The process group's exchange that collectives read and write (their
/// memory effects), so that no pass merges, drops or reorders them.
struct CommunicatorResource
    : public SideEffects::Resource::Base<CommunicatorResource> {
  StringRef getName() final { return "Communicator"; }
};

/// OptimizerOpInterface's verifier: gradient, states and results in the
/// param's shape.
LogicalResult verifyOptimizerOp(Operation *op);
} // namespace mlir::dsc

#include "dsc/Dialect/DscInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dsc/Dialect/DscOps.h.inc"

namespace mlir::dsc {
/// The verifiers of the optimizers whose states are not param-shaped.
LogicalResult verifyAdam8bitOp(Adam8bitOp op);
LogicalResult verifyAdafactorOp(AdafactorOp op);
/// Adafactor's factored second moment of a parameter of rank >= 2: the row
/// factor (shape[:-1]) and the column factor (shape[:-2] + shape[-1:]).
SmallVector<int64_t> adafactorRowShape(ArrayRef<int64_t> param);
SmallVector<int64_t> adafactorColShape(ArrayRef<int64_t> param);
/// The kinds of an Adafactor update's states, in operand order.
SmallVector<StateKind> adafactorStateKinds(int64_t rank, bool firstMoment);
} // namespace mlir::dsc

namespace mlir::dsc {

/// Names of the argument/result attributes the frontend and passes use.
inline constexpr llvm::StringLiteral kParamAttrName = "dsc.param";
inline constexpr llvm::StringLiteral kStateAttrName = "dsc.state";
/// On a parameter argument (beside dsc.param): the parameter is frozen, as
/// -dsc-lora leaves the base model's weights. -dsc-autodiff gives it no
/// gradient and -dsc-build-train-step no optimizer state or update; the
/// runtime still loads and saves it (unit attribute).
inline constexpr llvm::StringLiteral kFrozenAttrName = "dsc.frozen";
/// ZeRO (-dsc-zero): on a step argument that holds this rank's shard of a
/// flattened, zero-padded tensor, the whole tensor's shape (array<i64>).
inline constexpr llvm::StringLiteral kShardOfAttrName = "dsc.shard_of";
/// ZeRO-Offload: on a step function's argument or result, a state that
/// lives in host memory; on an op, an op that runs on the host over host
/// values (dsc.to_host and dsc.to_device cross between the two).
inline constexpr llvm::StringLiteral kHostAttrName = "dsc.host";
/// ZeRO-Infinity: on a step function's argument or result (beside
/// dsc.host), a state that lives in the NVMe swap file; the step reads it
/// by dsc.swap_in and writes it by dsc.swap_out (-dsc-offload-nvme).
inline constexpr llvm::StringLiteral kNvmeAttrName = "dsc.nvme";
/// On a step argument whose value differs between ranks (1-bit Adam's
/// compression errors): checkpoints keep every rank's copy (unit attribute).
inline constexpr llvm::StringLiteral kPerRankAttrName = "dsc.per_rank";
/// The module attribute holding the device mesh (#dsc.mesh<...>).
inline constexpr llvm::StringLiteral kMeshAttrName = "dsc.mesh";
/// The module attribute splitting the mesh's data axis into groups of this
/// many consecutive data ranks (i64; the data_inner and data_outer axes).
inline constexpr llvm::StringLiteral kMeshDataInnerAttrName =
    "dsc.mesh_data_inner";

/// The module attributes recording that -dsc-zero sharded the step (its
/// stage, i64) and that -dsc-offload-optimizer offloaded it (unit) and,
/// with `params`, the parameter shards (unit), and naming the directory of
/// ZeRO-Infinity's swap file (string, set by the driver for
/// -dsc-offload-nvme).
inline constexpr llvm::StringLiteral kZeroStageAttrName = "dsc.zero_stage";
inline constexpr llvm::StringLiteral kOffloadOptimizerAttrName =
    "dsc.offload_optimizer";
inline constexpr llvm::StringLiteral kOffloadParamsAttrName =
    "dsc.offload_params";
inline constexpr llvm::StringLiteral kNvmePathAttrName = "dsc.nvme_path";
/// The module attribute asking for expert parallelism (i64, the ranks of
/// an expert-parallel group: the data_inner groups, so it equals
/// dsc.mesh_data_inner); -dsc-expert-parallel shards the experts over them.
inline constexpr llvm::StringLiteral kMeshExpertAttrName = "dsc.mesh_expert";
/// The module attributes -dsc-expert-parallel writes: the expert parameters
/// a rank holds (array of names, those of group rank 0: `experts.j.` for
/// local expert j), and how many experts each rank holds (i64). Group rank
/// g's local expert j is expert g * experts_per_rank + j; its parameters,
/// gradients and optimizer state are its own (rt::placeExpertShards names
/// them per rank).
inline constexpr llvm::StringLiteral kExpertParamsAttrName =
    "dsc.expert_params";
inline constexpr llvm::StringLiteral kExpertsPerRankAttrName =
    "dsc.experts_per_rank";
/// Whether `param` is one of the module's expert-parallel parameters.
bool isExpertParam(Operation *op, StringRef param);

/// The module attribute -dsc-quantize-frozen writes: parameter name ->
/// #dsc.four_bit (a dictionary).
inline constexpr llvm::StringLiteral kFourBitParamsAttrName =
    "dsc.four_bit_params";

/// The module attribute -dsc-tensor-parallel writes: parameter name ->
/// #dsc.tensor_slice (a dictionary). Its optimizer state and gradient
/// accumulators are sliced the same way.
inline constexpr llvm::StringLiteral kTensorSlicesAttrName =
    "dsc.tensor_slices";
/// The module attribute -dsc-tensor-parallel writes: the Philox streams of
/// the dropouts inside sliced regions (array<i64>), which each tensor rank
/// draws differently (rt::drawTensorParallelStreamsPerRank).
inline constexpr llvm::StringLiteral kTensorParallelStreamsAttrName =
    "dsc.tensor_parallel_streams";
/// The slice of parameter `param` in the dsc.tensor_slices of `op` (a
/// module) or of its enclosing module; null for a whole (replicated) one.
TensorSliceAttr tensorSliceOf(Operation *op, StringRef param);
/// The #dsc.four_bit of `param` in the module of `op` (null when it is not
/// stored in 4 bits).
FourBitAttr fourBitOf(Operation *op, StringRef param);

/// The number of ranks a collective of `op` spans along `axis`: from the
/// dsc.mesh and dsc.mesh_data_inner of `op` (a module) or of its enclosing
/// module, 1 without a mesh.
int64_t meshGroupSize(Operation *op, MeshAxis axis);

/// Pipeline stages (-dsc-pipeline-stage): the module attribute naming the
/// stage a module holds (i64, 0 .. P-1 of the mesh's pipeline axis), the
/// unit attribute on the @forward argument that receives the previous
/// stage's activation, and the module attribute listing the parameters
/// the first and last stage both hold (array of strings: tied embeddings,
/// whose gradients the runtime sums between the two).
inline constexpr llvm::StringLiteral kPipelineStageAttrName =
    "dsc.pipeline_stage";
inline constexpr llvm::StringLiteral kPipelineInputAttrName =
    "dsc.pipeline_input";
inline constexpr llvm::StringLiteral kPipelineTiedParamsAttrName =
    "dsc.pipeline_tied_params";
/// The pipeline stage `op` (a module, or an op in one) holds, or -1 for a
/// module that is not cut into stages.
int64_t pipelineStageOf(Operation *op);

/// Interleaved pipelines (Megatron-LM's virtual stages): rank s of P holds
/// the v model chunks s, s + P, ..., s + (v-1)P of the v*P virtual stages,
/// and its module says v in `dsc.pipeline_chunks` (absent: 1). Chunk k's
/// boundary arguments and results, states and functions are named as chunk
/// 0's with ".k" appended (`stage_input.1`, @micro_step.1).
inline constexpr llvm::StringLiteral kPipelineChunksAttrName =
    "dsc.pipeline_chunks";
int64_t pipelineChunksOf(Operation *op);
/// The chunks of `op`'s stage that receive an activation (all but the
/// first virtual stage), that send one (all but the last), and whether it
/// holds the last virtual stage (the loss), in chunk order.
SmallVector<int64_t> pipelineReceivingChunks(Operation *op);
SmallVector<int64_t> pipelineSendingChunks(Operation *op);
bool holdsPipelineLoss(Operation *op);
/// `name` for chunk `chunk`: itself for chunk 0, else `name.chunk`.
std::string pipelineChunkName(StringRef name, int64_t chunk);

/// Discardable provenance attributes on ops, read by the memory report:
/// `dsc.layer = i : i64` on every op the frontend builds for transformer
/// layer i (embeddings, final norm, head and loss carry none), and the unit
/// attribute `dsc.grad` on every op -dsc-autodiff builds (which also copies
/// the dsc.layer of the forward op it differentiates).
inline constexpr llvm::StringLiteral kLayerAttrName = "dsc.layer";
inline constexpr llvm::StringLiteral kGradAttrName = "dsc.grad";

/// Shape of `lhs` @ W for a dsc.linear with the given weight shape, or
/// failure with a message. Shared by the verifier and the frontend.
FailureOr<SmallVector<int64_t>> inferLinearShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> weight,
                                                 bool transposeW,
                                                 std::string &error);

} // namespace mlir::dsc

#endif // DSC_DIALECT_DSCOPS_H
