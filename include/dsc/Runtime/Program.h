//===- Program.h - The plain step description the runtime executes -*- C++ -*-===//
//
// The compiler (lib/Codegen) lowers the dsc module to a Program: a list of
// buffers and, per entry function, a list of instructions over buffer ids.
// The runtime executes Programs and links no MLIR, so it can be embedded and
// tested alone. Every opcode below mirrors one dsc dialect op; its semantics
// are those of the op (see include/dsc/Dialect/DscOps.td).
//
// Layout conventions: tensors are dense, row-major, fp32 unless the buffer's
// dtype says otherwise (i32 for token ids and labels, i64 for the step).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_PROGRAM_H
#define DSC_RUNTIME_PROGRAM_H

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace dsc::rt {

enum class DType { F32, I32, I64 };

size_t dtypeSize(DType t);
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

enum class InitKind { None, Zeros, Ones, Normal };

struct Buffer {
  std::string name; ///< e.g. "transformer.h.0.ln_1.weight", "exp_avg/<param>"
  BufferRole role = BufferRole::Temp;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  InitKind init = InitKind::None; ///< only for Param
  double initStd = 0.0;           ///< only for InitKind::Normal
  /// Byte offset in the program's arena when it has a memory plan
  /// (Program::arenaBytes >= 0, see include/dsc/Codegen/MemoryPlan.h); -1
  /// when the buffer is allocated on its own.
  int64_t offset = -1;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return size_t(numElements()) * dtypeSize(dtype); }
};

enum class Opcode {
  // Forward.
  Fill,           ///< out[...] = attr "value" (f32 or i32 buffer)
  Iota,           ///< out[i] = start + i * step (i32)
  Embedding,      ///< in: table[V,C], ids[...]; out[..., C] = table[ids]
  Add,            ///< in: a, b (b broadcast numpy-style to a's shape); out = a+b
  Linear,         ///< in: x[...,K], w[K,N] (or [N,K] if transpose_w), [bias[N]]
  LayerNorm,      ///< in: x[...,C], gamma[C], beta[C]; attr epsilon
  InvertibleLayerNorm, ///< LayerNorm with a second output: rstd[...] (1/std)
  Gelu,           ///< in: x; attr approximation = "tanh" | "erf"
  Dropout,        ///< in: x; attrs rate, stream; Philox mask, scale 1/(1-rate)
  BiasGelu,       ///< in: x[...,N], bias[N]; attr approximation: gelu(x+b)
  BiasDropoutAdd, ///< in: x[...,N], bias[N], res; attrs rate, stream:
                  ///< res + dropout(x + b) with Dropout's mask
  BiasDropoutAddLayerNorm, ///< in: x[...,C], bias[C], res, gamma[C], beta[C];
                           ///< attrs rate, stream, epsilon; outs: sum =
                           ///< BiasDropoutAdd(x, bias, res), LayerNorm(sum),
                           ///< rstd[...] (as InvertibleLayerNorm)
  SplitHeads,     ///< in: x[B,T,P*H*D]; outs: P tensors [B,H,T,D]; attr num_heads
  MergeHeads,     ///< ins: P tensors [B,H,T,D]; out: [B,T,P*H*D]
  BiasSplitHeads, ///< in: x[B,T,P*H*D], bias[P*H*D]; outs: P x [B,H,T,D] of
                  ///< x + bias; attr num_heads
  Concat,         ///< ins: pieces; out: their concatenation along attr axis
  Split,          ///< in: x; outs: pieces along attr axis (sizes from outs)
  BatchMatmul,    ///< in: a, b (rank>=3, same batch dims); attrs transpose_a,
                  ///< transpose_b, alpha: out = alpha * op(a) @ op(b)
  Softmax,        ///< in: x[..., Tq, Tk]; attrs scale, causal: softmax over the
                  ///< last dim of scale*x with keys j > i + (Tk-Tq) masked out
  SoftmaxDropout, ///< in: scores; attrs scale, causal, rate, stream; outs:
                  ///< dropout(softmax), softmax (Dropout's mask)
  Attention,      ///< in: q, k, v [B,H,T,D]; attrs scale, causal, rate,
                  ///< stream; outs: out [B,H,T,D] = SoftmaxDropout(scores)
                  ///< @ v (its mask over the [B,H,T,T] probabilities),
                  ///< lse [B,H,T] of the scaled, masked scores
  CrossEntropy,   ///< in: logits[..., V], labels[...] (i32); attr ignore_index;
                  ///< out: scalar mean NLL over labels != ignore_index
  MlmMask,        ///< in: ids[...]; outs: inputs, labels; attrs mask_prob,
                  ///< mask_token_id, vocab_size, stream (80/10/10 rule)
  // Backward.
  ReduceTo,       ///< in: x; out: sum of x over the dims broadcast by Add
  EmbeddingGrad,  ///< in: ids[...], dy[...,C]; out: dtable[V,C] (scatter-add)
  LinearGradInput,  ///< in: dy[...,N], w; attr transpose_w; out: dx[...,K]
  LinearGradWeight, ///< in: x[...,K], dy[...,N]; attr transpose_w; out: dw
  LayerNormGrad,  ///< in: dy, x, gamma, [dres]; attr epsilon; outs: dx,
                  ///< dgamma, dbeta (dx includes the optional dres)
  LayerNormGradFromOutput, ///< in: dy, y, gamma, beta, rstd, [dres]; outs:
                           ///< dx, dgamma, dbeta (x_hat = (y - beta) / gamma;
                           ///< dx includes the optional dres)
  GeluGrad,       ///< in: dy, x; attr approximation; out: dx
  BiasGeluGrad,   ///< in: dy, x, bias; attr approximation; outs: dx, dbias
  DropoutBiasGrad, ///< in: dy; attrs rate, stream; outs: dropout(dy), its
                   ///< sum over rows
  SoftmaxGrad,    ///< in: dy, y; attr scale; out: dx = scale*y*(dy-sum(dy*y))
  SoftmaxDropoutGrad, ///< in: dy, probs, dropped; attrs scale, rate: the mask is
                      ///< dropped != 0 (see the TD);
                      ///< SoftmaxGrad(Dropout(dy), probs)
  AttentionGrad,  ///< in: dout, q, k, v, out, lse; Attention's attrs; outs:
                  ///< dq, dk, dv (probabilities recomputed from the lse)
  CrossEntropyGrad, ///< in: dloss (scalar), logits, labels; attr ignore_index
  // Training step.
  Copy,           ///< out = in
  GlobalNorm,     ///< ins: any number of tensors; out: scalar sqrt(sum x^2)
  ClipCoefficient, ///< in: norm; attr max_norm; out: min(1, max_norm/(norm+1e-6))
  LrSchedule,     ///< in: step (i64 scalar); attrs: see LrSchedule in the TD
  Adam,           ///< ins: p, g, m, v, lr, step, gscale; outs: p, m, v
  Lamb,           ///< ins: p, g, m, v, lr, step, gscale; outs: p, m, v
  Sgd,            ///< ins: p, g, buf, lr, step, gscale; outs: p, buf
  AllReduce,      ///< in: x; out: reduction over the communicator; attr op
  // Mixed precision (optimizer ops take an optional 8th/7th input: skip).
  RoundToHalf,    ///< in: x; out: x rounded to attr format "f16" | "bf16"
  CheckFinite,    ///< ins: tensors; out: 1.0 if any inf/NaN, else 0.0
  LossScale,      ///< in: scaler state[3]; out: scale * attr multiplier
  UnscaleClip,    ///< ins: scaled norm, scale; attr max_norm; outs: gscale, norm
  UpdateLossScale, ///< ins: state[3], overflow; out: next state (see TD)
};

