//===- CpuBackend.cpp - Executes a Program function on the CPU -----------===//
//
// Each instruction is validated (checkInstr: buffer ids, element counts,
// attributes; then the dtypes here) and dispatched to a kernel of
// CpuKernels.cpp. Every error is an rt::Error whose message starts with the
// opcode name.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "MixedPrecisionKernels.h"

#include "dsc/Runtime/InstrCheck.h"
#include "dsc/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <cstring>
#include <sstream>

namespace dsc::rt {

namespace {

/// Typed access to the operands of one instruction that checkInstr passed.
class Exec {
public:
  Exec(const Program &prog, Storage &st, const Instr &instr)
      : P(prog), S(st), I(instr), op(opcodeName(instr.op)) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(std::string(op) + ": " + msg);
  }

  // Buffer ids and element counts are checkInstr's.
  int inId(size_t k) const { return I.inputs[k]; }
  int outId(size_t k) const { return I.outputs[k]; }
  const Buffer &in(size_t k) const { return P.buffers[size_t(inId(k))]; }
  const Buffer &out(size_t k) const { return P.buffers[size_t(outId(k))]; }

  void dtype(const Buffer &b, DType t, const char *role) const {
    if (b.dtype != t)
      fail(std::string(role) + " '" + b.name + "' must be " + dtypeName(t) +
           ", got " + dtypeName(b.dtype));
  }

  const float *fin(size_t k, const char *role) {
    dtype(in(k), DType::F32, role);
    return S.f32(inId(k));
  }
  float *fout(size_t k, const char *role) {
    dtype(out(k), DType::F32, role);
    return S.f32(outId(k));
  }
  const int32_t *iin(size_t k, const char *role) {
    dtype(in(k), DType::I32, role);
    return S.i32(inId(k));
  }
  int32_t *iout(size_t k, const char *role) {
    dtype(out(k), DType::I32, role);
    return S.i32(outId(k));
  }
  float scalarIn(size_t k, const char *role) { return fin(k, role)[0]; }
  /// The optimizer step counter: an i64 scalar (i32 accepted too).
  int64_t stepIn(size_t k) {
    const Buffer &b = in(k);
    if (b.dtype == DType::I64)
      return S.i64(inId(k))[0];
    if (b.dtype == DType::I32)
      return S.i32(inId(k))[0];
    fail("step '" + b.name + "' must be i64, got " + dtypeName(b.dtype));
  }
  /// Copies input k into output j when they are different buffers, so that an
  /// in-place kernel can run on the output.
  float *inPlace(size_t k, size_t j, const char *role) {
    const float *src = fin(k, role);
    float *dst = fout(j, role);
    if (dst != src)
      cpu::copyBytes(dst, src, size_t(in(k).numElements()) * 4);
    return dst;
  }

  const Program &P;
  Storage &S;
  const Instr &I;
  const char *op;
};

/// With DSC_PROFILE set, the backend times every instruction and prints the
/// time per opcode to stderr when it is destroyed.
class OpcodeProfile {
public:
  void add(Opcode op, double seconds) {
    auto &[total, calls] = entries[op];
    total += seconds;
    ++calls;
  }
  ~OpcodeProfile() {
    if (entries.empty())
      return;
    std::vector<std::pair<double, Opcode>> order;
    double all = 0;
    for (auto &[op, entry] : entries) {
      order.push_back({entry.first, op});
      all += entry.first;
    }
    std::sort(order.rbegin(), order.rend());
    std::fprintf(stderr, "dsc cpu profile: %.3f s in %zu opcodes\n", all,
                 order.size());
    for (auto &[seconds, op] : order)
      std::fprintf(stderr, "  %-18s %9.3f s %5.1f%% %8lld calls\n",
                   opcodeName(op), seconds, 100 * seconds / all,
                   (long long)entries[op].second);
  }

private:
  std::map<Opcode, std::pair<double, int64_t>> entries;
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(Communicator &comm)
      : comm(comm), profile(std::getenv("DSC_PROFILE")
                                ? std::make_unique<OpcodeProfile>()
                                : nullptr) {
    cpu::configureBlasThreads();
  }
  const char *name() const override { return "cpu"; }

