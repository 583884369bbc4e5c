//===- ModelBuilder.cpp - GPT-2 and BERT as dsc IR -----------------------===//
//
// Emits the forward graph of GPT2LMHeadModel, BertForMaskedLM and
// LlamaForCausalLM the way Hugging Face computes them, op by op, so the IR
// is what a user who knows those models expects to read. Parameter names
// and layouts are Hugging Face's: GPT-2 Conv1D weights are [in, out], BERT
// and LLaMA nn.Linear weights are [out, in] (dsc.linear with transpose_w);
// GPT-2 and BERT tie the output embeddings, LLaMA's config chooses.
//
//===----------------------------------------------------------------------===//

#include "dsc/Frontend/ModelBuilder.h"

#include "dsc/Dialect/DscOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// Emits ops at the end of @forward's body and collects parameter arguments
/// (inserted before the two input arguments).
class GraphBuilder {
public:
  GraphBuilder(func::FuncOp fn)
      : ctx(fn.getContext()), b(ctx), loc(fn.getLoc()),
        block(&fn.getBody().front()), f32(Float32Type::get(ctx)) {
    b.setInsertionPointToEnd(block);
  }

  Value param(const std::string &name, ArrayRef<int64_t> shape,
              InitKind init, double std = 0.0) {
    Value v = block->insertArgument(numParams++,
                                    RankedTensorType::get(shape, f32), loc);
    paramAttrs.push_back(
        ParamAttr::get(ctx, name, init, b.getF64FloatAttr(std)));
    return v;
  }
  Value normalParam(const std::string &name, ArrayRef<int64_t> shape,
                    double std) {
    return param(name, shape, InitKind::normal, std);
  }
  Value zerosParam(const std::string &name, ArrayRef<int64_t> shape) {
    return param(name, shape, InitKind::zeros);
  }

  RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  RankedTensorType f32Type(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, f32);
  }

  Value embedding(Value table, Value ids) {
    SmallVector<int64_t> shape(typeOf(ids).getShape());
    shape.push_back(typeOf(table).getShape()[1]);
    return b.create<EmbeddingOp>(loc, f32Type(shape), table, ids);
  }
  Value iota(int64_t n, int64_t step) {
    return b.create<IotaOp>(loc,
                            RankedTensorType::get({n}, b.getIntegerType(32)),
                            b.getI64IntegerAttr(0), b.getI64IntegerAttr(step));
  }
  Value add(Value lhs, Value rhs) {
    return b.create<AddOp>(loc, lhs.getType(), lhs, rhs);
  }
  Value linear(Value x, Value w, Value bias, bool transposeW) {
    std::string error;
    auto shape = inferLinearShape(typeOf(x).getShape(), typeOf(w).getShape(),
                                  transposeW, error);
    assert(succeeded(shape) && "frontend built mismatched linear");
    return b.create<LinearOp>(loc, f32Type(*shape), x, w, bias,
                              b.getBoolAttr(transposeW));
  }
  /// A projection with parameters `<prefix>.weight` (normal(std), created
  /// first) and `<prefix>.bias` (zeros). `transposeW` selects nn.Linear's
  /// [out, in] layout over Conv1D's [in, out].
  Value projection(Value x, const std::string &prefix, int64_t in,
                   int64_t out, double std, bool transposeW) {
    SmallVector<int64_t> shape = transposeW ? SmallVector<int64_t>{out, in}
                                            : SmallVector<int64_t>{in, out};
    Value w = normalParam(prefix + ".weight", shape, std);
    Value bias = zerosParam(prefix + ".bias", {out});
    return linear(x, w, bias, transposeW);
  }
  /// An nn.Linear `<prefix>` ([out, in] weight, normal(std)) with a zero
  /// bias only when `bias` (LLaMA's projections mostly have none).
  Value dense(Value x, const std::string &prefix, int64_t in, int64_t out,
              double std, bool bias) {
    if (bias)
      return projection(x, prefix, in, out, std, /*transposeW=*/true);
    Value w = normalParam(prefix + ".weight", {out, in}, std);
    return linear(x, w, Value(), /*transposeW=*/true);
  }
  /// RMSNorm with parameter `<prefix>.weight`; `plusOne` (Gemma): the
  /// scale is 1 + weight, the weight starting at 0.
  Value rmsNorm(Value x, const std::string &prefix, double eps,
                bool plusOne = false) {
    int64_t c = typeOf(x).getShape().back();
    Value weight = param(prefix + ".weight", {c},
                         plusOne ? InitKind::zeros : InitKind::ones);
    if (plusOne)
      weight = add(weight, b.create<FillOp>(loc, weight.getType(),
                                            b.getF64FloatAttr(1.0)));
    return b.create<RmsNormOp>(loc, x.getType(), x, weight,
                               b.getF64FloatAttr(eps));
  }
  /// [B, T, H*D] -> [B, H, T, D].
  Value splitHeads(Value x, int64_t heads) {
    auto shape = typeOf(x).getShape();
    auto type = f32Type({shape[0], heads, shape[1], shape[2] / heads});
    return b.create<SplitHeadsOp>(loc, TypeRange{type}, x,
                                  b.getI64IntegerAttr(heads))
        .getParts()[0];
  }
  Value rotary(Value x, const ::dsc::RopeConfig &rope) {
    RopeScaling scaling = rope.scaling == ::dsc::RopeScaling::Linear
                              ? RopeScaling::linear
                          : rope.scaling == ::dsc::RopeScaling::Llama3
                              ? RopeScaling::llama3
                              : RopeScaling::none;
    return b.create<RotaryOp>(
        loc, x.getType(), x, b.getF64FloatAttr(rope.theta),
        RopeScalingAttr::get(ctx, scaling), b.getF64FloatAttr(rope.factor),
        b.getF64FloatAttr(rope.lowFreqFactor),
        b.getF64FloatAttr(rope.highFreqFactor),
        b.getI64IntegerAttr(rope.originalMaxPositions), b.getBoolAttr(false));
  }
  /// The rotary embedding on the first `dims` of each head's D dimensions
  /// of x [B, H, T, D]; the rest pass through (Phi's partial rotary).
  Value partialRotary(Value x, int64_t dims, const ::dsc::RopeConfig &rope) {
    auto shape = typeOf(x).getShape();
    if (dims == shape[3])
      return rotary(x, rope);
    auto turned = f32Type({shape[0], shape[1], shape[2], dims});
    auto passed = f32Type({shape[0], shape[1], shape[2], shape[3] - dims});
    auto parts = b.create<SplitOp>(loc, TypeRange{turned, passed}, x,
                                   b.getI64IntegerAttr(3))
                     .getPieces();
    return b.create<ConcatOp>(loc, x.getType(),
                              ValueRange{rotary(parts[0], rope), parts[1]},
                              b.getI64IntegerAttr(3));
  }
  /// Key/value heads [B, KV, T, D] repeated for `groups` query heads each.
  Value repeatKv(Value x, int64_t groups) {
    if (groups == 1)
      return x;
    auto shape = typeOf(x).getShape();
    return b.create<RepeatKvOp>(
        loc, f32Type({shape[0], shape[1] * groups, shape[2], shape[3]}), x,
        b.getI64IntegerAttr(groups));
  }

  /// LayerNorm with parameters `<prefix>.weight` (ones) and `.bias` (zeros).
  Value layerNorm(Value x, const std::string &prefix, double eps) {
    int64_t c = typeOf(x).getShape().back();
    Value gamma = param(prefix + ".weight", {c}, InitKind::ones);
    Value beta = zerosParam(prefix + ".bias", {c});
    return b.create<LayerNormOp>(loc, x.getType(), x, gamma, beta,
                                 b.getF64FloatAttr(eps));
  }
  Value gelu(Value x, ::dsc::GeluApprox approx) {
    return b.create<GeluOp>(loc, x.getType(), x,
                            approx == ::dsc::GeluApprox::Tanh
                                ? GeluApproximation::tanh
                                : GeluApproximation::erf);
  }
  /// Dropout sites get consecutive Philox streams; rate 0 emits nothing.
  Value dropout(Value x, double rate) {
    if (rate == 0.0)
      return x;
    return b.create<DropoutOp>(loc, x.getType(), x, b.getF64FloatAttr(rate),
                               b.getI64IntegerAttr(nextStream++));
  }
  int64_t takeStream() { return nextStream++; }

  /// The last op emitted so far (null if none); with tagLayer, marks the
  /// ops of one transformer layer with dsc.layer for the memory report.
  Operation *lastOp() { return block->empty() ? nullptr : &block->back(); }
  void tagLayer(Operation *before, int64_t layer) {
    auto it = before ? std::next(before->getIterator()) : block->begin();
    for (; it != block->end(); ++it)
      it->setAttr(kLayerAttrName, b.getI64IntegerAttr(layer));
  }

  /// Multi-head attention core on projected [B, T, P*C] inputs: the P parts
  /// are split into heads, attended, and merged back to [B, T, C].
  Value attention(ValueRange projections, int64_t heads, bool causal,
                  double attnDropout) {
    SmallVector<Value> qkv;
    for (Value proj : projections) {
      auto shape = typeOf(proj).getShape();
      // One fused projection holds Q, K and V; separate ones hold one each.
      int64_t parts = projections.size() == 1 ? 3 : 1;
      int64_t width = shape[2] / parts;
      auto headType =
          f32Type({shape[0], heads, shape[1], width / heads});
      SmallVector<Type> types(parts, headType);
      auto split = b.create<SplitHeadsOp>(loc, types, proj,
                                          b.getI64IntegerAttr(heads));
      llvm::append_range(qkv, split.getParts());
    }
    assert(qkv.size() == 3 && "attention needs q, k and v");
    return attendHeads(qkv[0], qkv[1], qkv[2], causal, attnDropout);
  }

  /// softmax(q k^T / sqrt(D)) v on [B, H, T, D] heads, merged back to
  /// [B, T, H*D].
  /// Attention of q over k, v [B, H, T, D]: softmax(scale q.k) v, with
  /// `scale` 0 meaning 1/sqrt(D); with `softcap` (Gemma 2) the scaled
  /// scores are soft-capped before the softmax.
  Value attendHeads(Value q, Value k, Value v, bool causal,
                    double attnDropout, double scale = 0.0,
                    double softcap = 0.0) {
    auto headShape = typeOf(q).getShape(); // [B, H, T, D]
    int64_t heads = headShape[1], t = headShape[2], d = headShape[3];
    if (scale == 0.0)
      scale = 1.0 / std::sqrt(d);
    auto scoreType = f32Type({headShape[0], heads, t, t});
    Value scores = b.create<BatchMatmulOp>(
        loc, scoreType, q, k, b.getBoolAttr(false), b.getBoolAttr(true),
        b.getF64FloatAttr(softcap ? scale : 1.0));
    if (softcap)
      scores = b.create<SoftcapOp>(loc, scoreType, scores,
                                   b.getF64FloatAttr(softcap));
    Value probs = b.create<SoftmaxOp>(loc, scoreType, scores, keyMask,
                                      b.getF64FloatAttr(softcap ? 1.0 : scale),
                                      b.getBoolAttr(causal), attentionLayout);
    probs = dropout(probs, attnDropout);
    Value context = b.create<BatchMatmulOp>(
        loc, q.getType(), probs, v, b.getBoolAttr(false),
        b.getBoolAttr(false), b.getF64FloatAttr(1.0));
    return b.create<MergeHeadsOp>(
        loc, f32Type({headShape[0], t, heads * d}), ValueRange{context});
  }

  /// The sparse MoE block of Mixtral and Qwen2-MoE on `x` [B, T, C]
  /// (parameters under `prefix`, Hugging Face's names and order: the router
  /// `gate`, then each expert's w1, w2, w3 (Mixtral) or gate_proj, up_proj,
  /// down_proj (Qwen2-MoE)): route each token to its top-k experts, run the
  /// experts' SwiGLU MLPs on their rows (the experts' weights concatenated,
  /// one grouped GEMM per projection) and sum the outputs weighted by the
  /// router (renormalised with norm_topk_prob). Appends the layer's load to
  /// `loads` when the objective has the load-balancing loss.
  Value moeBlock(Value x, const std::string &prefix,
                 const ::dsc::ModelConfig &m, SmallVectorImpl<Value> *loads) {
    auto xShape = typeOf(x).getShape();
    const int64_t c = xShape.back(), f = m.expertIntermediate,
                  e = m.numExperts, k = m.expertsPerToken;
    const int64_t tokens = typeOf(x).getNumElements() / c;
    const double std = m.initializerRange;
    const bool mixtral = m.typeName == "mixtral";
    Value router = normalParam(prefix + "gate.weight", {e, c}, std);
    SmallVector<Value> w1, w2, w3; // gate, down, up
    for (int64_t i = 0; i < e; ++i) {
      std::string ep = prefix + "experts." + std::to_string(i) + ".";
      if (mixtral) {
        w1.push_back(normalParam(ep + "w1.weight", {f, c}, std));
        w2.push_back(normalParam(ep + "w2.weight", {c, f}, std));
        w3.push_back(normalParam(ep + "w3.weight", {f, c}, std));
      } else {
        w1.push_back(normalParam(ep + "gate_proj.weight", {f, c}, std));
        w3.push_back(normalParam(ep + "up_proj.weight", {f, c}, std));
        w2.push_back(normalParam(ep + "down_proj.weight", {c, f}, std));
      }
    }
    Value logits = linear(x, router, Value(), /*transposeW=*/true);
    SmallVector<int64_t> perToken(xShape.drop_back());
    perToken.push_back(k);
    auto i32 = b.getIntegerType(32);
    auto topk = b.create<MoeTopkOp>(
        loc, TypeRange{f32Type(perToken), RankedTensorType::get(perToken, i32)},
        logits, b.getI64IntegerAttr(k), b.getBoolAttr(m.normTopk));
    auto route =
        b.create<MoeRouteOp>(loc,
                             TypeRange{RankedTensorType::get(perToken, i32),
                                       RankedTensorType::get({e}, i32)},
                             topk.getExperts(), b.getI64IntegerAttr(e),
                             b.getI64IntegerAttr(moeCapacity));
    Value rows = b.create<MoeDispatchOp>(loc, f32Type({tokens * k, c}), x,
                                         route.getSlots(), Value());
    auto experts = [&](Value in, ArrayRef<Value> weights, int64_t out) {
      auto wShape = typeOf(weights[0]).getShape();
      Value stacked =
          b.create<ConcatOp>(loc, f32Type({e * wShape[0], wShape[1]}), weights,
                             b.getI64IntegerAttr(0));
      return b
          .create<GroupedLinearOp>(loc, f32Type({tokens * k, out}), in, stacked,
                                   route.getCounts(), b.getBoolAttr(true))
          .getResult();
    };
    Value gate = experts(rows, w1, f), up = experts(rows, w3, f);
    Value act = b.create<MulOp>(
        loc, up.getType(), b.create<SiluOp>(loc, gate.getType(), gate), up);
    Value out = experts(act, w2, c);
    if (loads)
      loads->push_back(
          b.create<MoeLoadOp>(loc, f32Type({2, e}), logits, topk.getExperts()));
    return b.create<MoeCombineOp>(loc, x.getType(), out, route.getSlots(),
                                  topk.getWeights());
  }

  /// The LLaMA family's gated MLP on `x` [B, T, C]: down(act(gate x) * up
  /// x) of width `f`, parameters `<prefix>{gate,up,down}_proj` (biased with
  /// mlp_bias); act is SiLU, or GELU for Gemma.
  Value gatedMlp(Value x, const std::string &prefix, int64_t f,
                 const ::dsc::ModelConfig &m) {
    const int64_t c = typeOf(x).getShape().back();
    const double std = m.initializerRange;
    Value gate = dense(x, prefix + "gate_proj", c, f, std, m.mlpBias);
    Value up = dense(x, prefix + "up_proj", c, f, std, m.mlpBias);
    Value act = m.geluMlp
                    ? gelu(gate, m.gelu)
                    : Value(b.create<SiluOp>(loc, gate.getType(), gate));
    return dense(b.create<MulOp>(loc, up.getType(), act, up),
                 prefix + "down_proj", f, c, std, m.mlpBias);
  }

  /// Qwen2-MoE's shared expert on `x` [B, T, C]: a gated MLP of width
  /// shared_expert_intermediate_size every token runs, times the sigmoid of
  /// its own gate (parameters `shared_expert.{gate,up,down}_proj` and
  /// `shared_expert_gate` under `prefix`).
  Value sharedExpert(Value x, const std::string &prefix,
                     const ::dsc::ModelConfig &m) {
    const int64_t c = typeOf(x).getShape().back();
    Value out = gatedMlp(x, prefix + "shared_expert.",
                         m.sharedExpertIntermediate, m);
    Value g = dense(x, prefix + "shared_expert_gate", c, 1,
                    m.initializerRange, false);
    return b.create<SigmoidGateOp>(loc, out.getType(), g, out);
  }

  /// The mean loss over the labels other than `ignoreIndex`.
  Value crossEntropy(Value logits, Value labels, int64_t ignoreIndex) {
    return b.create<CrossEntropyOp>(loc, f32Type({}), logits, labels,
                                    b.getI64IntegerAttr(ignoreIndex));
  }
  /// Next-token labels that are padding do not count (no padding: -100,
  /// which no token equals).
  int64_t nextTokenIgnoreIndex() const {
    return padTokenId >= 0 ? padTokenId : -100;
  }

  MLIRContext *ctx;
  OpBuilder b;
  Location loc;
  Block *block;
  Type f32;
  unsigned numParams = 0;
  SmallVector<Attribute> paramAttrs;
  BlockLayoutAttr attentionLayout; ///< null: dense attention
  int64_t padTokenId = -1;         ///< < 0: no padding
  /// Token dropping: ImportOptions::moeCapacity (0: dropless).
  int64_t moeCapacity = 0;
  Value keyMask;                   ///< dsc.padding_mask of the inputs, or null
  int64_t nextStream = 1;
};

