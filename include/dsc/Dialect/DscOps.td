//===- DscOps.td - dsc operations --------------------------*- tablegen -*-===//
//
// Tensor-level ops of the training graph. Every op has value semantics on
// builtin ranked tensors; shape rules are checked by verifiers implemented as
// free functions in lib/Dialect/DscOps.cpp, and every differentiable op
// implements GradientOpInterface (lib/Dialect/GradientRules.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_OPS
#define DSC_OPS

include "dsc/Dialect/DscDialect.td"
include "dsc/Dialect/DscAttrs.td"
include "dsc/Dialect/DscInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

/// Every op computes in f32 and stores each result in its element type; one
/// op may mix f32 with one 16-bit format (a half activation times a half
/// weight plus an f32 bias), never f16 with bf16.
def Dsc_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Dsc_IdTensor : RankedTensorOf<[I32]>;
def Dsc_Scalar : 0DTensorOf<[F32]>;
def Dsc_StepScalar : 0DTensorOf<[I64]>;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

/// No op mixes f16 with bf16 (DscTraits.h).
def Dsc_OneHalfFormat : NativeOpTrait<"OneHalfFormat"> {
  let cppNamespace = "::mlir::dsc";
}

/// An op with effects of its own (none is pure by default).
class Dsc_EffectfulOp<string mnemonic, list<Trait> traits = []>
    : Op<Dsc_Dialect, mnemonic, !listconcat(traits, [Dsc_OneHalfFormat])> {
  // An op verifies its shapes through a free function in DscOps.cpp, unless
  // its ODS constraints state them (hasVerifier = 0: the norm family).
  let hasVerifier = 1;
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

/// A pure function of its operands: CSE may merge two, DCE may drop one.
class Dsc_Op<string mnemonic, list<Trait> traits = []>
    : Dsc_EffectfulOp<mnemonic, !listconcat(traits, [Pure])>;

/// What the ranks of a process group exchange. A collective reads and writes
/// it, so CSE never merges two collectives and DCE never drops one whose
/// result is unused: every rank must issue the same collectives in the same
/// order.
def Dsc_CommunicatorResource
    : Resource<"::mlir::dsc::CommunicatorResource">;
def Dsc_Collective : MemoryEffects<[MemRead<Dsc_CommunicatorResource>,
                                    MemWrite<Dsc_CommunicatorResource>]>;

/// An op that applies dropout (rate, stream): see StochasticOpInterface.
def Dsc_Stochastic : DeclareOpInterfaceMethods<Dsc_StochasticOpInterface>;
def Dsc_DropoutReplacedInEvaluation
    : DeclareOpInterfaceMethods<Dsc_StochasticOpInterface, ["disableDropout"]>;

/// A per-parameter optimizer update: see OptimizerOpInterface.
def Dsc_Optimizer : DeclareOpInterfaceMethods<Dsc_OptimizerOpInterface>;

/// CostOpInterface for an op that spends `flops` operations per element of
/// its first operand (`basis` "FirstOperand") or of its results ("Results");
/// `cheap`: -dsc-remat recomputes it by default. Contractions (linear,
/// batch_matmul, attention) have C++ models in lib/Dialect/CostModel.cpp.
class Dsc_ElementwiseCostImpl<string params>
    : ParamNativeOpTrait<"ElementwiseCost", params> {
  let cppNamespace = "::mlir::dsc";
}
class Dsc_ElementwiseCost<int flops, string basis, bit cheap>
    : TraitList<[Dsc_CostOpInterface,
                 Dsc_ElementwiseCostImpl<flops # ", ::mlir::dsc::CostBasis::" #
                                         basis # ", " #
                                         !if(cheap, "true", "false")>]>;

/// FLOPs per element of the elementwise ops (a multiply-add counts 2).
defvar kAddFlops = 1;
defvar kDropoutFlops = 2;   // compare the Philox draw, scale
defvar kGeluFlops = 10;     // tanh or erf polynomial
defvar kSoftmaxFlops = 5;   // scale, max, exp, sum, divide
defvar kLayerNormFlops = 8;
defvar kRmsNormFlops = 5;   // square, sum, scale, weight
defvar kCrossEntropyFlops = 5;
defvar kMaskFlops = 4;
defvar kSiluFlops = 5;      // exp, add, divide, multiply
defvar kRotaryFlops = 6;    // sin, cos, two multiply-adds

/// Shape rules of the norm family (ops normalising the last dimension of a
/// [..., C] tensor `rows`), stated as constraints (DscTraits.h predicates).
class Dsc_PerFeature<string value, string rows>
    : PredOpTrait<value # " has one element per feature: [C] for " # rows #
                  " [..., C]",
                  CPred<"::mlir::dsc::isPerFeature($" # value # ", $" # rows #
                        ")">>;
class Dsc_PerRow<string value, string rows>
    : PredOpTrait<value # " has one element per row: [...] for " # rows #
                  " [..., C]",
                  CPred<"::mlir::dsc::isPerRow($" # value # ", $" # rows #
                        ")">>;
/// `value` is optional: `getter` reads it (ODS's $name would dereference an
/// absent operand).
class Dsc_OptionalShapedLike<string value, string getter, string rows>
    : PredOpTrait<value # ", when present, has the shape of " # rows,
                  CPred<"::mlir::dsc::isAbsentOrShapedLike(this->" # getter #
                        "(), $" # rows # ")">>;
def Dsc_PositiveFloat : AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0">,
    "whose value is positive">;
def Dsc_Epsilon : ConfinedAttr<F64Attr, [Dsc_PositiveFloat]>;

/// An op that `-dsc-autodiff` differentiates through.
class Dsc_DiffOp<string mnemonic, list<Trait> traits = []>
    : Dsc_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Dsc_GradientOpInterface>])>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Dsc_FillOp : Dsc_Op<"fill", [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "A tensor with every element equal to `value`";
  let description = [{
    `%z = dsc.fill {value = 0.0 : f64} : () -> tensor<4x8xf32>`. Integer
    result types get the value truncated towards zero.
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_IotaOp : Dsc_Op<"iota", [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "Position ids: result[i] = start + i * step";
  let description = [{
    `dsc.iota {start = 0, step = 1} : () -> tensor<16xi32>` gives GPT-2's
    position ids; `step = 0` gives BERT's all-zero token-type ids.
  }];
  let arguments = (ins DefaultValuedAttr<I64Attr, "0">:$start,
                       DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs RankedTensorOf<[I32]>:$result);
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Dsc_EmbeddingOp
    : Dsc_DiffOp<"embedding",
        [Dsc_ElementwiseCost<0, "Results", 0>]> {
  let summary = "Row gather: result[..., :] = table[ids[...], :]";
  let arguments = (ins Dsc_FloatTensor:$table, Dsc_IdTensor:$ids);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_AddOp
    : Dsc_DiffOp<"add",
        [Dsc_ElementwiseCost<kAddFlops, "Results", 1>]> {
  let summary = "Elementwise sum; `rhs` broadcasts to `lhs` numpy-style";
  let description = [{
    The result has the shape of `lhs`. `rhs` is right-aligned against `lhs`
    and each of its dimensions equals the matching one or is 1, e.g. position
    embeddings `tensor<16x64xf32>` added to token embeddings
    `tensor<2x16x64xf32>`.
  }];
  let arguments = (ins Dsc_FloatTensor:$lhs, Dsc_FloatTensor:$rhs);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_LinearOp : Dsc_DiffOp<"linear"> {
  let summary = "x @ W (+ bias) over the last dimension of x";
  let description = [{
    `x` is `[..., K]`. `weight` is `[K, N]` (GPT-2 `Conv1D` layout) or, with
    `transpose_w`, `[N, K]` (`nn.Linear` layout, and tied output embeddings).
    The optional `bias` is `[N]`. The result is `[..., N]`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$weight,
                       Optional<Dsc_FloatTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

/// A weight stored in 4 bits: the bytes of FourBitLayout
/// (include/dsc/Program/FourBitLayout.h).
def Dsc_FourBitWeight : 1DTensorOf<[UI8]>;

def Dsc_Linear4bitOp : Dsc_DiffOp<"linear_4bit"> {
  let summary = "x @ W with W stored in 4 bits (QLoRA's frozen weights)";
  let description = [{
    `dsc.linear` without a bias over a weight of `rows` x `cols` elements
    stored as 4-bit codes (`format` `"nf4"` or `"fp4"`, bitsandbytes' code
    books) with one absmax per `block_size` elements of the row-major
    weight, the absmaxes themselves quantized to 8 bits in blocks of 256
    with `double_quant`: one `ui8` tensor whose bytes are laid out as
    `include/dsc/Program/FourBitLayout.h` says. `transpose_w` as for
    `dsc.linear` (`[N, K]`, `nn.Linear`'s layout). The kernels dequantize
    tiles of the weight as they load them: no full-precision copy of the
    weight is ever made. The weight is frozen: only `input` has a gradient
    (`dsc.linear_4bit_grad_input`).
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FourBitWeight:$weight,
                       StrAttr:$format, I64Attr:$rows, I64Attr:$cols,
                       I64Attr:$block_size, BoolAttr:$double_quant,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_LayerNormOp
    : Dsc_DiffOp<"layer_norm",
        [Dsc_ElementwiseCost<kLayerNormFlops, "FirstOperand", 0>,
         Dsc_PerFeature<"gamma", "input">,
         Dsc_PerFeature<"beta", "input">,
         AllShapesMatch<["input", "result"]>]> {
  let hasVerifier = 0;
  let summary = "LayerNorm over the last dimension (biased variance)";
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$gamma,
                       Dsc_FloatTensor:$beta, Dsc_Epsilon:$epsilon);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_RmsNormOp
    : Dsc_DiffOp<"rms_norm",
        [Dsc_ElementwiseCost<kRmsNormFlops, "FirstOperand", 0>,
         Dsc_PerFeature<"weight", "input">,
         AllShapesMatch<["input", "result"]>]> {
  let hasVerifier = 0;
  let summary = "RMSNorm over the last dimension (LLaMA)";
  let description = [{
    `y = x * rsqrt(mean(x^2) + epsilon) * weight` per row of the last
    dimension, computed in f32 as Hugging Face's LlamaRMSNorm does (no mean
    subtraction, no bias).
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$weight,
                       DefaultValuedAttr<Dsc_Epsilon, "1e-6">:$epsilon);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_AddRmsNormOp
    : Dsc_DiffOp<"add_rms_norm",
        [Dsc_ElementwiseCost<!add(kAddFlops, kRmsNormFlops),
                             "FirstOperand", 0>,
         Dsc_PerFeature<"weight", "input">,
         Dsc_PerRow<"rstd", "input">,
         AllShapesMatch<["input", "residual", "sum", "result"]>]> {
  let hasVerifier = 0;
  let summary = "Fused residual add, then RMSNorm";
  let description = [{
    `%sum, %y, %rstd = dsc.add_rms_norm %x, %res, %weight {epsilon}`
    computes `%sum = %x + %res` and `%y = rms_norm(%sum)` row by row in one
    pass, with `%rstd` the per-row `1 / sqrt(mean(sum^2) + epsilon)` (`[...]`
    for `[..., C]`). `%sum` is the residual stream (LLaMA's next block adds
    to it); `%rstd` lets `-dsc-invertible` take the RMSNorm backward from
    `%y`. Produced by `-dsc-fuse-residual-rms-norm`; its gradient is one
    `dsc.rms_norm_grad` that adds `%sum`'s other gradient into its input
    gradient, which is then both operands' gradient.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$residual,
                       Dsc_FloatTensor:$weight,
                       DefaultValuedAttr<Dsc_Epsilon, "1e-6">:$epsilon);
  let results = (outs Dsc_FloatTensor:$sum, Dsc_FloatTensor:$result,
                      Dsc_FloatTensor:$rstd);
}

def Dsc_RotaryOp
    : Dsc_DiffOp<"rotary",
        [Dsc_ElementwiseCost<kRotaryFlops, "Results", 1>]> {
  let summary = "Rotary position embedding of [B, H, T, D] heads (LLaMA)";
  let description = [{
    Hugging Face's half rotation: for i < D/2 and position t (the index in
    T), with angle a = t * f_i,
      y[i]       = x[i] cos a - x[i + D/2] sin a
      y[i + D/2] = x[i + D/2] cos a + x[i] sin a.
    The frequencies f_i = theta^(-2i/D) are stretched by `scaling`: linear
    divides them by `factor`; llama3 divides those whose wavelength exceeds
    original_max_positions / low_freq_factor by `factor`, keeps those below
    original_max_positions / high_freq_factor and blends in between
    (transformers' _compute_llama3_parameters). `inverse` rotates by -a,
    which is both the inverse and the gradient (a rotation's transpose).
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                       DefaultValuedAttr<Dsc_RopeScalingAttr,
                           "::mlir::dsc::RopeScaling::none">:$scaling,
                       DefaultValuedAttr<F64Attr, "1.0">:$factor,
                       DefaultValuedAttr<F64Attr, "1.0">:$low_freq_factor,
                       DefaultValuedAttr<F64Attr, "4.0">:$high_freq_factor,
                       DefaultValuedAttr<I64Attr, "8192">:$original_max_positions,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_RepeatKvOp
    : Dsc_DiffOp<"repeat_kv",
        [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "Grouped-query attention: each key/value head serves `groups` query heads";
  let description = [{
    `[B, KV, T, D] -> [B, KV * groups, T, D]`, head h reading head
    h / groups (Hugging Face's repeat_kv). `-dsc-fuse-attention` absorbs it:
    the fused kernels index the shared head instead of copying it. The
    gradient is `dsc.repeat_kv_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, I64Attr:$groups);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SiluOp
    : Dsc_DiffOp<"silu",
        [Dsc_ElementwiseCost<kSiluFlops, "Results", 1>]> {
  let summary = "SiLU (swish): x * sigmoid(x)";
  let arguments = (ins Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_MulOp
    : Dsc_DiffOp<"mul",
        [Dsc_ElementwiseCost<kAddFlops, "Results", 1>]> {
  let summary = "Elementwise product of two tensors of one shape";
  let arguments = (ins Dsc_FloatTensor:$lhs, Dsc_FloatTensor:$rhs);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_ScaleOp
    : Dsc_DiffOp<"scale",
        [Dsc_ElementwiseCost<kAddFlops, "Results", 1>]> {
  let summary = "Multiplies every element by a constant: input * factor";
  let description = [{
    `%y = dsc.scale %x {factor = 2.0 : f64}`: LoRA's alpha / r on the
    adapter's output (`-dsc-lora`). Its gradient is the same scaling of the
    incoming gradient.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Dsc_FloatTensor:$result);
}

defvar kSoftcapFlops = 4;   // divide, tanh, multiply (tanh counted as 2)

def Dsc_SoftcapOp
    : Dsc_DiffOp<"softcap",
        [Dsc_ElementwiseCost<kSoftcapFlops, "Results", 1>]> {
  let summary = "Soft-capping: cap * tanh(input / cap)";
  let description = [{
    `%y = dsc.softcap %x {cap = 50.0 : f64}`: Gemma 2's attention-logit and
    final-logit soft-capping (`attn_logit_softcapping`,
    `final_logit_softcapping`), which bounds |y| below `cap` (> 0). Its
    gradient, `dsc.softcap_grad`, reads the result: dy * (1 - (y / cap)^2).
  }];
  let arguments = (ins Dsc_FloatTensor:$input, F64Attr:$cap);
  let results = (outs Dsc_FloatTensor:$result);
}

defvar kSigmoidGateFlops = 5; // exp, add, divide for the sigmoid; a multiply

def Dsc_SigmoidGateOp
    : Dsc_DiffOp<"sigmoid_gate",
        [Dsc_ElementwiseCost<kSigmoidGateFlops, "Results", 1>]> {
  let summary = "A sigmoid gate per row: sigmoid(gate) * input";
  let description = [{
    `%y = dsc.sigmoid_gate %gate, %x : (tensor<4x1xf32>, tensor<4x8xf32>) ->
    tensor<4x8xf32>`: each row of `%x` (`[..., C]`) times the sigmoid of its
    one gate value (`%gate` `[..., 1]`): Qwen2-MoE's shared expert,
    `sigmoid(shared_expert_gate(h)) * shared_expert(h)`. Its gradient is
    `dsc.sigmoid_gate_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$gate, Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SwigluOp
    : Dsc_DiffOp<"swiglu",
        [Dsc_ElementwiseCost<!add(kSiluFlops, kAddFlops), "Results", 1>]> {
  let summary = "Fused SwiGLU gate: silu(gate) * up";
  let description = [{
    `dsc.mul (dsc.silu %gate), %up` in one pass (LLaMA's MLP), without the
    silu output as an intermediate. Produced by `-dsc-fuse-swiglu`; its
    gradient is one `dsc.swiglu_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$gate, Dsc_FloatTensor:$up);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_GeluOp
    : Dsc_DiffOp<"gelu",
        [Dsc_ElementwiseCost<kGeluFlops, "Results", 1>]> {
  let summary = "GELU, tanh approximation (gelu_new) or exact erf (gelu)";
  let arguments = (ins Dsc_FloatTensor:$input,
                       Dsc_GeluApproximation:$approximation);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $approximation $input attr-dict `:` type($input) `->` type($result)
  }];
}

def Dsc_DropoutOp
    : Dsc_DiffOp<"dropout",
        [Dsc_DropoutReplacedInEvaluation,
         Dsc_ElementwiseCost<kDropoutFlops, "Results", 1>]> {
  let summary = "Inverted dropout with a Philox mask";
  let description = [{
    Element i is kept iff the Philox draw for (seed, step offset, `stream`, i)
    is >= `rate`, and kept elements are scaled by 1/(1-rate). The mask is a
    pure function of those values, so the gradient is the same op applied to
    the incoming gradient, and a recomputed forward reproduces the mask.
    `stream` is unique per dropout site in a module.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, F64Attr:$rate, I64Attr:$stream);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SplitHeadsOp
    : Dsc_DiffOp<"split_heads",
        [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "[B, T, P*H*D] -> P tensors of [B, H, T, D]";
  let description = [{
    With one result this splits a projection into heads; with three it
    splits a fused QKV projection (GPT-2 `c_attn`) into Q, K and V.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, I64Attr:$num_heads);
  let results = (outs Variadic<Dsc_FloatTensor>:$parts);
}

def Dsc_MergeHeadsOp
    : Dsc_DiffOp<"merge_heads",
        [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "P tensors of [B, H, T, D] -> [B, T, P*H*D]";
  let arguments = (ins Variadic<Dsc_FloatTensor>:$parts);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_BatchMatmulOp : Dsc_DiffOp<"batch_matmul"> {
  let summary = "alpha * op(a) @ op(b) over equal leading batch dimensions";
  let arguments = (ins Dsc_FloatTensor:$lhs, Dsc_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SoftmaxOp
    : Dsc_DiffOp<"softmax",
        [Dsc_ElementwiseCost<kSoftmaxFlops, "Results", 0>]> {
  let summary = "Softmax of scale*x over the last dimension, optionally causal";
  let description = [{
    For `x : [..., Tq, Tk]` with `causal`, key j is masked for query i when
    j > i + (Tk - Tq); masked probabilities are exactly zero. With a
    block-sparse `layout` (`x : [..., H, T, T]`, T the layout's tokens),
    scores outside its blocks are masked as well: the dense reference of
    block-sparse `dsc.attention`. With a key padding mask `%key_mask :
    [B, Tk]` (i32, 0 where the key is padding; x is [B, ..., Tq, Tk]), key
    j of batch b is masked for every query of b; a row left with no key has
    all probabilities 0.
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       Optional<Dsc_IdTensor>:$key_mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       OptionalAttr<Dsc_BlockLayoutAttr>:$layout);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SoftmaxDropoutOp
    : Dsc_DiffOp<"softmax_dropout",
        [Dsc_Stochastic,
         Dsc_ElementwiseCost<!add(kSoftmaxFlops, kDropoutFlops),
                             "FirstOperand", 0>]> {
  let summary = "Fused scale + mask + softmax + dropout of attention scores";
  let description = [{
    `%dropped, %probs = dsc.softmax_dropout %scores {scale, causal, rate,
    stream}`: the `dsc.softmax` of the scores and the `dsc.dropout` of that
    (same Philox mask) in one pass per row. `%probs` is what the backward
    needs; its gradient is one `dsc.softmax_dropout_grad`. Produced by
    `-dsc-fuse-softmax-dropout`. `layout` and `%key_mask` mask as
    `dsc.softmax`'s do.
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       Optional<Dsc_IdTensor>:$key_mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       F64Attr:$rate, I64Attr:$stream,
                       OptionalAttr<Dsc_BlockLayoutAttr>:$layout);
  let results = (outs Dsc_FloatTensor:$result, Dsc_FloatTensor:$probs);
}

def Dsc_AttentionOp : Dsc_DiffOp<"attention", [Dsc_Stochastic]> {
  let summary = "Fused dense attention: dropout(softmax(scale * q k^T)) v";
  let description = [{
    `%out, %lse = dsc.attention %q, %k, %v {scale, causal, rate, stream}`
    with `%q, %k, %v, %out : [B, H, T, D]` and `%lse : [B, H, T]` is
    `dsc.batch_matmul` (q, k^T) -> `dsc.softmax_dropout` -> `dsc.batch_matmul`
    (with v) without materialising the [B, H, T, T] scores: keys are visited
    in tiles with an online softmax (FlashAttention). `%lse` is each row's
    log-sum-exp of the scaled, masked scores, so the backward recomputes the
    probabilities as exp(scale * q.k - lse). Scale, causal mask, rate and the
    Philox `stream` mean what they mean for `dsc.softmax_dropout`: the
    dropout mask element is the index in the [B, H, T, T] probabilities, so
    fused and unfused steps draw the same mask. `%lse` has no gradient and
    only `dsc.attention_grad` may read it. Produced by -dsc-fuse-attention;
    its gradient is one `dsc.attention_grad`. Grouped-query attention:
    `%k, %v : [B, KV, T, D]` with H a multiple of KV; query head h reads
    key/value head h / (H / KV), which is never copied. Block-sparse
    attention: with a `layout` (#dsc.block_layout, T its tokens, its heads
    1 or H, block-causal when `causal`), scores outside the layout's blocks
    are masked and the kernels visit only its blocks, so time and memory
    traffic scale with its nonzero blocks, not T^2. Key padding: with
    `%key_mask : [B, T]` (i32, 0 where key j of batch b is padding; from
    `dsc.padding_mask`), those keys are masked for every query and head; a
    query left with no key (a padding query under causal masking) gets
    output 0 and lse -inf, and no gradient.
  }];
  let arguments = (ins Dsc_FloatTensor:$q, Dsc_FloatTensor:$k,
                       Dsc_FloatTensor:$v,
                       Optional<Dsc_IdTensor>:$key_mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       F64Attr:$rate, I64Attr:$stream,
                       OptionalAttr<Dsc_BlockLayoutAttr>:$layout);
  let results = (outs Dsc_FloatTensor:$result, Dsc_FloatTensor:$lse);
}

def Dsc_CrossEntropyOp
    : Dsc_DiffOp<"cross_entropy",
        [Dsc_ElementwiseCost<kCrossEntropyFlops, "FirstOperand", 0>]> {
  let summary = "Mean negative log-likelihood of `labels` under softmax(logits)";
  let description = [{
    Positions whose label equals `ignore_index` do not count (BERT's
    unmasked positions). The result is a scalar. With `classes = K` (0:
    every column) only a row's first K logits are classes: the rest are a
    padded vocabulary's (-dsc-pad-vocabulary) and take no probability;
    labels must lie below K.
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IdTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs Dsc_Scalar:$loss);
}

def Dsc_MlmMaskOp
    : Dsc_Op<"mlm_mask",
        [Dsc_ElementwiseCost<kMaskFlops, "FirstOperand", 0>]> {
  let summary = "BERT masked-LM corruption with the 80/10/10 rule";
  let description = [{
    Each position is selected with probability `mask_prob`; a selected token
    becomes `mask_token_id` (80%), a uniformly random token (10%) or stays
    (10%), and its label is the original token; unselected positions get the
    label -100. All draws come from the Philox stream `stream`. Tokens equal
    to `pad_token_id` (when >= 0) are never selected, as Hugging Face's
    collator leaves special tokens alone; the draws of the others do not
    change.
  }];
  let arguments = (ins Dsc_IdTensor:$ids, F64Attr:$mask_prob,
                       I64Attr:$mask_token_id, I64Attr:$vocab_size,
                       I64Attr:$stream,
                       DefaultValuedAttr<I64Attr, "-1">:$pad_token_id);
  let results = (outs Dsc_IdTensor:$inputs, Dsc_IdTensor:$labels);
}

def Dsc_PaddingMaskOp
    : Dsc_Op<"padding_mask",
        [SameOperandsAndResultShape,
         Dsc_ElementwiseCost<1, "FirstOperand", 1>]> {
  let summary = "Key padding mask: 0 where a token is `pad_token_id`, else 1";
  let description = [{
    `%mask = dsc.padding_mask %ids {pad_token_id = P}` is Hugging Face's
    `attention_mask` of a batch of token ids [B, T]: the `%key_mask` of
    `dsc.attention` and of the attention softmaxes.
  }];
  let arguments = (ins Dsc_IdTensor:$ids, I64Attr:$pad_token_id);
  let results = (outs Dsc_IdTensor:$mask);
}

def Dsc_ConcatOp
    : Dsc_DiffOp<"concat", [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "Concatenation along `axis`";
  let description = [{
    `-dsc-fuse-qkv` concatenates BERT's query/key/value weights and biases so
    the three projections become one GEMM; the parameters keep their own
    Hugging Face names. The gradient is `dsc.split` of the result gradient.
  }];
  let arguments = (ins Variadic<Dsc_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SplitOp : Dsc_DiffOp<"split", [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "Split along `axis` into pieces of the result sizes";
  let arguments = (ins Dsc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Dsc_FloatTensor>:$pieces);
}

def Dsc_PackOp
    : Dsc_DiffOp<"pack", [Pure, Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "The inputs' elements one after another in one vector";
  let description = [{
    `%flat = dsc.pack %a, %b : (tensor<2x3xf32>, tensor<4xf32>) ->
    tensor<10xf32>`: each input in row-major order, in operand order (a
    flattening `dsc.concat`). With `chunks = C`, every input is C equal
    chunks and the result is C chunks, chunk j holding every input's chunk
    j in operand order: what a reduce-scatter over C ranks needs to give
    rank j its part of every input at once. `-dsc-bucket-collectives` packs
    gradients and shards into buckets so one collective moves them;
    `-dsc-pipeline-stage` packs the activations a stage boundary carries
    when there are several. The gradient is `dsc.unpack` of the result's.
  }];
  let arguments = (ins Variadic<Dsc_FloatTensor>:$inputs,
                       DefaultValuedAttr<I64Attr, "1">:$chunks);
  let results = (outs Dsc_FloatTensor:$result);
  let hasVerifier = 1;
}

def Dsc_UnpackOp
    : Dsc_DiffOp<"unpack", [Pure, Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "A vector cut into tensors of the result types, in order";
  let description = [{
    The inverse of `dsc.pack` with the same `chunks`: result k holds its
    numel(k) / C elements of each of the C chunks of `input`, in row-major
    order. The gradient is `dsc.pack` of the results' (zeros for a result
    without one).
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$chunks);
  let results = (outs Variadic<Dsc_FloatTensor>:$results);
  let hasVerifier = 1;
}

def Dsc_BiasSplitHeadsOp
    : Dsc_DiffOp<"bias_split_heads",
        [Dsc_ElementwiseCost<kAddFlops, "FirstOperand", 1>]> {
  let summary = "Fused QKV epilogue: add the bias and split into heads";
  let description = [{
    `%q, %k, %v = dsc.bias_split_heads %qkv, %bias {num_heads = H}` with
    `%qkv : [B, T, 3*H*D]`, `%bias : [3*H*D]` and results `[B, H, T, D]` is
    `dsc.split_heads (dsc.add %qkv, %bias)` in one pass: each element is read
    once, biased and written straight into its head-major position (DeepSpeed's
    bias+transpose kernel). Produced by `-dsc-fuse-qkv`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias,
                       I64Attr:$num_heads);
  let results = (outs Variadic<Dsc_FloatTensor>:$parts);
}

def Dsc_BiasGeluOp
    : Dsc_DiffOp<"bias_gelu",
        [Dsc_ElementwiseCost<!add(kAddFlops, kGeluFlops), "Results", 1>]> {
  let summary = "Fused bias + GELU: gelu(input + bias)";
  let description = [{
    `%y = dsc.bias_gelu tanh %h, %b` with `%h : [..., N]`, `%b : [N]`: one
    pass over the data instead of a biased GEMM epilogue followed by a GELU
    pass. Produced by `-dsc-fuse-bias-gelu`; its gradient is one
    `dsc.bias_gelu_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias,
                       Dsc_GeluApproximation:$approximation);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $approximation $input `,` $bias attr-dict `:` `(` type($input) `,`
    type($bias) `)` `->` type($result)
  }];
}

def Dsc_BiasDropoutAddOp
    : Dsc_DiffOp<"bias_dropout_add",
        [Dsc_Stochastic,
         Dsc_ElementwiseCost<!add(kAddFlops, kAddFlops, kDropoutFlops),
                             "Results", 1>]> {
  let summary = "Fused residual + dropout(input + bias)";
  let description = [{
    `%y = dsc.bias_dropout_add %h, %b, %res {rate, stream}` is
    `%res + dropout(%h + %b)` in one pass, with the same Philox mask as a
    `dsc.dropout` of that `stream` (rate 0: no dropout). Produced by
    `-dsc-fuse-bias-dropout-add`; its gradient passes the result gradient to
    the residual and computes the input and bias gradients in one
    `dsc.dropout_bias_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias,
                       Dsc_FloatTensor:$residual, F64Attr:$rate,
                       I64Attr:$stream);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_BiasDropoutAddLayerNormOp
    : Dsc_DiffOp<"bias_dropout_add_layer_norm",
        [Dsc_Stochastic,
         Dsc_ElementwiseCost<!add(kAddFlops, kAddFlops, kDropoutFlops,
                                  kLayerNormFlops),
                             "FirstOperand", 0>,
         Dsc_PerFeature<"bias", "input">,
         Dsc_PerFeature<"gamma", "input">,
         Dsc_PerFeature<"beta", "input">,
         Dsc_PerRow<"rstd", "input">,
         AllShapesMatch<["input", "residual", "sum", "result"]>]> {
  let hasVerifier = 0;
  let summary = "Fused residual + dropout(input + bias), then LayerNorm";
  let description = [{
    `%sum, %y, %rstd = dsc.bias_dropout_add_layer_norm %h, %b, %res, %gamma,
    %beta {rate, stream, epsilon}` computes `%sum = %res + dropout(%h + %b)`
    (the `dsc.bias_dropout_add` of that `stream`) and `%y =
    layer_norm(%sum)` row by row in one pass, with `%rstd` the per-row 1/std
    (`[...]` for `[..., C]`). `%sum` is the residual stream (GPT-2 adds the
    next block to it), `%rstd` lets `-dsc-invertible` take the LayerNorm
    backward from `%y`. Produced by `-dsc-fuse-residual-layer-norm`; its
    gradient is one `dsc.layer_norm_grad` that adds `%sum`'s other gradient
    into its input gradient, then one `dsc.dropout_bias_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias,
                       Dsc_FloatTensor:$residual, Dsc_FloatTensor:$gamma,
                       Dsc_FloatTensor:$beta, F64Attr:$rate, I64Attr:$stream,
                       Dsc_Epsilon:$epsilon);
  let results = (outs Dsc_FloatTensor:$sum, Dsc_FloatTensor:$result,
                      Dsc_FloatTensor:$rstd);
}

//===----------------------------------------------------------------------===//
// Mixture of experts (Mixtral)
//===----------------------------------------------------------------------===//
//
// A sparse MoE block on N tokens of width C with E experts, K per token
// (per-token tensors may keep leading dimensions, [B, T, C] for [N, C]):
//
//   %w, %e = dsc.moe_topk %router_logits {k = K}     [N, E] -> [N, K], [N, K]
//   %slots, %counts = dsc.moe_route %e {num_experts = E}
//   %rows = dsc.moe_dispatch %x, %slots               [N, C] -> [N*K, C]
//   %g = dsc.grouped_linear %rows, %w1, %counts {transpose_w = true}
//   ... the experts' MLPs on %rows, grouped by %counts ...
//   %y = dsc.moe_combine %out, %slots, %w             [N*K, C] -> [N, C]
//
// %rows holds expert 0's rows first, then expert 1's, ... (`counts[e]` rows
// each): the layout an all-to-all between the dispatch and the experts'
// GEMMs would exchange. No token is dropped: every one of the N*K
// assignments gets a row.

defvar kMoeTopkFlops = 8;   // softmax (5) plus the selection and renormalisation
defvar kMoeMoveFlops = 0;   // a row copy
defvar kMoeCombineFlops = 2; // a multiply-add per element and chosen expert

def Dsc_MoeTopkOp
    : Dsc_DiffOp<"moe_topk",
        [Dsc_ElementwiseCost<kMoeTopkFlops, "FirstOperand", 1>]> {
  let summary = "Router: the top-k experts of each token and their weights";
  let description = [{
    `%weights, %experts = dsc.moe_topk %logits {k = K}` on router logits
    `[..., E]` (one row per token): the softmax of each row (in f32), its K
    largest probabilities (`%experts`, i32, in descending order; of equal
    ones the lower expert first) and those probabilities divided by their
    sum (`%weights` `[..., K]`), as Mixtral's sparse MoE block routes. The
    renormalised weights are the softmax of the chosen logits alone, so the
    gradient (`dsc.moe_topk_grad`) reaches only the chosen logits. With
    `normalize = false` (Qwen2-MoE's `norm_topk_prob: false`) the weights
    are the probabilities themselves, and the gradient reaches every logit.
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, I64Attr:$k,
                       DefaultValuedAttr<BoolAttr, "true">:$normalize);
  let results = (outs Dsc_FloatTensor:$weights, Dsc_IdTensor:$experts);
}

def Dsc_MoeRouteOp
    : Dsc_Op<"moe_route", [Dsc_ElementwiseCost<1, "FirstOperand", 1>]> {
  let summary = "Expert-major row layout of the tokens' expert choices";
  let description = [{
    `%slots, %counts = dsc.moe_route %experts {num_experts = E}` on the
    `[..., K]` expert choices of N tokens: `%counts[e]` (`[E]`, i32) is the number of
    assignments to expert e, and `%slots[n, k]` the row that assignment
    (n, k) takes in an `[N*K, C]` expert-major layout: expert e's rows
    start at `counts[0] + ... + counts[e-1]`, ordered by n then k (a
    stable counting sort). Every choice must be in [0, E).
    With `capacity = Cap` > 0 (token dropping) an expert keeps at most Cap
    assignments, first choices first (k = 0 of every token in token order,
    then k = 1, ...); a dropped assignment's slot is -1 and its row is not
    counted, so the counts add up to at most N*K and the rows after them
    are padding. The ops that read slots skip -1 (no row, no
    contribution).
  }];
  let arguments = (ins Dsc_IdTensor:$experts, I64Attr:$num_experts,
                       DefaultValuedAttr<I64Attr, "0">:$capacity);
  let results = (outs Dsc_IdTensor:$slots, Dsc_IdTensor:$counts);
}

def Dsc_MoeDispatchOp
    : Dsc_DiffOp<"moe_dispatch",
        [Dsc_ElementwiseCost<kMoeMoveFlops, "Results", 1>]> {
  let summary = "Token rows copied to their experts' rows";
  let description = [{
    `%rows = dsc.moe_dispatch %x, %slots[, %weights]`: `rows[slots[n, k]] =
    x[n]` (times `weights[n, k]` when given) for the N tokens `%x` `[...,
    C]` and `%slots` `[..., K]` from `dsc.moe_route`; `%rows` is `[N*K,
    C]`. The adjoint of
    `dsc.moe_combine`: each is the other's gradient.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_IdTensor:$slots,
                       Optional<Dsc_FloatTensor>:$weights);
  let results = (outs Dsc_FloatTensor:$rows);
}

def Dsc_MoeCombineOp
    : Dsc_DiffOp<"moe_combine",
        [Dsc_ElementwiseCost<kMoeCombineFlops, "FirstOperand", 1>]> {
  let summary = "Each token's sum of its experts' rows, weighted";
  let description = [{
    `%y = dsc.moe_combine %rows, %slots[, %weights]`: `y[n] = sum_k
    weights[n, k] * rows[slots[n, k]]` (weight 1 when absent) for `%rows`
    `[N*K, C]` and `%slots` `[..., K]` (N tokens); `%y` is `[..., C]`. The sum over k runs
    in order k = 0, 1, ....
  }];
  let arguments = (ins Dsc_FloatTensor:$rows, Dsc_IdTensor:$slots,
                       Optional<Dsc_FloatTensor>:$weights);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_GroupedLinearOp : Dsc_DiffOp<"grouped_linear"> {
  let summary = "Expert-major rows times their experts' weights";
  let description = [{
    `%y = dsc.grouped_linear %rows, %weight, %counts {transpose_w}`: the
    first `counts[0]` rows of `%rows` `[S, K]` times expert 0's matrix, the
    next `counts[1]` times expert 1's, .... `%weight` stacks the E experts'
    matrices along dimension 0: `[E*K, N]`, or `[E*N, K]` with
    `transpose_w` (nn.Linear's `[out, in]` per expert, as Mixtral's
    `experts.{e}.w1.weight` concatenated). The result is `[S, N]`; the
    counts add up to at most S, and rows after theirs are padding (zero
    results, no gradient: expert parallelism's received rows). Expert e's
    rows are one GEMM.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$weight,
                       Dsc_IdTensor:$counts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_MoeLoadOp
    : Dsc_DiffOp<"moe_load",
        [Dsc_ElementwiseCost<kSoftmaxFlops, "FirstOperand", 1>]> {
  let summary = "One layer's expert load: choices and router probability sums";
  let description = [{
    `%load = dsc.moe_load %logits, %experts` for router logits `[..., E]`
    and the chosen experts `[..., K]` of N tokens: `%load` is `[2, E]` f32, row 0 the
    number of tokens that chose each expert (among their K), row 1 the sum
    over tokens of the softmax of the logits. Only row 1 has a gradient.
    `dsc.moe_balance_loss` turns the layers' loads into the auxiliary loss.
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IdTensor:$experts);
  let results = (outs Dsc_FloatTensor:$load);
}

def Dsc_MoeBalanceLossOp
    : Dsc_DiffOp<"moe_balance_loss",
        [Dsc_ElementwiseCost<2, "FirstOperand", 1>]> {
  let summary = "Switch-Transformer load-balancing loss over every MoE layer";
  let description = [{
    `%aux = dsc.moe_balance_loss %load_0, ..., %load_{L-1} {scale = s}`:
    with T the sum of the layers' `[2, E]` loads (`dsc.moe_load`), `%aux =
    s * sum_e T[0, e] * T[1, e]`. For L layers of N tokens, s = E /
    (L*N)^2 is transformers' `load_balancing_loss_func` (the fraction of
    assignments to each expert times its mean router probability, both over
    all layers' tokens, summed and times E); Mixtral adds it to the
    cross-entropy times `router_aux_loss_coef`, which the frontend folds
    into s. The gradient of every load is the same `[2, E]` tensor
    (`dsc.moe_balance_loss_grad`).
  }];
  let arguments = (ins Variadic<Dsc_FloatTensor>:$loads, F64Attr:$scale);
  let results = (outs Dsc_Scalar:$loss);
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

def Dsc_ReduceToOp : Dsc_Op<"reduce_to"> {
  let summary = "Sum over the dimensions that `dsc.add` broadcast";
  let arguments = (ins Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_EmbeddingGradOp : Dsc_Op<"embedding_grad"> {
  let summary = "Scatter-add of row gradients into a [V, C] table gradient";
  let arguments = (ins Dsc_IdTensor:$ids, Dsc_FloatTensor:$grad);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_LinearGradInputOp : Dsc_Op<"linear_grad_input"> {
  let summary = "dx = dy @ W^T for dsc.linear";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$weight,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_Linear4bitGradInputOp : Dsc_Op<"linear_4bit_grad_input"> {
  let summary = "dx = dy @ W^T for dsc.linear_4bit";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FourBitWeight:$weight,
                       StrAttr:$format, I64Attr:$rows, I64Attr:$cols,
                       I64Attr:$block_size, BoolAttr:$double_quant,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_LinearGradWeightOp : Dsc_Op<"linear_grad_weight"> {
  let summary = "dW = x^T @ dy for dsc.linear, in the weight's layout";
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$grad,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_LayerNormGradOp
    : Dsc_Op<"layer_norm_grad",
        [Dsc_PerFeature<"gamma", "input">,
         Dsc_PerFeature<"gamma_grad", "input">,
         Dsc_PerFeature<"beta_grad", "input">,
         Dsc_OptionalShapedLike<"residual_grad", "getResidualGrad", "input">,
         AllShapesMatch<["grad", "input", "input_grad"]>]> {
  let hasVerifier = 0;
  let summary = "Gradients of dsc.layer_norm w.r.t. input, gamma and beta";
  let description = [{
    With the optional `residual_grad` (the gradient reaching the LayerNorm
    input along a residual connection), the input gradient is the LayerNorm
    one plus `residual_grad`, added in the same pass.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$input,
                       Dsc_FloatTensor:$gamma,
                       Optional<Dsc_FloatTensor>:$residual_grad,
                       Dsc_Epsilon:$epsilon);
  let results = (outs Dsc_FloatTensor:$input_grad, Dsc_FloatTensor:$gamma_grad,
                      Dsc_FloatTensor:$beta_grad);
}

def Dsc_RmsNormGradOp
    : Dsc_Op<"rms_norm_grad",
        [Dsc_PerFeature<"weight", "input">,
         Dsc_PerFeature<"weight_grad", "input">,
         Dsc_OptionalShapedLike<"residual_grad", "getResidualGrad", "input">,
         AllShapesMatch<["grad", "input", "input_grad"]>]> {
  let hasVerifier = 0;
  let summary = "Gradients of dsc.rms_norm w.r.t. input and weight";
  let description = [{
    With `x_hat = x * rstd` and `g = grad * weight`:
    `input_grad = rstd * (g - x_hat * mean(g * x_hat))` per row and
    `weight_grad = sum over rows of grad * x_hat` (rstd recomputed from x).
    With the optional `residual_grad` (the gradient reaching the RMSNorm
    input along a residual connection), the input gradient is the RMSNorm
    one plus `residual_grad`, added in the same pass.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$input,
                       Dsc_FloatTensor:$weight,
                       Optional<Dsc_FloatTensor>:$residual_grad,
                       DefaultValuedAttr<Dsc_Epsilon, "1e-6">:$epsilon);
  let results = (outs Dsc_FloatTensor:$input_grad,
                      Dsc_FloatTensor:$weight_grad);
}

def Dsc_InvertibleLayerNormOp
    : Dsc_Op<"invertible_layer_norm",
        [Dsc_ElementwiseCost<kLayerNormFlops, "FirstOperand", 0>,
         Dsc_PerFeature<"gamma", "input">,
         Dsc_PerFeature<"beta", "input">,
         Dsc_PerRow<"rstd", "input">,
         AllShapesMatch<["input", "result"]>]> {
  let hasVerifier = 0;
  let summary = "LayerNorm that also returns each row's 1/std";
  let description = [{
    `%y, %rstd = dsc.invertible_layer_norm %x, %gamma, %beta` with
    `%x : [..., C]` and `%rstd : [...]`. With the per-row `%rstd` saved, the
    backward needs only `%y` (`dsc.layer_norm_grad_from_output`), so `%x` need
    not be kept for it. Produced by `-dsc-invertible`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$gamma,
                       Dsc_FloatTensor:$beta, Dsc_Epsilon:$epsilon);
  let results = (outs Dsc_FloatTensor:$result, Dsc_FloatTensor:$rstd);
}

def Dsc_LayerNormGradFromOutputOp
    : Dsc_Op<"layer_norm_grad_from_output",
        [Dsc_PerFeature<"gamma", "output">,
         Dsc_PerFeature<"beta", "output">,
         Dsc_PerFeature<"gamma_grad", "output">,
         Dsc_PerFeature<"beta_grad", "output">,
         Dsc_PerRow<"rstd", "output">,
         Dsc_OptionalShapedLike<"residual_grad", "getResidualGrad", "output">,
         AllShapesMatch<["grad", "output", "input_grad"]>]> {
  let hasVerifier = 0;
  let summary = "LayerNorm gradients from the output and the saved 1/std";
  let description = [{
    x_hat = (y - beta) / gamma, then the usual LayerNorm backward. Requires
    every gamma element to be non-zero (checked by the kernels at run time:
    a zero is an error, not a wrong gradient) and the forward beta. The
    optional `residual_grad` is added into the input gradient, as for
    `dsc.layer_norm_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$output,
                       Dsc_FloatTensor:$gamma, Dsc_FloatTensor:$beta,
                       Dsc_FloatTensor:$rstd,
                       Optional<Dsc_FloatTensor>:$residual_grad);
  let results = (outs Dsc_FloatTensor:$input_grad, Dsc_FloatTensor:$gamma_grad,
                      Dsc_FloatTensor:$beta_grad);
}

def Dsc_InvertibleRmsNormOp
    : Dsc_Op<"invertible_rms_norm",
        [Dsc_ElementwiseCost<kRmsNormFlops, "FirstOperand", 0>,
         Dsc_PerFeature<"weight", "input">,
         Dsc_PerRow<"rstd", "input">,
         AllShapesMatch<["input", "result"]>]> {
  let hasVerifier = 0;
  let summary = "RMSNorm that also returns each row's 1/rms";
  let description = [{
    `%y, %rstd = dsc.invertible_rms_norm %x, %weight` with `%x : [..., C]`
    and `%rstd : [...]`. With the per-row `%rstd` saved, the backward needs
    only `%y` (`dsc.rms_norm_grad_from_output`), so `%x` need not be kept
    for it. Produced by `-dsc-invertible`.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$weight,
                       DefaultValuedAttr<Dsc_Epsilon, "1e-6">:$epsilon);
  let results = (outs Dsc_FloatTensor:$result, Dsc_FloatTensor:$rstd);
}

def Dsc_RmsNormGradFromOutputOp
    : Dsc_Op<"rms_norm_grad_from_output",
        [Dsc_PerFeature<"weight", "output">,
         Dsc_PerFeature<"weight_grad", "output">,
         Dsc_PerRow<"rstd", "output">,
         Dsc_OptionalShapedLike<"residual_grad", "getResidualGrad", "output">,
         AllShapesMatch<["grad", "output", "input_grad"]>]> {
  let hasVerifier = 0;
  let summary = "RMSNorm gradients from the output and the saved 1/rms";
  let description = [{
    x_hat = y / weight, then the `dsc.rms_norm_grad` formulas with the
    saved rstd. Requires every weight element to be non-zero (checked by
    the kernels at run time: a zero is an error, not a wrong gradient). The
    optional `residual_grad` is added into the input gradient, as for
    `dsc.rms_norm_grad`.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$output,
                       Dsc_FloatTensor:$weight, Dsc_FloatTensor:$rstd,
                       Optional<Dsc_FloatTensor>:$residual_grad);
  let results = (outs Dsc_FloatTensor:$input_grad,
                      Dsc_FloatTensor:$weight_grad);
}

def Dsc_GeluGradOp : Dsc_Op<"gelu_grad"> {
  let summary = "dx = dy * gelu'(x)";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$input,
                       Dsc_GeluApproximation:$approximation);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $approximation $grad `,` $input attr-dict `:` type($grad) `,` type($input)
    `->` type($result)
  }];
}

def Dsc_SiluGradOp : Dsc_Op<"silu_grad"> {
  let summary = "dx = dy * silu'(x)";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SoftcapGradOp : Dsc_Op<"softcap_grad"> {
  let summary = "dx = dy * (1 - (y / cap)^2), y the result of dsc.softcap";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$result,
                       F64Attr:$cap);
  let results = (outs Dsc_FloatTensor:$input_grad);
}

def Dsc_SigmoidGateGradOp : Dsc_Op<"sigmoid_gate_grad"> {
  let summary = "Gradients of dsc.sigmoid_gate w.r.t. its gate and input";
  let description = [{
    `%dgate, %dx = dsc.sigmoid_gate_grad %dy, %gate, %x`: with s the
    sigmoid of a row's gate, `dx = s * dy` and `dgate = s (1 - s) sum_c
    dy[c] x[c]` (the sum in order along the row).
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$gate,
                       Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$gate_grad,
                      Dsc_FloatTensor:$input_grad);
}

def Dsc_SwigluGradOp : Dsc_Op<"swiglu_grad"> {
  let summary = "Gradients of dsc.swiglu w.r.t. gate and up, one pass";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$gate,
                       Dsc_FloatTensor:$up);
  let results = (outs Dsc_FloatTensor:$gate_grad, Dsc_FloatTensor:$up_grad);
}

def Dsc_RepeatKvGradOp : Dsc_Op<"repeat_kv_grad"> {
  let summary = "Gradient of dsc.repeat_kv: the sum over each head's group";
  let arguments = (ins Dsc_FloatTensor:$grad, I64Attr:$groups);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_BiasGeluGradOp : Dsc_Op<"bias_gelu_grad"> {
  let summary = "Gradients of dsc.bias_gelu w.r.t. input and bias, one pass";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$input,
                       Dsc_FloatTensor:$bias,
                       Dsc_GeluApproximation:$approximation);
  let results = (outs Dsc_FloatTensor:$input_grad,
                      Dsc_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $approximation $grad `,` $input `,` $bias attr-dict `:` `(` type($grad)
    `,` type($input) `,` type($bias) `)` `->` `(` type($input_grad) `,`
    type($bias_grad) `)`
  }];
}

def Dsc_DropoutBiasGradOp : Dsc_Op<"dropout_bias_grad", [Dsc_Stochastic]> {
  let summary = "dx = dropout(dy) and dbias = its sum over rows, one pass";
  let arguments = (ins Dsc_FloatTensor:$grad, F64Attr:$rate, I64Attr:$stream);
  let results = (outs Dsc_FloatTensor:$input_grad,
                      Dsc_FloatTensor:$bias_grad);
}

def Dsc_SoftmaxGradOp : Dsc_Op<"softmax_grad"> {
  let summary = "dx = scale * y * (dy - sum(dy * y)) from the softmax output y";
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$output,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_SoftmaxDropoutGradOp : Dsc_Op<"softmax_dropout_grad"> {
  let summary = "dx = softmax_grad(dropout(dy), probs), one pass per row";
  let description = [{
    `%dx = dsc.softmax_dropout_grad %dy, %probs, %dropped {scale, rate}` with
    `%probs, %dropped` the results of the forward `dsc.softmax_dropout`. The
    dropout mask is read off `%dropped` (kept where it is non-zero) instead
    of being drawn again from Philox: where a probability is positive that
    is exactly the forward mask, and where it is zero the element's
    gradient is zero under either mask. The backward reads `%dropped` for
    the context GEMM's gradient anyway, so this costs no memory and saves
    the Philox rounds.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$probs,
                       Dsc_FloatTensor:$dropped,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       F64Attr:$rate);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_AttentionGradOp : Dsc_Op<"attention_grad", [Dsc_Stochastic]> {
  let summary = "Gradients of dsc.attention w.r.t. q, k and v";
  let description = [{
    `%dq, %dk, %dv = dsc.attention_grad %dout, %q, %k, %v, %out, %lse {scale,
    causal, rate, stream}` (FlashAttention-2's backward): per tile of keys
    the probabilities are recomputed from `%q`, `%k` and the saved `%lse`,
    the dropout mask is drawn again from Philox, and with D_i =
    rowsum(dout * out), dP = dout v^T (dropped), dS = P * (dP - D) gives
    dq = scale * dS k, dk = scale * dS^T q and dv = dropout(P)^T dout.
    Nothing of size [T, T] is saved. `layout` and `%key_mask`: the
    forward's; only the layout's blocks are visited.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$q,
                       Dsc_FloatTensor:$k, Dsc_FloatTensor:$v,
                       Dsc_FloatTensor:$out, Dsc_FloatTensor:$lse,
                       Optional<Dsc_IdTensor>:$key_mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       F64Attr:$rate, I64Attr:$stream,
                       OptionalAttr<Dsc_BlockLayoutAttr>:$layout);
  let results = (outs Dsc_FloatTensor:$q_grad, Dsc_FloatTensor:$k_grad,
                      Dsc_FloatTensor:$v_grad);
}

def Dsc_CrossEntropyWithGradOp
    : Dsc_Op<"cross_entropy_with_grad",
        [DeclareOpInterfaceMethods<Dsc_InPlaceOpInterface>]> {
  let summary = "dsc.cross_entropy and its gradient in one pass over the logits";
  let description = [{
    `%loss, %dlogits = dsc.cross_entropy_with_grad %dloss, %logits, %labels`
    is `%loss = dsc.cross_entropy %logits, %labels` and `%dlogits =
    dsc.cross_entropy_grad %dloss, %logits, %labels`, both with
    `ignore_index`, computed from one read of each row's logits: each row's
    maximum and sum of exponentials serve the loss and its softmax.
    `%dlogits` has the type of `%logits` and may be written over them
    (InPlaceOpInterface): with the logits read by nothing else, the step
    holds one [B, T, V] buffer where it held two. Produced by
    -dsc-fuse-cross-entropy, which runs when the loss gradient's seed
    (`%dloss`) is known before the loss is computed, as it is in
    @micro_step. `classes` as in dsc.cross_entropy.
  }];
  let arguments = (ins Dsc_Scalar:$grad, Dsc_FloatTensor:$logits,
                       Dsc_IdTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs Dsc_Scalar:$loss, Dsc_FloatTensor:$logits_grad);
  let hasVerifier = 1;
}

def Dsc_CrossEntropyGradOp : Dsc_Op<"cross_entropy_grad"> {
  let summary = "dlogits = dloss * (softmax(logits) - onehot(labels)) / count";
  let description = [{
    With `classes = K` (0: every column), as in dsc.cross_entropy: the
    softmax is over a row's first K logits and the padding columns' gradient
    is zero.
  }];
  let arguments = (ins Dsc_Scalar:$grad, Dsc_FloatTensor:$logits,
                       Dsc_IdTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_MoeTopkGradOp : Dsc_Op<"moe_topk_grad"> {
  let summary = "Gradient of dsc.moe_topk's weights w.r.t. the router logits";
  let description = [{
    `%dlogits = dsc.moe_topk_grad %dweights, %weights, %experts`:
    `dlogits[n, experts[n, k]] = w[n, k] * (dw[n, k] - sum_j w[n, j] dw[n,
    j])`, zero for the experts a token did not choose; `[..., E]`. With the
    forward's `%logits` as a fourth operand (`normalize = false`: the
    weights are softmax probabilities p), an expert j a token did not
    choose gets `-p[n, j] * sum_k w[n, k] dw[n, k]` instead of zero.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$weights,
                       Dsc_IdTensor:$experts,
                       Optional<Dsc_FloatTensor>:$logits);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_MoeSlotDotOp : Dsc_Op<"moe_slot_dot"> {
  let summary = "Per assignment: a token's row dotted with its expert row";
  let description = [{
    `%dw = dsc.moe_slot_dot %x, %rows, %slots`: `dw[n, k] = dot(x[n],
    rows[slots[n, k]])` for `%x` `[..., C]`, `%rows` `[N*K, C]`; shaped
    like `%slots` `[..., K]`.
    The gradient of the weights of `dsc.moe_combine` (x: the output
    gradient, rows: the experts' rows) and of `dsc.moe_dispatch` (x: the
    tokens, rows: the rows' gradient).
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$rows,
                       Dsc_IdTensor:$slots);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_GroupedLinearGradWeightOp : Dsc_Op<"grouped_linear_grad_weight"> {
  let summary = "dW_e = x_e^T @ dy_e for dsc.grouped_linear, stacked";
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$grad,
                       Dsc_IdTensor:$counts,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_w);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_MoeLoadGradOp : Dsc_Op<"moe_load_grad"> {
  let summary = "Gradient of dsc.moe_load w.r.t. the router logits";
  let description = [{
    `%dlogits = dsc.moe_load_grad %dload, %logits`: the softmax backward of
    each row of `%logits` `[..., E]` for the output gradient `dload[1]`
    (the same for every token); row 0 (the counts) has none.
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_FloatTensor:$logits);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_MoeBalanceLossGradOp : Dsc_Op<"moe_balance_loss_grad"> {
  let summary = "Gradient of dsc.moe_balance_loss w.r.t. each layer's load";
  let description = [{
    `%dload = dsc.moe_balance_loss_grad %dloss, %load_0, ... {scale}`:
    with T the loads' sum, `dload[0, e] = dloss * scale * T[1, e]` and
    `dload[1, e] = dloss * scale * T[0, e]` (`[2, E]`).
  }];
  let arguments = (ins Dsc_Scalar:$grad, Variadic<Dsc_FloatTensor>:$loads,
                       F64Attr:$scale);
  let results = (outs Dsc_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Training-step ops
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Collectives. Each spans the group of ranks along its mesh `axis`
// (Dsc_MeshAttr); shapes are checked against that group's size G.
//===----------------------------------------------------------------------===//

class Dsc_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dsc_EffectfulOp<mnemonic, !listconcat(traits, [Dsc_Collective])>;

def Dsc_AllReduceOp : Dsc_CollectiveOp<"all_reduce",
        [DeclareOpInterfaceMethods<Dsc_InPlaceOpInterface>]> {
  let summary = "Element-wise sum, mean or max of the group's tensors";
  let description = [{
    Every rank of the group gets the reduction of all of the group's
    `input`s. With G = 1 this is the identity. The result may be written
    over the input (InPlaceOpInterface): @apply_step reduces each gradient
    accumulator in its own buffer, which it zeroes afterwards, instead of
    into a gradient-sized temporary.
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       DefaultValuedAttr<Dsc_ReduceKindAttr,
                                         "ReduceKind::mean">:$op,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_ReduceScatterOp : Dsc_CollectiveOp<"reduce_scatter"> {
  let summary = "Reduce, then keep this rank's 1/G of dimension 0";
  let description = [{
    `input` [G*n, ...] -> `result` [n, ...]: rank i of the group gets rows
    [i*n, (i+1)*n) of the reduction (sum, mean or max) of the group's
    inputs. ZeRO-2 reduces gradients this way.
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       DefaultValuedAttr<Dsc_ReduceKindAttr,
                                         "ReduceKind::mean">:$op,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_AllGatherOp : Dsc_CollectiveOp<"all_gather"> {
  let summary = "Concatenate the group's tensors along dimension 0";
  let description = [{
    `input` [n, ...] -> `result` [G*n, ...], rank i's input at rows
    [i*n, (i+1)*n). ZeRO-3 gathers sharded parameters this way.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_BroadcastOp : Dsc_CollectiveOp<"broadcast"> {
  let summary = "Every rank of the group gets the root's tensor";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$root,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_AllToAllOp : Dsc_CollectiveOp<"all_to_all"> {
  let summary = "Rank i sends its j-th 1/G of dimension 0 to rank j";
  let description = [{
    `input` and `result` are [G*n, ...]: rows [j*n, (j+1)*n) of rank i's
    input become rows [i*n, (i+1)*n) of rank j's result.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_SendOp : Dsc_CollectiveOp<"send"> {
  let summary = "Send a tensor to the rank `peer` steps along the axis";
  let description = [{
    `peer` is an offset along `axis` (pipeline stages send activations to
    +1 and gradients to -1), taken modulo the group size G (the last stage's
    +1 is the first); the rank that receives it issues the matching
    `dsc.recv` with the opposite offset. 0 < |peer| < G. The send returns
    once the tensor may be reused: a ring in which every rank sends first
    relies on the transport buffering the message (small ones), so a
    schedule orders each pair's send and receive.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$peer,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::pipeline">:$axis);
}

def Dsc_RecvOp : Dsc_CollectiveOp<"recv"> {
  let summary = "Receive a tensor from the rank `peer` steps along the axis";
  let arguments = (ins I64Attr:$peer,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::pipeline">:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_ShardOp : Dsc_CollectiveOp<"shard"> {
  let summary = "This rank's 1/G of dimension 0 (no communication)";
  let description = [{
    `input` [G*n, ...] -> `result` [n, ...]: rows [i*n, (i+1)*n) on rank i
    of the group. What a rank updates of a parameter ZeRO shards.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_NormAllReduceOp : Dsc_CollectiveOp<"norm_all_reduce"> {
  let summary = "sqrt of the group's sum of squares of a scalar";
  let description = [{
    The global norm of vectors sharded across the group, from each rank's
    norm of its shards: sqrt(sum over ranks of input^2).
  }];
  let arguments = (ins Dsc_Scalar:$input,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data">:$axis);
  let results = (outs Dsc_Scalar:$result);
}

// Megatron's two tensor-parallel operators, which -dsc-tensor-parallel
// puts around each sliced region (column-parallel GEMMs ... row-parallel
// GEMM): their forward and backward meanings differ, so -dsc-autodiff
// derives the backward collectives from them.

def Dsc_TpCopyOp
    : Dsc_DiffOp<"tp_copy", [Dsc_ElementwiseCost<0, "Results", 1>]> {
  let summary = "Enter a tensor-parallel region (Megatron's f)";
  let description = [{
    The identity in the forward pass: every rank of the group already holds
    the same `input`. Its gradient is the sum over the group of the ranks'
    gradients, since each rank's sliced GEMMs see only their part of it.
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::tensor">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_TpReduceOp
    : Dsc_CollectiveOp<"tp_reduce",
          [DeclareOpInterfaceMethods<Dsc_GradientOpInterface>]> {
  let summary = "Leave a tensor-parallel region (Megatron's g)";
  let description = [{
    The sum over the group of the ranks' partial results (a row-parallel
    GEMM's), as `dsc.all_reduce` with op sum. Its gradient is the identity:
    the result is replicated, so every rank already has the whole gradient.
  }];
  let arguments = (ins Dsc_FloatTensor:$input,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::tensor">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

// Expert parallelism (-dsc-expert-parallel): the G ranks of `axis` hold E / G
// experts each (expert e on group rank e / (E / G)); a layer's expert rows
// travel to the ranks of their experts and back.

def Dsc_MoeExchangeCountsOp : Dsc_CollectiveOp<"moe_exchange_counts"> {
  let summary = "Expert parallelism: the row counts each rank will receive";
  let description = [{
    `%recv_counts, %local_counts = dsc.moe_exchange_counts %counts {axis}`
    on this rank's per-expert row counts `[E]` (from `dsc.moe_route`), over
    the G ranks of `axis`, each holding El = E / G experts:
    `recv_counts[s, j]` (`[G, El]`) is the count group rank s has for this
    rank's local expert j (its expert g * El + j, g this rank's
    coordinate), and `local_counts[j]` (`[El]`) their sum over s: the rows
    local expert j computes. An all-to-all of El counts per peer.
  }];
  let arguments = (ins Dsc_IdTensor:$counts,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data_inner">:$axis);
  let results = (outs Dsc_IdTensor:$recv_counts, Dsc_IdTensor:$local_counts);
}

def Dsc_MoeExchangeOp
    : Dsc_CollectiveOp<"moe_exchange",
          [DeclareOpInterfaceMethods<Dsc_GradientOpInterface>]> {
  let summary = "Expert parallelism: expert rows to their experts' ranks and back";
  let description = [{
    `%out = dsc.moe_exchange %in, %counts, %recv_counts {axis, reverse}`
    with `%counts` `[E]` this rank's rows per expert and `%recv_counts`
    `[G, El]` from `dsc.moe_exchange_counts`. Forward (`reverse = false`):
    `%in` `[Rs, C]` is this rank's expert-major rows (`dsc.moe_dispatch`'s
    layout, the counts adding up to at most Rs); the rows of the experts of
    group rank p go to p. `%out` `[Rr, C]` is the receiver's layout: local
    expert 0's rows first, from source rank 0, 1, ... in turn, each
    source's in its own order; rows after the received ones are zero. Rr
    is static: a bound the compiler picks (G * N * min(K, El) holds any
    routing of N tokens to K experts each). `reverse = true` sends each
    row back: `%in` `[Rr, C]` in the receiver's layout, `%out` `[Rs, C]`
    in the sender's (rows after the counts' sum zero). Each direction is
    the other's gradient. Rows travel as bytes of any element type, one
    message per peer, only the rows that exist.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_IdTensor:$counts,
                       Dsc_IdTensor:$recv_counts,
                       DefaultValuedAttr<BoolAttr, "false">:$reverse,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::data_inner">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

// Vocabulary-parallel embedding and loss (Megatron's VocabParallelEmbedding
// and vocab_parallel_cross_entropy): rank t of the group holds rows (or
// logit columns) [t*Vl, (t+1)*Vl) of a vocabulary of `vocab` entries, padded
// to T*Vl. They run with the rank's coordinate along `axis`.

def Dsc_VocabEmbeddingOp
    : Dsc_CollectiveOp<"vocab_embedding",
          [DeclareOpInterfaceMethods<Dsc_GradientOpInterface>]> {
  let summary = "Row gather from a table sliced by rows over the group";
  let description = [{
    Each rank looks up the `ids` in its rows (the others give zeros) and
    the group sums the results: every rank gets `table[ids]` of the whole
    table. Ids must lie in [0, vocab).
  }];
  let arguments = (ins Dsc_FloatTensor:$table, Dsc_IdTensor:$ids,
                       I64Attr:$vocab,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::tensor">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_VocabEmbeddingGradOp : Dsc_Op<"vocab_embedding_grad"> {
  let summary = "This rank's rows of an embedding's table gradient";
  let description = [{
    The scatter-add of `dsc.embedding_grad` restricted to the ids in the
    rank's rows; no communication (every rank has the whole gradient of
    the lookup's result).
  }];
  let arguments = (ins Dsc_IdTensor:$ids, Dsc_FloatTensor:$grad,
                       I64Attr:$vocab,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::tensor">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_VocabCrossEntropyOp
    : Dsc_CollectiveOp<"vocab_cross_entropy",
          [DeclareOpInterfaceMethods<Dsc_GradientOpInterface>]> {
  let summary = "dsc.cross_entropy of logits sliced by columns over the group";
  let description = [{
    `logits` [..., Vl] are this rank's columns; padding columns (from
    `vocab` on) do not count. The group all-reduces each row's maximum,
    then its sum of exponentials and the label's logit (held by one rank):
    every rank gets the whole vocabulary's mean loss.
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IdTensor:$labels,
                       I64Attr:$vocab,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::tensor">:$axis);
  let results = (outs Dsc_Scalar:$loss);
}

def Dsc_VocabCrossEntropyGradOp
    : Dsc_CollectiveOp<"vocab_cross_entropy_grad"> {
  let summary = "This rank's columns of dsc.cross_entropy_grad";
  let description = [{
    dloss * (softmax(logits) - onehot(labels)) / count on the rank's
    columns (zero on padding), the softmax's row maximum and sum
    all-reduced over the group again.
  }];
  let arguments = (ins Dsc_Scalar:$grad, Dsc_FloatTensor:$logits,
                       Dsc_IdTensor:$labels, I64Attr:$vocab,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<Dsc_MeshAxisAttr,
                                         "MeshAxis::tensor">:$axis);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_FlatResizeOp : Dsc_Op<"flat_resize"> {
  let summary = "The elements in row-major order, cut or zero-padded";
  let description = [{
    `result` holds the first min(n, m) elements of `input` (n elements) in
    row-major order, then zeros up to its own m elements. ZeRO flattens a
    parameter into G equal shards with it, and back (a 4-bit weight's
    bytes, `ui8`, too).
  }];
  let arguments = (ins RankedTensorOf<[F32, F16, BF16, UI8]>:$input);
  let results = (outs RankedTensorOf<[F32, F16, BF16, UI8]>:$result);
}

//===----------------------------------------------------------------------===//
// ZeRO-Offload: copies between device and host memory (-dsc-offload-optimizer,
// lib/Transforms/OffloadOptimizer.cpp). Ops marked `dsc.host` run on the host
// over host values; these two are the only ops that cross.
//===----------------------------------------------------------------------===//

def Dsc_ToHostOp : Dsc_Op<"to_host"> {
  let summary = "Copies a device tensor into host memory";
  let description = [{
    `%h = dsc.to_host %g {group = 3} : (tensor<1024xf32>) -> tensor<1024xf32>`:
    the same values, now in host memory, for an update that runs on the
    host. `group` is the transfer group (one per transformer layer, in the
    order the backward finishes them) the copy travels in: the CUDA
    backend's copy stream would move one group while the host updates the
    previous one; the CPU backend copies with memcpy.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$group);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_ToDeviceOp : Dsc_Op<"to_device"> {
  let summary = "Copies a host tensor into device memory";
  let description = [{
    `%p = dsc.to_device %h {group = 3} : (tensor<1024xf32>) -> tensor<1024xf32>`:
    the reverse of `dsc.to_host`: a parameter updated on the host streams
    back to the device in its transfer group.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$group);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_SwapInOp : Dsc_Op<"swap_in"> {
  let summary = "ZeRO-Infinity: reads an NVMe-resident tensor into host memory";
  let description = [{
    `%h = dsc.swap_in %s {group = 3} : (tensor<1024xf32>) -> tensor<1024xf32>`:
    `%s` is a step argument that lives in the NVMe swap file (`dsc.nvme`,
    -dsc-offload-nvme); `%h` the same values in host memory, for the host
    update of transfer group `group`.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$group);
  let results = (outs AnyRankedTensor:$result);
}

def Dsc_SwapOutOp : Dsc_Op<"swap_out"> {
  let summary = "ZeRO-Infinity: writes a host tensor to its NVMe-resident state";
  let description = [{
    `%s = dsc.swap_out %h {group = 3} : (tensor<1024xf32>) -> tensor<1024xf32>`:
    the reverse of `dsc.swap_in`: `%s` is returned as the new value of an
    NVMe-resident state (`dsc.nvme`), so the runtime writes `%h` into that
    state's place in the swap file.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$group);
  let results = (outs AnyRankedTensor:$result);
}

//===----------------------------------------------------------------------===//
// 1-bit compression: DeepSpeed's compressed_allreduce, taken apart into
// kernels and plain collectives by -dsc-onebit-adam (lib/Transforms/
// OneBitAdam.cpp). A tensor of P elements (P a multiple of 8) travels as P
// sign bits and one f32 scale.
//===----------------------------------------------------------------------===//

/// Signs packed 8 per byte, numpy.packbits order: bit 7 (the high bit) of
/// byte k is element 8k; a set bit is +1, a clear bit -1.
def Dsc_SignBits : 1DTensorOf<[UI8]>;
def Dsc_F32Vector : 1DTensorOf<[F32]>;

def Dsc_OnebitCompressOp : Dsc_Op<"onebit_compress"> {
  let summary = "Error-compensated 1-bit compression";
  let description = [{
    y = flatten(`input`) zero-padded to the P elements of `error`, plus
    `error`; scale = ||y||_2 / sqrt(P); each element is sent as its sign
    (+1 for y >= 0, NaN included: DeepSpeed's sign(0) = +1) times scale.
    `new_error` = y - scale * sign, fed back into the next compression.
    `signs` is [P/8] (Dsc_SignBits), `scale` [1]. The sum of squares is
    accumulated in f64 in element order, so the result is the same on any
    thread count. With `skip` non-zero (an fp16 overflow) `new_error` is
    `error`: the step that is skipped leaves no trace.
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_F32Vector:$error,
                       Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_SignBits:$signs, Dsc_F32Vector:$scale,
                      Dsc_F32Vector:$new_error);
}

/// Block-wise int8 codes (ZeRO++'s quantized weight all-gather).
def Dsc_Int8Codes : 1DTensorOf<[I8]>;

def Dsc_QuantizeInt8Op : Dsc_Op<"quantize_int8"> {
  let summary = "Block-wise symmetric int8 codes of a flat tensor (qwZ)";
  let description = [{
    `input` [n] (n a multiple of `block_size`) as int8 codes with one f32
    scale per block: scale = max|x| / 127 over the block, code =
    round-half-even(x / scale) in [-127, 127] (0 in an all-zero block,
    whose scale is 0). ZeRO++'s qwZ quantizes each rank's parameter shard
    so, all-gathers codes and scales, and `dsc.dequantize_int8` rebuilds
    the parameter.
  }];
  let arguments = (ins RankedTensorOf<[F32, F16, BF16]>:$input,
                       I64Attr:$block_size);
  let results = (outs Dsc_Int8Codes:$codes, Dsc_F32Vector:$scales);
}

def Dsc_DequantizeInt8Op : Dsc_Op<"dequantize_int8"> {
  let summary = "code * scale per block of int8 codes";
  let description = [{
    `codes` [n] and `scales` [n / block_size] as `dsc.quantize_int8` makes
    them; the result [n] is each code times its block's scale, in f32
    (stored in the result's float type).
  }];
  let arguments = (ins Dsc_Int8Codes:$codes, Dsc_F32Vector:$scales,
                       I64Attr:$block_size);
  let results = (outs RankedTensorOf<[F32, F16, BF16]>:$result);
}

/// Block-wise int4 codes, two per byte (ZeRO++'s quantized gradients).
def Dsc_Int4Codes : 1DTensorOf<[UI8]>;

def Dsc_QuantizeInt4Op : Dsc_Op<"quantize_int4"> {
  let summary = "Block-wise symmetric int4 codes of a flat tensor (qgZ)";
  let description = [{
    `input` [n] (n a multiple of `block_size`, which is even) as 4-bit
    codes, two per byte, with one f32 scale per block: scale = max|x| / 7
    over the block, code = round-half-even(x / scale) in [-7, 7] (0 in an
    all-zero block, whose scale is 0), stored as code + 8; element 2i is
    the low nibble of byte i, element 2i + 1 its high nibble. ZeRO++'s qgZ
    quantizes each rank's gradient so before the all-to-all that replaces
    the reduce-scatter (`dsc.dequantize_reduce_int4`).
  }];
  let arguments = (ins RankedTensorOf<[F32, F16, BF16]>:$input,
                       I64Attr:$block_size);
  let results = (outs Dsc_Int4Codes:$codes, Dsc_F32Vector:$scales);
}

def Dsc_DequantizeReduceInt4Op : Dsc_Op<"dequantize_reduce_int4"> {
  let summary = "The sum or mean of G chunks of int4 codes (qgZ)";
  let description = [{
    `codes` [G*c/2] and `scales` [G*c/block_size] hold G chunks of c
    elements (c a multiple of `block_size`) as `dsc.quantize_int4` makes
    them, chunk j first at byte j*c/2 and scale j*c/block_size. `result`
    [c] is, per element, the f32 sum over j = 0..G-1 in that order of code
    * scale; `op = mean` divides that sum by G. After an all-to-all of a
    quantized gradient, rank j holds every rank's chunk j: this is its
    shard of the reduce-scatter.
  }];
  let arguments = (ins Dsc_Int4Codes:$codes, Dsc_F32Vector:$scales,
                       I64Attr:$block_size,
                       DefaultValuedAttr<Dsc_ReduceKindAttr,
                                         "ReduceKind::mean">:$op);
  let results = (outs RankedTensorOf<[F32, F16, BF16]>:$result);
}

def Dsc_OnebitDecodeOp : Dsc_Op<"onebit_decode"> {
  let summary = "G compressed chunks back to f32 values";
  let description = [{
    `signs` [G*c/8] holds G chunks of c signs, `scales` [G] their scales;
    `result` [G*c] is element i of chunk j = scales[j] * sign.
  }];
  let arguments = (ins Dsc_SignBits:$signs, Dsc_F32Vector:$scales);
  let results = (outs Dsc_F32Vector:$result);
}

def Dsc_OnebitDecodeMeanOp : Dsc_Op<"onebit_decode_mean"> {
  let summary = "The mean of G compressed chunks";
  let description = [{
    `signs` [G*c/8] holds G chunks of c signs, `scales` [G] their scales;
    `result` [c] = sum over j = 0..G-1, in that order, of sign * (scales[j]
    * (1/G)): what a 1-bit server averages from the workers' chunks.
  }];
  let arguments = (ins Dsc_SignBits:$signs, Dsc_F32Vector:$scales);
  let results = (outs Dsc_F32Vector:$result);
}

def Dsc_EmaUpdateOp : Dsc_Op<"ema_update"> {
  let summary = "Exponential moving average: beta * avg + (1 - beta) * grad";
  let description = [{
    `grad` is multiplied by `grad_scale` (clipping) first; with `skip`
    non-zero, `avg` passes through. 1-bit Adam's momentum of the local
    gradient, before it is compressed.
  }];
  let arguments = (ins Dsc_FloatTensor:$avg, Dsc_FloatTensor:$grad,
                       Dsc_Scalar:$grad_scale, F64Attr:$beta,
                       Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_FrozenAdamOp : Dsc_Op<"frozen_adam"> {
  let summary = "Adam's update with a frozen variance (1-bit Adam)";
  let description = [{
    m = `exp_avg`, zeroed where `exp_avg_sq` is exactly 0 (an element that
    has only ever had zero gradients: DeepSpeed's exp_avg_mask, derived
    instead of supplied); update = m / (sqrt(exp_avg_sq) + eps) +
    weight_decay * param; `new_param` = param - lr * update, `new_exp_avg` =
    m. Without bias correction, as DeepSpeed's OnebitAdam. With `skip`
    non-zero, param and `old_exp_avg` pass through.
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$old_exp_avg,
                       Dsc_FloatTensor:$exp_avg, Dsc_FloatTensor:$exp_avg_sq,
                       Dsc_Scalar:$lr, F64Attr:$eps, F64Attr:$weight_decay,
                       Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Dsc_FloatTensor:$new_exp_avg);
}

// 1-bit LAMB (DeepSpeed's OnebitLamb, deepspeed/runtime/fp16/onebit/lamb.py).

def Dsc_LambCoeffEmaOp : Dsc_Op<"lamb_coeff_ema"> {
  let summary = "1-bit LAMB's warm-up: the moving average of trust ratios";
  let description = [{
    The trust ratio LAMB applied to `param` (before its update) with the
    updated `exp_avg` and `exp_avg_sq`: update = m / (sqrt(v) + eps) +
    weight_decay * param, ratio = ||param|| / ||update|| clamped to
    [min_coeff, max_coeff] (1 when either norm is 0). The result is
    coeff_beta * `coeff` + (1 - coeff_beta) * ratio, or `coeff` when the
    ratio is exactly 1 (DeepSpeed's rule). The compression stage scales the
    last of these averages.
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$exp_avg,
                       Dsc_FloatTensor:$exp_avg_sq, Dsc_Scalar:$coeff,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       F64Attr:$max_coeff, F64Attr:$min_coeff,
                       F64Attr:$coeff_beta);
  let results = (outs Dsc_Scalar:$new_coeff);
}

def Dsc_MomentumScalesOp : Dsc_Op<"momentum_scales"> {
  let summary = "1-bit LAMB's momentum scaling coefficients";
  let description = [{
    With r_i = ||m_i|| / sqrt(numel(m_i)) for each momentum and r their
    mean, scale_i = r / r_i (1 where r_i is 0, which DeepSpeed divides by):
    scaled momenta of similar magnitude compress with less error.
  }];
  let arguments = (ins Variadic<Dsc_FloatTensor>:$momenta);
  let results = (outs Variadic<Dsc_Scalar>:$scales);
}

def Dsc_ScaleByOp : Dsc_Op<"scale_by"> {
  let summary = "Every element times a scalar tensor";
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_Scalar:$factor);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_OnebitLambUpdateOp : Dsc_Op<"onebit_lamb_update"> {
  let summary = "1-bit LAMB's compression-stage update";
  let description = [{
    m = `exp_avg` / `scaling` (the compressed mean of the scaled momenta),
    zeroed where `exp_avg_sq` is exactly 0 (DeepSpeed's exp_avg_mask,
    derived); g = (m - beta1 * `last_exp_avg`) / (1 - beta1); fresh =
    beta2 * `exp_avg_sq_fresh` + (1 - beta2) * g^2; denom = sqrt(v) + eps
    (the frozen variance); prelim = m / denom; update = prelim +
    weight_decay * param; factor = max(denom / (sqrt(fresh) + eps)), with
    weight decay blended as factor * r + (1 - r), r = min(1,
    ||prelim|| / ||update||); clamped to [factor_min, factor_max] and to
    within factor_threshold of `last_factor`; param -= lr * coeff_freeze *
    factor * update. Results: the parameter, m, fresh and the factor.
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$exp_avg,
                       Dsc_FloatTensor:$last_exp_avg,
                       Dsc_FloatTensor:$exp_avg_sq,
                       Dsc_FloatTensor:$exp_avg_sq_fresh,
                       Dsc_Scalar:$scaling, Dsc_Scalar:$coeff_freeze,
                       Dsc_Scalar:$last_factor, Dsc_Scalar:$lr,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, F64Attr:$factor_max,
                       F64Attr:$factor_min, F64Attr:$factor_threshold);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Dsc_FloatTensor:$new_exp_avg,
                      Dsc_FloatTensor:$new_exp_avg_sq_fresh,
                      Dsc_Scalar:$new_last_factor);
}

def Dsc_LocalAdamOp : Dsc_Op<"local_adam"> {
  let summary = "0/1 Adam's local step: frozen-variance Adam, update accumulated";
  let description = [{
    `dsc.frozen_adam`'s update (m zeroed where `exp_avg_sq` is exactly 0;
    update = m / (sqrt(exp_avg_sq) + eps) + weight_decay * param;
    `new_param` = param - lr * update, `new_exp_avg` = m), and
    `new_accumulator` = accumulator - lr * update: what DeepSpeed's
    ZeroOneAdam adds to its `momentum_accumulator` between synchronisations.
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$old_exp_avg,
                       Dsc_FloatTensor:$exp_avg, Dsc_FloatTensor:$exp_avg_sq,
                       Dsc_FloatTensor:$accumulator, Dsc_Scalar:$lr,
                       F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Dsc_FloatTensor:$new_exp_avg,
                      Dsc_FloatTensor:$new_accumulator);
}

def Dsc_ZeroOneUnwindOp : Dsc_Op<"zero_one_unwind"> {
  let summary = "0/1 Adam's synchronisation, before the all-reduce";
  let description = [{
    `param` minus the `accumulator` of local updates (the parameter where
    the local steps began), and the accumulator scaled back to momentum
    units: accumulator * (sqrt(exp_avg_sq) + eps), which ranks all-reduce
    compressed.
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$accumulator,
                       Dsc_FloatTensor:$exp_avg_sq, F64Attr:$eps);
  let results = (outs Dsc_FloatTensor:$start_param,
                      Dsc_FloatTensor:$scaled);
}

def Dsc_ZeroOneSyncOp : Dsc_Op<"zero_one_sync"> {
  let summary = "0/1 Adam's synchronisation, after the all-reduce";
  let description = [{
    With the ranks' mean `reduced` of the scaled accumulators and `lr_sum`
    the learning rates of the local steps: `new_param` = param + reduced /
    (sqrt(exp_avg_sq) + eps), `new_exp_avg` = -reduced / lr_sum; both
    leave an element whose `exp_avg_sq` is exactly 0 (only zero gradients
    so far) at param and 0 (DeepSpeed's exp_avg_mask, derived).
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$reduced,
                       Dsc_FloatTensor:$exp_avg_sq, Dsc_Scalar:$lr_sum,
                       F64Attr:$eps);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Dsc_FloatTensor:$new_exp_avg);
}

def Dsc_GlobalNormOp : Dsc_Op<"global_norm"> {
  let summary = "sqrt of the sum of squares of every element of every input";
  let arguments = (ins Variadic<Dsc_FloatTensor>:$inputs);
  let results = (outs Dsc_Scalar:$norm);
}

def Dsc_ClipCoefficientOp : Dsc_Op<"clip_coefficient"> {
  let summary = "Gradient multiplier for global-norm clipping";
  let description = [{
    min(1, max_norm / (norm + 1e-6)), as DeepSpeed's `gradient_clipping`.
  }];
  let arguments = (ins Dsc_Scalar:$norm, F64Attr:$max_norm);
  let results = (outs Dsc_Scalar:$coefficient);
}

def Dsc_LrScheduleOp : Dsc_Op<"lr_schedule"> {
  let summary = "Learning rate of optimizer update `step` (1-based)";
  let hasVerifier = 0;
  let description = [{
    `kind` is constant, WarmupLR, WarmupDecayLR or WarmupCosineLR,
    evaluated as DeepSpeed's lr_schedules.py does; the other attributes are
    that scheduler's parameters (`lr` is the optimizer's base rate).
  }];
  let arguments = (ins Dsc_StepScalar:$step, Dsc_LrScheduleKindAttr:$kind,
                       F64Attr:$lr,
                       F64Attr:$warmup_min_lr, F64Attr:$warmup_max_lr,
                       I64Attr:$warmup_num_steps, I64Attr:$total_num_steps,
                       Dsc_WarmupTypeAttr:$warmup_type,
                       F64Attr:$warmup_min_ratio,
                       F64Attr:$cos_min_ratio);
  let results = (outs Dsc_Scalar:$lr_value);
}

def Dsc_AdamOp : Dsc_Op<"adam", [Dsc_Optimizer,
                                   AllTypesMatch<["param", "new_param"]>,
        DeclareOpInterfaceMethods<Dsc_InPlaceOpInterface>]> {
  let summary = "Adam / AdamW update with PyTorch semantics";
  // Shapes: OptimizerOpInterface.
  let hasVerifier = 0;
  let description = [{
    Gradients are multiplied by `grad_scale` (clipping) first. `adamw`
    selects decoupled weight decay; otherwise decay is added to the gradient
    (L2). Bias correction divides by 1 - beta^step. With the optional `skip`
    operand (the fp16 overflow flag) non-zero, param and state pass through
    unchanged (this and Lamb/Sgd). Each new value may be written over the
    old one (InPlaceOpInterface: the update is elementwise), so an update
    whose operands are temporaries, such as ZeRO-Infinity's reads from the
    swap file, holds one copy of its state instead of two.
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$grad,
                       Dsc_FloatTensor:$exp_avg, Dsc_FloatTensor:$exp_avg_sq,
                       Dsc_Scalar:$lr, Dsc_StepScalar:$step,
                       Dsc_Scalar:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, BoolAttr:$adamw,
                       BoolAttr:$bias_correction, Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$new_param, Dsc_FloatTensor:$new_exp_avg,
                      Dsc_FloatTensor:$new_exp_avg_sq);
}

def Dsc_LambOp : Dsc_Op<"lamb", [Dsc_Optimizer,
                                   AllTypesMatch<["param", "new_param"]>]> {
  let summary = "LAMB update as DeepSpeed's FusedLamb";
  // Shapes: OptimizerOpInterface.
  let hasVerifier = 0;
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$grad,
                       Dsc_FloatTensor:$exp_avg, Dsc_FloatTensor:$exp_avg_sq,
                       Dsc_Scalar:$lr, Dsc_StepScalar:$step,
                       Dsc_Scalar:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, BoolAttr:$bias_correction,
                       F64Attr:$max_coeff, F64Attr:$min_coeff,
                       Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$new_param, Dsc_FloatTensor:$new_exp_avg,
                      Dsc_FloatTensor:$new_exp_avg_sq);
}

def Dsc_SgdOp : Dsc_Op<"sgd", [Dsc_Optimizer,
                                   AllTypesMatch<["param", "new_param"]>,
        DeclareOpInterfaceMethods<Dsc_InPlaceOpInterface>]> {
  let summary = "SGD with momentum, torch.optim.SGD semantics";
  let description = [{
    Elementwise, so each new value may be written over the old one
    (InPlaceOpInterface), as dsc.adam's.
  }];
  // Shapes: OptimizerOpInterface.
  let hasVerifier = 0;
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$grad,
                       Dsc_FloatTensor:$momentum_buffer, Dsc_Scalar:$lr,
                       Dsc_StepScalar:$step, Dsc_Scalar:$grad_scale,
                       F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, BoolAttr:$nesterov,
                       Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Dsc_FloatTensor:$new_momentum_buffer);
}

/// An optimizer whose state is not all shaped like the parameter.
def Dsc_OptimizerOwnStates
    : DeclareOpInterfaceMethods<Dsc_OptimizerOpInterface,
                                ["statesHaveParamShape"]>;

/// 8-bit optimizer state: one byte per element, a code of a dynamic map.
def Dsc_QuantizedState : RankedTensorOf<[UI8]>;

def Dsc_Adam8bitOp : Dsc_Op<"adam_8bit", [Dsc_OptimizerOwnStates,
                                          AllTypesMatch<["param", "new_param"]>,
                                          AllTypesMatch<["exp_avg", "new_exp_avg"]>,
                                          AllTypesMatch<["exp_avg_sq", "new_exp_avg_sq"]>]> {
  let summary = "8-bit Adam: bitsandbytes' block-wise quantized Adam update";
  let description = [{
    bitsandbytes' `Adam8bit` / `AdamW8bit` update of one parameter
    (`kOptimizerStatic8bit2StateBlockwise`): the moments are stored as one
    byte per element, a code of bitsandbytes' dynamic map (signed for
    `exp_avg`, unsigned for `exp_avg_sq`), scaled per block of 256
    consecutive elements of the flattened parameter by the block's largest
    magnitude (`exp_avg_absmax`, `exp_avg_sq_absmax`: ceil(n / 256) f32
    each). Per block: dequantize, g' = g * grad_scale,
    m = beta1 m + (1 - beta1) g', v = beta2 v + (1 - beta2) g'^2,
    p += -(lr sqrt(1 - beta2^t) / (1 - beta1^t)) m / (sqrt(v) +
    sqrt(1 - beta2^t) eps), then p *= 1 - lr weight_decay (decoupled, after
    the step, as bitsandbytes), the new absmax of each moment and each
    element quantized to the nearest code (a momentum whose nearest code has
    the other sign takes the neighbouring code of its own sign). An element
    whose gradient is inf or NaN gets zero moments and keeps its parameter.
    With `skip` non-zero, param and state pass through unchanged.

    ```mlir
    %p2, %m2, %v2, %ma2, %va2 = dsc.adam_8bit %p, %g, %m, %v, %ma, %va, %lr, %step, %gs
        {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64}
        : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xui8>, tensor<64x64xui8>,
           tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<i64>, tensor<f32>)
        -> (tensor<64x64xf32>, tensor<64x64xui8>, tensor<64x64xui8>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$grad,
                       Dsc_QuantizedState:$exp_avg,
                       Dsc_QuantizedState:$exp_avg_sq,
                       1DTensorOf<[F32]>:$exp_avg_absmax,
                       1DTensorOf<[F32]>:$exp_avg_sq_absmax,
                       Dsc_Scalar:$lr, Dsc_StepScalar:$step,
                       Dsc_Scalar:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay, Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Dsc_QuantizedState:$new_exp_avg,
                      Dsc_QuantizedState:$new_exp_avg_sq,
                      1DTensorOf<[F32]>:$new_exp_avg_absmax,
                      1DTensorOf<[F32]>:$new_exp_avg_sq_absmax);
  let extraClassDeclaration = [{
    /// bitsandbytes' block of the optimizer state (elements per absmax).
    static constexpr int64_t kBlockSize = 256;
  }];
}

def Dsc_AdafactorOp : Dsc_Op<"adafactor", [Dsc_OptimizerOwnStates,
                                           AttrSizedOperandSegments,
                                           AllTypesMatch<["param", "new_param"]>]> {
  let summary = "Adafactor update as Hugging Face transformers' Adafactor";
  let description = [{
    `transformers.optimization.Adafactor`'s step for one parameter. The
    states are the second moment, then `exp_avg` when `first_moment` (HF's
    `beta1` is not None): a parameter of rank >= 2 keeps it factored, as
    `exp_avg_sq_row` (shape[:-1]) and `exp_avg_sq_col` (shape[:-2] +
    shape[-1:]); a vector keeps `exp_avg_sq` (its shape). At step t:
    beta2t = 1 - t^decay_rate; u = g'^2 + eps1 (g' = g * grad_scale);
    row = beta2t row + (1 - beta2t) mean_last(u), col likewise over the
    second-last dimension, approx = rsqrt(row / mean(row)) rsqrt(col)
    (unfactored: v = beta2t v + (1 - beta2t) u, approx = rsqrt(v));
    update = approx g', divided by max(1, RMS(update) / clip_threshold);
    lr_t = (relative_step ? min(warmup_init ? 1e-6 t : 1e-2, 1/sqrt(t)) :
    lr) * (scale_parameter ? max(eps2, RMS(p)) : 1); update *= lr_t;
    with `first_moment` m = beta1 m + (1 - beta1) update, update = m;
    p -= weight_decay lr_t p; p -= update. RMS(x) = ||x|| / sqrt(numel).
    With `skip` non-zero, param and state pass through unchanged.

    ```mlir
    %p2, %r2, %c2 = dsc.adafactor %p, %g, [%r, %c], %lr, %step, %gs
        {clip_threshold = 1.0 : f64, decay_rate = -8.0e-01 : f64, ...}
        : tensor<8x4xf32>, tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>],
          tensor<f32>, tensor<i64>, tensor<f32>
        -> tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>]
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$param, Dsc_FloatTensor:$grad,
                       Variadic<RankedTensorOf<[F32]>>:$states,
                       Dsc_Scalar:$lr, Dsc_StepScalar:$step,
                       Dsc_Scalar:$grad_scale,
                       F64Attr:$eps1, F64Attr:$eps2, F64Attr:$clip_threshold,
                       F64Attr:$decay_rate, BoolAttr:$first_moment,
                       F64Attr:$beta1, F64Attr:$weight_decay,
                       BoolAttr:$scale_parameter, BoolAttr:$relative_step,
                       BoolAttr:$warmup_init, Optional<Dsc_Scalar>:$skip);
  let results = (outs Dsc_FloatTensor:$new_param,
                      Variadic<RankedTensorOf<[F32]>>:$new_states);
  let assemblyFormat = [{
    $param `,` $grad `,` `[` $states `]` `,` $lr `,` $step `,` $grad_scale
    (`skip` $skip^)? attr-dict `:` type($param) `,` type($grad) `,`
    `[` type($states) `]` `,` type($lr) `,` type($step) `,`
    type($grad_scale) (`,` type($skip)^)? `->` type($new_param) `,`
    `[` type($new_states) `]`
  }];
}

//===----------------------------------------------------------------------===//
// Mixed precision (lib/Dialect/MixedPrecisionOps.cpp)
//===----------------------------------------------------------------------===//

/// The dynamic loss scaler's persistent state, [scale, hysteresis used,
/// good steps since the last overflow]; all zero means "not started".
def Dsc_ScalerState : 1DTensorOf<[F32]>;

def Dsc_ConvertOp : Dsc_Op<"convert"> {
  let summary = "Converts a float tensor to another float element type";
  let description = [{
    `%y = dsc.convert %x : (tensor<4x8xf32>) -> tensor<4x8xbf16>` converts
    every element to the result's element type (f32, f16 or bf16): to the
    nearest representable value, ties to even. Subnormals are rounded
    exactly; f16 values beyond the largest finite half (65504, rounding
    boundary 65520) become +-inf; NaN stays NaN and infinities stay
    infinite. Widening (f16 or bf16 to f32) is exact. Inserted by
    -dsc-mixed-precision where a value changes format: the half copy of a
    GEMM weight, a half activation a function returns as f32.
  }];
  let arguments = (ins Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
}

def Dsc_CheckFiniteOp : Dsc_Op<"check_finite"> {
  let summary = "1.0 if any element of any input is inf or NaN, else 0.0";
  let description = [{
    The overflow test of DeepSpeed's fp16 optimizer
    (`CheckOverflow.has_overflow` over every gradient), evaluated on the
    averaged gradients so every data-parallel rank reaches the same verdict.
  }];
  let arguments = (ins Variadic<Dsc_FloatTensor>:$inputs);
  let results = (outs Dsc_Scalar:$overflow);
}

def Dsc_LossScaleOp : Dsc_Op<"loss_scale"> {
  let summary = "The current loss scale times `multiplier`";
  let description = [{
    Reads the scale out of the loss scaler's state (`initial_scale` while the
    state is all zero, i.e. before the first update). @micro_step seeds the
    loss gradient with `scale / A` (multiplier 1/A), as DeepSpeed's
    `backward` multiplies the loss by `cur_scale`.
  }];
  let arguments = (ins Dsc_ScalerState:$state, F64Attr:$initial_scale,
                       DefaultValuedAttr<F64Attr, "1.0">:$multiplier);
  let results = (outs Dsc_Scalar:$value);
}

def Dsc_UnscaleClipOp : Dsc_Op<"unscale_clip"> {
  let summary = "Gradient multiplier that unscales and clips, and the true norm";
  let description = [{
    DeepSpeed's `unscale_and_clip_grads`: from the norm of the scaled
    gradients, `norm = scaled_norm / scale`; `combined = scale`, times
    `(norm + 1e-6) / max_norm` when `max_norm > 0` and that ratio exceeds 1;
    `grad_scale = 1 / combined`. Clipping therefore uses the unscaled norm.
  }];
  let arguments = (ins Dsc_Scalar:$scaled_norm, Dsc_Scalar:$scale,
                       F64Attr:$max_norm);
  let results = (outs Dsc_Scalar:$grad_scale, Dsc_Scalar:$norm);
}

def Dsc_UpdateLossScaleOp : Dsc_Op<"update_loss_scale"> {
  let summary = "DeepSpeed's DynamicLossScaler.update_scale";
  let description = [{
    Given the step's overflow flag, returns the scaler's next state exactly
    as `deepspeed/runtime/fp16/loss_scaler.py`'s `update_scale(overflow)`
    (scale factor 2): on overflow, with `hysteresis` == 1 or no hysteresis
    left, the scale halves (not below `min_scale`; an overflow at
    `min_scale` is a runtime error, as DeepSpeed raises), otherwise one unit
    of hysteresis is used; without overflow, every `scale_window`-th
    iteration since the last overflow doubles the scale and restores the
    hysteresis (restored on every good step with `consecutive_hysteresis`).
    With `dynamic = false` (a static `loss_scale`) the state is unchanged.
  }];
  let arguments = (ins Dsc_ScalerState:$state, Dsc_Scalar:$overflow,
                       BoolAttr:$dynamic, F64Attr:$initial_scale,
                       I64Attr:$scale_window, I64Attr:$hysteresis,
                       F64Attr:$min_scale, BoolAttr:$consecutive_hysteresis);
  let results = (outs Dsc_ScalerState:$new_state);
}

#endif // DSC_OPS
