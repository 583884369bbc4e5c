//===- InstrCheck.h - Operand checks of one instruction ---------*- C++ -*-===//
//
// checkInstr validates what every backend must agree on before it runs or
// compiles an instruction: operand counts and attributes as Ops.def states
// them, buffer ids, element counts, ranks, shape agreement and attribute
// ranges. It returns the sizes the
// kernels run over. What is a backend's own stays there: the CPU backend
// checks dtypes as it takes typed pointers, the CUDA emitter checks storage
// types and aliasing after buffer folding.
//
// Every error is an rt::Error whose message starts with the opcode name.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_INSTRCHECK_H
#define DSC_PROGRAM_INSTRCHECK_H

#include "dsc/Program/FourBitLayout.h"
#include "dsc/Program/Program.h"

#include <cstdint>
#include <vector>

namespace dsc::rt {

/// An LrSchedule's attributes (every one is on the instruction; their
/// defaults are DeepSpeed's, applied where the config is read).
struct LrScheduleAttrs {
  /// In the order the CUDA device library numbers them.
  enum Kind { Constant, WarmupLR, WarmupDecayLR, WarmupCosineLR };
  Kind kind = Constant;
  bool logWarmup = true; ///< warmup_type "log", else "linear"
  double lr = 0, warmupMinLr = 0, warmupMaxLr = 0;
  int64_t warmupNumSteps = 0, totalNumSteps = 0;
  double warmupMinRatio = 0, cosMinRatio = 0;
};

/// The sizes of a checked instruction. Only the fields its opcode family
/// uses are set; the others keep their defaults.
struct InstrDims {
  /// Elements of the main operand (elementwise ops, optimizers, copies).
  int64_t n = 0;
  /// The main operand as [rows, cols]: cols is its last dim (C of a norm,
  /// the bias width, V of the logits, Tk of the scores).
  int64_t rows = 0, cols = 0;
  /// Embedding(Grad): the table's rows (its cols are `cols`, the ids `rows`).
  /// CrossEntropy(Grad, WithGrad): the classes, a row's first `vocab` of
  /// its `cols` logits (the rest pad the vocabulary).
  int64_t vocab = 0;
  /// Softmax: the query length, the scores' second-to-last dim (1 if none).
  int64_t tq = 1;
  /// GEMMs. BatchMatmul: [batch, M, K] @ [batch, K, N]. Linear family:
  /// x [M, K], weight [K, N] ([N, K] when transposed), y [M, N].
  int64_t batch = 1, M = 0, K = 0, N = 0;
  bool transA = false, transB = false, transW = false;
  /// FourBitLinear: the weight's code book and the layout of its bytes
  /// (its elements are [K, N], or [N, K] when transW).
  quant::FourBitFormat fourBitFormat = quant::FourBitFormat::NF4;
  quant::FourBitLayout fourBit;
  /// SplitHeads / BiasSplitHeads / MergeHeads: [B, T, parts*H*D] and
  /// `parts` head tensors [B, H, T, D]. Attention: q [B, H, T, D], BH = B*H.
  int64_t B = 0, T = 0, H = 0, D = 0, BH = 0, parts = 0;
  /// Attention: query heads per key/value head (k, v are [B, H/groups, T,
  /// D]). Rotary: x [B, H, T, D]. RepeatKv(Grad): the key/value heads
  /// [B, H, T, D] and the copies of each.
  int64_t groups = 1;
  /// Concat / Split: the whole tensor as [outer, sum(widths), inner].
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> widths;
  /// Softmax / SoftmaxDropout / Attention(Grad): the input holding the key
  /// padding mask ([B, Tk] i32, 0: padding), or -1 without one. Softmax:
  /// its B is `B`.
  int keyMaskInput = -1;
  /// Dropout rate, checked to be in [0, 1) (0 for ops without one).
  double rate = 0.0;
  /// Gelu family: the tanh form (anything but "erf").
  bool tanh = false;
  /// Compression family: a compressed tensor of `cols` elements (P) in
  /// `rows` chunks (G; OnebitCompress: 1); `n` is OnebitCompress's input
  /// elements, EmaUpdate's and FrozenAdam's tensor elements.
  /// Quantize/DequantizeInt8, QuantizeInt4: `n` elements in `rows` blocks
  /// of `cols`. DequantizeReduceInt4: `rows` chunks (G) of `n` elements in
  /// blocks of `cols`, reduced by `reduce`.
  /// AllToAll: `n` elements per peer.
  /// AllReduce: its `op`.
  ReduceOp reduce = ReduceOp::Sum;
  /// Collectives: the mesh axis whose group they span and that group's
  /// size. Broadcast: `n` elements, `peer` the group rank of the root;
  /// Send / Recv: `n` elements, `peer` the offset along the axis.
  MeshAxis axis = MeshAxis::Data;
  int64_t group = 1;
  int64_t peer = 0;
  /// Moe family: N tokens (`rows`) of width `cols`, `experts` experts and
  /// `topK` chosen per token; GroupedLinear(GradWeight) also sets the
  /// linear family's M (rows), K, N and transW (one expert's matrix).
  /// MoeBalanceLoss(Grad): `parts` layer loads. MoeExchangeCounts: `n`
  /// experts per rank of the group; MoeExchange: `rows` rows in, `M` out,
  /// of width `cols`, `n` the input's elements.
  int64_t experts = 0, topK = 0;
  /// LrSchedule: its attributes, checked (kind, warmup type, and a cosine
  /// decay that has steps to run).
  LrScheduleAttrs schedule;
};

/// Checks `I` against the buffers of `P`; throws rt::Error ("<Opcode>:
/// ...") on the first problem.
InstrDims checkInstr(const Program &P, const Instr &I);

/// ZeRO-Offload: why `I` reads or writes a buffer in the wrong memory (an
/// instruction works in the memory it runs in, Instr::host; ToHost and
/// ToDevice copy from the device to the host and back); empty when it
/// does not. checkInstr throws it.
std::string memorySpaceError(const Program &P, const Instr &I);

} // namespace dsc::rt

#endif // DSC_PROGRAM_INSTRCHECK_H