/// GPT2LMHeadModel: pre-LayerNorm blocks, fused c_attn, tied lm_head.
Value buildGpt2(GraphBuilder &g, const ::dsc::ModelConfig &m, Value ids,
                Value targets, Value &logits) {
  const std::string p = "transformer.";
  int64_t c = m.hidden, t = cast<RankedTensorType>(ids.getType()).getShape()[1];
  double std = m.initializerRange;
  // Hugging Face scales residual projections by 1/sqrt(2 * n_layer).
  double projStd = std / std::sqrt(2.0 * m.numLayers);
  Value wte = g.normalParam(p + "wte.weight", {m.vocabSize, c}, std);
  Value wpe = g.normalParam(p + "wpe.weight", {m.maxPositions, c}, std);
  Value tokens = g.embedding(wte, ids);
  Value h = g.add(tokens, g.embedding(wpe, g.iota(t, 1)));
  h = g.dropout(h, m.embdDropout);
  for (int64_t l = 0; l < m.numLayers; ++l) {
    Operation *before = g.lastOp();
    std::string lp = p + "h." + std::to_string(l) + ".";
    Value a = g.layerNorm(h, lp + "ln_1", m.layerNormEps);
    Value qkv = g.projection(a, lp + "attn.c_attn", c, 3 * c, std, false);
    a = g.attention(ValueRange{qkv}, m.numHeads, /*causal=*/true,
                    m.attnDropout);
    a = g.projection(a, lp + "attn.c_proj", c, c, projStd, false);
    h = g.add(h, g.dropout(a, m.residDropout));
    Value f = g.layerNorm(h, lp + "ln_2", m.layerNormEps);
    f = g.projection(f, lp + "mlp.c_fc", c, m.intermediate, std, false);
    f = g.gelu(f, m.gelu);
    f = g.projection(f, lp + "mlp.c_proj", m.intermediate, c, projStd, false);
    h = g.add(h, g.dropout(f, m.residDropout));
    g.tagLayer(before, l);
  }
  h = g.layerNorm(h, p + "ln_f", m.layerNormEps);
  logits = g.linear(h, wte, Value(), /*transposeW=*/true);
  return g.crossEntropy(logits, targets, g.nextTokenIgnoreIndex());
}

