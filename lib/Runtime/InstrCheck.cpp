//===- InstrCheck.cpp - Operand checks of one instruction -----------------===//
//
// One function per opcode family. The checks run in the order the backends
// ran them before they shared this file, so a malformed instruction still
// gets the same first message.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/InstrCheck.h"

#include "dsc/Runtime/Broadcast.h"

#include <algorithm>

namespace dsc::rt {

namespace {

class Checker {
public:
  Checker(const Program &P, const Instr &I) : P(P), I(I) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(std::string(opcodeName(I.op)) + ": " + msg);
  }

  void numIns(size_t lo, size_t hi) const {
    if (I.inputs.size() < lo || I.inputs.size() > hi)
      fail("expects " +
           (lo == hi ? std::to_string(lo)
                     : std::to_string(lo) + ".." + std::to_string(hi)) +
           " inputs, got " + std::to_string(I.inputs.size()));
  }
  void numIns(size_t n) const { numIns(n, n); }
  void numOuts(size_t n) const {
    if (I.outputs.size() != n)
      fail("expects " + std::to_string(n) + " outputs, got " +
           std::to_string(I.outputs.size()));
  }

  const Buffer &buffer(int id) const {
    if (id < 0 || size_t(id) >= P.buffers.size())
      fail("buffer id " + std::to_string(id) + " out of range (program has " +
           std::to_string(P.buffers.size()) + " buffers)");
    return P.buffers[size_t(id)];
  }
  const Buffer &in(size_t k) const { return buffer(I.inputs.at(k)); }
  const Buffer &out(size_t k) const { return buffer(I.outputs.at(k)); }

  void count(const Buffer &b, int64_t n, const char *role) const {
    if (b.numElements() != n)
      fail(std::string(role) + " '" + b.name + "' " + shapeStr(b.shape) +
           " has " + std::to_string(b.numElements()) + " elements, expected " +
           std::to_string(n));
  }
  int64_t lastDim(const Buffer &b, const char *role) const {
    if (b.shape.empty())
      fail(std::string(role) + " '" + b.name + "' must have rank >= 1");
    return b.shape.back();
  }
  /// `b` as [rows, cols] over its last dim.
  void rowsOf(const Buffer &b, const char *role) {
    d.cols = lastDim(b, role);
    d.n = b.numElements();
    d.rows = d.cols ? d.n / d.cols : 0;
  }
  void rate() {
    d.rate = I.getFloat("rate");
    if (!(d.rate >= 0.0 && d.rate < 1.0))
      fail("rate must be in [0, 1), got " + std::to_string(d.rate));
  }
  bool flag(const char *name) const { return I.has(name) && I.getInt(name); }

  void family(); ///< the checks of I's opcode family
  void embedding();
  void add();
  void reduceTo();
  void linear();
  void batchMatmul();
  void layerNorm();
  void layerNormGrad();
  void biasDropoutAddLayerNorm();
  void gelu();
  void dropout();
  void biasOps();
  void heads();
  void concatSplit();
  void softmax();
  void attention();
  void crossEntropy();
  void mlmMask();
  void optimizer();
  void scalarOp();
  void lrSchedule();
  void other();