  void run(const Program &program, const Function &fn, Storage &storage,
           const RngContext &rng) override {
    for (const Instr &instr : fn.body) {
      if (!profile) {
        execute(program, storage, instr, rng);
        continue;
      }
      auto start = std::chrono::steady_clock::now();
      execute(program, storage, instr, rng);
      profile->add(instr.op, std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count());
    }
  }

private:
  void execute(const Program &P, Storage &S, const Instr &I,
               const RngContext &rng);
  Communicator &comm;
  std::unique_ptr<OpcodeProfile> profile;
};

void CpuBackend::execute(const Program &P, Storage &S, const Instr &I,
                         const RngContext &rng) {
  const InstrDims d = checkInstr(P, I);
  Exec e(P, S, I);
  switch (I.op) {
  case Opcode::Fill: {
    const double v = I.getFloat("value");
    if (e.out(0).dtype == DType::F32)
      cpu::fillF32(S.f32(e.outId(0)), d.n, float(v));
    else if (e.out(0).dtype == DType::I32)
      cpu::fillI32(S.i32(e.outId(0)), d.n, int32_t(v));
    else {
      int64_t *p = S.i64(e.outId(0));
      for (int64_t i = 0; i < d.n; ++i)
        p[i] = int64_t(v);
    }
    return;
  }
  case Opcode::Iota:
    cpu::iota(e.iout(0, "output"), d.n, I.getInt("start"), I.getInt("step"));
    return;
  case Opcode::Embedding: {
    const float *table = e.fin(0, "table");
    const int32_t *ids = e.iin(1, "ids");
    cpu::embedding(table, ids, e.fout(0, "output"), d.rows, d.vocab, d.cols);
    return;
  }
  case Opcode::EmbeddingGrad: {
    const int32_t *ids = e.iin(0, "ids");
    const float *dy = e.fin(1, "dy");
    cpu::embeddingGrad(ids, dy, e.fout(0, "dtable"), d.rows, d.vocab, d.cols);
    return;
  }
  case Opcode::Add: {
    const float *pa = e.fin(0, "a"), *pb = e.fin(1, "b");
    cpu::addBroadcast(pa, pb, e.fout(0, "output"), e.in(0).shape,
                      e.in(1).shape);
    return;
  }
  case Opcode::ReduceTo: {
    const float *px = e.fin(0, "input");
    float *po = e.fout(0, "output");
    if (px == po)
      e.fail("output must not alias the input");
    cpu::reduceTo(px, po, e.in(0).shape, e.out(0).shape);
    return;
  }
  case Opcode::Linear: {
    const float *bias = I.inputs.size() == 3 ? e.fin(2, "bias") : nullptr;
    const float *px = e.fin(0, "x"), *pw = e.fin(1, "weight");
    cpu::linear(px, pw, bias, e.fout(0, "output"), d.M, d.K, d.N, d.transW);
    return;
  }
  case Opcode::LinearGradInput: {
    const float *pdy = e.fin(0, "dy"), *pw = e.fin(1, "weight");
    cpu::linearGradInput(pdy, pw, e.fout(0, "dx"), d.M, d.K, d.N, d.transW);
    return;
  }
  case Opcode::LinearGradWeight: {
    const float *px = e.fin(0, "x"), *pdy = e.fin(1, "dy");
    cpu::linearGradWeight(px, pdy, e.fout(0, "dw"), d.M, d.K, d.N, d.transW);
    return;
  }
  case Opcode::BatchMatmul: {
    const float alpha = I.has("alpha") ? float(I.getFloat("alpha")) : 1.0f;
    const float *pa = e.fin(0, "a"), *pb = e.fin(1, "b");
    cpu::batchMatmul(pa, pb, e.fout(0, "output"), d.batch, d.M, d.N, d.K,
                     d.transA, d.transB, alpha);
    return;
  }
  case Opcode::LayerNorm:
  case Opcode::InvertibleLayerNorm: {
    float *rstd =
        I.op == Opcode::InvertibleLayerNorm ? e.fout(1, "rstd") : nullptr;
    const float *px = e.fin(0, "x"), *pg = e.fin(1, "gamma"),
                *pb = e.fin(2, "beta");
    cpu::layerNorm(px, pg, pb, e.fout(0, "output"), d.rows, d.cols,
                   float(I.getFloat("epsilon")), rstd);
    return;
  }
  case Opcode::LayerNormGradFromOutput: {
    const float *dres =
        I.inputs.size() == 6 ? e.fin(5, "residual gradient") : nullptr;
    cpu::layerNormGradFromOutput(
        e.fin(0, "dy"), e.fin(1, "y"), e.fin(2, "gamma"), e.fin(3, "beta"),
        e.fin(4, "rstd"), dres, e.fout(0, "dx"), e.fout(1, "dgamma"),
        e.fout(2, "dbeta"), d.rows, d.cols);
    return;
  }
  case Opcode::LayerNormGrad: {
    const float *dres =
        I.inputs.size() == 4 ? e.fin(3, "residual gradient") : nullptr;
    const float *dy = e.fin(0, "dy"), *px = e.fin(1, "x"),
                *pg = e.fin(2, "gamma");
    float *dx = e.fout(0, "dx"), *dg = e.fout(1, "dgamma"),
          *db = e.fout(2, "dbeta");
    cpu::layerNormGrad(dy, px, pg, dres, dx, dg, db, d.rows, d.cols,
                       float(I.getFloat("epsilon")));
    return;
  }
  case Opcode::RmsNorm:
    cpu::rmsNorm(e.fin(0, "x"), e.fin(1, "weight"), e.fout(0, "output"),
                 d.rows, d.cols, float(I.getFloat("epsilon")));
    return;
  case Opcode::RmsNormGrad:
    cpu::rmsNormGrad(e.fin(0, "dy"), e.fin(1, "x"), e.fin(2, "weight"),
                     e.fout(0, "dx"), e.fout(1, "dweight"), d.rows, d.cols,
                     float(I.getFloat("epsilon")));
    return;
  case Opcode::BiasDropoutAddLayerNorm:
    cpu::biasDropoutAddLayerNorm(
        e.fin(0, "x"), e.fin(1, "bias"), e.fin(2, "residual"),
        e.fin(3, "gamma"), e.fin(4, "beta"), e.fout(0, "sum"),
        e.fout(1, "output"), e.fout(2, "rstd"), d.rows, d.cols, d.rate,
        uint32_t(I.getInt("stream")), rng.seed, rng.offset,
        float(I.getFloat("epsilon")));
    return;
  case Opcode::Gelu: {
    const float *x = e.fin(0, "x");
    cpu::gelu(x, e.fout(0, "output"), d.n, d.tanh);
    return;
  }
  case Opcode::GeluGrad: {
    const float *dy = e.fin(0, "dy"), *x = e.fin(1, "x");
    cpu::geluGrad(dy, x, e.fout(0, "dx"), d.n, d.tanh);
    return;
  }
  case Opcode::Dropout: {
    const float *x = e.fin(0, "x");
    cpu::dropout(x, e.fout(0, "output"), d.n, d.rate,
                 uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  }
  case Opcode::BiasGelu:
    cpu::biasGelu(e.fin(0, "x"), e.fin(1, "bias"), e.fout(0, "output"),
                  d.rows, d.cols, d.tanh);
    return;
  case Opcode::BiasGeluGrad:
    cpu::biasGeluGrad(e.fin(0, "dy"), e.fin(1, "x"), e.fin(2, "bias"),
                      e.fout(0, "dx"), e.fout(1, "dbias"), d.rows, d.cols,
                      d.tanh);
    return;
  case Opcode::BiasDropoutAdd:
    cpu::biasDropoutAdd(e.fin(0, "x"), e.fin(1, "bias"), e.fin(2, "residual"),
                        e.fout(0, "output"), d.rows, d.cols, d.rate,
                        uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  case Opcode::DropoutBiasGrad:
    cpu::dropoutBiasGrad(e.fin(0, "dy"), e.fout(0, "dx"), e.fout(1, "dbias"),
                         d.rows, d.cols, d.rate, uint32_t(I.getInt("stream")),
                         rng.seed, rng.offset);
    return;
  case Opcode::SplitHeads:
  case Opcode::BiasSplitHeads: {
    const float *px = e.fin(0, "x");
    const float *bias =
        I.op == Opcode::BiasSplitHeads ? e.fin(1, "bias") : nullptr;
    std::vector<float *> outs;
    for (size_t p = 0; p < I.outputs.size(); ++p)
      outs.push_back(e.fout(p, "output"));
    cpu::splitHeads(px, bias, outs, d.B, d.T, d.H, d.D);
    return;
  }
  case Opcode::MergeHeads: {
    std::vector<const float *> ins;
    for (size_t p = 0; p < I.inputs.size(); ++p)
      ins.push_back(e.fin(p, "input"));
    cpu::mergeHeads(ins, e.fout(0, "output"), d.B, d.T, d.H, d.D);
    return;
  }
  case Opcode::Concat: {
    std::vector<const float *> ins;
    for (size_t k = 0; k < I.inputs.size(); ++k)
      ins.push_back(e.fin(k, "piece"));
    cpu::concat(ins, d.widths, e.fout(0, "output"), d.outer, d.inner);
    return;
  }
  case Opcode::Split: {
    std::vector<float *> outs;
    for (size_t k = 0; k < I.outputs.size(); ++k)
      outs.push_back(e.fout(k, "piece"));
    cpu::split(e.fin(0, "input"), outs, d.widths, d.outer, d.inner);
    return;
  }
  case Opcode::Softmax: {
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    const bool causal = I.has("causal") && I.getInt("causal") != 0;
    const float *px = e.fin(0, "x");
    cpu::softmax(px, e.fout(0, "output"), d.rows, d.tq, d.cols, scale, causal);
    return;
  }
  case Opcode::SoftmaxDropout:
  case Opcode::SoftmaxDropoutGrad: {
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    if (I.op == Opcode::SoftmaxDropoutGrad)
      cpu::softmaxDropoutGrad(e.fin(0, "dy"), e.fin(1, "probs"),
                              e.fin(2, "dropped"), e.fout(0, "dx"), d.rows,
                              d.cols, scale, d.rate);
    else
      cpu::softmaxDropout(e.fin(0, "scores"), e.fout(0, "dropped"),
                          e.fout(1, "probs"), d.rows, d.tq, d.cols, scale,
                          I.has("causal") && I.getInt("causal") != 0, d.rate,
                          uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  }
  case Opcode::Attention:
  case Opcode::AttentionGrad: {
    const float scale = float(I.getFloat("scale"));
    const bool causal = I.getInt("causal") != 0;
    const uint32_t stream = uint32_t(I.getInt("stream"));
    if (I.op == Opcode::AttentionGrad)
      cpu::attentionGrad(e.fin(0, "dout"), e.fin(1, "q"), e.fin(2, "k"),
                         e.fin(3, "v"), e.fin(4, "out"), e.fin(5, "lse"),
                         e.fout(0, "dq"), e.fout(1, "dk"), e.fout(2, "dv"),
                         d.BH, d.T, d.D, scale, causal, d.rate, stream,
                         rng.seed, rng.offset);
    else
      cpu::attention(e.fin(0, "q"), e.fin(1, "k"), e.fin(2, "v"),
                     e.fout(0, "out"), e.fout(1, "lse"), d.BH, d.T, d.D,
                     scale, causal, d.rate, stream, rng.seed, rng.offset);
    return;
  }
  case Opcode::SoftmaxGrad: {
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    const float *dy = e.fin(0, "dy"), *py = e.fin(1, "y");
    cpu::softmaxGrad(dy, py, e.fout(0, "dx"), d.rows, d.cols, scale);
    return;
  }
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyGrad: {
    const bool grad = I.op == Opcode::CrossEntropyGrad;
    const size_t li = grad ? 1 : 0;
    const int64_t ignore =
        I.has("ignore_index") ? I.getInt("ignore_index") : -100;
    const float *logits = e.fin(li, "logits");
    const int32_t *labels = e.iin(li + 1, "labels");
    if (grad) {
      const float dloss = e.scalarIn(0, "dloss");
      cpu::crossEntropyGrad(dloss, logits, labels, e.fout(0, "dlogits"),
                            d.rows, d.cols, ignore);
    } else {
      e.fout(0, "loss")[0] =
          cpu::crossEntropy(logits, labels, d.rows, d.cols, ignore);
    }
    return;
  }
  case Opcode::MlmMask: {
    const int32_t *ids = e.iin(0, "ids");
    int32_t *inputs = e.iout(0, "inputs"), *labels = e.iout(1, "labels");
    if (ids == inputs || ids == labels || inputs == labels)
      e.fail("outputs must not alias the input or each other");
    cpu::mlmMask(ids, inputs, labels, d.n, I.getFloat("mask_prob"),
                 int32_t(I.getInt("mask_token_id")), I.getInt("vocab_size"),
                 uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  }
  case Opcode::Copy: {
    const Buffer &i = e.in(0), &o = e.out(0);
    if (i.dtype != o.dtype)
      e.fail("dtypes differ: " + std::string(dtypeName(i.dtype)) + " -> " +
             dtypeName(o.dtype));
    cpu::copyBytes(S.data(e.outId(0)), S.data(e.inId(0)), i.bytes());
    return;
  }
  case Opcode::GlobalNorm: {
    double total = 0.0;
    for (size_t k = 0; k < I.inputs.size(); ++k)
      total += cpu::sumSquares(e.fin(k, "input"), e.in(k).numElements());
    e.fout(0, "output")[0] = float(std::sqrt(total));
    return;
  }
  case Opcode::ClipCoefficient: {
    float norm = e.scalarIn(0, "norm");
    e.fout(0, "output")[0] = cpu::clipCoefficient(norm, I.getFloat("max_norm"));
    return;
  }
  case Opcode::LrSchedule: {
    const int64_t step = e.stepIn(0);
    e.fout(0, "output")[0] = float(cpu::lrSchedule(d.schedule, step));
    return;
  }
  case Opcode::Adam:
  case Opcode::Lamb: {
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *m = e.inPlace(2, 1, "exp_avg");
    float *v = e.inPlace(3, 2, "exp_avg_sq");
    if (I.inputs.size() == 8 && e.scalarIn(7, "skip") != 0.0f)
      return; // fp16 overflow: param and state pass through
    const float lr = e.scalarIn(4, "lr");
    const int64_t step = e.stepIn(5);
    const float gscale = e.scalarIn(6, "gscale");
    if (step < 1)
      e.fail("step counter must be >= 1, got " + std::to_string(step));
    if (I.op == Opcode::Adam) {
      cpu::AdamParams hp{I.getFloat("beta1"),        I.getFloat("beta2"),
                         I.getFloat("eps"),          I.getFloat("weight_decay"),
                         I.getInt("adamw") != 0,
                         I.getInt("bias_correction") != 0};
      cpu::adam(p, g, m, v, d.n, lr, step, gscale, hp);
    } else {
      cpu::LambParams hp{I.getFloat("beta1"),        I.getFloat("beta2"),
                         I.getFloat("eps"),          I.getFloat("weight_decay"),
                         I.getFloat("max_coeff"),    I.getFloat("min_coeff"),
                         I.getInt("bias_correction") != 0};
      cpu::lamb(p, g, m, v, d.n, lr, step, gscale, hp);
    }
    return;
  }
  case Opcode::Sgd: {
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *buf = e.inPlace(2, 1, "momentum_buffer");
    if (I.inputs.size() == 7 && e.scalarIn(6, "skip") != 0.0f)
      return; // fp16 overflow: param and state pass through
    const float lr = e.scalarIn(3, "lr");
    const int64_t step = e.stepIn(4);
    const float gscale = e.scalarIn(5, "gscale");
    if (step < 1)
      e.fail("step counter must be >= 1, got " + std::to_string(step));
    cpu::SgdParams hp{I.getFloat("momentum"), I.getFloat("dampening"),
                      I.getFloat("weight_decay"), I.getInt("nesterov") != 0};
    cpu::sgd(p, g, buf, d.n, lr, step, gscale, hp);
    return;
  }
  case Opcode::RoundToHalf:
    cpu::roundToHalf(e.fin(0, "input"), e.fout(0, "output"), d.n, d.bf16);
    return;
  case Opcode::CheckFinite: {
    bool overflow = false;
    for (size_t k = 0; k < I.inputs.size() && !overflow; ++k)
      overflow = cpu::hasNonFinite(e.fin(k, "input"), e.in(k).numElements());
    e.fout(0, "output")[0] = overflow ? 1.0f : 0.0f;
    return;
  }
  case Opcode::LossScale: {
    const float scale =
        cpu::currentLossScale(e.fin(0, "state"), I.getFloat("initial_scale"));
    e.fout(0, "output")[0] = float(double(scale) * I.getFloat("multiplier"));
    return;
  }
  case Opcode::UnscaleClip: {
    float gscale, norm;
    cpu::unscaleClip(e.scalarIn(0, "scaled_norm"), e.scalarIn(1, "scale"),
                     I.getFloat("max_norm"), gscale, norm);
    e.fout(0, "grad_scale")[0] = gscale;
    e.fout(1, "norm")[0] = norm;
    return;
  }
  case Opcode::UpdateLossScale: {
    cpu::LossScalerParams p;
    p.dynamic = I.getInt("dynamic") != 0;
    p.initialScale = I.getFloat("initial_scale");
    p.scaleWindow = I.getInt("scale_window");
    p.hysteresis = I.getInt("hysteresis");
    p.minScale = I.getFloat("min_scale");
    p.consecutiveHysteresis = I.getInt("consecutive_hysteresis") != 0;
    const bool overflow = e.scalarIn(1, "overflow") != 0.0f;
    float next[3];
    if (!cpu::updateLossScale(e.fin(0, "state"), next, overflow, p))
      e.fail("gradient overflow at the minimum loss scale " +
             std::to_string(p.minScale) +
             ": current loss scale already at minimum - cannot decrease "
             "scale anymore (DeepSpeed stops here too; lower "
             "fp16.min_loss_scale)");
    std::copy(next, next + 3, e.fout(0, "new_state"));
    return;
  }
  case Opcode::AllReduce:
    comm.allReduce(e.inPlace(0, 0, "tensor"), d.n, d.mean);
    return;
  }
  throw Error("unknown opcode " + std::to_string(int(I.op)));
}

} // namespace

std::unique_ptr<Backend> createCpuBackend(Communicator &comm) {
  return std::make_unique<CpuBackend>(comm);
}

} // namespace dsc::rt