/// BertForMaskedLM: post-LayerNorm encoder, MLM head tied to the word
/// embeddings; the inputs are corrupted in-graph by dsc.mlm_mask.
Value buildBert(GraphBuilder &g, const ::dsc::ModelConfig &m,
                const ::dsc::ImportOptions &opts, Value ids, Value &logits) {
  auto idType = cast<RankedTensorType>(ids.getType());
  int64_t c = m.hidden, t = idType.getShape()[1];
  double std = m.initializerRange;
  auto mask = g.b.create<MlmMaskOp>(
      g.loc, TypeRange{idType, idType}, ids,
      g.b.getF64FloatAttr(opts.mlmProbability),
      g.b.getI64IntegerAttr(opts.maskTokenId),
      g.b.getI64IntegerAttr(m.vocabSize), g.b.getI64IntegerAttr(g.takeStream()),
      g.b.getI64IntegerAttr(g.padTokenId));
  const std::string e = "bert.embeddings.";
  Value words = g.normalParam(e + "word_embeddings.weight", {m.vocabSize, c}, std);
  Value pos = g.normalParam(e + "position_embeddings.weight",
                            {m.maxPositions, c}, std);
  Value types = g.normalParam(e + "token_type_embeddings.weight",
                              {m.typeVocabSize, c}, std);
  Value h = g.embedding(words, mask.getInputs());
  h = g.add(h, g.embedding(pos, g.iota(t, 1)));
  h = g.add(h, g.embedding(types, g.iota(t, 0)));
  h = g.layerNorm(h, e + "LayerNorm", m.layerNormEps);
  h = g.dropout(h, m.embdDropout);
  auto dense = [&](Value x, const std::string &prefix, int64_t in,
                   int64_t out) {
    return g.projection(x, prefix, in, out, std, /*transposeW=*/true);
  };
  for (int64_t l = 0; l < m.numLayers; ++l) {
    Operation *before = g.lastOp();
    std::string lp = "bert.encoder.layer." + std::to_string(l) + ".";
    std::string sp = lp + "attention.self.";
    Value q = dense(h, sp + "query", c, c);
    Value k = dense(h, sp + "key", c, c);
    Value v = dense(h, sp + "value", c, c);
    Value a = g.attention(ValueRange{q, k, v}, m.numHeads, /*causal=*/false,
                          m.attnDropout);
    a = g.dropout(dense(a, lp + "attention.output.dense", c, c), m.residDropout);
    h = g.layerNorm(g.add(a, h), lp + "attention.output.LayerNorm",
                    m.layerNormEps);
    Value f = g.gelu(dense(h, lp + "intermediate.dense", c, m.intermediate),
                     m.gelu);
    f = g.dropout(dense(f, lp + "output.dense", m.intermediate, c),
                  m.residDropout);
    h = g.layerNorm(g.add(f, h), lp + "output.LayerNorm", m.layerNormEps);
    g.tagLayer(before, l);
  }
  const std::string cp = "cls.predictions.";
  Value x = g.gelu(dense(h, cp + "transform.dense", c, c), m.gelu);
  x = g.layerNorm(x, cp + "transform.LayerNorm", m.layerNormEps);
  logits = g.linear(x, words, g.zerosParam(cp + "bias", {m.vocabSize}),
                    /*transposeW=*/true);
  return g.crossEntropy(logits, mask.getLabels(), /*ignoreIndex=*/-100);
}

