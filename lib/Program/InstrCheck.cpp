//===- InstrCheck.cpp - Operand checks of one instruction -----------------===//
//
// First what Ops.def states for every opcode (operand counts, attribute
// names and kinds), then one function per OpFamily for shapes and sizes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Program/InstrCheck.h"

#include "dsc/Program/Broadcast.h"

#include <algorithm>

namespace dsc::rt {

namespace {

class Checker {
public:
  Checker(const Program &P, const Instr &I) : P(P), I(I) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(std::string(opcodeName(I.op)) + ": " + msg);
  }

  void counts(const char *what, size_t got, int lo, int hi) const {
    if (got >= size_t(lo) && (hi == kAnyCount || got <= size_t(hi)))
      return;
    const std::string range =
        hi == kAnyCount ? "at least " + std::to_string(lo)
        : lo == hi      ? std::to_string(lo)
                        : std::to_string(lo) + ".." + std::to_string(hi);
    fail("expects " + range + " " + what + ", got " + std::to_string(got));
  }
  /// Operand counts and attributes as Ops.def states them.
  void contract() const {
    const OpInfo &info = opInfo(I.op);
    counts("inputs", I.inputs.size(), info.minIns, info.maxIns);
    counts("outputs", I.outputs.size(), info.minOuts, info.maxOuts);
    for (const AttrSpec &spec : info.attrs) {
      auto it = I.attrs.find(spec.name);
      if (it == I.attrs.end())
        fail(std::string("missing attribute '") + spec.name + "'");
      const AttrValue &v = it->second;
      const bool ok =
          spec.kind == AttrKind::Int ? std::holds_alternative<int64_t>(v)
          : spec.kind == AttrKind::Float
              ? std::holds_alternative<int64_t>(v) ||
                    std::holds_alternative<double>(v)
          : spec.kind == AttrKind::BlockLayout
              ? std::holds_alternative<BlockLayout>(v)
              : std::holds_alternative<std::string>(v);
      if (!ok)
        fail(std::string("attribute '") + spec.name + "' must be " +
             (spec.kind == AttrKind::Int           ? "an int"
              : spec.kind == AttrKind::Float       ? "a number"
              : spec.kind == AttrKind::BlockLayout ? "a block layout"
                                                   : "a string"));
      if (spec.kind == AttrKind::BlockLayout) {
        std::string why = std::get<BlockLayout>(v).invalidReason();
        if (!why.empty())
          fail(std::string("attribute '") + spec.name + "': " + why);
      }
    }
    for (const auto &[name, value] : I.attrs)
      if (std::none_of(info.attrs.begin(), info.attrs.end(),
                       [&](const AttrSpec &a) { return name == a.name; }))
        fail("unknown attribute '" + name + "'");
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
  bool flag(const char *name) const { return I.getInt(name) != 0; }
  bool geluIsTanh() const {
    const std::string &approx = I.getString("approximation");
    if (approx != "tanh" && approx != "erf")
      fail("approximation must be \"tanh\" or \"erf\", got \"" + approx +
           "\"");
    return approx == "tanh";
  }

  /// Input `k`, if the instruction has it, is a key padding mask [B, Tk].
  void keyMask(size_t k, int64_t batch, int64_t tk) {
    if (I.inputs.size() <= k)
      return;
    const Buffer &m = in(k);
    if (m.shape != std::vector<int64_t>{batch, tk})
      fail("key_mask '" + m.name + "' " + shapeStr(m.shape) + " must be " +
           shapeStr({batch, tk}));
    d.keyMaskInput = int(k);
  }

  void family(); ///< the checks of I's OpFamily
  void memorySpaces() const;
  void adam8bit();
  void adafactor();
  void embedding();
  void add();
  void reduceTo();
  void linear();
  void fourBitLinear();
  void batchMatmul();
  void norm();
  void normGrad(bool fromOutput);
  void residualNorm();
  void gelu();
  void dropout();
  void biasOps();
  void heads();
  void concatSplit();
  void softmax();
  void attention();
  void blockLayout(int64_t heads, int64_t tq, int64_t tk) const;
  void pointwise();
  void rowGate();
  void rotary();
  void repeatKv();
  void crossEntropy();
  void tokenMask();
  void optimizer();
  void scalarOp();
  void lrSchedule();
  void other();
  void meshGroup();
  void transfer();
  void shard();
  void compression();
  void moe();
  void matrix(const Buffer &b, const char *role, int64_t rows,
              int64_t cols) const;
  void ids(const Buffer &b, const char *role) const;
  void perToken(const Buffer &b, const char *role, int64_t rows,
                int64_t cols) const;
  ReduceOp reduceOp() const;

  const Program &P;
  const Instr &I;
  InstrDims d;
};

void Checker::embedding() {
  const bool grad =
      I.op == Opcode::EmbeddingGrad || I.op == Opcode::VocabEmbeddingGrad;
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
  const Buffer &a = in(0), &b = in(1);
  if (!broadcastable(a.shape, b.shape))
    fail("cannot broadcast '" + b.name + "' " + shapeStr(b.shape) + " to '" +
         a.name + "' " + shapeStr(a.shape));
  d.n = a.numElements();
  count(out(0), d.n, "output");
}

void Checker::reduceTo() {
  const Buffer &x = in(0), &o = out(0);
  if (!broadcastable(x.shape, o.shape))
    fail("output '" + o.name + "' " + shapeStr(o.shape) +
         " does not broadcast to input '" + x.name + "' " + shapeStr(x.shape));
}

void Checker::linear() {
  const bool fwd = I.op == Opcode::Linear;
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

void Checker::fourBitLinear() {
  const bool fwd = I.op == Opcode::Linear4bit;
  if (!quant::parseFourBitFormat(I.getString("format"), d.fourBitFormat))
    fail("format must be \"nf4\" or \"fp4\", got \"" +
         I.getString("format") + "\"");
  const int64_t rows = I.getInt("rows"), cols = I.getInt("cols"),
                block = I.getInt("block_size");
  if (rows <= 0 || cols <= 0 || block <= 0 || block % 2 != 0)
    fail("rows, cols and an even block_size must be positive, got " +
         std::to_string(rows) + " x " + std::to_string(cols) +
         " in blocks of " + std::to_string(block));
  d.fourBit = quant::FourBitLayout::of(rows * cols, block,
                                       flag("double_quant"));
  d.transW = flag("transpose_w");
  d.K = d.transW ? cols : rows;
  d.N = d.transW ? rows : cols;
  const Buffer &w = in(1);
  if (w.dtype != DType::U8 || w.numElements() != d.fourBit.bytes)
    fail("weight '" + w.name + "' must be " +
         std::to_string(d.fourBit.bytes) + " u8 bytes, got " +
         shapeStr(w.shape) + " " + dtypeName(w.dtype));
  const Buffer &x = in(0);
  const int64_t width = fwd ? d.K : d.N;
  if (lastDim(x, fwd ? "x" : "dy") != width)
    fail(std::string(fwd ? "x '" : "dy '") + x.name + "' " +
         shapeStr(x.shape) + " does not match the " + std::to_string(rows) +
         " x " + std::to_string(cols) + " weight" +
         (d.transW ? " (transposed)" : ""));
  d.M = x.numElements() / width;
  count(out(0), d.M * (fwd ? d.N : d.K), fwd ? "output" : "dx");
}

void Checker::batchMatmul() {
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

/// A norm over the last dimension: x, then its per-feature parameters
/// (LayerNorm's gamma and beta, RMSNorm's weight) -> y[, rstd].
void Checker::norm() {
  rowsOf(in(0), "x");
  for (size_t k = 1; k < I.inputs.size(); ++k)
    count(in(k), d.cols, "per-feature parameter");
  count(out(0), d.n, "output");
  if (I.outputs.size() == 2)
    count(out(1), d.rows, "rstd");
}

/// A norm's backward -> dx and one gradient per parameter (G = outputs - 1).
/// From the input: dy, x, the scale (gamma or weight: the only parameter
/// the backward reads), an optional residual gradient. From the output: dy,
/// y, all G parameters (inverting y needs beta too), the saved rstd, an
/// optional residual gradient.
void Checker::normGrad(bool fromOutput) {
  const size_t grads = I.outputs.size() - 1;
  const size_t params = fromOutput ? grads : 1;
  const size_t base = 2 + params + (fromOutput ? 1 : 0);
  // Ops.def's operand counts are checked first; this catches a row that
  // disagrees with the family's rule.
  if (I.inputs.size() < base || I.inputs.size() > base + 1)
    fail("internal: expects " + std::to_string(base) + " or " +
         std::to_string(base + 1) + " inputs for " + std::to_string(grads) +
         " parameter gradients, got " + std::to_string(I.inputs.size()));
  rowsOf(in(1), fromOutput ? "y" : "x");
  count(in(0), d.n, "dy");
  for (size_t k = 0; k < params; ++k)
    count(in(2 + k), d.cols, "per-feature parameter");
  if (fromOutput)
    count(in(2 + params), d.rows, "rstd");
  if (I.inputs.size() == base + 1)
    count(in(base), d.n, "residual gradient");
  count(out(0), d.n, "dx");
  for (size_t k = 0; k < grads; ++k)
    count(out(1 + k), d.cols, "parameter gradient");
}

/// BiasDropoutAddLayerNorm(x, bias, res, gamma, beta) and AddRmsNorm(x,
/// res, weight), both -> sum, y, rstd.
void Checker::residualNorm() {
  if (I.op == Opcode::AddRmsNorm) {
    rowsOf(in(0), "input");
    count(in(1), d.n, "residual");
    count(in(2), d.cols, "weight");
    count(out(0), d.n, "sum");
    count(out(1), d.n, "output");
    count(out(2), d.rows, "rstd");
    return;
  }
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
  d.tanh = geluIsTanh();
  d.n = in(0).numElements();
  count(out(0), d.n, "output");
  if (grad)
    count(in(1), d.n, "x");
}

void Checker::dropout() {
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
  if (geluOp)
    d.tanh = geluIsTanh();
  else
    rate();
}

void Checker::heads() {
  const bool split = I.op != Opcode::MergeHeads;
  const bool biased = I.op == Opcode::BiasSplitHeads;
  const Buffer &x = split ? in(0) : out(0);
  const int64_t parts = d.parts =
      int64_t(split ? I.outputs.size() : I.inputs.size());
  if (x.shape.size() != 3)
    fail("'" + x.name + "' must be [B,T,P*H*D], got " + shapeStr(x.shape));
  // MergeHeads reads the head count off its parts [B, H, T, D].
  const int64_t H = d.H = split ? I.getInt("num_heads")
                          : in(0).shape.size() == 4 ? in(0).shape[1]
                                                    : 0;
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
  const bool concat = I.op == Opcode::Concat || I.op == Opcode::Pack;
  const size_t pieces = concat ? I.inputs.size() : I.outputs.size();
  const Buffer &whole = concat ? out(0) : in(0);
  if (I.op == Opcode::Pack || I.op == Opcode::Unpack) {
    // Flattened pieces of C chunks each: [C, sum(numel / C), 1].
    d.outer = I.getInt("chunks");
    if (d.outer < 1)
      fail("chunks must be >= 1, got " + std::to_string(d.outer));
    int64_t total = 0;
    for (size_t k = 0; k < pieces; ++k) {
      const Buffer &piece = concat ? in(k) : out(k);
      if (piece.numElements() % d.outer != 0)
        fail("piece '" + piece.name + "' " + shapeStr(piece.shape) +
             " does not split into " + std::to_string(d.outer) + " chunks");
      d.widths.push_back(piece.numElements() / d.outer);
      total += piece.numElements();
    }
    count(whole, total, concat ? "packed result" : "packed input");
    return;
  }
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

/// Softmax(x[, key_mask]) -> y, SoftmaxGrad(dy, y) -> dx,
/// SoftmaxDropout(scores[, key_mask]) -> dropped, probs, SoftmaxDropoutGrad(dy, probs, dropped) -> dx.
void Checker::softmax() {
  const Opcode op = I.op;
  const bool grad =
      op == Opcode::SoftmaxGrad || op == Opcode::SoftmaxDropoutGrad;
  const bool drop =
      op == Opcode::SoftmaxDropout || op == Opcode::SoftmaxDropoutGrad;
  const Buffer &x = in(grad ? 1 : 0);
  rowsOf(x, drop ? "scores" : grad ? "y" : "x");
  d.tq = x.shape.size() >= 2 ? x.shape[x.shape.size() - 2] : 1;
  if (!grad && I.inputs.size() > 1) {
    if (x.shape.size() < 3)
      fail("a key mask needs scores [B, ..., Tq, Tk], got " +
           shapeStr(x.shape));
    d.B = x.shape[0];
    keyMask(1, d.B, d.cols);
  }
  if (grad)
    count(in(0), d.n, "dy");
  if (op == Opcode::SoftmaxDropoutGrad)
    count(in(2), d.n, "dropped");
  for (size_t k = 0; k < I.outputs.size(); ++k)
    count(out(k), d.n, op == Opcode::SoftmaxGrad ? "dx" : "output");
  if (drop)
    rate();
  if (!grad && !I.getLayout("layout").empty()) {
    if (x.shape.size() < 3)
      fail("a block layout needs scores [..., H, T, T], got " +
           shapeStr(x.shape));
    blockLayout(x.shape[x.shape.size() - 3], d.tq, d.cols);
  }
}

/// The instruction's block layout fits H heads of Tq x Tk scores: Tq = Tk =
/// its tokens, its heads 1 or H, block-causal when the op is causal.
void Checker::blockLayout(int64_t heads, int64_t tq, int64_t tk) const {
  const BlockLayout &l = I.getLayout("layout");
  if (tq != l.tokens() || tk != l.tokens())
    fail("block layout covers " + std::to_string(l.tokens()) +
         " tokens, the scores are " + std::to_string(tq) + " x " +
         std::to_string(tk));
  if (l.heads != 1 && l.heads != heads)
    fail("block layout has " + std::to_string(l.heads) +
         " heads, expected 1 or " + std::to_string(heads));
  if (I.getInt("causal") != 0 && !l.isBlockCausal())
    fail("causal attention needs a block-causal layout (no block above the "
         "diagonal)");
}

/// Attention(q, k, v[, key_mask]) -> out, lse; AttentionGrad(dout, q, k, v,
/// out, lse[, key_mask]) -> dq, dk, dv. q, out and dq are [B, H, T, D], lse is [B, H, T]; k and v
/// (and dk, dv) may have fewer heads than q (grouped-query attention):
/// [B, KV, T, D] with KV dividing H.
void Checker::attention() {
  const bool grad = I.op == Opcode::AttentionGrad;
  const size_t qi = grad ? 1 : 0;
  const Buffer &q = in(qi), &k = in(qi + 1);
  if (q.shape.size() != 4)
    fail("q '" + q.name + "' must be [B,H,T,D], got " + shapeStr(q.shape));
  d.B = q.shape[0];
  d.H = q.shape[1];
  d.BH = q.shape[0] * q.shape[1];
  d.T = q.shape[2];
  d.D = q.shape[3];
  if (k.shape.size() != 4 || k.shape[1] <= 0 || d.H % k.shape[1] != 0)
    fail("k '" + k.name + "' " + shapeStr(k.shape) +
         " must be [B,KV,T,D] with KV dividing q's " + std::to_string(d.H) +
         " heads");
  d.groups = d.H / k.shape[1];
  const int64_t rows = d.BH * d.T, n = rows * d.D, kvN = n / d.groups;
  const auto sizeOf = [&](size_t input) {
    if (input == 5)
      return rows;
    return input == qi + 1 || input == qi + 2 ? kvN : n;
  };
  const size_t tensors = grad ? 6 : 3;
  for (size_t i = grad ? 0 : 1; i < tensors; ++i)
    count(in(i), sizeOf(i), i == 5 ? "lse" : "input");
  keyMask(tensors, d.B, d.T);
  for (size_t o = 0; o < I.outputs.size(); ++o)
    count(out(o), grad ? (o == 0 ? n : kvN) : (o == 1 ? rows : n), "output");
  rate();
  if (!I.getLayout("layout").empty())
    blockLayout(d.H, d.T, d.T);
}

/// Silu(x), SiluGrad(dy, x), Mul(a, b), Swiglu(gate, up), SwigluGrad(dy,
/// gate, up) -> dgate, dup: every operand has the same number of elements.
void Checker::pointwise() {
  d.n = in(0).numElements();
  for (size_t i = 1; i < I.inputs.size(); ++i)
    count(in(i), d.n, "input");
  for (size_t o = 0; o < I.outputs.size(); ++o)
    count(out(o), d.n, "output");
}

/// SigmoidGate(gate [rows..., 1], x [rows..., C]) -> y like x;
/// SigmoidGateGrad(dy, gate, x) -> (dgate like gate, dx like x).
void Checker::rowGate() {
  const bool grad = I.op == Opcode::SigmoidGateGrad;
  const Buffer &gate = in(grad ? 1 : 0), &x = in(grad ? 2 : 1);
  if (x.shape.empty())
    fail("input '" + x.name + "' must be [rows..., C], got a scalar");
  d.cols = x.shape.back();
  d.rows = d.cols ? x.numElements() / d.cols : 0;
  d.n = x.numElements();
  perToken(gate, "gate", d.rows, 1);
  if (grad) {
    count(in(0), d.n, "dy");
    count(out(0), d.rows, "dgate");
    count(out(1), d.n, "dx");
  } else {
    count(out(0), d.n, "output");
  }
}

/// Rotary(x) -> y on [B, H, T, D] heads with an even D.
void Checker::rotary() {
  const Buffer &x = in(0);
  if (x.shape.size() != 4 || x.shape[3] % 2 != 0)
    fail("x '" + x.name + "' must be [B,H,T,D] with an even D, got " +
         shapeStr(x.shape));
  d.B = x.shape[0];
  d.H = x.shape[1];
  d.T = x.shape[2];
  d.D = x.shape[3];
  d.n = x.numElements();
  count(out(0), d.n, "output");
  const std::string &scaling = I.getString("scaling");
  if (scaling != "none" && scaling != "linear" && scaling != "llama3")
    fail("unknown scaling '" + scaling + "'");
}

/// RepeatKv(x [B, KV, T, D]) -> [B, KV*G, T, D]; RepeatKvGrad the reverse.
void Checker::repeatKv() {
  const bool grad = I.op == Opcode::RepeatKvGrad;
  const Buffer &kv = grad ? out(0) : in(0);
  d.groups = I.getInt("groups");
  if (kv.shape.size() != 4 || d.groups <= 0)
    fail("'" + kv.name + "' must be [B,KV,T,D] with groups > 0, got " +
         shapeStr(kv.shape) + " and groups " + std::to_string(d.groups));
  d.B = kv.shape[0];
  d.H = kv.shape[1];
  d.T = kv.shape[2];
  d.D = kv.shape[3];
  d.n = kv.numElements();
  count(grad ? in(0) : out(0), d.n * d.groups, "repeated heads");
}

/// CrossEntropy(logits, labels) -> loss; CrossEntropyGrad(dloss, logits,
/// labels) -> dlogits; CrossEntropyWithGrad(dloss, logits, labels) -> loss,
/// dlogits (dlogits may be the logits' buffer).
void Checker::crossEntropy() {
  const bool both = I.op == Opcode::CrossEntropyWithGrad;
  const bool grad = both || I.op == Opcode::CrossEntropyGrad ||
                    I.op == Opcode::VocabCrossEntropyGrad;
  const size_t li = grad ? 1 : 0;
  rowsOf(in(li), "logits");
  count(in(li + 1), d.rows, "labels");
  if (I.op != Opcode::VocabCrossEntropy && I.op != Opcode::VocabCrossEntropyGrad) {
    const int64_t classes = I.getInt("classes");
    if (classes < 0 || classes > d.cols)
      fail("classes = " + std::to_string(classes) +
           " must be 0 (every column) or at most the logits' " +
           std::to_string(d.cols) + " columns");
    d.vocab = classes ? classes : d.cols;
  }
  if (grad)
    count(in(0), 1, "dloss");
  if (!grad || both)
    count(out(0), 1, "loss");
  if (grad)
    count(out(both ? 1 : 0), d.n, "dlogits");
}

/// MlmMask(ids) -> inputs, labels; PaddingMask(ids) -> mask.
void Checker::tokenMask() {
  d.n = in(0).numElements();
  if (I.op == Opcode::PaddingMask) {
    count(out(0), d.n, "mask");
    if (I.getInt("pad_token_id") < 0)
      fail("pad_token_id must be >= 0, got " +
           std::to_string(I.getInt("pad_token_id")));
    return;
  }
  count(out(0), d.n, "inputs");
  count(out(1), d.n, "labels");
  const int64_t vocab = I.getInt("vocab_size");
  if (vocab <= 0)
    fail("vocab_size must be positive, got " + std::to_string(vocab));
}

/// Optimizers (see Ops.def): param, grad, one state tensor per output
/// after the param, then lr, step, gscale[, skip]; outputs param and the
/// states updated (in place or not).
void Checker::optimizer() {
  if (I.op == Opcode::Adam8bit)
    return adam8bit();
  if (I.op == Opcode::Adafactor)
    return adafactor();
  const size_t tensors = size_t(opInfo(I.op).minOuts) + 1;
  d.n = in(0).numElements();
  for (size_t k = 1; k < tensors; ++k)
    count(in(k), d.n, k == 1 ? "grad" : "state");
  for (size_t k = 0; k + 1 < tensors; ++k)
    count(out(k), d.n, k == 0 ? "param" : "state");
  if (I.inputs.size() == tensors + 4)
    count(in(tensors + 3), 1, "skip");
  count(in(tensors), 1, "lr");
  count(in(tensors + 1), 1, "step");
  count(in(tensors + 2), 1, "gscale");
}

/// Adam8bit: the u8 moments like the param, one f32 absmax per block of
/// 256 elements (d.rows blocks).
void Checker::adam8bit() {
  d.n = in(0).numElements();
  d.rows = (d.n + 255) / 256;
  const char *roles[] = {"grad", "exp_avg", "exp_avg_sq", "exp_avg_absmax",
                         "exp_avg_sq_absmax"};
  for (size_t k = 1; k < 6; ++k) {
    count(in(k), k < 4 ? d.n : d.rows, roles[k - 1]);
    count(out(k - 1), k - 1 == 0 ? d.n : k - 1 < 3 ? d.n : d.rows,
          k - 1 == 0 ? "param" : roles[k - 1]);
  }
  for (size_t k : {size_t(2), size_t(3)})
    if (in(k).dtype != DType::U8 || out(k - 1).dtype != DType::U8)
      fail(std::string(roles[k - 1]) + " must be u8");
  for (size_t k : {size_t(4), size_t(5)})
    if (in(k).dtype != DType::F32 || out(k - 1).dtype != DType::F32)
      fail(std::string(roles[k - 1]) + " must be f32");
  count(in(6), 1, "lr");
  count(in(7), 1, "step");
  count(in(8), 1, "gscale");
  if (I.inputs.size() == 10)
    count(in(9), 1, "skip");
}

/// Adafactor: a param of rank >= 2 as [batch, rows, cols] (d.batch, d.M,
/// d.N) with its row ([batch, rows]) and column ([batch, cols]) factors,
/// else the whole second moment; then exp_avg with first_moment.
void Checker::adafactor() {
  const Buffer &p = in(0);
  d.n = p.numElements();
  const bool factored = p.shape.size() >= 2,
             first = I.getInt("first_moment") != 0;
  const size_t states = (factored ? 2 : 1) + (first ? 1 : 0);
  if (I.outputs.size() != states + 1)
    fail("expects " + std::to_string(states + 1) + " outputs for a rank-" +
         std::to_string(p.shape.size()) + " parameter" +
         (first ? " with" : " without") + " first_moment, got " +
         std::to_string(I.outputs.size()));
  counts("inputs", I.inputs.size(), int(states + 5), int(states + 6));
  if (factored) {
    d.N = p.shape.back();
    d.M = p.shape[p.shape.size() - 2];
    d.batch = d.M * d.N != 0 ? d.n / (d.M * d.N) : 0;
  } else {
    d.batch = 1;
    d.M = 1;
    d.N = d.n;
  }
  count(in(1), d.n, "grad");
  count(out(0), d.n, "param");
  std::vector<std::pair<int64_t, const char *>> want;
  if (factored)
    want = {{d.batch * d.M, "exp_avg_sq_row"}, {d.batch * d.N, "exp_avg_sq_col"}};
  else
    want = {{d.n, "exp_avg_sq"}};
  if (first)
    want.push_back({d.n, "exp_avg"});
  for (size_t k = 0; k < states; ++k) {
    count(in(2 + k), want[k].first, want[k].second);
    count(out(1 + k), want[k].first, want[k].second);
  }
  for (size_t k = 0; k < 2 + states; ++k)
    if (in(k).dtype != DType::F32)
      fail("tensors must be f32");
  count(in(2 + states), 1, "lr");
  count(in(3 + states), 1, "step");
  count(in(4 + states), 1, "gscale");
  if (I.inputs.size() == states + 6)
    count(in(5 + states), 1, "skip");
  if (!(I.getFloat("clip_threshold") > 0))
    fail("clip_threshold must be > 0");
}

void Checker::lrSchedule() {
  LrScheduleAttrs &s = d.schedule;
  const std::string &kind = I.getString("kind");
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
  const std::string &warmupType = I.getString("warmup_type");
  if (warmupType != "log" && warmupType != "linear")
    fail("unknown warmup_type '" + warmupType + "' (expected log or linear)");
  s.logWarmup = warmupType == "log";
  s.lr = I.getFloat("lr");
  s.warmupMinLr = I.getFloat("warmup_min_lr");
  s.warmupMaxLr = I.getFloat("warmup_max_lr");
  s.warmupMinRatio = I.getFloat("warmup_min_ratio");
  s.cosMinRatio = I.getFloat("cos_min_ratio");
  s.warmupNumSteps = I.getInt("warmup_num_steps");
  s.totalNumSteps = I.getInt("total_num_steps");
  const bool cosine = s.kind == LrScheduleAttrs::WarmupCosineLR;
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
    count(out(0), 1, "output");
    return;
  case Opcode::ClipCoefficient:
    count(out(0), 1, "output");
    count(in(0), 1, "norm");
    return;
  case Opcode::LrSchedule:
    count(out(0), 1, "output");
    count(in(0), 1, "step");
    lrSchedule();
    return;
  case Opcode::LossScale:
    count(in(0), 3, "state");
    count(out(0), 1, "output");
    return;
  case Opcode::UnscaleClip:
    count(out(0), 1, "grad_scale");
    count(out(1), 1, "norm");
    count(in(0), 1, "scaled_norm");
    count(in(1), 1, "scale");
    return;
  case Opcode::UpdateLossScale:
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

/// Fill, Iota, Copy, Convert, AllReduce.
void Checker::other() {
  if (I.op == Opcode::Fill || I.op == Opcode::Iota) {
    d.n = out(0).numElements();
    return;
  }
  d.n = in(0).numElements();
  const bool reduces = I.op == Opcode::AllReduce || I.op == Opcode::TpReduce;
  if (reduces) // tp_reduce sums
    d.reduce = I.op == Opcode::AllReduce ? reduceOp() : ReduceOp::Sum;
  count(out(0), d.n, reduces ? "tensor" : "output");
}

ReduceOp Checker::reduceOp() const {
  const std::string &op = I.getString("op");
  if (op == "sum")
    return ReduceOp::Sum;
  if (op == "mean")
    return ReduceOp::Mean;
  if (op == "max")
    return ReduceOp::Max;
  fail("op must be \"sum\", \"mean\" or \"max\", got \"" + op + "\"");
}

/// Collectives: the axis they span and its group's size in the program's
/// mesh.
void Checker::meshGroup() {
  const std::vector<AttrSpec> &specs = opInfo(I.op).attrs;
  auto spec = std::find_if(specs.begin(), specs.end(), [](const AttrSpec &a) {
    return a.kind == AttrKind::MeshAxis;
  });
  if (spec == specs.end())
    return;
  try {
    d.axis = meshAxisNamed(I.getString(spec->name));
  } catch (const Error &e) {
    fail(e.what());
  }
  d.group = P.mesh().groupSize(d.axis);
}

/// Broadcast, Send, Recv: bytes of any type (d.n elements) between the
/// ranks of a group; `root` a rank of it, `peer` an offset to another.
void Checker::transfer() {
  const std::string axis = meshAxisName(d.axis);
  if (I.op == Opcode::Broadcast) {
    d.n = in(0).numElements();
    if (in(0).dtype != out(0).dtype)
      fail("'" + out(0).name + "' must have the input's type " +
           dtypeName(in(0).dtype) + ", got " + dtypeName(out(0).dtype));
    count(out(0), d.n, "result");
    d.peer = I.getInt("root");
    if (d.peer < 0 || d.peer >= d.group)
      fail("root " + std::to_string(d.peer) + " is not a rank of the " +
           axis + " group of " + std::to_string(d.group));
    return;
  }
  d.n = I.op == Opcode::Send ? in(0).numElements() : out(0).numElements();
  d.peer = I.getInt("peer");
  if (d.peer == 0 || d.peer <= -d.group || d.peer >= d.group)
    fail("peer offset " + std::to_string(d.peer) +
         " does not name another rank of the " + axis + " group of " +
         std::to_string(d.group));
}

/// ReduceScatter, AllGather, Shard, AllToAll: tensors whose sizes differ
/// by the size W of their axis's group (d.n: the per-rank shard);
/// NormAllReduce: f32 scalars.
void Checker::shard() {
  const int64_t W = d.group;
  // Gathers and exchanges move bytes of any type; reductions f32.
  if (I.op == Opcode::AllGather || I.op == Opcode::AllToAll) {
    if (in(0).dtype != out(0).dtype)
      fail("'" + out(0).name + "' must have the input's type " +
           dtypeName(in(0).dtype) + ", got " + dtypeName(out(0).dtype));
  } else {
    for (const Buffer *b : {&in(0), &out(0)})
      if (b->dtype != DType::F32)
        fail("'" + b->name + "' must be f32 (reductions move f32), got " +
             dtypeName(b->dtype));
  }
  if (I.op == Opcode::AllToAll) {
    const int64_t total = in(0).numElements();
    if (total % W != 0)
      fail("'" + in(0).name + "' has " + std::to_string(total) +
           " elements, not a multiple of the " + meshAxisName(d.axis) +
           " group's " + std::to_string(W) + " ranks");
    d.n = total / W;
    count(out(0), total, "result");
    return;
  }
  if (I.op == Opcode::NormAllReduce) {
    d.n = 1;
    count(in(0), 1, "norm");
    count(out(0), 1, "result");
    return;
  }
  const bool gather = I.op == Opcode::AllGather;
  const Buffer &whole = gather ? out(0) : in(0), &part = gather ? in(0) : out(0);
  d.n = part.numElements();
  count(whole, d.n * W, gather ? "gathered result" : "input");
  if (I.op == Opcode::ReduceScatter)
    d.reduce = reduceOp();
}

/// 1-bit compression (see InstrDims for the sizes).
void Checker::compression() {
  auto bits = [&](const Buffer &b, int64_t elements, const char *role) {
    if (b.dtype != DType::U8)
      fail(std::string(role) + " '" + b.name + "' must be u8, got " +
           dtypeName(b.dtype));
    count(b, elements / 8, role);
  };
  auto f32 = [&](const Buffer &b, int64_t elements, const char *role) {
    if (b.dtype != DType::F32)
      fail(std::string(role) + " '" + b.name + "' must be f32, got " +
           dtypeName(b.dtype));
    count(b, elements, role);
  };
  auto int8Blocks = [&](const Buffer &codes, const Buffer &scales,
                        const Buffer &values) {
    d.n = values.numElements();
    d.cols = I.getInt("block_size");
    if (d.cols <= 0 || d.n % d.cols != 0)
      fail("block_size " + std::to_string(d.cols) + " does not divide the " +
           std::to_string(d.n) + " elements");
    d.rows = d.n / d.cols;
    if (codes.dtype != DType::I8)
      fail("codes '" + codes.name + "' must be i8, got " +
           dtypeName(codes.dtype));
    count(codes, d.n, "codes");
    f32(scales, d.rows, "scales");
  };
  // int4 codes of `elements` values, two per byte, with a scale per block
  // of cols (set) elements.
  auto int4Blocks = [&](const Buffer &codes, const Buffer &scales,
                        int64_t elements) {
    if (d.cols <= 0 || d.cols % 2 != 0 || elements % d.cols != 0)
      fail("block_size " + std::to_string(d.cols) +
           " is not even or does not divide the " + std::to_string(elements) +
           " elements");
    if (codes.dtype != DType::U8)
      fail("codes '" + codes.name + "' must be u8, got " +
           dtypeName(codes.dtype));
    count(codes, elements / 2, "codes");
    f32(scales, elements / d.cols, "scales");
  };
  switch (I.op) {
  case Opcode::QuantizeInt4:
    d.n = in(0).numElements();
    d.cols = I.getInt("block_size");
    int4Blocks(out(0), out(1), d.n);
    d.rows = d.n / d.cols;
    return;
  case Opcode::DequantizeReduceInt4: {
    d.n = out(0).numElements();
    d.cols = I.getInt("block_size");
    d.reduce = reduceOp();
    const int64_t codes = in(0).numElements() * 2;
    if (d.n == 0 || codes % d.n != 0)
      fail("the " + std::to_string(codes) + " codes do not split into "
           "chunks of the result's " + std::to_string(d.n) + " elements");
    d.rows = codes / d.n;
    if (d.reduce == ReduceOp::Max)
      fail("reduces by sum or mean, not max");
    int4Blocks(in(0), in(1), codes);
    if (d.n % d.cols != 0)
      fail("block_size " + std::to_string(d.cols) + " does not divide a "
           "chunk's " + std::to_string(d.n) + " elements");
    return;
  }
  case Opcode::QuantizeInt8:
    return int8Blocks(out(0), out(1), in(0));
  case Opcode::DequantizeInt8:
    return int8Blocks(in(0), in(1), out(0));
  case Opcode::OnebitCompress:
    d.n = in(0).numElements();
    d.rows = 1;
    d.cols = in(1).numElements();
    if (d.cols % 8 != 0 || d.cols < d.n)
      fail("error '" + in(1).name + "' has " + std::to_string(d.cols) +
           " elements; it must be a multiple of 8 and at least the input's " +
           std::to_string(d.n));
    f32(in(1), d.cols, "error");
    if (I.inputs.size() == 3)
      count(in(2), 1, "skip");
    bits(out(0), d.cols, "signs");
    f32(out(1), 1, "scale");
    f32(out(2), d.cols, "new_error");
    return;
  case Opcode::OnebitDecode:
  case Opcode::OnebitDecodeMean: {
    d.rows = in(1).numElements();
    const int64_t bytes = in(0).numElements();
    if (d.rows < 1 || bytes % d.rows != 0)
      fail("signs '" + in(0).name + "' of " + std::to_string(bytes) +
           " bytes do not split into " + std::to_string(d.rows) + " chunks");
    d.cols = bytes / d.rows * 8;
    bits(in(0), d.rows * d.cols, "signs");
    f32(in(1), d.rows, "scales");
    f32(out(0), I.op == Opcode::OnebitDecode ? d.rows * d.cols : d.cols,
        "result");
    return;
  }
  case Opcode::LambCoeffEma:
    d.n = in(0).numElements();
    f32(in(1), d.n, "exp_avg");
    f32(in(2), d.n, "exp_avg_sq");
    f32(in(3), 1, "coeff");
    f32(out(0), 1, "new_coeff");
    return;
  case Opcode::MomentumScales:
    if (I.inputs.size() != I.outputs.size())
      fail("expects one scale per momentum, got " +
           std::to_string(I.inputs.size()) + " momenta and " +
           std::to_string(I.outputs.size()) + " scales");
    for (size_t k = 0; k < I.inputs.size(); ++k) {
      f32(in(k), in(k).numElements(), "momentum");
      f32(out(k), 1, "scale");
    }
    return;
  case Opcode::ScaleBy:
    d.n = in(0).numElements();
    f32(in(1), 1, "factor");
    count(out(0), d.n, "result");
    return;
  case Opcode::OnebitLambUpdate: {
    d.n = in(0).numElements();
    const char *tensors[] = {"param", "exp_avg", "last_exp_avg", "exp_avg_sq",
                             "exp_avg_sq_fresh"};
    for (size_t k = 0; k < 5; ++k)
      f32(in(k), d.n, tensors[k]);
    const char *scalars[] = {"scaling", "coeff_freeze", "last_factor", "lr"};
    for (size_t k = 0; k < 4; ++k)
      f32(in(5 + k), 1, scalars[k]);
    f32(out(0), d.n, "new_param");
    f32(out(1), d.n, "new_exp_avg");
    f32(out(2), d.n, "new_exp_avg_sq_fresh");
    f32(out(3), 1, "new_last_factor");
    return;
  }
  case Opcode::EmaUpdate:
    d.n = in(0).numElements();
    count(in(1), d.n, "grad");
    count(in(2), 1, "grad_scale");
    if (I.inputs.size() == 4)
      count(in(3), 1, "skip");
    count(out(0), d.n, "result");
    if (!(I.getFloat("beta") >= 0 && I.getFloat("beta") < 1))
      fail("beta must be in [0, 1)");
    return;
  case Opcode::FrozenAdam:
    d.n = in(0).numElements();
    count(in(1), d.n, "old_exp_avg");
    count(in(2), d.n, "exp_avg");
    count(in(3), d.n, "exp_avg_sq");
    count(in(4), 1, "lr");
    if (I.inputs.size() == 6)
      count(in(5), 1, "skip");
    count(out(0), d.n, "new_param");
    count(out(1), d.n, "new_exp_avg");
    return;
  case Opcode::LocalAdam:
  case Opcode::ZeroOneUnwind:
  case Opcode::ZeroOneSync: {
    // Every tensor the parameter's size; LocalAdam's lr (input 5) and
    // ZeroOneSync's lr_sum (input 3) scalars.
    d.n = in(0).numElements();
    const size_t scalar = I.op == Opcode::LocalAdam     ? 5
                          : I.op == Opcode::ZeroOneSync ? 3
                                                        : I.inputs.size();
    for (size_t k = 0; k < I.inputs.size(); ++k)
      count(in(k), k == scalar ? 1 : d.n,
            k == scalar ? "learning rate" : "tensor");
    for (size_t k = 0; k < I.outputs.size(); ++k)
      count(out(k), d.n, "result");
    if (!(I.getFloat("eps") > 0))
      fail("eps must be > 0");
    return;
  }
  default:
    fail("internal: not a compression opcode");
  }
}

void Checker::matrix(const Buffer &b, const char *role, int64_t rows,
                     int64_t cols) const {
  if (b.shape != std::vector<int64_t>{rows, cols})
    fail(std::string(role) + " '" + b.name + "' " + shapeStr(b.shape) +
         " must be " + shapeStr({rows, cols}));
}

void Checker::ids(const Buffer &b, const char *role) const {
  if (b.dtype != DType::I32)
    fail(std::string(role) + " '" + b.name + "' must be i32, got " +
         dtypeName(b.dtype));
}

/// `b` is [tokens..., cols] with `rows` tokens.
void Checker::perToken(const Buffer &b, const char *role, int64_t rows,
                       int64_t cols) const {
  if (b.shape.empty() || b.shape.back() != cols ||
      b.numElements() != rows * cols)
    fail(std::string(role) + " '" + b.name + "' " + shapeStr(b.shape) +
         " must be [tokens..., " + std::to_string(cols) + "] over " +
         std::to_string(rows) + " tokens");
}

/// The mixture-of-experts ops: router logits [tokens..., E], expert
/// choices and slots [tokens..., K] (i32), token rows [tokens..., C],
/// expert rows [N*K, C] (N tokens), counts [E] (i32), loads [2, E] (f32).
void Checker::moe() {
  auto rank2 = [&](const Buffer &b, const char *role) {
    if (b.shape.size() != 2)
      fail(std::string(role) + " '" + b.name + "' must be rank 2, got " +
           shapeStr(b.shape));
  };
  // Sets the token count and K from expert choices or slots.
  auto choices = [&](const Buffer &b, const char *role) {
    ids(b, role);
    d.topK = lastDim(b, role);
    d.rows = d.topK ? b.numElements() / d.topK : 0;
  };
  auto load = [&](const Buffer &b) {
    rank2(b, "load");
    if (b.shape[0] != 2 || b.dtype != DType::F32)
      fail("load '" + b.name + "' must be [2, E] f32, got " +
           shapeStr(b.shape) + " " + dtypeName(b.dtype));
    if (d.experts && b.shape[1] != d.experts)
      fail("loads differ in experts: '" + b.name + "' " + shapeStr(b.shape));
    d.experts = b.shape[1];
  };
  switch (I.op) {
  case Opcode::MoeTopk:
  case Opcode::MoeTopkGrad: {
    const bool grad = I.op == Opcode::MoeTopkGrad;
    const Buffer &logits = grad ? out(0) : in(0);
    choices(grad ? in(2) : out(1), "experts");
    d.experts = lastDim(logits, "logits");
    perToken(logits, "logits", d.rows, d.experts);
    perToken(grad ? in(0) : out(0), grad ? "dweights" : "weights", d.rows,
             d.topK);
    if (grad)
      perToken(in(1), "weights", d.rows, d.topK);
    if (grad && I.inputs.size() == 4) // normalize = false: every logit
      perToken(in(3), "logits", d.rows, d.experts);
    if (d.topK < 1 || d.topK > d.experts || (!grad && I.getInt("k") != d.topK))
      fail("top-k " + std::to_string(d.topK) + " of " +
           std::to_string(d.experts) + " experts");
    return;
  }
  case Opcode::MoeRoute:
    choices(in(0), "experts");
    ids(out(0), "slots");
    perToken(out(0), "slots", d.rows, d.topK);
    d.experts = I.getInt("num_experts");
    ids(out(1), "counts");
    count(out(1), d.experts, "counts");
    return;
  case Opcode::MoeDispatch:
  case Opcode::MoeCombine:
  case Opcode::MoeSlotDot: {
    const bool dispatch = I.op == Opcode::MoeDispatch,
               dot = I.op == Opcode::MoeSlotDot;
    const Buffer &tokens = dispatch || dot ? in(0) : out(0);
    const Buffer &rows = dispatch ? out(0) : in(dot ? 1 : 0);
    const Buffer &slots = in(dot ? 2 : 1);
    choices(slots, "slots");
    rank2(rows, "expert rows");
    d.cols = rows.shape[1];
    perToken(tokens, "tokens", d.rows, d.cols);
    matrix(rows, "expert rows", d.rows * d.topK, d.cols);
    if (dot)
      perToken(out(0), "dweights", d.rows, d.topK);
    else if (I.inputs.size() == 3)
      perToken(in(2), "weights", d.rows, d.topK);
    return;
  }
  case Opcode::GroupedLinear:
  case Opcode::GroupedLinearGradWeight: {
    const bool fwd = I.op == Opcode::GroupedLinear;
    const Buffer &x = in(0), &w = fwd ? in(1) : out(0),
                 &dy = fwd ? out(0) : in(1), &counts = in(2);
    ids(counts, "counts");
    if (counts.shape.size() != 1 || counts.shape[0] < 1)
      fail("counts '" + counts.name + "' must be [E], got " +
           shapeStr(counts.shape));
    d.experts = counts.shape[0];
    rank2(x, "x");
    rank2(w, "weight");
    d.transW = flag("transpose_w");
    if (w.shape[0] % d.experts != 0)
      fail("weight '" + w.name + "' " + shapeStr(w.shape) + " does not stack " +
           std::to_string(d.experts) + " experts");
    d.M = x.shape[0];
    d.K = d.transW ? w.shape[1] : w.shape[0] / d.experts;
    d.N = d.transW ? w.shape[0] / d.experts : w.shape[1];
    matrix(x, "x", d.M, d.K);
    matrix(dy, fwd ? "y" : "dy", d.M, d.N);
    return;
  }
  case Opcode::MoeLoad:
  case Opcode::MoeLoadGrad: {
    const bool grad = I.op == Opcode::MoeLoadGrad;
    const Buffer &logits = in(grad ? 1 : 0);
    load(grad ? in(0) : out(0));
    d.rows = d.experts ? logits.numElements() / d.experts : 0;
    perToken(logits, "logits", d.rows, d.experts);
    if (grad) {
      perToken(out(0), "dlogits", d.rows, d.experts);
    } else {
      const int64_t tokens = d.rows;
      choices(in(1), "experts");
      if (d.rows != tokens)
        fail("experts '" + in(1).name + "' " + shapeStr(in(1).shape) +
             " do not cover the " + std::to_string(tokens) + " tokens");
    }
    return;
  }
  case Opcode::MoeBalanceLoss:
  case Opcode::MoeBalanceLossGrad: {
    const bool grad = I.op == Opcode::MoeBalanceLossGrad;
    for (size_t k = grad ? 1 : 0; k < I.inputs.size(); ++k)
      load(in(k));
    d.parts = int64_t(I.inputs.size()) - (grad ? 1 : 0);
    if (grad) {
      count(in(0), 1, "dloss");
      load(out(0));
    } else {
      count(out(0), 1, "loss");
    }
    return;
  }
  case Opcode::MoeExchangeCounts:
  case Opcode::MoeExchange: {
    // counts [E] over the group's G ranks, El = E / G each; recv_counts
    // [G, El].
    const Buffer &counts = in(I.op == Opcode::MoeExchange ? 1 : 0);
    ids(counts, "counts");
    if (counts.shape.size() != 1 || counts.shape[0] % d.group != 0)
      fail("counts '" + counts.name + "' " + shapeStr(counts.shape) +
           " do not divide over the " + std::to_string(d.group) + " ranks");
    d.experts = counts.shape[0];
    const int64_t perRank = d.experts / d.group;
    const Buffer &recv = I.op == Opcode::MoeExchange ? in(2) : out(0);
    ids(recv, "recv_counts");
    matrix(recv, "recv_counts", d.group, perRank);
    if (I.op == Opcode::MoeExchangeCounts) {
      ids(out(1), "local_counts");
      count(out(1), perRank, "local_counts");
      d.n = perRank;
      return;
    }
    // Rows of any element type: rows `rows` in, `M` out, width `cols`.
    rank2(in(0), "rows");
    rank2(out(0), "result");
    if (in(0).dtype != out(0).dtype || in(0).shape[1] != out(0).shape[1])
      fail("'" + out(0).name + "' " + shapeStr(out(0).shape) + " " +
           dtypeName(out(0).dtype) + " must have the rows' width and type");
    d.rows = in(0).shape[0];
    d.M = out(0).shape[0];
    d.cols = in(0).shape[1];
    d.n = in(0).numElements();
    return;
  }
  default:
    fail("internal: not a mixture-of-experts opcode");
  }
}

void Checker::family() {
  switch (opInfo(I.op).family) {
  case OpFamily::Init:
  case OpFamily::Copy:
  case OpFamily::Convert:
  case OpFamily::Collective:
    other();
    return;
  case OpFamily::Transfer:
    transfer();
    return;
  case OpFamily::Shard:
    shard();
    return;
  case OpFamily::Compression:
  case OpFamily::CompressedOptimizer:
    compression();
    return;
  case OpFamily::Pointwise:
    pointwise();
    return;
  case OpFamily::RowGate:
    rowGate();
    return;
  case OpFamily::Rotary:
    rotary();
    return;
  case OpFamily::RepeatKv:
    repeatKv();
    return;
  case OpFamily::Resize:
    d.n = in(0).numElements();
    return;
  case OpFamily::Embedding:
  case OpFamily::VocabEmbedding:
    embedding();
    return;
  case OpFamily::Add:
    add();
    return;
  case OpFamily::ReduceTo:
    reduceTo();
    return;
  case OpFamily::Linear:
    linear();
    return;
  case OpFamily::FourBitLinear:
    fourBitLinear();
    return;
  case OpFamily::BatchMatmul:
    batchMatmul();
    return;
  case OpFamily::Norm:
    norm();
    return;
  case OpFamily::NormGrad:
    normGrad(/*fromOutput=*/false);
    return;
  case OpFamily::NormGradFromOutput:
    normGrad(/*fromOutput=*/true);
    return;
  case OpFamily::ResidualNorm:
    residualNorm();
    return;
  case OpFamily::Gelu:
    gelu();
    return;
  case OpFamily::Dropout:
    dropout();
    return;
  case OpFamily::Bias:
    biasOps();
    return;
  case OpFamily::Heads:
    heads();
    return;
  case OpFamily::ConcatSplit:
    concatSplit();
    return;
  case OpFamily::Softmax:
    softmax();
    return;
  case OpFamily::Attention:
    attention();
    return;
  case OpFamily::CrossEntropy:
  case OpFamily::VocabCrossEntropy:
    crossEntropy();
    return;
  case OpFamily::TokenMask:
    tokenMask();
    return;
  case OpFamily::Optimizer:
  case OpFamily::PerTensorOptimizer:
    optimizer();
    return;
  case OpFamily::Scalar:
    scalarOp();
    return;
  case OpFamily::Moe:
  case OpFamily::ExpertExchange:
    moe();
    return;
  }
}

void Checker::memorySpaces() const {
  const std::string why = memorySpaceError(P, I);
  if (!why.empty())
    fail(why);
}

} // namespace

std::string memorySpaceError(const Program &P, const Instr &I) {
  // ZeRO-Infinity: only the swaps touch the NVMe swap file, swap_in
  // reading it, swap_out writing it.
  const bool swapIn = I.op == Opcode::SwapIn, swapOut = I.op == Opcode::SwapOut;
  auto onNvme = [&](int id) {
    return id >= 0 && size_t(id) < P.buffers.size() &&
           P.buffers[size_t(id)].nvme;
  };
  for (int id : I.inputs)
    if (onNvme(id) != (swapIn && id == I.inputs[0]))
      return "input '" + P.buffers[size_t(id)].name + "' " +
             (onNvme(id) ? "is in the NVMe swap file, which only a swap_in "
                           "reads"
                         : "must be in the NVMe swap file (swap_in reads it)");
  for (int id : I.outputs)
    if (onNvme(id) != (swapOut && id == I.outputs[0]))
      return "output '" + P.buffers[size_t(id)].name + "' " +
             (onNvme(id) ? "is in the NVMe swap file, which only a swap_out "
                           "writes"
                         : "must be in the NVMe swap file (swap_out writes it)");
  auto where = [](bool host) { return host ? "host" : "device"; };
  const bool toHost = I.op == Opcode::ToHost,
             toDevice = I.op == Opcode::ToDevice;
  if ((toHost || toDevice) && I.host)
    return "a copy between memories is not placed on the host itself";
  auto wrong = [&](int id, bool host, const char *role) -> std::string {
    if (id < 0 || size_t(id) >= P.buffers.size())
      return "";
    const Buffer &b = P.buffers[size_t(id)];
    if (b.host == host)
      return "";
    return std::string(role) + " '" + b.name + "' is in " + where(b.host) +
           " memory, but " +
           (toHost || toDevice
                ? std::string("the copy expects ") + where(host) + " memory"
                : std::string("the instruction runs on the ") +
                      where(I.host));
  };
  for (int id : I.inputs)
    if (std::string why = wrong(id, toDevice || (!toHost && I.host), "input");
        !why.empty())
      return why;
  for (int id : I.outputs)
    if (std::string why = wrong(id, toHost || (!toDevice && I.host), "output");
        !why.empty())
      return why;
  return "";
}

InstrDims checkInstr(const Program &P, const Instr &I) {
  Checker c(P, I);
  c.contract();
  c.meshGroup();
  c.family();
  // The families look at the operands they size things by; the backends
  // index the others too (e.g. GlobalNorm's inputs).
  for (int id : I.inputs)
    c.buffer(id);
  for (int id : I.outputs)
    c.buffer(id);
  c.memorySpaces();
  return c.d;
}

} // namespace dsc::rt
