//===- Program.h - The plain step description the runtime executes -*- C++ -*-===//
//
// The compiler (lib/Codegen) lowers the dsc module to a Program: a list of
// buffers and, per entry function, a list of instructions over buffer ids.
// The runtime executes Programs and links no MLIR, so it can be embedded and
// tested alone. Every opcode below mirrors one dsc dialect op; its semantics
// are those of the op (see include/dsc/Dialect/DscOps.td).
//
// Layout conventions: tensors are dense, row-major, of the buffer's dtype:
// f32, or f16/bf16 for the activations of a mixed-precision step (every
// kernel computes in f32 and stores in its outputs' dtypes), i32 for token
// ids and labels, i64 for the step.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_PROGRAM_H
#define DSC_PROGRAM_PROGRAM_H

#include "dsc/Program/FourBitLayout.h"
#include "dsc/Support/Error.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace dsc::rt {

/// Element types of buffers. I8 and U8 are for quantized and compressed
/// collectives (packed signs, scales); no kernel reads them yet.
enum class DType { F32, F16, BF16, I32, I64, I8, U8 };

size_t dtypeSize(DType t);
/// F32, F16 and BF16: what the float kernels read and write.
inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
const char *dtypeName(DType t);
/// A shape as the runtime's messages print it: "[2,3]".
std::string shapeStr(const std::vector<int64_t> &shape);

/// What a buffer holds across calls of the step.
enum class BufferRole {
  Temp,       ///< produced and consumed inside one function call
  Param,      ///< model weight, persistent, saved in checkpoints
  GradAcc,    ///< gradient accumulator of a parameter, persistent
  OptState,   ///< optimizer state (exp_avg, exp_avg_sq, momentum), persistent
  Input,      ///< written by the driver before a call (tokens, step counter)
  Output,     ///< read by the driver after a call (loss, logits, grad norm)
};

/// Normal: N(0, initStd^2); Uniform: U(-initStd, initStd) (LoRA's A).
enum class InitKind { None, Zeros, Ones, Normal, Uniform };