/// LlamaForCausalLM (also Mistral, Qwen2, Qwen3, Gemma, Mixtral and Qwen2-MoE):
/// pre-RMSNorm blocks, rotary embeddings on q and k, grouped-query
/// attention, SwiGLU MLP, a head of its own unless tie_word_embeddings.
/// Qwen3 RMS-normalises each query and key head before the rotation
/// (q_norm, k_norm over head_dim). Gemma scales the
/// embeddings by sqrt(hidden_size), its RMSNorms by 1 + weight, and gates
/// its MLP through GELU. Mixtral replaces the MLP by a sparse MoE block
/// and, with output_router_logits, adds router_aux_loss_coef times the
/// load-balancing loss over all layers to the cross-entropy.
Value buildLlama(GraphBuilder &g, const ::dsc::ModelConfig &m, Value ids,
                 Value targets, Value &logits) {
  int64_t c = m.hidden, hd = m.headDim, heads = m.numHeads,
          kv = m.numKvHeads;
  double std = m.initializerRange, eps = m.layerNormEps;
  Value embed = g.normalParam("model.embed_tokens.weight", {m.vocabSize, c},
                              std);
  Value h = g.embedding(embed, ids);
  if (m.embedScale) // Gemma: the embeddings times sqrt(hidden_size)
    h = g.b.create<ScaleOp>(g.loc, h.getType(), h,
                            g.b.getF64FloatAttr(std::sqrt(double(c))));
  const bool plusOne = m.normPlusOne;
  SmallVector<Value> routerLoads;
  const bool auxLoss = m.numMoeLayers() && m.routerAuxLoss;
  for (int64_t l = 0; l < m.numLayers; ++l) {
    Operation *before = g.lastOp();
    std::string lp = "model.layers." + std::to_string(l) + ".";
    Value a = g.rmsNorm(h, lp + "input_layernorm", eps, plusOne);
    std::string sp = lp + "self_attn.";
    Value q = g.dense(a, sp + "q_proj", c, heads * hd, std, m.qkvBias);
    Value k = g.dense(a, sp + "k_proj", c, kv * hd, std, m.qkvBias);
    Value v = g.dense(a, sp + "v_proj", c, kv * hd, std, m.qkvBias);
    q = g.splitHeads(q, heads);
    k = g.splitHeads(k, kv);
    if (m.qkNorm) { // Qwen3: each head's D features RMS-normalised
      q = g.rmsNorm(q, sp + "q_norm", eps);
      k = g.rmsNorm(k, sp + "k_norm", eps);
    }
    q = g.rotary(q, m.rope);
    k = g.rotary(k, m.rope);
    v = g.splitHeads(v, kv);
    a = g.attendHeads(
        q, g.repeatKv(k, heads / kv), g.repeatKv(v, heads / kv),
        /*causal=*/true, m.attnDropout,
        m.queryPreAttnScalar ? 1.0 / std::sqrt(m.queryPreAttnScalar) : 0.0,
        m.attnSoftcap);
    a = g.dense(a, sp + "o_proj", heads * hd, c, std, m.outBias);
    // Gemma 2's sandwich: the attention output normalised before the
    // residual add, the MLP reading its own pre_feedforward_layernorm.
    if (m.sandwichNorms)
      a = g.rmsNorm(a, lp + "post_attention_layernorm", eps, plusOne);
    h = g.add(h, a);
    Value f = g.rmsNorm(h,
                        lp + (m.sandwichNorms ? "pre_feedforward_layernorm"
                                              : "post_attention_layernorm"),
                        eps, plusOne);
    if (m.isMoeLayer(l)) {
      // Mixtral names the block block_sparse_moe, Qwen2-MoE mlp.
      const std::string mp =
          lp + (m.typeName == "mixtral" ? "block_sparse_moe." : "mlp.");
      Value moe = g.moeBlock(f, mp, m, auxLoss ? &routerLoads : nullptr);
      if (m.sharedExpertIntermediate)
        moe = g.add(moe, g.sharedExpert(f, mp, m));
      h = g.add(h, moe);
      g.tagLayer(before, l);
      continue;
    }
    f = g.gatedMlp(f, lp + "mlp.", m.intermediate, m);
    if (m.sandwichNorms)
      f = g.rmsNorm(f, lp + "post_feedforward_layernorm", eps, plusOne);
    h = g.add(h, f);
    g.tagLayer(before, l);
  }
  h = g.rmsNorm(h, "model.norm", eps, plusOne);
  Value head = m.tieEmbeddings
                   ? embed
                   : g.normalParam("lm_head.weight", {m.vocabSize, c}, std);
  logits = g.linear(h, head, Value(), /*transposeW=*/true);
  if (m.finalSoftcap) // Gemma 2: the logits (returned and trained) capped
    logits = g.b.create<SoftcapOp>(g.loc, logits.getType(), logits,
                                   g.b.getF64FloatAttr(m.finalSoftcap));
  Value loss = g.crossEntropy(logits, targets, g.nextTokenIgnoreIndex());
  if (!auxLoss)
    return loss;
  // transformers' load_balancing_loss_func: E * sum_e (the fraction of all
  // layers' assignments to e) * (e's router probability averaged over all
  // layers' tokens), times router_aux_loss_coef.
  const auto idsType = cast<RankedTensorType>(ids.getType());
  const double all =
      double(idsType.getNumElements()) * double(m.numMoeLayers());
  Value aux = g.b.create<MoeBalanceLossOp>(
      g.loc, g.f32Type({}), routerLoads,
      g.b.getF64FloatAttr(m.routerAuxLossCoef * double(m.numExperts) /
                          (all * all)));
  return g.add(loss, aux);
}