  const Program &P;
  const Instr &I;
  InstrDims d;
};

void Checker::embedding() {
  const bool grad = I.op == Opcode::EmbeddingGrad;
  numIns(2);
  numOuts(1);
  const Buffer &t = grad ? out(0) : in(0);
  if (t.shape.size() != 2)
    fail(std::string(grad ? "dtable" : "table") + " '" + t.name +
         "' must be [V,C], got " + shapeStr(t.shape));
  d.vocab = t.shape[0];
  d.cols = t.shape[1];
  d.rows = in(grad ? 0 : 1).numElements();
  count(grad ? in(1) : out(0), d.rows * d.cols, grad ? "dy" : "output");
}

void Checker::add() {
  numIns(2);
  numOuts(1);
  const Buffer &a = in(0), &b = in(1);
  if (!broadcastable(a.shape, b.shape))
    fail("cannot broadcast '" + b.name + "' " + shapeStr(b.shape) + " to '" +
         a.name + "' " + shapeStr(a.shape));
  d.n = a.numElements();
  count(out(0), d.n, "output");
}

void Checker::reduceTo() {
  numIns(1);
  numOuts(1);
  const Buffer &x = in(0), &o = out(0);
  if (!broadcastable(x.shape, o.shape))
    fail("output '" + o.name + "' " + shapeStr(o.shape) +
         " does not broadcast to input '" + x.name + "' " + shapeStr(x.shape));
}

void Checker::linear() {
  const bool fwd = I.op == Opcode::Linear;
  numIns(2, fwd ? 3 : 2);
  numOuts(1);
  d.transW = flag("transpose_w");
  const bool tw = d.transW;
  const Buffer &w = I.op == Opcode::LinearGradWeight ? out(0) : in(1);
  if (w.shape.size() != 2)
    fail("weight '" + w.name + "' must be rank 2, got " + shapeStr(w.shape));
  const int64_t K = d.K = tw ? w.shape[1] : w.shape[0];
  const int64_t N = d.N = tw ? w.shape[0] : w.shape[1];
  if (fwd) {
    const Buffer &x = in(0);
    if (lastDim(x, "x") != K)
      fail("x '" + x.name + "' " + shapeStr(x.shape) +
           " does not match weight " + shapeStr(w.shape) +
           (tw ? " (transposed)" : ""));
    d.M = K ? x.numElements() / K : 0;
    count(out(0), d.M * N, "output");
    if (I.inputs.size() == 3)
      count(in(2), N, "bias");
  } else if (I.op == Opcode::LinearGradInput) {
    const Buffer &dy = in(0);
    if (lastDim(dy, "dy") != N)
      fail("dy '" + dy.name + "' " + shapeStr(dy.shape) +
           " does not match weight " + shapeStr(w.shape));
    d.M = N ? dy.numElements() / N : 0;
    count(out(0), d.M * K, "dx");
  } else {
    const Buffer &x = in(0), &dy = in(1);
    if (lastDim(x, "x") != K || lastDim(dy, "dy") != N)
      fail("x " + shapeStr(x.shape) + " and dy " + shapeStr(dy.shape) +
           " do not match dw " + shapeStr(w.shape));
    d.M = K ? x.numElements() / K : 0;
    count(dy, d.M * N, "dy");
  }
}

void Checker::batchMatmul() {
  numIns(2);
  numOuts(1);
  const Buffer &a = in(0), &b = in(1);
  if (a.shape.size() < 3 || b.shape.size() != a.shape.size())
    fail("operands must have equal rank >= 3, got " + shapeStr(a.shape) +
         " and " + shapeStr(b.shape));
  for (size_t i = 0; i + 2 < a.shape.size(); ++i) {
    if (a.shape[i] != b.shape[i])
      fail("batch dims differ: " + shapeStr(a.shape) + " vs " +
           shapeStr(b.shape));
    d.batch *= a.shape[i];
  }
  const bool ta = d.transA = flag("transpose_a");
  const bool tb = d.transB = flag("transpose_b");
  const size_t r = a.shape.size();
  d.M = ta ? a.shape[r - 1] : a.shape[r - 2];
  d.K = ta ? a.shape[r - 2] : a.shape[r - 1];
  const int64_t Kb = tb ? b.shape[r - 1] : b.shape[r - 2];
  d.N = tb ? b.shape[r - 2] : b.shape[r - 1];
  if (d.K != Kb)
    fail("contraction dims differ: " + shapeStr(a.shape) + (ta ? "^T" : "") +
         " @ " + shapeStr(b.shape) + (tb ? "^T" : ""));
  count(out(0), d.batch * d.M * d.N, "output");
}

void Checker::layerNorm() {
  const bool withRstd = I.op == Opcode::InvertibleLayerNorm;
  numIns(3);
  numOuts(withRstd ? 2 : 1);
  rowsOf(in(0), "x");
  count(in(1), d.cols, "gamma");
  count(in(2), d.cols, "beta");
  count(out(0), d.n, "output");
  if (withRstd)
    count(out(1), d.rows, "rstd");
}

/// LayerNormGrad: dy, x, gamma[, dres]; LayerNormGradFromOutput: dy, y,
/// gamma, beta, rstd[, dres]. Outputs dx, dgamma, dbeta.
void Checker::layerNormGrad() {
  const bool fromOutput = I.op == Opcode::LayerNormGradFromOutput;
  const size_t base = fromOutput ? 5 : 3;
  numIns(base, base + 1);
  numOuts(3);
  rowsOf(in(1), fromOutput ? "y" : "x");
  count(in(0), d.n, "dy");
  count(in(2), d.cols, "gamma");
  if (fromOutput) {
    count(in(3), d.cols, "beta");
    count(in(4), d.rows, "rstd");
  }
  const bool dres = I.inputs.size() == base + 1;
  // LayerNormGrad looked at the residual gradient before the outputs.
  if (dres && !fromOutput)
    count(in(base), d.n, "residual gradient");
  count(out(0), d.n, "dx");
  count(out(1), d.cols, "dgamma");
  count(out(2), d.cols, "dbeta");
  if (dres && fromOutput)
    count(in(base), d.n, "residual gradient");
}

void Checker::biasDropoutAddLayerNorm() {
  numIns(5);
  numOuts(3);
  rowsOf(in(0), "input");
  count(in(1), d.cols, "bias");
  count(in(2), d.n, "residual");
  count(in(3), d.cols, "gamma");
  count(in(4), d.cols, "beta");
  count(out(0), d.n, "sum");
  count(out(1), d.n, "output");
  count(out(2), d.rows, "rstd");
  rate();
}

void Checker::gelu() {
  const bool grad = I.op == Opcode::GeluGrad;
  numIns(grad ? 2 : 1);
  numOuts(1);
  const std::string approx =
      I.has("approximation") ? I.getString("approximation") : "tanh";
  if (approx != "tanh" && approx != "erf" && approx != "none")
    fail("approximation must be \"tanh\" or \"erf\", got \"" + approx + "\"");
  d.tanh = approx == "tanh";
  d.n = in(0).numElements();
  count(out(0), d.n, "output");
  if (grad)
    count(in(1), d.n, "x");
}

void Checker::dropout() {
  numIns(1);
  numOuts(1);
  d.n = in(0).numElements();
  count(out(0), d.n, "output");
  rate();
}

/// [rows, N] tensors with a bias [N]; inputs/outputs by opcode:
///   BiasGelu(x, b) -> y            BiasGeluGrad(dy, x, b) -> dx, db
///   BiasDropoutAdd(x, b, res) -> y  DropoutBiasGrad(dy) -> dx, db
void Checker::biasOps() {
  const bool grad =
      I.op == Opcode::BiasGeluGrad || I.op == Opcode::DropoutBiasGrad;
  const bool geluOp = I.op == Opcode::BiasGelu || I.op == Opcode::BiasGeluGrad;
  const size_t ins = I.op == Opcode::BiasGelu          ? 2
                     : I.op == Opcode::DropoutBiasGrad ? 1
                                                       : 3;
  numIns(ins);
  numOuts(grad ? 2 : 1);
  rowsOf(in(0), "input");
  if (I.op == Opcode::BiasGeluGrad) {
    count(in(1), d.n, "x");
    count(in(2), d.cols, "bias");
  } else if (ins > 1) {
    count(in(1), d.cols, "bias");
    if (ins > 2)
      count(in(2), d.n, "residual");
  }
  count(out(0), d.n, "output");
  if (grad)
    count(out(1), d.cols, "bias gradient");
  if (geluOp) // unlike Gelu's, anything but "erf" is the tanh form
    d.tanh = I.getString("approximation") != "erf";
  else
    rate();
}

void Checker::heads() {
  const bool split = I.op != Opcode::MergeHeads;
  const bool biased = I.op == Opcode::BiasSplitHeads;
  if (split) {
    numIns(biased ? 2 : 1);
    if (I.outputs.empty())
      fail("expects at least one output");
  } else {
    numOuts(1);
    if (I.inputs.empty())
      fail("expects at least one input");
  }
  const Buffer &x = split ? in(0) : out(0);
  const int64_t parts = d.parts =
      int64_t(split ? I.outputs.size() : I.inputs.size());
  if (x.shape.size() != 3)
    fail("'" + x.name + "' must be [B,T,P*H*D], got " + shapeStr(x.shape));
  const int64_t H = d.H = I.getInt("num_heads");
  d.B = x.shape[0];
  d.T = x.shape[1];
  const int64_t W = d.cols = x.shape[2];
  if (H <= 0 || W % (parts * H) != 0)
    fail("last dim " + std::to_string(W) + " of '" + x.name +
         "' is not divisible by " + std::to_string(parts) + " parts x " +
         std::to_string(H) + " heads");
  d.D = W / (parts * H);
  for (int64_t p = 0; p < parts; ++p)
    count(split ? out(size_t(p)) : in(size_t(p)), d.B * H * d.T * d.D,
          "head tensor");
  if (biased)
    count(in(1), W, "bias");
}

/// The whole tensor and its pieces, viewed as [outer, width, inner].
void Checker::concatSplit() {
  const bool concat = I.op == Opcode::Concat;
  const size_t pieces = concat ? I.inputs.size() : I.outputs.size();
  if (concat)
    numOuts(1);
  else
    numIns(1);
  if (pieces == 0)
    fail("expects at least one piece");
  const Buffer &whole = concat ? out(0) : in(0);
  const int64_t axis = I.getInt("axis");
  if (axis < 0 || axis >= int64_t(whole.shape.size()))
    fail("axis " + std::to_string(axis) + " out of range for " +
         shapeStr(whole.shape));
  for (int64_t k = 0; k < axis; ++k)
    d.outer *= whole.shape[size_t(k)];
  for (size_t k = size_t(axis) + 1; k < whole.shape.size(); ++k)
    d.inner *= whole.shape[k];
  int64_t total = 0;
  for (size_t k = 0; k < pieces; ++k) {
    const Buffer &piece = concat ? in(k) : out(k);
    const int64_t width =
        piece.numElements() / std::max<int64_t>(1, d.outer * d.inner);
    count(piece, d.outer * width * d.inner, "piece");
    d.widths.push_back(width);
    total += width;
  }
  if (total != whole.shape[size_t(axis)])
    fail("pieces sum to " + std::to_string(total) + " along axis " +
         std::to_string(axis) + ", expected " +
         std::to_string(whole.shape[size_t(axis)]));
}

/// Softmax(x) -> y, SoftmaxGrad(dy, y) -> dx, SoftmaxDropout(scores) ->
/// dropped, probs, SoftmaxDropoutGrad(dy, probs, dropped) -> dx.
void Checker::softmax() {
  const Opcode op = I.op;
  const bool grad =
      op == Opcode::SoftmaxGrad || op == Opcode::SoftmaxDropoutGrad;
  const bool drop =
      op == Opcode::SoftmaxDropout || op == Opcode::SoftmaxDropoutGrad;
  numIns(op == Opcode::SoftmaxDropoutGrad ? 3 : grad ? 2 : 1);
  numOuts(op == Opcode::SoftmaxDropout ? 2 : 1);
  const Buffer &x = in(grad ? 1 : 0);
  rowsOf(x, drop ? "scores" : grad ? "y" : "x");
  d.tq = x.shape.size() >= 2 ? x.shape[x.shape.size() - 2] : 1;
  if (grad)
    count(in(0), d.n, "dy");
  if (op == Opcode::SoftmaxDropoutGrad)
    count(in(2), d.n, "dropped");
  for (size_t k = 0; k < I.outputs.size(); ++k)
    count(out(k), d.n, op == Opcode::SoftmaxGrad ? "dx" : "output");
  if (drop)
    rate();
}

/// Attention(q, k, v) -> out, lse; AttentionGrad(dout, q, k, v, out, lse)
/// -> dq, dk, dv. q, k, v, out and their gradients are [B, H, T, D], lse is
/// [B, H, T].
void Checker::attention() {
  const bool grad = I.op == Opcode::AttentionGrad;
  numIns(grad ? 6 : 3);
  numOuts(grad ? 3 : 2);
  const Buffer &q = in(grad ? 1 : 0);
  if (q.shape.size() != 4)
    fail("q '" + q.name + "' must be [B,H,T,D], got " + shapeStr(q.shape));
  d.BH = q.shape[0] * q.shape[1];
  d.T = q.shape[2];
  d.D = q.shape[3];
  const int64_t rows = d.BH * d.T, n = rows * d.D;
  for (size_t k = grad ? 0 : 1; k < I.inputs.size(); ++k)
    count(in(k), k == 5 ? rows : n, k == 5 ? "lse" : "input");
  for (size_t k = 0; k < I.outputs.size(); ++k)
    count(out(k), k == 1 && !grad ? rows : n, "output");
  rate();
}

/// CrossEntropy(logits, labels) -> loss; CrossEntropyGrad(dloss, logits,
/// labels) -> dlogits.
void Checker::crossEntropy() {
  const bool grad = I.op == Opcode::CrossEntropyGrad;
  numIns(grad ? 3 : 2);
  numOuts(1);
  const size_t li = grad ? 1 : 0;
  rowsOf(in(li), "logits");
  count(in(li + 1), d.rows, "labels");
  if (grad) {
    count(in(0), 1, "dloss");
    count(out(0), d.n, "dlogits");
  } else {
    count(out(0), 1, "loss");
  }
}

void Checker::mlmMask() {
  numIns(1);
  numOuts(2);
  d.n = in(0).numElements();
  count(out(0), d.n, "inputs");
  count(out(1), d.n, "labels");
  const int64_t vocab = I.getInt("vocab_size");
  if (vocab <= 0)
    fail("vocab_size must be positive, got " + std::to_string(vocab));
}

/// Adam/Lamb(param, grad, exp_avg, exp_avg_sq, lr, step, gscale[, skip])
/// -> param, exp_avg, exp_avg_sq; Sgd(param, grad, momentum_buffer, lr,
/// step, gscale[, skip]) -> param, momentum_buffer.
void Checker::optimizer() {
  const bool sgd = I.op == Opcode::Sgd;
  const size_t tensors = sgd ? 3 : 4;
  numIns(tensors + 3, tensors + 4);
  numOuts(tensors - 1);
  d.n = in(0).numElements();
  if (sgd) {
    count(in(1), d.n, "grad");
    count(in(2), d.n, "momentum_buffer");
  } else {
    for (size_t k = 1; k < 4; ++k)
      count(in(k), d.n, k == 1 ? "grad" : "state");
  }
  // The state outputs are the state inputs updated (in place or not).
  const char *outs[] = {"param", sgd ? "momentum_buffer" : "exp_avg",
                        "exp_avg_sq"};
  for (size_t k = 0; k + 1 < tensors; ++k)
    count(out(k), d.n, outs[k]);
  if (I.inputs.size() == tensors + 4)
    count(in(tensors + 3), 1, "skip");
  count(in(tensors), 1, "lr");
  count(in(tensors + 1), 1, "step");
  count(in(tensors + 2), 1, "gscale");
}

/// lr is required where the schedule is in units of it (constant, cosine),
/// total_num_steps where it decays.
void Checker::lrSchedule() {
  LrScheduleAttrs &s = d.schedule;
  const std::string kind = I.has("kind") ? I.getString("kind") : "constant";
  if (kind == "constant")
    s.kind = LrScheduleAttrs::Constant;
  else if (kind == "WarmupLR")
    s.kind = LrScheduleAttrs::WarmupLR;
  else if (kind == "WarmupDecayLR")
    s.kind = LrScheduleAttrs::WarmupDecayLR;
  else if (kind == "WarmupCosineLR")
    s.kind = LrScheduleAttrs::WarmupCosineLR;
  else
    fail("unknown schedule kind '" + kind + "'");
  const std::string warmupType =
      I.has("warmup_type") ? I.getString("warmup_type") : "log";
  if (warmupType != "log" && warmupType != "linear")
    fail("unknown warmup_type '" + warmupType + "' (expected log or linear)");
  s.logWarmup = warmupType == "log";
  auto optional = [&](const char *name, double &v) {
    if (I.has(name))
      v = I.getFloat(name);
  };
  optional("lr", s.lr);
  optional("warmup_min_lr", s.warmupMinLr);
  optional("warmup_max_lr", s.warmupMaxLr);
  optional("warmup_min_ratio", s.warmupMinRatio);
  optional("cos_min_ratio", s.cosMinRatio);
  if (I.has("warmup_num_steps"))
    s.warmupNumSteps = I.getInt("warmup_num_steps");
  if (I.has("total_num_steps"))
    s.totalNumSteps = I.getInt("total_num_steps");
  const bool cosine = s.kind == LrScheduleAttrs::WarmupCosineLR;
  if (s.kind == LrScheduleAttrs::Constant || cosine)
    s.lr = I.getFloat("lr");
  if (s.kind == LrScheduleAttrs::WarmupDecayLR || cosine)
    s.totalNumSteps = I.getInt("total_num_steps");
  // DeepSpeed warms up over max(2, warmup_num_steps) and divides the cosine
  // phase by what is left.
  const int64_t warmup = std::max<int64_t>(2, s.warmupNumSteps);
  if (cosine && s.totalNumSteps == warmup)
    fail("WarmupCosineLR needs total_num_steps (" +
         std::to_string(s.totalNumSteps) +
         ") different from warmup_num_steps (" + std::to_string(warmup) + ")");
}

/// The scalar bookkeeping of the step.
void Checker::scalarOp() {
  switch (I.op) {
  case Opcode::GlobalNorm:
  case Opcode::CheckFinite: // any number of inputs
    numOuts(1);
    count(out(0), 1, "output");
    return;
  case Opcode::ClipCoefficient:
    numIns(1);
    numOuts(1);
    count(out(0), 1, "output");
    count(in(0), 1, "norm");
    return;
  case Opcode::LrSchedule:
    numIns(1);
    numOuts(1);
    count(out(0), 1, "output");
    count(in(0), 1, "step");
    lrSchedule();
    return;
  case Opcode::LossScale:
    numIns(1);
    numOuts(1);
    count(in(0), 3, "state");
    count(out(0), 1, "output");
    return;
  case Opcode::UnscaleClip:
    numIns(2);
    numOuts(2);
    count(out(0), 1, "grad_scale");
    count(out(1), 1, "norm");
    count(in(0), 1, "scaled_norm");
    count(in(1), 1, "scale");
    return;
  case Opcode::UpdateLossScale:
    numIns(2);
    numOuts(1);
    count(in(0), 3, "state");
    count(out(0), 3, "new_state");
    if (I.getInt("scale_window") < 1 || I.getInt("hysteresis") < 1)
      fail("scale_window and hysteresis must be >= 1");
    count(in(1), 1, "overflow");
    return;
  default:
    fail("internal: not a scalar op");
  }
}

/// Fill, Iota, Copy, RoundToHalf, AllReduce.
void Checker::other() {
  if (I.op == Opcode::Fill || I.op == Opcode::Iota) {
    numIns(0);
    numOuts(1);
    d.n = out(0).numElements();
    return;
  }
  numIns(1);
  numOuts(1);
  d.n = in(0).numElements();
  if (I.op == Opcode::RoundToHalf) {
    const std::string format = I.getString("format");
    if (format != "f16" && format != "bf16")
      fail("format must be \"f16\" or \"bf16\", got \"" + format + "\"");
    d.bf16 = format == "bf16";
  } else if (I.op == Opcode::AllReduce) {
    const std::string op = I.has("op") ? I.getString("op") : "sum";
    if (op != "sum" && op != "mean")
      fail("op must be \"sum\" or \"mean\", got \"" + op + "\"");
    d.mean = op == "mean";
  }
  count(out(0), d.n, I.op == Opcode::AllReduce ? "tensor" : "output");
}

void Checker::family() {
  switch (I.op) {
  case Opcode::Fill:
  case Opcode::Iota:
  case Opcode::Copy:
  case Opcode::RoundToHalf:
  case Opcode::AllReduce:
    other();
    return;
  case Opcode::Embedding:
  case Opcode::EmbeddingGrad:
    embedding();
    return;
  case Opcode::Add:
    add();
    return;
  case Opcode::ReduceTo:
    reduceTo();
    return;
  case Opcode::Linear:
  case Opcode::LinearGradInput:
  case Opcode::LinearGradWeight:
    linear();
    return;
  case Opcode::BatchMatmul:
    batchMatmul();
    return;
  case Opcode::LayerNorm:
  case Opcode::InvertibleLayerNorm:
    layerNorm();
    return;
  case Opcode::LayerNormGrad:
  case Opcode::LayerNormGradFromOutput:
    layerNormGrad();
    return;
  case Opcode::BiasDropoutAddLayerNorm:
    biasDropoutAddLayerNorm();
    return;
  case Opcode::Gelu:
  case Opcode::GeluGrad:
    gelu();
    return;
  case Opcode::Dropout:
    dropout();
    return;
  case Opcode::BiasGelu:
  case Opcode::BiasGeluGrad:
  case Opcode::BiasDropoutAdd:
  case Opcode::DropoutBiasGrad:
    biasOps();
    return;
  case Opcode::SplitHeads:
  case Opcode::BiasSplitHeads:
  case Opcode::MergeHeads:
    heads();
    return;
  case Opcode::Concat:
  case Opcode::Split:
    concatSplit();
    return;
  case Opcode::Softmax:
  case Opcode::SoftmaxGrad:
  case Opcode::SoftmaxDropout:
  case Opcode::SoftmaxDropoutGrad:
    softmax();
    return;
  case Opcode::Attention:
  case Opcode::AttentionGrad:
    attention();
    return;
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyGrad:
    crossEntropy();
    return;
  case Opcode::MlmMask:
    mlmMask();
    return;
  case Opcode::Adam:
  case Opcode::Lamb:
  case Opcode::Sgd:
    optimizer();
    return;
  case Opcode::GlobalNorm:
  case Opcode::CheckFinite:
  case Opcode::ClipCoefficient:
  case Opcode::LrSchedule:
  case Opcode::LossScale:
  case Opcode::UnscaleClip:
  case Opcode::UpdateLossScale:
    scalarOp();
    return;
  }
  throw Error("unknown opcode " + std::to_string(int(I.op)));
}

} // namespace

InstrDims checkInstr(const Program &P, const Instr &I) {
  Checker c(P, I);
  c.family();
  // The families look at the operands they size things by; the backends
  // index the others too (e.g. GlobalNorm's inputs).
  for (int id : I.inputs)
    c.buffer(id);
  for (int id : I.outputs)
    c.buffer(id);
  return c.d;
}

} // namespace dsc::rt