/// The number of elements of a tensor of `shape`.
inline int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A frozen weight stored in 4 bits (#dsc.four_bit): the buffer holds
/// FourBitLayout's bytes for a rows x cols ([out, in]) weight; the
/// parameter itself is [cols, rows] when `transposed` (GPT-2's Conv1D).
struct FourBitStorage {
  quant::FourBitFormat format = quant::FourBitFormat::NF4;
  int64_t rows = 0, cols = 0, block = 64;
  bool doubleQuant = false;
  bool transposed = false;

  /// The parameter's shape as weight files hold it.
  std::vector<int64_t> fileShape() const {
    return transposed ? std::vector<int64_t>{cols, rows}
                      : std::vector<int64_t>{rows, cols};
  }
  quant::FourBitLayout layout() const {
    return quant::FourBitLayout::of(rows * cols, block, doubleQuant);
  }
};

struct Buffer {
  std::string name; ///< e.g. "transformer.h.0.ln_1.weight", "exp_avg/<param>"
  BufferRole role = BufferRole::Temp;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  InitKind init = InitKind::None; ///< only for Param
  double initStd = 0.0;           ///< Normal's std, Uniform's bound
  /// ZeRO: this buffer holds rank r's elements [r*n, (r+1)*n) of a tensor
  /// of this shape, flattened and zero-padded to a multiple of the world
  /// size (n: this buffer's elements). Empty for a whole tensor.
  std::vector<int64_t> wholeShape;
  /// Tensor slicing (#dsc.tensor_slice): dimension `sliceDim` of the whole
  /// tensor has `sliceSize` elements in `sliceGroups` equal sections and
  /// this buffer holds part t of the mesh's T of each (t: the rank's tensor
  /// coordinate; see TensorSlice.h for padding); -1 when whole. The slice
  /// is what ZeRO then shards (wholeShape is the slice's shape).
  int64_t sliceDim = -1;
  int64_t sliceGroups = 1;
  int64_t sliceSize = 0;
  /// 1-bit Adam's compression errors: every rank holds its own value, so
  /// checkpoints keep all ranks' copies ([world size, shape...]).
  bool perRank = false;
  /// A parameter the step reads but never updates (dsc.frozen: the base
  /// model under LoRA). Trainable parameters are the adapter.
  bool frozen = false;
  /// A parameter stored in 4 bits (QLoRA); the runtime quantizes the
  /// [rows, cols] f32 weight it loads or initialises into it.
  std::optional<FourBitStorage> fourBit;
  /// Expert parallelism: a parameter of one of this rank's experts (or its
  /// gradient or optimizer state), named after that expert
  /// (placeExpertShards); the other ranks of its data_inner group hold the
  /// other experts under their names.
  bool expertShard = false;
  /// ZeRO-Offload: the buffer lives in host memory (the host arena,
  /// Program::hostArenaBytes), next to the device arena that holds every
  /// other buffer. On the CPU backend both are RAM.
  bool host = false;
  /// ZeRO-Infinity: a host buffer that lives in the NVMe swap file
  /// (dsc.nvme), at `offset` in it, rather than in the host arena; only
  /// swap_in reads it and swap_out writes it in a step.
  bool nvme = false;
  /// Byte offset in the program's arena (the host arena for a host
  /// buffer) when it has a memory plan
  /// (Program::arenaBytes >= 0, see include/dsc/Program/MemoryPlan.h); -1
  /// when the buffer is allocated on its own.
  int64_t offset = -1;

  int64_t numElements() const { return elementCount(shape); }
  size_t bytes() const { return size_t(numElements()) * dtypeSize(dtype); }
};

/// ZeRO-Offload's fp32 master weights ("master/<param>", an OptState in
/// host memory): derived from the parameter whenever weights are loaded or
/// initialised, equal to it after every step, never stored in files.
inline bool isMasterWeights(const Buffer &b) {
  return b.role == BufferRole::OptState && b.name.rfind("master/", 0) == 0;
}

/// The runtime opcodes, one per entry of Ops.def (whose header comment says
/// what the table holds); the semantics of each are those of the dsc op it
/// lowers from (include/dsc/Dialect/DscOps.td).
enum class Opcode {
#define DSC_OP(Name, ...) Name,
#include "dsc/Program/Ops.def"
};

/// Operand-count bound of Ops.def meaning "no upper bound".
constexpr int kAnyCount = -1;

/// An opcode's one classification: the shape checks and sizes it shares
/// with others (InstrCheck), and so the kernel family that runs it
/// (KernelOpcodes.h) and its CUDA route (OpInfo::route).
enum class OpFamily {
  Init, Copy, Convert, Collective, Transfer, Shard, Resize, Embedding,
  VocabEmbedding, Add, ReduceTo, Linear, BatchMatmul, Norm, NormGrad,
  NormGradFromOutput, ResidualNorm, Gelu, Dropout, Bias, Heads, ConcatSplit,
  Softmax, Attention, CrossEntropy, VocabCrossEntropy, TokenMask, Optimizer,
  PerTensorOptimizer, Scalar, Compression, CompressedOptimizer, Pointwise,
  RowGate, Rotary, RepeatKv, FourBitLinear, Moe, ExpertExchange,
};

/// The lib/Kernels family that runs an OpFamily (Gemm: GemmCpu.cpp on the
/// CPU, cuBLASLt on CUDA; Collective: the communicator).
enum class KernelFamily {
  Elementwise, Norms, Attention, EmbeddingLoss, Optimizers, Gemm, Collective,
  Compression, Gated, Rotary, Quantized, Moe,
};

/// How the CUDA backend runs an opcode.
enum class OpRoute { Kernel, Gemm, Copy, Collective, Optimizer };

/// The type of an instruction attribute. Int holds booleans as 0/1; the
/// enum kinds hold the name of one case of the dialect enum of that name.
enum class AttrKind {
  Int,
  Float,
  String,
  GeluApproximation,
  LrScheduleKind,
  WarmupType,
  ReduceKind,
  MeshAxis,
  RopeScaling,
  BlockLayout, ///< a BlockLayout; an op without #dsc.block_layout has none
};

struct AttrSpec {
  const char *name;
  AttrKind kind;
};

/// One row of Ops.def, with what its family implies.
struct OpInfo {
  Opcode op;
  const char *name;   ///< "LayerNorm"
  const char *mlirOp; ///< "layer_norm" (the dsc op), "" if none
  OpFamily family;
  KernelFamily kernels; ///< of the family (KernelOpcodes.h)
  OpRoute route;        ///< of the family (opRouteOf)
  int minIns, maxIns, minOuts, maxOuts; ///< max kAnyCount: unbounded
  std::vector<AttrSpec> attrs;
};

const OpInfo &opInfo(Opcode op);

/// The collectives overlap_comm runs beside the compute (CPU ranks: on the
/// communication thread; CUDA: on the comm lane): the bulk transfers. The
/// vocabulary-parallel ops, the norm, tensor slicing's reduce and the
/// pipeline transfers are waited for where they stand.
bool runsBesideCompute(Opcode op);
/// Every opcode's row, in Opcode order.
const std::vector<OpInfo> &allOps();

const char *opcodeName(Opcode op);

/// A block-sparse attention layout (#dsc.block_layout, whose description
/// says what it means): query block i of layout head h attends to the key
/// blocks cols[rows[h * blocks + i]] .. cols[rows[h * blocks + i + 1]] - 1.
/// `blocks` 0: no layout (dense attention).
struct BlockLayout {
  int64_t block = 0, heads = 0, blocks = 0;
  std::vector<int32_t> rows, cols;

  bool empty() const { return blocks == 0; }
  int64_t tokens() const { return blocks * block; }
  /// The layout head of query head `bh` of B * H (heads is 1 or H).
  int64_t headOf(int64_t bh) const { return bh % heads; }
  /// The same layout with rows and columns swapped (compressed columns:
  /// for each key block, the query blocks that attend to it).
  BlockLayout transposed() const;
  /// Every block split into blocks of `block / factor` (the same mask at a
  /// finer grain; `factor` divides `block`). `causal`: without the fine
  /// blocks above the diagonal, which a causal mask hides whole.
  BlockLayout refined(int64_t factor, bool causal = false) const;
  /// The rows/cols invariants of #dsc.block_layout's verifier: empty when
  /// they hold, else what is wrong.
  std::string invalidReason() const;
  /// Whether no block lies above the diagonal (a valid layout's columns
  /// ascend, so each row's last is its rightmost).
  bool isBlockCausal() const;

  bool operator==(const BlockLayout &o) const {
    return block == o.block && heads == o.heads && blocks == o.blocks &&
           rows == o.rows && cols == o.cols;
  }
  bool operator!=(const BlockLayout &o) const { return !(*this == o); }
};

/// Attribute values carried by an instruction (from the dsc op's attributes).
using AttrValue = std::variant<int64_t, double, std::string, BlockLayout>;

struct Instr {
  Opcode op;
  std::vector<int> inputs;  ///< buffer ids
  std::vector<int> outputs; ///< buffer ids (may equal an input: in place)
  std::map<std::string, AttrValue> attrs;
  /// Provenance, for memory reports: the transformer layer of the op
  /// (`dsc.layer`, -1 outside layers) and whether autodiff built it (`dsc.grad`).
  int layer = -1;
  bool backward = false;
  /// ZeRO-Offload: runs on the host over host buffers (dsc.host); ToHost
  /// and ToDevice move a buffer between the two memories.
  bool host = false;

  int64_t getInt(const std::string &name) const;
  double getFloat(const std::string &name) const; ///< accepts int too
  const std::string &getString(const std::string &name) const;
  const BlockLayout &getLayout(const std::string &name) const;
  bool has(const std::string &name) const { return attrs.count(name) != 0; }
};

/// One entry point of the step (micro_step, apply_step).
struct Function {
  std::string name;
  std::vector<Instr> body;
};

/// A mesh axis (#dsc<axis ...>): the group of ranks a collective spans.
/// DataInner and DataOuter split the data axis (Mesh::dataInner).
enum class MeshAxis { Data, Tensor, Pipeline, DataInner, DataOuter };
/// Every axis, in enum order (MeshGroups builds a group for each).
constexpr MeshAxis kMeshAxes[] = {MeshAxis::Data, MeshAxis::Tensor,
                                  MeshAxis::Pipeline, MeshAxis::DataInner,
                                  MeshAxis::DataOuter};
/// "data" -> MeshAxis::Data, ...; an error for another name.
MeshAxis meshAxisNamed(const std::string &name);
const char *meshAxisName(MeshAxis axis);

/// The device mesh of a job (the module's dsc.mesh): data x tensor x
/// pipeline ranks. A rank's coordinates vary tensor fastest, then data,
/// then pipeline (Megatron's order): a tensor group is consecutive ranks,
/// which launchers place on one node, and pipeline stages are farthest
/// apart. The data axis splits into groups of `dataInner` consecutive data
/// ranks (dsc.mesh_data_inner): DataInner spans a rank's group, DataOuter
/// the ranks at its position in every group.
struct Mesh {
  int64_t data = 1, tensor = 1, pipeline = 1, dataInner = 1;

  int64_t size() const { return data * tensor * pipeline; }
  bool operator==(const Mesh &o) const {
    return data == o.data && tensor == o.tensor && pipeline == o.pipeline &&
           dataInner == o.dataInner;
  }
  bool operator!=(const Mesh &o) const { return !(*this == o); }
  int64_t groupSize(MeshAxis axis) const;
  /// Rank `rank`'s coordinate along `axis`, in [0, groupSize(axis)).
  int64_t coordinate(int64_t rank, MeshAxis axis) const;
  /// The rank with coordinate `c` along `axis` and `rank`'s other
  /// coordinates (`c` taken modulo the group size: peers wrap around).
  int64_t rankAlong(int64_t rank, MeshAxis axis, int64_t c) const;
};

/// Stream offset of tensor rank t in drawTensorParallelStreamsPerRank.
constexpr int64_t kTensorRankStreamStride = int64_t(1) << 24;

struct Program;
/// Megatron's model-parallel RNG: a dropout inside a tensor-sliced region
/// acts on this rank's heads or features, so rank t draws its masks from
/// stream s + t * kTensorRankStreamStride instead of s (the masks of rank
/// 0 are the one-rank run's stream; replicated regions keep theirs, so
/// every rank drops the same elements there). Rewrites the `stream`
/// attribute of every instruction with a stream in
/// Program::tensorParallelStreams (the forward op, its recomputation and
/// its gradient alike).
void drawTensorParallelStreamsPerRank(Program &program, int64_t tensorRank);

/// Expert parallelism (dsc.expert_params, dsc.experts_per_rank): the
/// compiled step names local expert j's buffers as expert j's (`experts.j.`
/// in the name); group rank `expertRank` of the data_inner axis holds
/// experts expertRank * experts_per_rank + j. Renames them so and marks
/// them Buffer::expertShard; nothing to do without expert parallelism.
void placeExpertShards(Program &program, int64_t expertRank);
/// `name` with the expert index of its last `experts.<i>.` replaced by
/// `expert`; an error when it has none.
std::string withExpertIndex(const std::string &name, int64_t expert);
/// The expert index of `name`'s last `experts.<i>.`; -1 when none.
int64_t expertIndexOf(const std::string &name);

struct Program {
  std::vector<Buffer> buffers;
  std::map<std::string, Function> functions;
  /// Module-level facts the driver needs: micro_batch, seq_len,
  /// grad_accum, vocab_size, model_type, seed, ...
  std::map<std::string, AttrValue> meta;
  /// Bytes of the static arena holding every buffer at its Buffer::offset;
  /// -1 when the program has no memory plan (one allocation per buffer).
  int64_t arenaBytes = -1;
  /// Bytes of the host arena holding the host buffers (Buffer::host) when
  /// the program has a memory plan; 0 without host buffers.
  int64_t hostArenaBytes = 0;
  /// Bytes of the NVMe swap file holding the nvme buffers (Buffer::nvme);
  /// 0 without them. The file goes in the directory meta "nvme_path".
  int64_t nvmeBytes = 0;
  /// The Philox streams of dropouts inside tensor-sliced regions
  /// (dsc.tensor_parallel_streams): each tensor rank draws its own masks
  /// there (see drawTensorParallelStreamsPerRank).
  std::vector<int64_t> tensorParallelStreams;

  int findBuffer(BufferRole role, const std::string &name) const; ///< -1 if none
  /// The buffers that live across steps (parameters, gradient accumulators,
  /// optimizer state): what a device backend must hold from the start.
  std::vector<int> persistentBuffers() const;
  /// The integer module attribute `dsc.<key>`: `dflt` when it is absent (an
  /// error if there is no default), an error naming the key when it is not an
  /// integer or is below `min`.
  int64_t metaInt(const std::string &key,
                  std::optional<int64_t> dflt = std::nullopt,
                  int64_t min = std::numeric_limits<int64_t>::min()) const;
  /// The string module attribute `dsc.<key>`: `dflt` when it is absent
  /// (an error if there is no default), an error naming the key when it is
  /// not a string.
  std::string metaString(const std::string &key,
                         std::optional<std::string> dflt = std::nullopt) const;
  const Function &function(const std::string &name) const;
  /// The mesh the step was compiled for: dsc.mesh_{data,tensor,pipeline}
  /// and dsc.mesh_data_inner, or world_size ranks of data parallelism when
  /// only that is given (1 without either). An error when the axes do not
  /// multiply to world_size or the split does not divide the data axis.
  Mesh mesh() const;
  /// The axis ZeRO's shards divide tensors over (dsc.zero_axis, which
  /// -dsc-zero writes for hybrid sharding): Data without it.
  MeshAxis zeroAxis() const;
};

/// How a collective reduction combines the ranks' values (the `op` of
/// all_reduce).
enum class ReduceOp { Sum, Mean, Max };

/// Every runtime failure (bad file, bad program, bad shapes) is a
/// dsc::Error with a one-line message.
using Error = dsc::Error;

} // namespace dsc::rt

#endif // DSC_PROGRAM_PROGRAM_H