/// PhiForCausalLM: parallel blocks (attention and MLP both read one
/// LayerNorm of the residual stream and both add to it), biases on every
/// linear layer and on the LM head, a rotary embedding on the first
/// rotaryDims() of each head's dimensions.
Value buildPhi(GraphBuilder &g, const ::dsc::ModelConfig &m, Value ids,
               Value targets, Value &logits) {
  int64_t c = m.hidden, hd = m.headDim, heads = m.numHeads,
          kv = m.numKvHeads, rot = m.rotaryDims();
  double std = m.initializerRange, eps = m.layerNormEps;
  Value embed = g.normalParam("model.embed_tokens.weight", {m.vocabSize, c},
                              std);
  Value h = g.dropout(g.embedding(embed, ids), m.embdDropout);
  for (int64_t l = 0; l < m.numLayers; ++l) {
    Operation *before = g.lastOp();
    std::string lp = "model.layers." + std::to_string(l) + ".";
    Value a = g.layerNorm(h, lp + "input_layernorm", eps);
    std::string sp = lp + "self_attn.";
    Value q = g.splitHeads(g.dense(a, sp + "q_proj", c, heads * hd, std, true),
                           heads);
    Value k =
        g.splitHeads(g.dense(a, sp + "k_proj", c, kv * hd, std, true), kv);
    Value v =
        g.splitHeads(g.dense(a, sp + "v_proj", c, kv * hd, std, true), kv);
    q = g.partialRotary(q, rot, m.rope);
    k = g.partialRotary(k, rot, m.rope);
    Value att = g.attendHeads(q, g.repeatKv(k, heads / kv),
                              g.repeatKv(v, heads / kv), /*causal=*/true,
                              m.attnDropout);
    att = g.dropout(g.dense(att, sp + "dense", heads * hd, c, std, true),
                    m.residDropout);
    std::string mp = lp + "mlp.";
    Value f = g.gelu(g.dense(a, mp + "fc1", c, m.intermediate, std, true),
                     m.gelu);
    f = g.dropout(g.dense(f, mp + "fc2", m.intermediate, c, std, true),
                  m.residDropout);
    h = g.add(g.add(att, f), h);
    g.tagLayer(before, l);
  }
  h = g.layerNorm(h, "model.final_layernorm", eps);
  Value head = m.tieEmbeddings
                   ? embed
                   : g.normalParam("lm_head.weight", {m.vocabSize, c}, std);
  logits = g.linear(h, head, g.zerosParam("lm_head.bias", {m.vocabSize}),
                    /*transposeW=*/true);
  return g.crossEntropy(logits, targets, g.nextTokenIgnoreIndex());
}