const char *opcodeName(Opcode op);

/// Attribute values carried by an instruction (from the dsc op's attributes).
using AttrValue = std::variant<int64_t, double, std::string>;

struct Instr {
  Opcode op;
  std::vector<int> inputs;  ///< buffer ids
  std::vector<int> outputs; ///< buffer ids (may equal an input: in place)
  std::map<std::string, AttrValue> attrs;
  /// Provenance, for memory reports: the transformer layer of the op
  /// (`dsc.layer`, -1 outside layers) and whether autodiff built it (`dsc.grad`).
  int layer = -1;
  bool backward = false;

  int64_t getInt(const std::string &name) const;
  double getFloat(const std::string &name) const; ///< accepts int too
  const std::string &getString(const std::string &name) const;
  bool has(const std::string &name) const { return attrs.count(name) != 0; }
};

/// One entry point of the step (micro_step, apply_step).
struct Function {
  std::string name;
  std::vector<Instr> body;
};

struct Program {
  std::vector<Buffer> buffers;
  std::map<std::string, Function> functions;
  /// Module-level facts the driver needs: micro_batch, seq_len,
  /// grad_accum, vocab_size, model_type, seed, ...
  std::map<std::string, AttrValue> meta;
  /// Bytes of the static arena holding every buffer at its Buffer::offset;
  /// -1 when the program has no memory plan (one allocation per buffer).
  int64_t arenaBytes = -1;

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
  const Function &function(const std::string &name) const;
};

/// Every runtime failure (bad file, bad program, bad shapes) is an Error with a
/// one-line message; the tools print it and exit non-zero.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_PROGRAM_H
