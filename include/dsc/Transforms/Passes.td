//===- Passes.td - dsc passes ------------------------------*- tablegen -*-===//
#ifndef DSC_PASSES
#define DSC_PASSES

include "mlir/Pass/PassBase.td"

def DscAutodiff : Pass<"dsc-autodiff", "::mlir::ModuleOp"> {
  let summary = "Build the backward graph of @forward from per-op rules";
  let description = [{
    For the function `@forward(params..., inputs...) -> (loss, extra...)`
    this adds `@forward_grad(params..., inputs..., %dloss) -> (loss, extra...,
    grads...)` holding the forward ops followed by their reverse-mode
    gradients, one gradient per argument carrying `dsc.param` and not
    `dsc.frozen` (frozen parameters are constants to it). Gradients of
    values with several uses are summed with `dsc.add`. Each op's rule comes
    from its GradientOpInterface; an op on the path to the loss without one
    is an error.

    A pipeline stage (-dsc-pipeline-stage) also differentiates its received
    activation (the argument marked `dsc.pipeline_input`): that gradient,
    sent back to the previous stage, is the last result. A stage before
    the last returns the activation it sends instead of a loss; `%dloss`
    then has its type and is the gradient the next stage sends back.

    ```mlir
    func.func @forward(%w: tensor<4x3xf32> {dsc.param = ...}, %x: ...) -> tensor<f32>
    // =>
    func.func @forward_grad(%w, %x, %dloss: tensor<f32>) -> (tensor<f32>, tensor<4x3xf32>)
      ... forward ...
      %dlogits = dsc.cross_entropy_grad %dloss, %logits, %labels ...
      %dw = dsc.linear_grad_weight %x, %dlogits ...
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "Name of the function to differentiate">
  ];
}

def DscLora : Pass<"dsc-lora", "::mlir::ModuleOp"> {
  let summary = "LoRA: freeze @forward's parameters, add low-rank adapters";
  let description = [{
    PEFT's `get_peft_model` as a rewrite of the forward graph (run it first,
    before the fusions and -dsc-autodiff). Every `dsc.linear` whose weight
    is the parameter `<module>.weight` of a targeted module gets an adapter:
    two new parameters `<module>.lora_A.weight` [r, in] (uniform in
    +-1/sqrt(in), PEFT's kaiming_uniform(a=sqrt(5))) and
    `<module>.lora_B.weight` [out, r] (zeros), and its result becomes

    ```mlir
    %y  = dsc.linear %x, %w, %b                      // the frozen base
    %xd = dsc.dropout %x {rate = lora_dropout}       // only if rate > 0
    %h  = dsc.linear %xd, %lora_A {transpose_w = true}
    %d  = dsc.linear %h, %lora_B {transpose_w = true}
    %ds = dsc.scale %d {factor = alpha / r}          // alpha / sqrt(r): rslora
    %y2 = dsc.add %y, %ds
    ```

    Every other parameter gets `dsc.frozen` (no gradient, no optimizer
    state), except biases by `bias`: `all` trains every parameter whose name
    contains "bias" (PEFT's rule), `lora_only` the biases of adapted
    modules. A module matches an entry of `target-modules` when its name
    equals it or ends in "." + it; `all-linear` adapts every linear layer
    but the output head; `target-regex` instead matches whole module names
    (PEFT's string form). Every entry must match a module, and a matched
    weight must feed only linear layers (an embedding cannot be adapted).
    The module records the settings (`dsc.lora_rank`, `dsc.lora_alpha`,
    `dsc.lora_dropout`, `dsc.lora_target_modules` or `dsc.lora_target_regex`,
    `dsc.lora_bias`, `dsc.lora_rslora`, `dsc.lora_fan_in_fan_out`): the
    runtime writes them to PEFT's adapter_config.json and merges with them.
    After -dsc-tensor-parallel, a sliced layer's adapter is sliced with it:
    a column-parallel layer's `lora_B` as its output features (the adapter
    reads the input before the region's `dsc.tp_copy` and copies its
    hidden value through one of its own), a row-parallel layer's `lora_A`
    as its input features (its partial hidden value summed by a
    `dsc.tp_reduce`, the adapter added after the layer's); the entries join
    `dsc.tensor_slices`, and a dropout on sliced inputs joins
    `dsc.tensor_parallel_streams`.
  }];
  let options = [
    Option<"rank", "rank", "int64_t", "8", "r: the adapters' rank">,
    Option<"alpha", "alpha", "::mlir::dsc::ExactDouble", "8.0",
           "lora_alpha: the update is scaled by alpha / r">,
    Option<"dropout", "dropout", "::mlir::dsc::ExactDouble", "0.0",
           "lora_dropout: dropout on the adapter's input">,
    ListOption<"targetModules", "target-modules", "std::string",
               "target_modules: module names (or name suffixes) to adapt">,
    Option<"targetRegex", "target-regex", "std::string", "\"\"",
           "target_modules as a string: a regex matching whole module names">,
    Option<"bias", "bias", "std::string", "\"none\"",
           "Trainable biases: none, all or lora_only">,
    Option<"rslora", "rslora", "bool", "false",
           "use_rslora: scale by alpha / sqrt(r)">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscQuantizeFrozen : Pass<"dsc-quantize-frozen", "::mlir::ModuleOp"> {
  let summary = "QLoRA: frozen linear weights stored in 4 bits";
  let description = [{
    bitsandbytes' `load_in_4bit` as a rewrite of the forward graph (after
    -dsc-lora, before the fusions and -dsc-autodiff). Every frozen rank-2
    f32 parameter `<module>.weight` that only `dsc.linear` ops read as
    their weight (all in one layout), whose module is not in
    `skip-modules`, becomes a `tensor<Bxui8>` argument holding the 4-bit
    codes and block scales (`include/dsc/Program/FourBitLayout.h`) of the
    weight in `[out, in]` layout, as bitsandbytes' Linear4bit stores it
    (a GPT-2 Conv1D weight is quantized transposed), and each of its GEMMs
    a `dsc.linear_4bit` with `transpose_w` (a bias becomes a `dsc.add`
    after it):

    ```mlir
    %y = dsc.linear %x, %w, %b {transpose_w = true}
    // becomes
    %g = dsc.linear_4bit %x, %wq {format = "nf4", rows = 64, cols = 32,
           block_size = 64, double_quant = true, transpose_w = true}
    %y = dsc.add %g, %b
    ```

    The module's `dsc.four_bit_params` records each quantized parameter's
    `#dsc.four_bit` (the runtime quantizes the weight it loads or
    initialises). A module is skipped when its name equals an entry or ends
    in "." + the entry (bitsandbytes' `llm_int8_skip_modules`; the default
    keeps the output head, `lm_head`, as transformers does). Weights an
    embedding also reads (a tied head) stay as they are.
  }];
  let options = [
    Option<"format", "format", "std::string", "\"nf4\"",
           "bnb_4bit_quant_type: nf4 or fp4">,
    Option<"blockSize", "block-size", "int64_t", "64",
           "Elements per absmax (bitsandbytes' blocksize for 4-bit weights)">,
    Option<"doubleQuant", "double-quant", "bool", "false",
           "bnb_4bit_use_double_quant: the absmaxes in 8 bits, blocks of 256">,
    ListOption<"skipModules", "skip-modules", "std::string",
               "llm_int8_skip_modules: modules kept in full precision "
               "(default: lm_head)">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseQkv : Pass<"dsc-fuse-qkv", "::mlir::ModuleOp"> {
  let summary = "One GEMM for Q, K and V, then a fused bias + split-heads";
  let description = [{
    DeepSpeed's QKV fusion as a graph rewrite on the forward graph (run it
    before -dsc-autodiff; the gradient follows from the new ops' rules).

    Three projections of the same input into single-part `dsc.split_heads`
    (BERT's query/key/value) become one projection over the concatenated
    weights and biases; the parameters stay separate arguments, so loading
    and saving keep their Hugging Face names:

    ```mlir
    %q = dsc.linear %x, %wq, %bq {transpose_w = true}  // and %k, %v
    %qh = dsc.split_heads %q {num_heads = 12}          // and %kh, %vh
    // =>
    %w = dsc.concat %wq, %wk, %wv {axis = 0}
    %b = dsc.concat %bq, %bk, %bv {axis = 0}
    %qkv = dsc.linear %x, %w {transpose_w = true}
    %qh, %kh, %vh = dsc.bias_split_heads %qkv, %b {num_heads = 12}
    ```

    A biased projection whose only user is a `dsc.split_heads` (GPT-2's
    `c_attn`, and the result of the rewrite above) loses its bias to a
    `dsc.bias_split_heads`, which adds it while writing Q, K and V in
    [batch, heads, seq, head_dim] layout.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseBiasGelu : Pass<"dsc-fuse-bias-gelu", "::mlir::ModuleOp"> {
  let summary = "Bias + GELU in one op (and one op for its gradient)";
  let description = [{
    A biased projection whose only user is a GELU (the MLP's first layer)
    hands its bias to a `dsc.bias_gelu`; run before -dsc-autodiff, whose rule
    for it emits one `dsc.bias_gelu_grad` computing the input and bias
    gradients in a single pass.

    ```mlir
    %h = dsc.linear %x, %w, %b
    %a = dsc.gelu tanh %h
    // =>
    %h = dsc.linear %x, %w
    %a = dsc.bias_gelu tanh %h, %b
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseSwiglu : Pass<"dsc-fuse-swiglu", "::mlir::ModuleOp"> {
  let summary = "SiLU gate times up projection in one op (LLaMA's MLP)";
  let description = [{
    A product whose operand is a SiLU used only there becomes one
    `dsc.swiglu`; run before -dsc-autodiff, whose rule for it emits one
    `dsc.swiglu_grad` for both operands' gradients.

    ```mlir
    %s = dsc.silu %gate
    %h = dsc.mul %s, %up
    // =>
    %h = dsc.swiglu %gate, %up
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseBiasDropoutAdd : Pass<"dsc-fuse-bias-dropout-add", "::mlir::ModuleOp"> {
  let summary = "Bias + dropout + residual add in one op";
  let description = [{
    A biased projection, optionally followed by a dropout, added to a
    residual of the same shape (every block's output projection) becomes
    one `dsc.bias_dropout_add`; run before -dsc-autodiff, whose rule for it
    passes the gradient to the residual and emits one `dsc.dropout_bias_grad`
    for the input and bias gradients.

    ```mlir
    %h = dsc.linear %x, %w, %b
    %d = dsc.dropout %h {rate = 0.1, stream = 3}
    %y = dsc.add %res, %d
    // =>
    %h = dsc.linear %x, %w
    %y = dsc.bias_dropout_add %h, %b, %res {rate = 0.1, stream = 3}
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseResidualLayerNorm : Pass<"dsc-fuse-residual-layer-norm", "::mlir::ModuleOp"> {
  let summary = "Residual add (with bias and dropout) + LayerNorm in one op";
  let description = [{
    A `dsc.layer_norm` of a `dsc.bias_dropout_add` (run
    -dsc-fuse-bias-dropout-add first) becomes one
    `dsc.bias_dropout_add_layer_norm`, which also yields the residual sum for
    its other users and each row's 1/std. Run before -dsc-autodiff, whose
    rule for it emits one `dsc.layer_norm_grad` that adds the sum's other
    gradient in the same pass, then one `dsc.dropout_bias_grad`.

    ```mlir
    %y = dsc.bias_dropout_add %h, %b, %res {rate = 0.1, stream = 3}
    %n = dsc.layer_norm %y, %g, %beta {epsilon = 1e-5}
    // =>
    %y, %n, %rstd = dsc.bias_dropout_add_layer_norm %h, %b, %res, %g, %beta
        {epsilon = 1e-5, rate = 0.1, stream = 3}
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseResidualRmsNorm : Pass<"dsc-fuse-residual-rms-norm", "::mlir::ModuleOp"> {
  let summary = "Residual add + RMSNorm in one op";
  let description = [{
    A `dsc.rms_norm` of a same-shape `dsc.add` (LLaMA's residual stream)
    becomes one `dsc.add_rms_norm`, which also yields the sum for its other
    users and each row's 1/rms. Run before -dsc-autodiff, whose rule for it
    emits one `dsc.rms_norm_grad` that adds the sum's other gradient in the
    same pass.

    ```mlir
    %h = dsc.add %x, %res
    %n = dsc.rms_norm %h, %w {epsilon = 1e-5}
    // =>
    %h, %n, %rstd = dsc.add_rms_norm %x, %res, %w {epsilon = 1e-5}
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseSoftmaxDropout : Pass<"dsc-fuse-softmax-dropout", "::mlir::ModuleOp"> {
  let summary = "Scale + mask + softmax + dropout of the attention in one op";
  let description = [{
    A `dsc.softmax` (which already applies the scale and the causal mask)
    whose only user is a `dsc.dropout` becomes one `dsc.softmax_dropout`;
    run before -dsc-autodiff, whose rule for it emits one
    `dsc.softmax_dropout_grad`.

    ```mlir
    %p = dsc.softmax %s {causal = true, scale = 0.125}
    %d = dsc.dropout %p {rate = 0.1, stream = 2}
    // =>
    %d, %p = dsc.softmax_dropout %s {causal = true, rate = 0.1, scale = 0.125, stream = 2}
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseCrossEntropy : Pass<"dsc-fuse-cross-entropy", "::mlir::ModuleOp"> {
  let summary = "The loss and its gradient in one pass over the logits, in place";
  let description = [{
    In a built step, a `dsc.cross_entropy` and the `dsc.cross_entropy_grad`
    of the same logits, labels and `ignore_index`, whose seed is computed
    before the loss (in @micro_step it is the constant 1/A, or the fp16 loss
    scale), become one `dsc.cross_entropy_with_grad` where the loss was. Its
    kernels read each row of logits once for both and write the gradient
    over the logits when nothing else reads them, so the [B, T, V] logits
    and their gradient share one buffer and one pass of memory traffic. The
    loss and the gradient are the separate ops' bit for bit. Runs last: a
    pipeline stage's loss and its gradient in different functions are left
    as they are.

    ```mlir
    %seed = dsc.fill {dsc.grad, value = 2.5e-01 : f64} : () -> tensor<f32>
    %loss = dsc.cross_entropy %logits, %labels
    ...
    %dl = dsc.cross_entropy_grad %seed, %logits, %labels {dsc.grad}
    // =>
    %loss, %dl = dsc.cross_entropy_with_grad %seed, %logits, %labels
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscFuseAttention : Pass<"dsc-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Dense attention (scores, softmax, dropout, context) in one op";
  let description = [{
    The attention core of the imported models, `q k^T` -> softmax (scale
    and causal mask) -> optional dropout -> `@ v`, becomes one
    `dsc.attention`, which never materialises the [B, H, T, T] scores or
    probabilities: it visits the keys in tiles with an online softmax and
    keeps only each row's log-sum-exp. Its gradient rule emits one
    `dsc.attention_grad`, which recomputes the probabilities per tile from
    q, k and that log-sum-exp (FlashAttention-2), so the backward keeps
    nothing of size [T, T]: on GPT-2 small at seq 1024 that is most of the
    saved activations (the probabilities and their dropout, 2·B·H·T² values
    per layer). Run before -dsc-autodiff. It matches the chain whether or
    not -dsc-fuse-softmax-dropout has run (softmax + dropout, or their
    fused op whose undropped probabilities are unused); every intermediate
    must have exactly one user, the context product's alpha must be 1, and
    q, k, v must have one [B, H, T, D] shape. The score product's alpha is
    folded into the scale.

    ```mlir
    %s = dsc.batch_matmul %q, %k {transpose_b = true}
    %p = dsc.softmax %s {causal = true, scale = 0.125}
    %d = dsc.dropout %p {rate = 0.1, stream = 2}
    %c = dsc.batch_matmul %d, %v
    // =>
    %c, %lse = dsc.attention %q, %k, %v {causal = true, rate = 0.1, scale = 0.125, stream = 2}
    ```

    Without a dropout the op gets rate 0 and stream 0 (no draw is made).
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscInvertible : Pass<"dsc-invertible", "::mlir::ModuleOp"> {
  let summary = "LayerNorm and RMSNorm backward from the output (normalize_invertible)";
  let description = [{
    DeepSpeed's `normalize_invertible`: the LayerNorm backward is computed
    from the LayerNorm output and a saved per-row 1/std instead of its input,
    so the input is no longer kept alive for the backward pass. Run it after
    -dsc-autodiff (or -dsc-build-train-step):

    ```mlir
    %y = dsc.layer_norm %x, %g, %b {epsilon = 1e-5}
    ...
    %dx, %dg, %db = dsc.layer_norm_grad %dy, %x, %g {epsilon = 1e-5}
    // =>
    %y, %rstd = dsc.invertible_layer_norm %x, %g, %b {epsilon = 1e-5}
    ...
    %dx, %dg, %db = dsc.layer_norm_grad_from_output %dy, %y, %g, %b, %rstd
    ```

    Inversion needs gamma != 0 in every element (x_hat = (y - beta)/gamma)
    and the forward's beta. The pass cannot prove gamma != 0 at compile time
    (it is a trained parameter), so it rewrites whenever asked and the kernel
    checks gamma at run time: a zero element is a clear error, never a wrong
    gradient. RMSNorm the same way: dsc.rms_norm becomes
    dsc.invertible_rms_norm and its gradient dsc.rms_norm_grad_from_output
    (x_hat = y / weight). The fused dsc.bias_dropout_add_layer_norm and
    dsc.add_rms_norm already yield the per-row statistic, so only their
    gradients change. Softmax needs no rewrite: dsc.softmax_grad already
    reads only the softmax output; nor does dsc.rotary, whose gradient is
    the inverse rotation of the incoming gradient.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscBuildTrainStep : Pass<"dsc-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Turn @forward_grad into @micro_step and @apply_step";
  let description = [{
    `@micro_step(params, grad_accs, input_ids, targets) -> (loss,
    grad_accs')` runs one micro-batch and adds its gradients (seeded with
    1/gradient_accumulation_steps, as DeepSpeed scales the loss) to the
    accumulators. The logits stay inside the step (only the loss and its
    gradient read them), so the memory planner reuses their buffer; with
    `return-logits` they are also a result after the loss, as
    `dsc-run inspect` needs. `@eval_step` always returns them. `@apply_step(params, grad_accs, opt_state, step) -> (params',
    opt_state', grad_norm, lr)` averages the accumulators over data-parallel
    ranks (`dsc.all_reduce`), clips by global norm, evaluates the learning-rate
    schedule and applies the optimizer. Weight decay is applied to tensors of
    rank >= 2 only. Every argument and result carries `dsc.state`, which tells
    the runtime which buffers persist and which results overwrite them.

    The optimizer state is per parameter, in the kinds and types its update
    op takes: `adam8bit`/`adamw8bit` give a tensor of at least
    `min-8bit-size` elements `dsc.adam_8bit` with u8 `exp_avg`/`exp_avg_sq`
    and f32 `exp_avg_absmax`/`exp_avg_sq_absmax` (one per 256 elements), a
    smaller one `dsc.adam` (AdamW, bias-corrected, f32 state), as
    bitsandbytes keeps those in 32 bits; `adafactor` gives a matrix
    `exp_avg_sq_row` and `exp_avg_sq_col`, a vector `exp_avg_sq`, and both
    `exp_avg` with `first-moment`:

    ```mlir
    // -dsc-build-train-step=optimizer=adafactor, a [8, 4] weight:
    func.func @apply_step(%w: tensor<8x4xf32> {dsc.state = #dsc.state<param, "w">}, ...,
        %row: tensor<8xf32> {dsc.state = #dsc.state<exp_avg_sq_row, "w">},
        %col: tensor<4xf32> {dsc.state = #dsc.state<exp_avg_sq_col, "w">}, ...)
      %w2, %f:2 = dsc.adafactor %w, %g, [%row, %col], %lr, %step, %gs ...
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::dsc::TrainStepOptimizer",
           "::mlir::dsc::TrainStepOptimizer::AdamW", "The optimizer",
           [{::llvm::cl::values(
             clEnumValN(::mlir::dsc::TrainStepOptimizer::Adam, "adam",
                        "Adam, weight decay added to the gradient (L2)"),
             clEnumValN(::mlir::dsc::TrainStepOptimizer::AdamW, "adamw",
                        "Adam with decoupled weight decay"),
             clEnumValN(::mlir::dsc::TrainStepOptimizer::Lamb, "lamb",
                        "LAMB (layer-wise trust ratio)"),
             clEnumValN(::mlir::dsc::TrainStepOptimizer::Sgd, "sgd",
                        "SGD with optional momentum and Nesterov"),
             clEnumValN(::mlir::dsc::TrainStepOptimizer::Adam8bit, "adam8bit",
                        "bitsandbytes' Adam8bit (dsc.adam_8bit)"),
             clEnumValN(::mlir::dsc::TrainStepOptimizer::AdamW8bit, "adamw8bit",
                        "bitsandbytes' AdamW8bit (dsc.adam_8bit)"),
             clEnumValN(::mlir::dsc::TrainStepOptimizer::Adafactor, "adafactor",
                        "Hugging Face's Adafactor (dsc.adafactor)"))}]>,
    Option<"min8bitSize", "min-8bit-size", "int64_t", "4096",
           "8-bit Adam: tensors with fewer elements keep 32-bit state "
           "(dsc.adam with bitsandbytes' defaults)">,
    Option<"adafactorEps1", "adafactor-eps1", "::mlir::dsc::ExactDouble",
           "1e-30", "Adafactor eps[0], added to the squared gradient">,
    Option<"adafactorEps2", "adafactor-eps2", "::mlir::dsc::ExactDouble",
           "1e-3", "Adafactor eps[1], the smallest parameter scale">,
    Option<"clipThreshold", "clip-threshold", "::mlir::dsc::ExactDouble", "1.0",
           "Adafactor: the update's RMS is clipped to this">,
    Option<"decayRate", "decay-rate", "::mlir::dsc::ExactDouble", "-0.8",
           "Adafactor: beta2 of step t is 1 - t^decay_rate">,
    Option<"firstMoment", "first-moment", "bool", "false",
           "Adafactor keeps a first moment with beta1 (HF beta1 not None)">,
    Option<"scaleParameter", "scale-parameter", "bool", "true",
           "Adafactor scales the lr by max(eps[1], RMS(param))">,
    Option<"relativeStep", "relative-step", "bool", "true",
           "Adafactor's lr is min(1e-2, 1/sqrt(t)); lr is ignored">,
    Option<"warmupInit", "warmup-init", "bool", "false",
           "Adafactor's relative step is min(1e-6 t, 1/sqrt(t))">,
    Option<"lr", "lr", "::mlir::dsc::ExactDouble", "1e-3", "Base learning rate">,
    Option<"beta1", "beta1", "::mlir::dsc::ExactDouble", "0.9", "Adam/LAMB beta1">,
    Option<"beta2", "beta2", "::mlir::dsc::ExactDouble", "0.999", "Adam/LAMB beta2">,
    Option<"eps", "eps", "::mlir::dsc::ExactDouble", "1e-8", "Adam/LAMB epsilon">,
    Option<"weightDecay", "weight-decay", "::mlir::dsc::ExactDouble", "0.0",
           "Weight decay (rank >= 2 tensors only)">,
    Option<"biasCorrection", "bias-correction", "bool", "true",
           "Adam/LAMB bias correction">,
    Option<"maxCoeff", "max-coeff", "::mlir::dsc::ExactDouble", "10.0", "LAMB trust ratio max">,
    Option<"minCoeff", "min-coeff", "::mlir::dsc::ExactDouble", "0.01", "LAMB trust ratio min">,
    Option<"momentum", "momentum", "::mlir::dsc::ExactDouble", "0.0", "SGD momentum">,
    Option<"dampening", "dampening", "::mlir::dsc::ExactDouble", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"gradClip", "grad-clip", "::mlir::dsc::ExactDouble", "0.0",
           "Global-norm gradient clipping (0: off)">,
    Option<"gradAccum", "grad-accum", "int64_t", "1",
           "Micro-batches per optimizer step">,
    Option<"schedule", "schedule", "::mlir::dsc::LrScheduleKind",
           "::mlir::dsc::LrScheduleKind::constant",
           "Learning-rate schedule (DeepSpeed's scheduler.type)",
           [{::llvm::cl::values(
             clEnumValN(::mlir::dsc::LrScheduleKind::constant, "constant",
                        "lr throughout"),
             clEnumValN(::mlir::dsc::LrScheduleKind::WarmupLR, "WarmupLR",
                        "warm up, then hold warmup-max-lr"),
             clEnumValN(::mlir::dsc::LrScheduleKind::WarmupDecayLR,
                        "WarmupDecayLR",
                        "warm up, then decay linearly to 0 at total-num-steps"),
             clEnumValN(::mlir::dsc::LrScheduleKind::WarmupCosineLR,
                        "WarmupCosineLR",
                        "warm up, then cosine decay to cos-min-ratio"))}]>,
    Option<"warmupMinLr", "warmup-min-lr", "::mlir::dsc::ExactDouble", "0.0",
           "WarmupLR/WarmupDecayLR: learning rate at step 0">,
    Option<"warmupMaxLr", "warmup-max-lr", "::mlir::dsc::ExactDouble", "0.001",
           "WarmupLR/WarmupDecayLR: learning rate at the end of the warmup">,
    Option<"warmupNumSteps", "warmup-num-steps", "int64_t", "1000",
           "Steps of the warmup">,
    Option<"totalNumSteps", "total-num-steps", "int64_t", "0",
           "WarmupDecayLR/WarmupCosineLR: step at which the decay ends">,
    Option<"warmupType", "warmup-type", "::mlir::dsc::WarmupType",
           "::mlir::dsc::WarmupType::log", "Shape of the warmup",
           [{::llvm::cl::values(
             clEnumValN(::mlir::dsc::WarmupType::log, "log",
                        "logarithmic in the step"),
             clEnumValN(::mlir::dsc::WarmupType::linear, "linear",
                        "linear in the step"))}]>,
    Option<"warmupMinRatio", "warmup-min-ratio", "::mlir::dsc::ExactDouble", "0.0",
           "WarmupCosineLR: learning rate at step 0, as a fraction of lr">,
    Option<"cosMinRatio", "cos-min-ratio", "::mlir::dsc::ExactDouble", "0.0001",
           "WarmupCosineLR: final learning rate, as a fraction of lr">,
    // fp16 loss scaling (DeepSpeed's fp16.*), built in
    // lib/Transforms/BuildTrainStep.cpp from the ops of
    // lib/Dialect/MixedPrecisionOps.cpp: dsc.loss_scale seeds @micro_step's
    // loss gradient; @apply_step checks (dsc.check_finite), unscales
    // (dsc.unscale_clip) and updates the scale (dsc.update_loss_scale).
    Option<"fp16", "fp16", "bool", "false",
           "Scale the loss, skip steps whose gradients overflow">,
    Option<"lossScale", "loss-scale", "::mlir::dsc::ExactDouble", "0.0",
           "0: dynamic loss scaling; > 0: this static scale">,
    Option<"initialScalePower", "initial-scale-power", "int64_t", "16",
           "Dynamic scaling starts at 2^this">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", "1000",
           "Good steps before the scale doubles">,
    Option<"hysteresis", "hysteresis", "int64_t", "2",
           "Overflows tolerated before the scale halves">,
    Option<"minLossScale", "min-loss-scale", "::mlir::dsc::ExactDouble", "1.0",
           "The scale never drops below this">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool", "false",
           "Restore the hysteresis after every good step">,
    Option<"returnLogits", "return-logits", "bool", "false",
           "@micro_step also returns the logits (for inspection; training "
           "never reads them)">
  ];
}

def DscExpertParallel : Pass<"dsc-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Shards mixture-of-experts layers' experts over expert-parallel groups";
  let description = [{
    With the module attribute `dsc.mesh_expert = G` (nothing to do without
    it or with G = 1), the G ranks of each data_inner group hold E / G of
    every MoE layer's E experts: group rank g holds experts g * E / G and
    up. In @forward, each layer's expert rows (`dsc.moe_dispatch`) travel
    to their experts' ranks (`dsc.moe_exchange_counts`, then
    `dsc.moe_exchange`), the grouped GEMMs run this rank's experts on the
    rows it received (the concatenated weights keep E / G experts: the
    parameters of local slot j, named as group rank 0's expert j; the
    others leave the function), and their outputs travel back (`reverse`)
    before `dsc.moe_combine`. The received rows are a static bound: G * N *
    min(K, E / G) for N tokens routed to K experts, the most any routing
    sends one rank (with token dropping at most G * (E / G) * capacity);
    rows after the received ones are padding. The module
    records the expert parameters (`dsc.expert_params`) and experts per
    rank (`dsc.experts_per_rank`): -dsc-build-train-step averages their
    gradients over data_outer, the ranks holding the same experts, and
    sums their squares over data_inner for the norm; the runtime names each
    rank's parameters after its own experts. Runs before any fusion; the
    ops between the expert GEMMs must be `dsc.silu` and `dsc.mul`.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscPadVocabulary : Pass<"dsc-pad-vocabulary", "::mlir::ModuleOp"> {
  let summary = "The LM head's vocabulary padded to a multiple of N rows";
  let description = [{
    Pads the vocabulary of @forward to a multiple of `multiple` rows, so the
    LM head's GEMMs get 16-byte-aligned leading dimensions and the logits'
    rows aligned vector loads (GPT-2's 50,257 becomes 50,304 at 64, as in
    Megatron-LM and llm.c). The loss's LM head (a [V, C] parameter with
    transpose_w, and its bias) and every embedding table of V rows get the
    padding rows; the head computes the padded logits, the loss takes
    `classes = V` (the padding columns get no probability and a zero
    gradient, so the padding rows stay zero), and the step still returns
    the V real logits through a `dsc.split`. Each padded parameter is
    recorded in the module's `dsc.tensor_slices` as
    `#dsc.tensor_slice<dim = 0, groups = 1, size = V>`: the runtime
    initializes, loads and saves its V real rows only, so weights,
    checkpoints and the random initialization are the unpadded model's, and
    training follows the unpadded run up to the rounding of GEMMs of other
    shapes. Nothing to do at `multiple` 1, when V is a
    multiple already, without a recognisable head (a LoRA or 4-bit head), or
    on a tensor axis of several ranks (-dsc-tensor-parallel pads to a
    multiple of the ranks); a module with `dsc.tensor_slices` already is
    refused. dsc-run runs it with 64 on the CUDA backend
    (`dsc.pad_vocabulary`).

    ```mlir
    // vocab 100, multiple 64
    %logits = dsc.linear %h, %wte {transpose_w} : (tensor<2x8x32xf32>,
        tensor<100x32xf32>) -> tensor<2x8x100xf32>
    %loss = dsc.cross_entropy %logits, %labels
    // =>
    %logits = dsc.linear %h, %wte {transpose_w} : (tensor<2x8x32xf32>,
        tensor<128x32xf32>) -> tensor<2x8x128xf32>
    %loss = dsc.cross_entropy %logits, %labels {classes = 100 : i64}
    %real:2 = dsc.split %logits {axis = 2 : i64}
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", "64",
           "Pad the vocabulary to a multiple of this many rows (1: off)">,
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscTensorParallel : Pass<"dsc-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron-style tensor slicing of @forward over the tensor axis";
  let description = [{
    Over the T ranks of the tensor axis of the module's `dsc.mesh` (nothing
    to do when T = 1), each attention is split by heads and each MLP by its
    hidden features. A region's column-parallel `dsc.linear`s take the whole
    input through `dsc.tp_copy` and compute their 1/T of the output
    features; the ops between run on that part; the row-parallel
    `dsc.linear` multiplies its 1/T of the input features without bias,
    `dsc.tp_reduce` sums the partial products over the group, and the bias
    is added after. Attention regions run from `dsc.merge_heads` (feeding
    the output projection) back through batch_matmul, softmax, dropout,
    rotary and repeat_kv to the `dsc.split_heads` of column GEMMs (a fused
    QKV projection is sliced section by section); MLP regions run from a
    `dsc.linear` back through gelu, silu, mul and dropout to column GEMMs.
    The sliced weights and biases become 1/T of their whole shape, and the
    module's `dsc.tensor_slices` records each (#dsc.tensor_slice) for the
    gradient norm and the runtime, which initializes, loads and saves whole
    tensors. The vocabulary is split by rows (padded to a multiple of T):
    the loss's LM head (a [V, C] parameter with transpose_w, and its bias)
    and every embedding table of V rows; lookups become
    `dsc.vocab_embedding`, the loss `dsc.vocab_cross_entropy`, and the
    step's logits stay sliced (`logits` in `dsc.tensor_slices`). Position
    embeddings and norms stay replicated. A module with
    `dsc.tensor_slices` already is refused.
    Runs before any fusion, on the graph the frontend builds; the heads
    (key/value heads too) and every sliced feature count must divide by T.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscPipelineStage : Pass<"dsc-pipeline-stage", "::mlir::ModuleOp"> {
  let summary = "Cut @forward into pipeline stages and keep one of them";
  let description = [{
    Over the P ranks of the pipeline axis of the module's `dsc.mesh`
    (nothing to do when P = 1), the model's units (the embedding: every op
    before the first `dsc.layer`; each transformer layer; the head: every
    op after the last) are split into P contiguous stages, balanced by
    `partition` as DeepSpeed's PipelineModule names it: `uniform` (units),
    `parameters` (parameter elements) or `best` (the cost model's forward
    cost). Runs after -dsc-tensor-parallel and -dsc-lora, on the whole
    model they see. Only stage `stage` is kept: @forward becomes that stage's
    forward. A boundary carries the activations made before it and used
    after it (the residual stream; a mixture-of-experts model's router
    loads too, which pass through to the head's balance loss), several
    packed into one f32 vector (`dsc.pack`, unpacked where received): a
    stage after the first takes it as the argument marked
    `dsc.pipeline_input`, a stage before the last returns it as its only
    result. With `chunks` = v > 1 (Megatron-LM's interleaved schedule) the
    units are split into v*P virtual stages and stage s keeps the v model
    chunks s, s + P, ..., s + (v-1)P in one @forward: one
    `dsc.pipeline_input` argument per chunk that receives (chunk order),
    and as results the loss and logits if it holds the last virtual stage,
    then one activation per chunk that sends (chunk order); the module's
    `dsc.pipeline_chunks` says v. The chunks share no value: each
    recomputes its own token-only values. Values that depend on the tokens alone (positions, masks,
    BERT's masking, rotary tables) are recomputed by each stage that needs
    them; every stage keeps `input_ids` and `targets`. A parameter used by
    the first and the last stage (tied embeddings) is a copy on each,
    listed (unless frozen) in the module's `dsc.pipeline_tied_params`; the
    runtime sums its gradient between the two. The module's `dsc.pipeline_stage` says
    which stage it is; -dsc-autodiff and -dsc-build-train-step then build
    that stage's step. A module already cut is refused, as is a boundary
    that carries nothing or several activations not all f32.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "0",
           "The stage to keep (0 .. P-1)">,
    Option<"partition", "partition", "std::string", "\"uniform\"",
           "uniform | parameters | best">,
    Option<"chunks", "chunks", "int64_t", "1",
           "Model chunks per stage (v > 1: interleaved virtual stages)">,
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect",
                           "::mlir::func::FuncDialect"];
}

def DscSplitStageStep : Pass<"dsc-split-stage-step", "::mlir::ModuleOp"> {
  let summary = "Split a pipeline stage's @micro_step into its forward and "
                "its backward";
  let description = [{
    For a module that holds a pipeline stage (`dsc.pipeline_stage`; nothing
    to do otherwise), near the end of the pipeline: the ops of @micro_step
    that its forward results (`loss` on the last stage, and `logits` with
    return-logits; `stage_output` before it) depend on become
    @stage_forward, which returns those results and, as
    `#dsc.state<activation, "saved/<k>">`, every other value of theirs the
    backward reads (the last stage's logits among them). @micro_step keeps
    the rest, the backward: it takes the saved values as arguments of the
    same states (one buffer each, a forward result's own where the backward
    reads one; the runtime keeps them per micro-batch in flight) and
    returns the gradients.
    A value the backward reads that is made without effects from the
    function's arguments alone (a parameter's half copy, positions) is
    recomputed there instead of saved. An interleaved stage
    (`dsc.pipeline_chunks` v > 1) is cut per model chunk k into
    @stage_forward.k and @micro_step.k (".k" left out for chunk 0, saved
    states `saved/<n>.k`): each op goes with the chunk whose boundary
    values (`stage_input.k`, `stage_output_grad.k`) or forward it depends
    on, and an op that reads two chunks' values is an error. A module split
    already is refused.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect",
                           "::mlir::func::FuncDialect"];
}

def DscZero : Pass<"dsc-zero", "::mlir::ModuleOp"> {
  let summary = "ZeRO: shard optimizer state, gradients and parameters";
  let description = [{
    Over the G ranks of the data axis of the module's `dsc.mesh`, each
    parameter of n elements is flattened and zero-padded to G*s elements
    (s = ceil(n / G)) and rank i owns elements [i*s, (i+1)*s). With
    `dsc.adam_8bit` in @apply_step, s is rounded up to a multiple of its
    256-element quantization block for every parameter, so each rank's
    blocks are blocks of the whole tensor: the per-block scales
    (`exp_avg_absmax`, `exp_avg_sq_absmax`) shard as ceil(ceil(n/256)/G) =
    s/256 elements and the sharded update is the whole update. Adafactor
    (factored moments, whole-tensor RMS) and LAMB are refused.

    Stage 1 (DeepSpeed's ZeRO-1): the optimizer state arguments and results
    of @apply_step become the rank's shards; each accumulated gradient is
    reduce-scattered (`dsc.reduce_scatter` mean, instead of `dsc.all_reduce`);
    the global norm is the `dsc.norm_all_reduce` of the shards' norms (and
    fp16's overflow flag the `dsc.all_reduce` max of the shards'); the
    optimizer updates the rank's shard of the parameter (`dsc.shard`) and
    `dsc.all_gather` rebuilds the whole parameter. Per step each rank sends
    Psi(G-1)/G elements in the reduce-scatter and as many in the all-gather:
    what the all-reduce of data parallelism sends.

    Stage 2 also shards the gradient accumulators: @micro_step
    reduce-scatters each micro-batch's gradient into them, so they take
    1/G of the memory, and @apply_step uses them as they are.

    Stage 3 also shards the parameters: every step function takes the
    rank's shards; @micro_step all-gathers a parameter right before its
    first forward use and again before its first backward use (ops marked
    `dsc.grad`), so the memory plan holds a whole parameter only while its
    layer runs; @eval_step gathers each once; the optimizer updates the
    shards in place and nothing is gathered after it. Parameters of fewer
    than `persistence-threshold` elements (DeepSpeed's
    `stage3_param_persistence_threshold`) persist: they stay whole in every
    step function, never gathered, and are updated as in stage 2 (the
    optimizer updates the rank's shard, `dsc.all_gather` rebuilds them);
    their optimizer state and gradients are sharded all the same.

    With `quantized-weights` (ZeRO++'s qwZ, stage 3 only) each gather of a
    partitioned parameter in @micro_step and @eval_step moves int8 codes:
    the rank's shard is `dsc.quantize_int8`'d in blocks of 256 (shards are
    multiples of 256), codes and scales are all-gathered, and
    `dsc.dequantize_int8` rebuilds the parameter, so the step computes
    with the parameter rounded to 8 bits per block and the all-gathers
    move 1 + 4/256 bytes per element instead of 4 (2 for a 16-bit frozen
    weight). The optimizer still updates the full-precision shards.

    With `hybrid` (hybrid sharding: FSDP's HYBRID_SHARD, DeepSpeed's MiCS)
    the module's `dsc.mesh_data_inner = S` splits the data axis into groups
    of S consecutive ranks, and everything above shards over the S ranks of
    `data_inner` instead of `data`: reduce-scatters, gathers, shards, the
    norm and overflow all-reduces. Each group's reduced gradient shard is
    then combined across the groups by a `dsc.all_reduce` over `data_outer`
    in @apply_step (once per step, before the norm), so the D ranks train
    as one data-parallel job whose state takes 1/S per rank. The module
    gets `dsc.zero_axis = "data_inner"`, from which the runtime places and
    gathers the shards.

    With `hpz` (ZeRO++'s hpZ, stage 3) the shards stay over `data`, and the
    forward's gather of a partitioned parameter in @micro_step also keeps
    the rank's `data_inner` shard of it (`dsc.shard`, a secondary partition
    of 1/S of the parameter); the backward gathers that over `data_inner`,
    so its gathers stay within the group (a node, as `dsc-run` builds the
    split) and equal the forward's values.

    Every sharded argument carries `dsc.shard_of = array<i64: whole shape>`,
    from which the runtime gathers and scatters shards in checkpoints and
    weight files. The padding elements stay zero (zero gradient, zero state,
    no update). LAMB's trust ratio needs whole parameters and is refused.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "1", "ZeRO stage: 1, 2 or 3">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t", "0",
           "Stage 3: parameters of fewer elements stay whole (0: every "
           "parameter is sharded)">,
    Option<"quantizedWeights", "quantized-weights", "bool", "false",
           "Stage 3 (ZeRO++ qwZ): the parameter all-gathers move int8 codes "
           "with one f32 scale per 256 elements">,
    Option<"quantizedGradients", "quantized-gradients", "bool", "false",
           "Stage 3 (ZeRO++ qgZ): each micro-step's reduce-scatter of a "
           "matrix's gradient is an all-to-all of int4 codes with one f32 "
           "scale per 32 elements, dequantized and reduced by the receiving "
           "rank">,
    Option<"hybrid", "hybrid", "bool", "false",
           "Hybrid sharding: shard over the data_inner axis, all-reduce the "
           "gradient shards over data_outer">,
    Option<"hpz", "hpz", "bool", "false",
           "Stage 3 (ZeRO++ hpZ): the backward gathers each parameter over "
           "data_inner from a secondary shard the forward keeps">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscOffloadOptimizer : Pass<"dsc-offload-optimizer", "::mlir::ModuleOp"> {
  let summary = "ZeRO-Offload: the optimizer update runs on the host";
  let description = [{
    DeepSpeed's ZeRO-Offload (Ren et al., arXiv:2101.06840) as a rewrite of
    the sharded step (run after `-dsc-zero`). In @apply_step each optimizer
    update (`dsc.adam`, `dsc.sgd`, `dsc.adam_8bit`) gets the `dsc.host`
    attribute and reads only host values:

    - its optimizer state arguments and results get `dsc.host` (the runtime
      places them in the host arena);
    - the parameter it updates becomes a new argument and result
      `#dsc.state<master, "name">` with `dsc.host`: the rank's fp32 master
      weights (with the `dsc.shard_of` of the parameter's ZeRO shard), which
      the runtime derives from the parameter whenever it loads or
      initialises weights;
    - every other operand (the reduced gradient shard, the learning rate,
      the step, the clipping coefficient, fp16's skip flag) is copied to the
      host by a `dsc.to_host` right after it is computed, one copy per value;
    - the updated master shard streams back by a `dsc.to_device`, which
      replaces it everywhere on the device (the all-gather that rebuilds
      the parameter at stages 1 and 2, the parameter shard at stage 3).

    Each copy carries its transfer `group`: the transformer layer of its
    parameter + 1 (the first number in its Hugging Face name), 0 for
    parameters outside layers. The device keeps the f32 parameter the step
    computes with, so after every step it equals the master weights bit for
    bit and checkpoints keep only the parameter.

    With `params` (ZeRO-3's `offload_param`) the partitioned parameter
    shards (arguments with `dsc.shard_of`) live in host memory too, in
    every step function: each use of one on the device (the all-gathers
    before its forward and backward uses) reads a `dsc.to_device` copy made
    right before it, and the update reads and writes the host shard itself,
    which then is the master weights (no `master` state, nothing streams
    back). Parameters under the persistence threshold stay on the device.

    Refused: a step that `-dsc-zero` did not shard, a step offloaded
    already, compressed optimizers' extra step functions, an update whose
    parameter is not a step argument (or its ZeRO shard) or whose state is
    not a step argument, `params` below stage 3.
  }];
  let options = [
    Option<"params", "params", "bool", "false",
           "ZeRO-3: the partitioned parameter shards live in host memory too">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscOffloadNvme : Pass<"dsc-offload-nvme", "::mlir::ModuleOp"> {
  let summary = "ZeRO-Infinity: the offloaded optimizer state lives on NVMe";
  let description = [{
    DeepSpeed's ZeRO-Infinity optimizer offload to NVMe (Rajbhandari et
    al., arXiv:2104.07857) as a rewrite of an offloaded step (run after
    `-dsc-offload-optimizer`). Every host state argument of @apply_step
    that an update reads and rewrites (the optimizer state and the fp32
    master weights; not offloaded parameter shards, which the forward
    reads) gets `dsc.nvme` beside `dsc.host`, as does its result: the
    runtime keeps it in the swap file in the module's `dsc.nvme_path`
    instead of the host arena. The update reads it through a
    `dsc.swap_in` and its new value is returned through a `dsc.swap_out`,
    both in the update's transfer group. Each update's swap-ins are placed
    before the previous update, so the next group's state is read while
    the current one computes and at most two updates' states are in host
    memory at once (the memory plan's double buffer); the first two
    updates' swap-ins are at the function's start, so their reads run
    beside the gradient copies, reductions and norm that come before the
    first update (the host bytes they take are held at the first update
    anyway).

    With `params` (stage 3's `offload_param` device "nvme", after
    `-dsc-offload-optimizer params`) the host parameter shards go to the
    swap file too, in every step function: each of their reads (the
    `dsc.to_device` copies before the forward's and backward's gathers, the
    update) goes through a `dsc.swap_in`, placed before the read before it,
    and the update's new shard returns through a `dsc.swap_out`.

    Refused: a step that `-dsc-offload-optimizer` did not offload, one
    offloaded to NVMe already, a module without `dsc.nvme_path`, `params`
    where `-dsc-offload-optimizer` did not offload the parameters (with
    every parameter under stage 3's persistence threshold there is no
    shard to swap, and nothing is refused).
  }];
  let options = [
    Option<"params", "params", "bool", "false",
           "ZeRO-3: the offloaded parameter shards go to the swap file too">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscOneBitAdam : Pass<"dsc-onebit-adam", "::mlir::ModuleOp"> {
  let summary = "1-bit Adam: compress the momentum's all-reduce after warm-up";
  let description = [{
    DeepSpeed's OnebitAdam (arXiv:2102.02888) as a rewrite of the training
    step. @apply_step, built with AdamW-style decay and no bias correction,
    is the warm-up stage: full-precision all-reduce of the gradients. The
    pass adds @apply_step_compressed, the compression stage the runtime
    runs once the optimizer step exceeds `freeze-step` (the module
    attribute `dsc.freeze_step`):

      m = beta1 * m + (1 - beta1) * local gradient   (dsc.ema_update)
      m = compressed all-reduce (mean) of m          (G > 1 ranks only)
      p -= lr * (m / (sqrt(v) + eps) + weight_decay * p), v frozen
                                                     (dsc.frozen_adam)

    The compressed all-reduce is DeepSpeed's compressed_allreduce taken
    apart: dsc.onebit_compress (worker error feedback, 1 sign bit per
    element and one scale), dsc.all_to_all of the sign chunks,
    dsc.all_gather of the scales, dsc.onebit_decode_mean and a second
    dsc.onebit_compress (server error feedback), dsc.all_gather of the
    server signs and scales, dsc.onebit_decode. Each parameter of n
    elements is padded to P (a multiple of G * lcm(G, 8)); its errors are
    new per-rank state: `worker_error` [P] and `server_error` [P / G]
    arguments (marked `dsc.per_rank`) and results of the compression stage,
    so they are planned, checkpointed and resumed like any state. The
    all-reduces of the gradient accumulators go away (fp16's overflow flag
    is all-reduced with max instead); clipping sees local gradients, as in
    DeepSpeed once the engine stops all-reducing them.
  }];
  let options = [
    Option<"freezeStep", "freeze-step", "int64_t", "100000",
           "The last optimizer step of the warm-up stage">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscOneBitLamb : Pass<"dsc-onebit-lamb", "::mlir::ModuleOp"> {
  let summary = "1-bit LAMB: compress the momentum's all-reduce after warm-up";
  let description = [{
    DeepSpeed's OnebitLamb (arXiv:2104.06069) as a rewrite of the training
    step. @apply_step, built with LAMB without bias correction, is the
    warm-up stage (all-reduced gradients); the pass adds to it each
    parameter's `lamb_coeff_freeze` (dsc.lamb_coeff_ema: the moving average
    with `coeff-beta` of its trust ratios). It adds @onebit_lamb_freeze,
    which the runtime runs once when the optimizer step first exceeds
    `freeze-step` (module attribute `dsc.freeze_step`): per parameter the
    momentum scale (dsc.momentum_scales), the fresh variance (a copy of the
    frozen one) and the last factor (1). And @apply_step_compressed, the
    compression stage:

      m = (beta1 * m + (1 - beta1) * local gradient) * scale
      m = compressed all-reduce (mean) of m / scale  (G > 1 ranks only)
      dsc.onebit_lamb_update: the fresh variance from the reconstructed
      gradient, the frozen variance's update, and the frozen trust ratio
      times a factor (bounded by `factor-min`, `factor-max` and
      `factor-threshold`)

    with the compression errors as per-rank state, as -dsc-onebit-adam.
  }];
  let options = [
    Option<"freezeStep", "freeze-step", "int64_t", "100000",
           "The last optimizer step of the warm-up stage">,
    Option<"coeffBeta", "coeff-beta", "::mlir::dsc::ExactDouble", "0.9",
           "Moving-average coefficient of the warm-up's trust ratios">,
    Option<"factorMax", "factor-max", "::mlir::dsc::ExactDouble", "4.0",
           "Largest factor of the frozen trust ratio">,
    Option<"factorMin", "factor-min", "::mlir::dsc::ExactDouble", "0.5",
           "Smallest factor of the frozen trust ratio">,
    Option<"factorThreshold", "factor-threshold", "::mlir::dsc::ExactDouble",
           "0.1", "Largest relative change of the factor per step">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect",
                           "::mlir::func::FuncDialect"];
}

def DscZeroOneAdam : Pass<"dsc-zero-one-adam", "::mlir::ModuleOp"> {
  let summary = "0/1 Adam: 1-bit gradients, frozen variance and local steps";
  let description = [{
    DeepSpeed's ZeroOneAdam (arXiv:2202.06009) as a rewrite of the training
    step. @apply_step, built with AdamW-style decay and no bias correction,
    is its full step: all-reduced gradients, momentum and variance updated.
    The pass adds three more; the runtime picks one per optimizer step k by
    DeepSpeed's policy on s = k + 1 (DeepSpeed's own step count, whose
    first call only initialises), with the module attributes
    `dsc.var_freeze_step`, `dsc.var_update_scaler`, `dsc.local_step_scaler`
    and `dsc.local_step_clipper` (rt::ZeroOneAdamPolicy):

      k <= var-freeze-step, s a multiple of the variance interval:
        @apply_step (full step; after var-update-scaler of them the
        interval doubles, from 1)
      k <= var-freeze-step, otherwise: @apply_step_onebit
        m = beta1 m + (1 - beta1) * compressed mean of the local gradient,
        Adam's update with v frozen (dsc.frozen_adam)
      k > var-freeze-step (v frozen for good; the compression errors are
      zeroed once), s a multiple of the local-step interval:
        @apply_step_sync, else @apply_step_local (the interval doubles
        every local-step-scaler steps, up to local-step-clipper)
        local: m from the local gradient; update = m / (sqrt(v) + eps) +
        weight_decay * p applied to p and subtracted (times lr) into the
        accumulator u (dsc.local_adam); lr_sum += lr
        sync: a local step, then p -= u and the compressed mean w of
        u * (sqrt(v) + eps) (dsc.zero_one_unwind), p += w / (sqrt(v) + eps),
        m = -w / lr_sum (dsc.zero_one_sync); u = 0, lr_sum = 0

    The gradient all-reduces of the three go (clipping sees local
    gradients). New state: `momentum_accumulator` per parameter, the scalar
    `lr_sum`, and, on more than one rank, each parameter's `worker_error`
    and `server_error` (per rank), shared by the 1-bit gradient and the
    synchronisation as in DeepSpeed. On one rank nothing is compressed.
  }];
  let options = [
    Option<"varFreezeStep", "var-freeze-step", "int64_t", "100000",
           "The last optimizer step that may update the variance">,
    Option<"varUpdateScaler", "var-update-scaler", "int64_t", "16",
           "Variance updates after which their interval doubles">,
    Option<"localStepScaler", "local-step-scaler", "int64_t", "32678",
           "Steps after which the local-step interval doubles">,
    Option<"localStepClipper", "local-step-clipper", "int64_t", "16",
           "The largest local-step interval">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscBucketCollectives : Pass<"dsc-bucket-collectives", "::mlir::ModuleOp"> {
  let summary = "Move gradients and parameter shards in buckets, not one by one";
  let description = [{
    DeepSpeed's `reduce_bucket_size` and `allgather_bucket_size`. The
    collectives that data parallelism and ZeRO issue once per parameter are
    grouped, in program order, into buckets: the gradient all-reduces of
    `@apply_step` (no ZeRO) and the gradient reduce-scatters (ZeRO-1 in
    `@apply_step`, ZeRO-2/3 in `@micro_step`) into buckets of at most
    `reduce-bucket-elements` elements, and `@apply_step`'s all-gathers of
    the updated parameter shards into buckets of at most
    `allgather-bucket-elements` (ZeRO-3's gathers of parameters for the
    forward and backward are left alone: a bucket of them would hold the
    parameters whole at once). A bucket holds one kind of collective with
    one reduction, axis and element type, and no member's input depends on
    an earlier member's result; a bucket of two or more becomes, where its
    last member was, `dsc.pack` -> one collective -> `dsc.unpack` (a
    reduce-scatter packs every input's rank-j chunk together, `chunks = G`;
    an all-gather unpacks the same way), and the ops between the members
    that use an earlier member's result move, in order, behind the unpack.
    Values are unchanged: packing only copies and the reductions are
    element-wise. Runs last in the pipeline, after `-dsc-onebit-adam` and
    `-dsc-zero`. A size of 0 leaves that kind one by one.

    ```mlir
    %a = dsc.all_reduce %ga : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %b = dsc.all_reduce %gb : (tensor<4xf32>) -> tensor<4xf32>
    // becomes
    %p = dsc.pack %ga, %gb : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<20xf32>
    %r = dsc.all_reduce %p : (tensor<20xf32>) -> tensor<20xf32>
    %a, %b = dsc.unpack %r : (tensor<20xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
    ```
  }];
  let options = [
    Option<"reduceBucketElements", "reduce-bucket-elements", "int64_t",
           "500000000",
           "The most gradient elements one all-reduce or reduce-scatter "
           "bucket holds (DeepSpeed's default reduce_bucket_size); 0: none">,
    Option<"allgatherBucketElements", "allgather-bucket-elements", "int64_t",
           "500000000",
           "The most parameter elements one all-gather bucket holds "
           "(DeepSpeed's default allgather_bucket_size); 0: none">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscOverlapCollectives : Pass<"dsc-overlap-collectives", "::mlir::ModuleOp"> {
  let summary = "Place collectives where a runtime can overlap them with compute";
  let description = [{
    DeepSpeed's `overlap_comm`. In every function, in program order:
    - each gradient reduction (`dsc.reduce_scatter`, `dsc.all_reduce`) moves
      up, with the ops that only package its operand for it (`dsc.pack`,
      `dsc.flat_resize` used by nothing else), to just after the last op
      that defines what it reads: it is issued as soon as its gradients
      are final, while the rest of the backward computes, not after the
      whole backward (reductions then go in the order their gradients
      become final, not the parameters' order);
    - each `dsc.all_gather` of a function argument (ZeRO-3's parameter
      shards) moves up to the first use of the earliest gather whose
      elements, with those of the gathers between, fit in
      `prefetch-elements` (DeepSpeed's `stage3_prefetch_bucket_size`): it
      is issued while earlier layers compute. Gathers of computed values
      (updated shards, quantized weights) stay.
    Within a pipeline stage every rank runs the same program, so every rank
    issues the moved collectives in one order; no collective moves past one
    over the pipeline axis or a send/recv (ranks of other stages run other
    programs). Values are unchanged; the memory plan sees the moved results live
    earlier. A runtime that runs collectives beside the compute
    (`dsc.overlap_comm`: the CPU backend's communication thread) overlaps
    them. Runs after `-dsc-bucket-collectives`.

    ```mlir
    %a = dsc.all_gather %arg0 : (tensor<4xf32>) -> tensor<8xf32>
    %x = dsc.exp %a : (tensor<8xf32>) -> tensor<8xf32>
    %b = dsc.all_gather %arg1 : (tensor<4xf32>) -> tensor<8xf32>
    %y = dsc.add %x, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    // becomes (prefetch-elements >= 8)
    %a = dsc.all_gather %arg0 : (tensor<4xf32>) -> tensor<8xf32>
    %b = dsc.all_gather %arg1 : (tensor<4xf32>) -> tensor<8xf32>
    %x = dsc.exp %a : (tensor<8xf32>) -> tensor<8xf32>
    %y = dsc.add %x, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    ```
  }];
  let options = [
    Option<"prefetchElements", "prefetch-elements", "int64_t", "50000000",
           "The most gathered elements issued ahead of the current one "
           "(DeepSpeed's default stage3_prefetch_bucket_size); 0: none">
  ];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscMemoryReport : Pass<"dsc-memory-report", "::mlir::ModuleOp"> {
  let summary = "Plan the lowered step's static arena and print its memory";
  let description = [{
    Lowers a training step (`@micro_step`, `@apply_step`, optional
    `@eval_step`, as `-dsc-build-train-step` leaves them) to the runtime
    program exactly as `dsc-run` does, plans every buffer into one static,
    64-byte aligned arena (persistent buffers first; each function's
    temporaries packed by liveness, greedy by size, best fit, and shared
    between functions because they run one at a time) and prints the memory
    report to stdout. The IR is not changed.

    ```
    memory plan: one static arena, 64-byte aligned buffers
      category                                bytes          MiB
      parameters                                 96         0.00
      ...
      activations (saved)                       128         0.00
      workspace                                 256         0.00
      peak                                      992         0.00
    saved activations per layer:
      layer 0                                   128         0.00
    ```

    Saved activations are temporaries written by a forward op and read by
    an op carrying `dsc.grad`; they are attributed to the forward op's
    `dsc.layer`. A module that is not a lowered step, or holds an op the
    runtime cannot execute, is an error on that op.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"format", "format", "::mlir::dsc::MemoryReportFormat",
           "::mlir::dsc::MemoryReportFormat::Table", "Report format",
           [{::llvm::cl::values(
             clEnumValN(::mlir::dsc::MemoryReportFormat::Table, "table",
                        "the table of dsc-run estimate"),
             clEnumValN(::mlir::dsc::MemoryReportFormat::Json, "json",
                        "the JSON of dsc-run --memory-report"))}]>
  ];
}

def DscMixedPrecision : Pass<"dsc-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Store the activations and GEMM inputs of @micro_step in f16/bf16";
  let description = [{
    Every float tensor an op of `@micro_step` produces (forward activations
    and the backward's activation gradients) becomes a tensor of `dtype`:
    the op keeps computing in f32 and rounds as it stores. Every parameter a
    GEMM (dsc.linear, dsc.linear_grad_input) reads gets one half copy, a
    dsc.convert at the top of the function. What stays f32: master weights
    and optimizer state (all of @apply_step), the loss and the gradient
    accumulation (the parameter gradients, i.e. the batch reductions,
    feeding the accumulating dsc.add, and that add, also through the
    dsc.split that cuts the gradient of a concatenation of parameters),
    dsc.attention's log-sum-exp, the norms' per-row 1/std, the
    mixture-of-experts loads (dsc.moe_load) and their gradient, LayerNorm
    gamma/beta and embedding tables as read outside GEMMs. A half value the function returns (the logits) is converted back
    to its f32 result type. Run last (after -dsc-remat):

    ```mlir
    %h = dsc.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>,
                                  tensor<8xf32>) -> tensor<4x8xf32>
    // =>
    %wh = dsc.convert %w : (tensor<8x8xf32>) -> tensor<8x8xf16>  // at the top
    %h = dsc.linear %x, %wh, %b : (tensor<4x8xf16>, tensor<8x8xf16>,
                                   tensor<8xf32>) -> tensor<4x8xf16>
    ```

    The memory plan counts 2 bytes per half element, as both backends store
    them.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"dtype", "dtype", "::mlir::dsc::HalfFormat",
           "::mlir::dsc::HalfFormat::f16", "16-bit format of the activations",
           [{::llvm::cl::values(
             clEnumValN(::mlir::dsc::HalfFormat::f16, "f16", "IEEE binary16"),
             clEnumValN(::mlir::dsc::HalfFormat::bf16, "bf16", "bfloat16"))}]>
  ];
}

def DscRemat : Pass<"dsc-remat", "::mlir::ModuleOp"> {
  let summary = "Recompute vs store: recompute saved activations in the backward";
  let description = [{
    A saved activation is a result of a forward op that a gradient op
    (`dsc.grad`) reads; it stays alive from the forward to the backward. For
    each forward op with such results (the unit of decision; its results are
    recomputed together) the pass decides store or recompute. A recomputed op
    is cloned, with the chain of forward ops whose results it needs and that
    are not saved, right before the first gradient op that reads it; the
    gradient ops read the clone, so the forward value dies after its last
    forward use. Clones carry `dsc.grad` and `dsc.remat`; the function gets
    `dsc.remat.recompute_flops` (the FLOPs of the clones). Run after
    -dsc-build-train-step (and -dsc-invertible), on `@micro_step`:

    ```mlir
    %h = dsc.linear %x, %w1, %b1 : ...
    %g = dsc.gelu tanh %h : ...
    %y = dsc.linear %g, %w2, %b2 : ...
    ...
    %dg = dsc.linear_grad_input %dy, %w2 {dsc.grad}
    %dw2 = dsc.linear_grad_weight %g, %dy {dsc.grad}
    %dh = dsc.gelu_grad tanh %dg, %h {dsc.grad}
    // => %g dies after the forward linear
    %dg = dsc.linear_grad_input %dy, %w2 {dsc.grad}
    %g2 = dsc.gelu tanh %h {dsc.grad, dsc.remat}
    %dw2 = dsc.linear_grad_weight %g2, %dy {dsc.grad}
    %dh = dsc.gelu_grad tanh %dg, %h {dsc.grad}
    ```

    Recomputation is exact (bitwise): ops are pure and dropout regenerates
    its mask from (seed, step, stream, element).

    Policies (`policy`):
    - `none`: no change.
    - `deepspeed`: DeepSpeed's switches: `gelu` (transformer_kernel.
      gelu_checkpoint: GELU outputs), `attn-dropout` (attn_dropout_checkpoint:
      the dropout of the attention probabilities), `per-layer`
      (activation_checkpointing: every op of transformer layer i (`dsc.layer`)
      is recomputed except those read by an op outside the layer, i.e. only
      each layer's output (the next layer's input) is kept; with
      `layer-interval` k, DeepSpeed's pipeline activation_checkpoint_interval,
      layers count in groups of k consecutive ones (layer i in group i / k)
      and only each group's output is kept: the backward recomputes the
      group's k layers from its input).
    - `budget`: the least recompute cost with planned peak <= `budget-bytes`.

    In `deepspeed` and `budget`, with `recompute-cheap` (default true), every
    op whose recomputation (the op and its unsaved chain) consists only of
    ops CostOpInterface calls cheap is recomputed: dsc.add (bias and residual
    adds), dsc.gelu, dsc.dropout, dsc.bias_split_heads, dsc.split_heads,
    dsc.merge_heads, dsc.concat, dsc.split, dsc.fill, dsc.iota. In practice:
    GELU outputs and attention-probability dropouts (their inputs are saved
    anyway); a residual add whose operand is a GEMM output is not cheap.

    Algorithm of `budget`. Cost of recomputing a candidate = FLOPs + bytes
    moved (CostOpInterface) of the op and its unsaved chain. Memory model:
    peak(R) = P0 - sum of the saved bytes of the recomputed set R, where P0
    is the planned peak (lib/Program/MemoryPlan: the real planner on the
    lowered step) after the cheap recomputations. Minimising the cost subject
    to peak(R) <= budget is a 0/1 knapsack (store the candidates of largest
    total cost whose bytes fit budget - (P0 - all candidate bytes)), solved
    exactly by dynamic programming over bytes (dsc::remat::chooseRecompute).
    The choice is then applied to a copy of the module and re-planned; if
    the real peak exceeds the budget (the model ignores the short-lived
    recomputed values and packing), the capacity shrinks by the excess and
    the knapsack is solved again. The additive model cannot see that the
    backward recomputes one layer at a time, so per-layer checkpointing's
    set is measured as a second seed; from the cheaper seed that meets the
    budget, a local search stores back each recomputed candidate (most
    expensive first) wherever the re-planned peak stays within the budget.
    So: optimal for the additive model, never costlier than per-layer
    checkpointing when that meets the budget, a local optimum (no single
    recomputed candidate can be stored) for the real planner, and always
    meeting the budget as the real planner measures it; a budget that
    neither seed meets is an error naming the lowest peak found.

    A fused op recomputes as a whole; where the backward reads a result
    that a cheaper op can derive from a sibling result (the LayerNorm output
    of `dsc.bias_dropout_add_layer_norm` from its sum, the dropped
    probabilities of `dsc.softmax_dropout` from the probabilities), that op
    is a candidate of its own (an "exposure"), folded back into the fused
    op when it is not recomputed.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"function", "function", "std::string", "\"micro_step\"",
           "Function whose saved activations are considered">,
    Option<"policy", "policy", "::mlir::dsc::RematPolicy",
           "::mlir::dsc::RematPolicy::None", "What to recompute",
           [{::llvm::cl::values(
             clEnumValN(::mlir::dsc::RematPolicy::None, "none", "nothing"),
             clEnumValN(::mlir::dsc::RematPolicy::DeepSpeed, "deepspeed",
                        "DeepSpeed's switches gelu, attn-dropout, per-layer"),
             clEnumValN(::mlir::dsc::RematPolicy::Budget, "budget",
                        "least recompute cost within budget-bytes"))}]>,
    Option<"gelu", "gelu", "bool", "false",
           "deepspeed: recompute GELU outputs (gelu_checkpoint)">,
    Option<"attnDropout", "attn-dropout", "bool", "false",
           "deepspeed: recompute the attention-probability dropout "
           "(attn_dropout_checkpoint)">,
    Option<"perLayer", "per-layer", "bool", "false",
           "deepspeed: keep only each layer's output, recompute the layer in "
           "the backward (activation_checkpointing)">,
    Option<"layerInterval", "layer-interval", "int64_t", "1",
           "per-layer: checkpoint groups of this many consecutive layers, "
           "keeping each group's input (pipeline."
           "activation_checkpoint_interval)">,
    Option<"budgetBytes", "budget-bytes", "int64_t", "0",
           "budget: planned peak of the step in bytes">,
    Option<"recomputeCheap", "recompute-cheap", "bool", "true",
           "deepspeed/budget: recompute ops that are cheap (add, GELU, "
           "dropout, head splits)">
  ];
}

#endif // DSC_PASSES