/// The #dsc.block_layout of a config's layout; one layout head when every
/// head has the same blocks.
BlockLayoutAttr layoutAttr(MLIRContext *ctx, const ::dsc::BlockLayout &l,
                           int64_t seqLen) {
  const size_t perHead = size_t(l.blocks * l.blocks);
  int64_t heads = 1;
  for (int64_t h = 1; h < l.heads && heads == 1; ++h)
    if (!std::equal(l.bits.begin(), l.bits.begin() + perHead,
                    l.bits.begin() + h * perHead))
      heads = l.heads;
  return BlockLayoutAttr::fromMask(ctx, seqLen / l.blocks, heads, l.blocks,
                                   ArrayRef(l.bits).take_front(heads * perHead));
}

} // namespace

/// How Hugging Face files name the tensors of a model of this type.
static void setWeightFileNames(ModuleOp module, ::dsc::ModelType type) {
  Builder b(module.getContext());
  const ::dsc::HfTensorNames names = ::dsc::hfTensorNames(type);
  for (auto [attr, value] :
       {std::pair{::dsc::kHfOptionalPrefixAttr, &names.optionalPrefix},
        std::pair{::dsc::kHfTiedTensorsAttr, &names.tied},
        std::pair{::dsc::kHfUnusedTensorsAttr, &names.unused}})
    if (!value->empty())
      module->setAttr(attr, b.getStringAttr(*value));
}

