//===- DscAttrs.td - dsc attributes and enums --------------*- tablegen -*-===//
#ifndef DSC_ATTRS
#define DSC_ATTRS

include "dsc/Dialect/DscDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Dsc_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU is evaluated", [
      I32EnumAttrCase<"tanh", 0>,  // GPT-2 "gelu_new"
      I32EnumAttrCase<"erf", 1>    // BERT "gelu"
    ]> {
  let cppNamespace = "::mlir::dsc";
}

def Dsc_RopeScaling : I32EnumAttr<"RopeScaling",
    "how rotary embeddings stretch positions (Hugging Face rope_scaling)", [
      I32EnumAttrCase<"none", 0>,    // plain RoPE
      I32EnumAttrCase<"linear", 1>,  // every frequency divided by factor
      I32EnumAttrCase<"llama3", 2>   // Llama 3.1's per-wavelength blend
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_RopeScalingAttr : EnumAttr<Dsc_Dialect, Dsc_RopeScaling, "rope_scaling">;

def Dsc_HalfFormat : I32EnumAttr<"HalfFormat",
    "16-bit floating-point format of -dsc-mixed-precision", [
      I32EnumAttrCase<"f16", 0>,  // IEEE binary16
      I32EnumAttrCase<"bf16", 1>  // bfloat16
    ]> {
  let cppNamespace = "::mlir::dsc";
}

def Dsc_LrScheduleKind : I32EnumAttr<"LrScheduleKind",
    "learning-rate scheduler, as DeepSpeed names them", [
      I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"WarmupLR", 1>,
      I32EnumAttrCase<"WarmupDecayLR", 2>, I32EnumAttrCase<"WarmupCosineLR", 3>
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_LrScheduleKindAttr
    : EnumAttr<Dsc_Dialect, Dsc_LrScheduleKind, "lr_schedule">;

def Dsc_WarmupType : I32EnumAttr<"WarmupType", "shape of the lr warmup", [
      I32EnumAttrCase<"log", 0>, I32EnumAttrCase<"linear", 1>
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_WarmupTypeAttr : EnumAttr<Dsc_Dialect, Dsc_WarmupType, "warmup">;

def Dsc_ReduceKind : I32EnumAttr<"ReduceKind",
    "how a collective combines the ranks' tensors", [
      I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>,
      I32EnumAttrCase<"max", 2>
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_ReduceKindAttr : EnumAttr<Dsc_Dialect, Dsc_ReduceKind, "reduce">;

def Dsc_MeshAxis : I32EnumAttr<"MeshAxis",
    "an axis of the device mesh: the ranks a collective spans", [
      I32EnumAttrCase<"data", 0>, I32EnumAttrCase<"tensor", 1>,
      I32EnumAttrCase<"pipeline", 2>,
      // The data axis split into groups of dsc.mesh_data_inner consecutive
      // data ranks: a rank's group (data_inner) and the ranks at its
      // position in every group (data_outer).
      I32EnumAttrCase<"data_inner", 3>, I32EnumAttrCase<"data_outer", 4>
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_MeshAxisAttr : EnumAttr<Dsc_Dialect, Dsc_MeshAxis, "axis">;

def Dsc_InitKind : I32EnumAttr<"InitKind", "parameter initialisation rule", [
      I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"zeros", 1>,
      I32EnumAttrCase<"ones", 2>,
      I32EnumAttrCase<"uniform", 3>  // U(-std, std): LoRA's A
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_InitKindAttr : EnumAttr<Dsc_Dialect, Dsc_InitKind, "init">;

def Dsc_StateKind : I32EnumAttr<"StateKind",
    "what a train-step argument or result holds across calls", [
      I32EnumAttrCase<"param", 0>, I32EnumAttrCase<"grad", 1>,
      I32EnumAttrCase<"exp_avg", 2>, I32EnumAttrCase<"exp_avg_sq", 3>,
      I32EnumAttrCase<"momentum", 4>, I32EnumAttrCase<"input_ids", 5>,
      I32EnumAttrCase<"targets", 6>, I32EnumAttrCase<"step", 7>,
      I32EnumAttrCase<"output", 8>, I32EnumAttrCase<"loss_scaler", 9>,
      I32EnumAttrCase<"worker_error", 10>, I32EnumAttrCase<"server_error", 11>,
      I32EnumAttrCase<"momentum_accumulator", 12>,
      I32EnumAttrCase<"lr_sum", 13>,
      I32EnumAttrCase<"lamb_coeff_freeze", 14>,
      I32EnumAttrCase<"last_factor", 15>,
      I32EnumAttrCase<"scaling_coeff", 16>,
      I32EnumAttrCase<"exp_avg_sq_fresh", 17>,
      I32EnumAttrCase<"activation", 18>,
      // 8-bit Adam: the per-block scales of the quantized moments.
      I32EnumAttrCase<"exp_avg_absmax", 19>,
      I32EnumAttrCase<"exp_avg_sq_absmax", 20>,
      // Adafactor: the factored second moment of a matrix.
      I32EnumAttrCase<"exp_avg_sq_row", 21>,
      I32EnumAttrCase<"exp_avg_sq_col", 22>,
      // ZeRO-Offload: the fp32 master weights (this rank's shard) that the
      // host updates; the device keeps the parameter for the step.
      I32EnumAttrCase<"master", 23>
    ]> {
  let cppNamespace = "::mlir::dsc";
  let genSpecializedAttr = 0;
}
def Dsc_StateKindAttr : EnumAttr<Dsc_Dialect, Dsc_StateKind, "state_kind">;

def Dsc_ParamAttr : AttrDef<Dsc_Dialect, "Param"> {
  let mnemonic = "param";
  let summary = "A model parameter: its Hugging Face name and init rule";
  let description = [{
    Attached to a `@forward` argument as `dsc.param`:
    `#dsc.param<"transformer.h.0.attn.c_attn.weight", normal, 0.02>`. The name is
    the one `save_pretrained` writes; layouts follow Hugging Face (GPT-2
    `Conv1D` weights are [in, out], BERT `nn.Linear` weights are [out, in]).
    `std` is the standard deviation of `normal` and the bound of `uniform`.
  }];
  let parameters = (ins StringRefParameter<>:$name,
                        "InitKind":$init,
                        "FloatAttr":$std);
  let assemblyFormat = "`<` $name `,` $init `,` $std `>`";
  let genVerifyDecl = 1;
}

def Dsc_MeshAttr : AttrDef<Dsc_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "The device mesh: ranks = data x tensor x pipeline";
  let description = [{
    The module attribute `dsc.mesh = #dsc.mesh<data = 4, tensor = 2,
    pipeline = 1>` says how the job's ranks are arranged; a collective's
    `axis` names the group of ranks it spans (all ranks that differ only in
    that coordinate), and its verifier checks shapes against that group's
    size. A module without `dsc.mesh` runs on one rank (every axis has
    size 1).

    The module attribute `dsc.mesh_data_inner = S : i64` (S divides `data`)
    splits the data axis into groups of S consecutive data ranks: the axis
    `data_inner` spans a rank's group (S ranks), `data_outer` the data / S
    ranks at its position in every group. Without it `data_inner` has one
    rank and `data_outer` is the data axis. Hybrid sharding shards ZeRO's
    state over `data_inner` and all-reduces over `data_outer`; ZeRO++'s hpZ
    gathers the backward's parameters over `data_inner`.
  }];
  let parameters = (ins "int64_t":$data, "int64_t":$tensor,
                        "int64_t":$pipeline);
  let assemblyFormat = [{
    `<` `data` `=` $data `,` `tensor` `=` $tensor `,` `pipeline` `=`
    $pipeline `>`
  }];
  let genVerifyDecl = 1;
}

def Dsc_FourBitAttr : AttrDef<Dsc_Dialect, "FourBit"> {
  let mnemonic = "four_bit";
  let summary = "How a frozen parameter is stored in 4 bits (QLoRA)";
  let description = [{
    -dsc-quantize-frozen stores a frozen weight of `rows` x `cols` elements
    as 4-bit codes of `format` ("nf4" or "fp4", bitsandbytes' code books)
    with one absmax per `block` elements, quantized to 8 bits in blocks of
    256 with `double_quant`, and records it in the module's
    `dsc.four_bit_params` dictionary (parameter name -> `#dsc.four_bit<"nf4",
    rows = 64, cols = 32, block = 64, double_quant = true, transposed =
    false>`). The step's argument is then the weight's bytes
    (`tensor<Nxui8>`, the layout of include/dsc/Program/FourBitLayout.h);
    the runtime quantizes the full-precision weight it loads or
    initialises. The quantized weight is always `[out, in]` (`nn.Linear`'s
    layout, as bitsandbytes stores it); `transposed` says the parameter's
    own layout is `[in, out]` (GPT-2's Conv1D, `[cols, rows]`), which the
    runtime transposes as it quantizes and exports.
  }];
  let parameters = (ins StringRefParameter<>:$format, "int64_t":$rows,
                        "int64_t":$cols, "int64_t":$block,
                        "bool":$doubleQuant, "bool":$transposed);
  let assemblyFormat = [{
    `<` $format `,` `rows` `=` $rows `,` `cols` `=` $cols `,` `block` `=`
    $block `,` `double_quant` `=` $doubleQuant `,` `transposed` `=`
    $transposed `>`
  }];
}

def Dsc_TensorSliceAttr : AttrDef<Dsc_Dialect, "TensorSlice"> {
  let mnemonic = "tensor_slice";
  let summary = "Which part of a parameter a tensor-parallel rank holds";
  let description = [{
    -dsc-tensor-parallel slices a parameter over the T ranks of the mesh's
    tensor axis and records it in the module's `dsc.tensor_slices`
    dictionary (parameter name -> `#dsc.tensor_slice<dim = 1, groups = 3,
    size = 192>`). Dimension `dim` of the whole tensor has `size` elements
    in `groups` equal sections (GPT-2's fused c_attn holds Q, K and V: 3);
    rank r holds part r of T of each section, the parts side by side. With
    one group the parts may overrun `size`: a vocabulary-parallel table of
    107 rows over 2 ranks holds 54 rows on each, the last one padding. The
    step's arguments have the slice's shape; the runtime initializes, loads
    and saves whole tensors. The step's `logits` output may be listed too
    (the runtime gathers it when it reads it).
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$groups, "int64_t":$size);
  let assemblyFormat = [{
    `<` `dim` `=` $dim `,` `groups` `=` $groups `,` `size` `=` $size `>`
  }];
  let genVerifyDecl = 1;
}

def Dsc_StateAttr : AttrDef<Dsc_Dialect, "State"> {
  let mnemonic = "state";
  let summary = "Role of a train-step argument or result";
  let description = [{
    `#dsc.state<grad, "transformer.wte.weight">` marks the gradient accumulator
    of that parameter. A result whose state equals an argument's state
    overwrites that argument's buffer: this is how the runtime knows which
    values persist across calls. `output` results are read by the driver.
  }];
  let parameters = (ins "StateKind":$kind, StringRefParameter<>:$name);
  let assemblyFormat = "`<` $kind `,` $name `>`";
}

def Dsc_BlockLayoutAttr : AttrDef<Dsc_Dialect, "BlockLayout"> {
  let mnemonic = "block_layout";
  let summary = "A block-sparse attention layout, rows compressed (CSR)";
  let description = [{
    Which key blocks each query block attends to, per head:
    `#dsc.block_layout<block = 16, heads = 1, blocks = 3,
    rows = array<i32: 0, 1, 3, 5>, cols = array<i32: 0, 0, 1, 1, 2>>`.
    Tokens are cut into `blocks` blocks of `block`; query block i of layout
    head h attends to the key blocks `cols[rows[h * blocks + i]]` up to
    (not including) `cols[rows[h * blocks + i + 1]]`, ascending. `heads` is
    1 (every head shares the layout) or the number of query heads (head h
    uses layout head h). Every query block attends to at least one key
    block. On `dsc.softmax`, `dsc.softmax_dropout`, `dsc.attention` and
    `dsc.attention_grad` it masks every score outside the layout's blocks
    (probability exactly 0), on top of the op's causal mask; the fused
    attention kernels visit only the layout's blocks. Built from a
    `sparse_attention` config by the frontend (include/dsc/Frontend/
    SparseLayout.h).
  }];
  let parameters = (ins "int64_t":$block, "int64_t":$heads, "int64_t":$blocks,
                        "DenseI32ArrayAttr":$rows, "DenseI32ArrayAttr":$cols);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The layout of a [heads][blocks][blocks] 0/1 mask.
    static BlockLayoutAttr fromMask(MLIRContext *ctx, int64_t block,
                                    int64_t heads, int64_t blocks,
                                    ArrayRef<uint8_t> mask);
    /// The tokens the layout covers (blocks * block).
    int64_t getTokens() const { return getBlocks() * getBlock(); }
    /// Nonzero blocks over all layout heads.
    int64_t getNonzero() const { return getCols().size(); }
    /// Whether no block lies above the diagonal.
    bool isBlockCausal() const;
  }];
}

#endif // DSC_ATTRS