auto ::dsc::importModel(MLIRContext &ctx,
                                       const ::dsc::ModelConfig &model,
                         const ::dsc::ImportOptions &opts)
    -> OwningOpRef<ModuleOp> {
  ctx.loadDialect<DscDialect, func::FuncDialect>();
  Location loc = NameLoc::get(StringAttr::get(&ctx, model.typeName));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder mb = OpBuilder::atBlockEnd(module->getBody());
  auto idType = RankedTensorType::get({opts.microBatch, opts.seqLen},
                                      mb.getIntegerType(32));
  auto fn = mb.create<func::FuncOp>(loc, "forward",
                                    mb.getFunctionType({idType, idType}, {}));
  Block *block = fn.addEntryBlock();
  GraphBuilder g(fn);
  if (opts.attentionLayout)
    g.attentionLayout = layoutAttr(&ctx, *opts.attentionLayout, opts.seqLen);
  Value ids = block->getArgument(0), targets = block->getArgument(1);
  // Padding tokens are keys no query sees and labels no loss counts
  // (BERT: never selected for masking, so never a label).
  g.padTokenId = opts.padTokenId;
  g.moeCapacity = opts.moeCapacity;
  if (opts.padTokenId >= 0)
    g.keyMask = g.b.create<PaddingMaskOp>(
        loc, ids.getType(), ids, g.b.getI64IntegerAttr(opts.padTokenId));
  Value logits;
  Value loss;
  switch (model.type) {
  case ::dsc::ModelType::GPT2:
    loss = buildGpt2(g, model, ids, targets, logits);
    break;
  case ::dsc::ModelType::BERT:
    loss = buildBert(g, model, opts, ids, logits);
    break;
  case ::dsc::ModelType::LLaMA:
    loss = buildLlama(g, model, ids, targets, logits);
    break;
  case ::dsc::ModelType::Phi:
    loss = buildPhi(g, model, ids, targets, logits);
    break;
  }
  g.b.create<func::ReturnOp>(loc, ValueRange{loss, logits});

  fn.setFunctionType(mb.getFunctionType(block->getArgumentTypes(),
                                        {loss.getType(), logits.getType()}));
  // All at once: one setArgAttr per argument would rebuild (and unique)
  // the whole argument-attribute array every time, quadratic in the
  // parameter count.
  SmallVector<DictionaryAttr> argAttrs(block->getNumArguments(),
                                       mb.getDictionaryAttr({}));
  for (auto [i, attr] : llvm::enumerate(g.paramAttrs))
    argAttrs[i] = mb.getDictionaryAttr(mb.getNamedAttr(kParamAttrName, attr));
  fn.setAllArgAttrs(argAttrs);

  module->getOperation()->setAttr(::dsc::kMicroBatchAttr,
                                  mb.getI64IntegerAttr(opts.microBatch));
  module->getOperation()->setAttr(::dsc::kSeqLenAttr, mb.getI64IntegerAttr(opts.seqLen));
  module->getOperation()->setAttr(::dsc::kVocabSizeAttr,
                                  mb.getI64IntegerAttr(model.vocabSize));
  module->getOperation()->setAttr(
      ::dsc::kModelTypeAttr, mb.getStringAttr(model.typeName));
  setWeightFileNames(*module, model.type);
  return module;
}
