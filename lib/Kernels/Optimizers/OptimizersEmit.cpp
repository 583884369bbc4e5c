//===- OptimizersEmit.cpp - CUDA launchers of the optimizer family --------===//
//
// The multi-tensor launchers over chunk tables (global_norm, check_finite,
// and one launcher per group of adam, lamb or sgd instructions:
// emitOptimizerGroup) and the one-thread kernels of the step's scalars
// (clip_coefficient, lr_schedule, the fp16 loss scaler): emitOptimizers and
// the emit logic of each op, which instantiates the matching templates of
// Optimizers.cuh.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;
using rt::asFamily;
using rt::OptimizersOpcode;

/// The chunk table of a multi-tensor launch: element counts and the first
/// chunk of every tensor (one more entry: the total).
struct Chunks {
  std::vector<int64_t> n, first;
  int64_t total = 0;
};

constexpr int64_t kChunk = 16384;

Chunks chunksOf(const KernelSpec &s, const std::vector<int> &ids) {
  Chunks c;
  for (int id : ids) {
    const int64_t n = s.program.buffers[size_t(id)].numElements();
    c.n.push_back(n);
    c.first.push_back(c.total);
    c.total += ceilDiv(n, kChunk);
  }
  c.first.push_back(c.total);
  return c;
}

/// Every operand of 1-bit Adam's, 0/1 Adam's and 1-bit LAMB's kernels is f32.
void requireOperandsF32(KernelSpec &s) {
  for (size_t k = 0; k < s.I.inputs.size(); ++k)
    s.requireType(s.inType(k), Storage::F32, "operand");
}

void emitGlobalNormOrCheck(KernelSpec &s) {
  const bool norm = s.I.op == Opcode::GlobalNorm;
  std::vector<int> ids;
  for (size_t k = 0; k < s.I.inputs.size(); ++k)
    ids.push_back(s.inId(k));
  const Chunks c = chunksOf(s, ids);
  if (!norm)
    s.requireType(s.outType(0), Storage::F32, "output");
  const std::string out = s.out(0, "out");
  if (c.total == 0) { // no elements: the norm is 0, nothing is non-finite
    s.kernel(1, 1, {out}, "dsc::st(" + out + ", 0, 0.0f);");
    return;
  }
  const std::string K = std::to_string(ids.size());
  const std::string nArr = s.constArray("n", c.n),
                    fArr = s.constArray("first", c.first);
  const std::string x = s.table("x", ids, false);
  const std::string blk = std::to_string(kBlock);
  if (norm) {
    s.scratch(c.total * 8);
    const std::string part = "static_cast<double *>(dsc_scratch)";
    s.kernel(c.total, kBlock, {x, "dsc_scratch"},
             call("sumSquaresChunks", {K, n(kChunk), blk},
                  {x, nArr, fArr, part}));
    s.kernel(1, kBlock, {"dsc_scratch", out},
             call("sqrtOfSum", {s.T(out), n(c.total), blk}, {part, out}));
  } else {
    s.kernel(1, 1, {out}, "*" + out + " = 0.0f;");
    s.kernel(c.total, kBlock, {x, out},
             call("checkFiniteChunks", {K, n(kChunk), blk},
                  {x, nArr, fArr, out}));
  }
}

/// 1-bit Adam's compression stage around the compressed all-reduce: the
/// local momentum (ema_update) and the frozen-variance step (frozen_adam).
void emitOnebitAdamUpdate(KernelSpec &s, const rt::InstrDims &d) {
  const bool ema = s.I.op == Opcode::EmaUpdate;
  const size_t skipAt = ema ? 3 : 5;
  const bool skip = s.I.inputs.size() == skipAt + 1;
  requireOperandsF32(s);
  std::string skipArg = "nullptr";
  std::vector<std::string> args;
  if (ema) {
    const std::string avg = s.in(0, "avg"), g = s.in(1, "g"),
                      gscale = s.in(2, "gscale"), out = s.out(0, "out");
    if (skip)
      skipArg = s.in(3, "skip");
    args = {avg, g, gscale, out};
    if (skip)
      args.push_back(skipArg);
    const double beta = s.I.getFloat("beta");
    elementwise(s, d.n, args,
                call("emaUpdate", {n(d.n), b(skip)},
                     {avg, g, gscale, skipArg, flt(float(beta)),
                      flt(float(1.0 - beta)), out}));
    return;
  }
  const std::string p = s.in(0, "p"), oldM = s.in(1, "old_m"),
                    m = s.in(2, "m"), v = s.in(3, "v"), lr = s.in(4, "lr"),
                    newP = s.out(0, "new_p"), newM = s.out(1, "new_m");
  if (skip)
    skipArg = s.in(5, "skip");
  args = {p, oldM, m, v, lr, newP, newM};
  if (skip)
    args.push_back(skipArg);
  elementwise(s, d.n, args,
              call("frozenAdam", {n(d.n), b(skip)},
                   {p, oldM, m, v, lr, skipArg,
                    flt(float(s.I.getFloat("eps"))),
                    flt(float(s.I.getFloat("weight_decay"))), newP, newM}));
}

/// 0/1 Adam's local steps and their synchronisation (elementwise).
void emitLocalAdam(KernelSpec &s, const rt::InstrDims &d) {
  requireOperandsF32(s);
  const std::string eps = flt(float(s.I.getFloat("eps")));
  // Input 1 (the gradient) is read by the step's momentum update, not
  // here.
  const std::string p = s.in(0, "p"), m = s.in(2, "m"), v = s.in(3, "v"),
                    u = s.in(4, "u"), lr = s.in(5, "lr"),
                    newP = s.out(0, "new_p"), newM = s.out(1, "new_m"),
                    newU = s.out(2, "new_u");
  return elementwise(
      s, d.n, {p, m, v, u, lr, newP, newM, newU},
      call("localAdam", {n(d.n)},
           {p, m, v, u, lr, eps,
            flt(float(s.I.getFloat("weight_decay"))), newP, newM, newU}));
}

void emitZeroOneUnwind(KernelSpec &s, const rt::InstrDims &d) {
  requireOperandsF32(s);
  const std::string eps = flt(float(s.I.getFloat("eps")));
  const std::string p = s.in(0, "p"), u = s.in(1, "u"), v = s.in(2, "v"),
                    start = s.out(0, "start"), scaled = s.out(1, "scaled");
  return elementwise(s, d.n, {p, u, v, start, scaled},
                     call("zeroOneUnwind", {n(d.n)},
                          {p, u, v, eps, start, scaled}));
}

void emitZeroOneSync(KernelSpec &s, const rt::InstrDims &d) {
  requireOperandsF32(s);
  const std::string eps = flt(float(s.I.getFloat("eps")));
  const std::string p = s.in(0, "p"), w = s.in(1, "w"), v = s.in(2, "v"),
                    lrSum = s.in(3, "lr_sum"), newP = s.out(0, "new_p"),
                    newM = s.out(1, "new_m");
  const std::string code = s.status(
      "lr_sum must be > 0 (a synchronisation follows at least one local "
      "step with a positive learning rate)");
  return elementwise(s, d.n, {p, w, v, lrSum, newP, newM},
                     call("zeroOneSync", {n(d.n)},
                          {p, w, v, lrSum, eps, code, newP, newM}));
}

/// 1-bit LAMB: the warm-up's trust-ratio average, the momentum scales of
/// the switch, the scaling around the exchange, the compression stage's
/// update. Reductions go through per-chunk partials and one block.
void emitLambCoeffEma(KernelSpec &s, const rt::InstrDims &d) {
  requireOperandsF32(s);
  const std::string blk = std::to_string(kBlock);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  auto attr = [&](const char *name) { return flt(float(s.I.getFloat(name))); };
  const int64_t chunks = ceilDiv(d.n, kChunk);
  const std::string p = s.in(0, "p"), m = s.in(1, "m"), v = s.in(2, "v"),
                    coeff = s.in(3, "coeff"), out = s.out(0, "new_coeff");
  s.scratch(2 * chunks * 8);
  s.kernel(chunks, kBlock, {p, m, v, "dsc_scratch"},
           call("lambCoeffSums", {n(d.n), n(kChunk), blk},
                {p, m, v, attr("eps"), attr("weight_decay"), part}));
  s.kernel(1, kBlock, {"dsc_scratch", coeff, out},
           call("lambCoeffEma", {n(chunks), blk},
                {part, coeff, attr("max_coeff"), attr("min_coeff"),
                 dbl(s.I.getFloat("coeff_beta")), out}));
}

void emitMomentumScales(KernelSpec &s) {
  requireOperandsF32(s);
  const std::string blk = std::to_string(kBlock);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  std::vector<int> ins, outs;
  for (size_t k = 0; k < s.I.inputs.size(); ++k) {
    ins.push_back(s.inId(k));
    outs.push_back(s.outId(k));
  }
  const Chunks c = chunksOf(s, ins);
  const std::string K = std::to_string(ins.size());
  const std::string nArr = s.constArray("n", c.n),
                    fArr = s.constArray("first", c.first);
  const std::string x = s.table("x", ins, false),
                    scale = s.table("scale", outs, true);
  s.scratch(std::max<int64_t>(c.total, 1) * 8);
  if (c.total > 0)
    s.kernel(c.total, kBlock, {x, "dsc_scratch"},
             call("sumSquaresChunks", {K, n(kChunk), blk},
                  {x, nArr, fArr, part}));
  s.kernel(1, kBlock, {"dsc_scratch", scale},
           call("momentumScales", {K}, {part, nArr, fArr, scale + ".p"}));
}

void emitScaleBy(KernelSpec &s, const rt::InstrDims &d) {
  requireOperandsF32(s);
  const std::string x = s.in(0, "x"), factor = s.in(1, "factor"),
                    out = s.out(0, "out");
  elementwise(s, d.n, {x, factor, out},
              call("scaleBy", {n(d.n)}, {x, factor, out}));
}

void emitOnebitLambUpdate(KernelSpec &s, const rt::InstrDims &d) {
  requireOperandsF32(s);
  const std::string blk = std::to_string(kBlock);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  auto attr = [&](const char *name) { return flt(float(s.I.getFloat(name))); };
  const int64_t chunks = ceilDiv(d.n, kChunk);
  const std::string p = s.in(0, "p"), mc = s.in(1, "mc"),
                    last = s.in(2, "last"), v = s.in(3, "v"),
                    fresh = s.in(4, "fresh"), scaling = s.in(5, "scaling"),
                    coeffFreeze = s.in(6, "coeff_freeze"),
                    lastFactor = s.in(7, "last_factor"), lr = s.in(8, "lr");
  const std::string newP = s.out(0, "new_p"), newM = s.out(1, "new_m"),
                    newFresh = s.out(2, "new_fresh"),
                    newLastFactor = s.out(3, "new_last_factor");
  const bool decay = s.I.getFloat("weight_decay") > 0.0;
  s.scratch(3 * chunks * 8);
  s.kernel(chunks, kBlock,
           {p, mc, last, v, fresh, scaling, newM, newFresh, "dsc_scratch"},
           call("onebitLambMoments", {n(d.n), n(kChunk), blk, b(decay)},
                {p, mc, last, v, fresh, scaling, attr("beta1"),
                 attr("beta2"), attr("eps"), attr("weight_decay"), newM,
                 newFresh, part}));
  s.kernel(1, kBlock, {"dsc_scratch", lastFactor, newLastFactor},
           call("onebitLambFactor", {n(chunks), blk, b(decay)},
                {part, lastFactor, attr("factor_min"), attr("factor_max"),
                 attr("factor_threshold"), newLastFactor}));
  elementwise(s, d.n, {p, newM, v, coeffFreeze, newLastFactor, lr, newP},
              call("onebitLambApply", {n(d.n)},
                   {p, newM, v, coeffFreeze, newLastFactor, lr,
                    attr("eps"), attr("weight_decay"), newP}));
}

/// One-thread kernels for the scalar bookkeeping of the step.
void emitClipCoefficient(KernelSpec &s) {
  const std::string in = s.in(0, "norm"), out = s.out(0, "out");
  s.kernel(1, 1, {in, out},
           call("clipCoefficient", {s.T(in), s.T(out)},
                {in, out, dbl(s.I.getFloat("max_norm"))}));
}

void emitLrSchedule(KernelSpec &s, const rt::InstrDims &d) {
  const Storage st = s.inType(0);
  if (st != Storage::I64 && st != Storage::I32)
    s.fail("step must be i64, got " + std::string(rt::dtypeName(st)));
  const rt::LrScheduleAttrs &a = d.schedule;
  const std::string in = s.in(0, "step"), out = s.out(0, "lr");
  s.kernel(1, 1, {in, out},
           call("lrSchedule",
                {std::to_string(int(a.kind)), b(a.logWarmup), s.T(in),
                 s.T(out)},
                {in, out, dbl(a.lr), dbl(a.warmupMinLr),
                 dbl(a.warmupMaxLr), ll(a.warmupNumSteps),
                 ll(a.totalNumSteps), dbl(a.warmupMinRatio),
                 dbl(a.cosMinRatio)}));
}

void emitLossScale(KernelSpec &s) {
  s.requireType(s.inType(0), Storage::F32, "state");
  const std::string st = s.in(0, "state"), out = s.out(0, "scale");
  s.kernel(1, 1, {st, out},
           call("lossScale", {s.T(out)},
                {st, out, dbl(s.I.getFloat("initial_scale")),
                 dbl(s.I.getFloat("multiplier"))}));
}

void emitUnscaleClip(KernelSpec &s) {
  s.requireType(s.outType(0), Storage::F32, "grad_scale");
  s.requireType(s.outType(1), Storage::F32, "norm");
  const std::string sn = s.in(0, "scaled_norm"), sc = s.in(1, "scale"),
                    gs = s.out(0, "grad_scale"), nm = s.out(1, "norm");
  s.kernel(1, 1, {sn, sc, gs, nm},
           call("unscaleClip", {s.T(sn), s.T(sc)},
                {sn, sc, gs, nm, dbl(s.I.getFloat("max_norm"))}));
}

void emitUpdateLossScale(KernelSpec &s) {
  s.requireType(s.inType(0), Storage::F32, "state");
  s.requireType(s.outType(0), Storage::F32, "new_state");
  const auto &I = s.I;
  const int64_t window = I.getInt("scale_window"),
                hysteresis = I.getInt("hysteresis");
  const std::string st = s.in(0, "state"), of = s.in(1, "overflow"),
                    nx = s.out(0, "next");
  const std::string code = s.status(
      "gradient overflow at the minimum loss scale " +
      std::to_string(I.getFloat("min_scale")) +
      ": current loss scale already at minimum - cannot decrease scale "
      "anymore (DeepSpeed stops here too; lower fp16.min_loss_scale)");
  s.kernel(1, 1, {st, of, nx},
           call("updateLossScale",
                {b(I.getInt("dynamic") != 0),
                 b(I.getInt("consecutive_hysteresis") != 0), s.T(of)},
                {st, of, nx, dbl(I.getFloat("initial_scale")),
                 ll(window), ll(hysteresis),
                 dbl(I.getFloat("min_scale")), code}));
}

/// dsc.adam_8bit: one block per 256-element quantization block.
void emitAdam8bit(KernelSpec &s, const rt::InstrDims &d) {
  const std::string p = s.in(0, "p"), g = s.in(1, "g"), q1 = s.in(2, "q1"),
                    q2 = s.in(3, "q2"), a1 = s.in(4, "a1"), a2 = s.in(5, "a2"),
                    lr = s.in(6, "lr"), step = s.in(7, "step"),
                    gs = s.in(8, "gscale");
  const bool skip = s.I.inputs.size() == 10;
  const std::string sk = skip ? s.in(9, "skip") : "(const float *)nullptr";
  const std::string po = s.out(0, "p_out"), q1o = s.out(1, "q1_out"),
                    q2o = s.out(2, "q2_out"), a1o = s.out(3, "a1_out"),
                    a2o = s.out(4, "a2_out");
  for (size_t k : {0, 1, 4, 5, 6, 8})
    s.requireType(s.inType(k), Storage::F32, "operand");
  for (size_t k : {2, 3})
    s.requireType(s.inType(k), Storage::U8, "moment");
  const Storage stepT = s.inType(7);
  if (stepT != Storage::I64 && stepT != Storage::I32)
    s.fail("step must be i64, got " + std::string(rt::dtypeName(stepT)));
  std::vector<std::string> args = {p,  g,  q1,  q2,  a1,  a2,  lr,
                                   step, gs, po, q1o, q2o, a1o, a2o};
  if (skip)
    args.push_back(sk);
  const auto &I = s.I;
  const std::string code = s.status("optimizer step counter must be >= 1");
  s.kernel(std::max<int64_t>(1, d.rows), 256, args,
           call("adam8bitBlocks", {n(d.n), b(skip), s.T(step)},
                {p, g, q1, q2, a1, a2, lr, step, gs, sk,
                 flt(float(I.getFloat("beta1"))),
                 flt(float(I.getFloat("beta2"))),
                 flt(float(I.getFloat("eps"))),
                 flt(float(I.getFloat("weight_decay"))), po, q1o, q2o, a1o,
                 a2o, code}));
}

/// dsc.adafactor: the second-moment factors (or the whole second moment),
/// the row means, chunked sums of p^2 and of the update's squares, lr_t and
/// the clipping divisor, then the update.
void emitAdafactor(KernelSpec &s, const rt::InstrDims &d) {
  const auto &I = s.I;
  const size_t states = I.outputs.size() - 1;
  const bool factored = s.inBuf(0).shape.size() >= 2,
             first = I.getInt("first_moment") != 0;
  const size_t at = 2 + states;
  for (size_t k = 0; k < at; ++k)
    s.requireType(s.inType(k), Storage::F32, "operand");
  const std::string p = s.in(0, "p"), g = s.in(1, "g");
  const std::string v0 = s.in(2, "v0"), v0o = s.out(1, "v0_out");
  const std::string v1 = factored ? s.in(3, "v1") : "(const float *)nullptr";
  const std::string v1o = factored ? s.out(2, "v1_out") : "(float *)nullptr";
  const std::string m = first ? s.in(at - 1, "m") : "(const float *)nullptr";
  const std::string mo = first ? s.out(states, "m_out") : "(float *)nullptr";
  const std::string lr = s.in(at, "lr"), step = s.in(at + 1, "step"),
                    gs = s.in(at + 2, "gscale");
  const bool skip = I.inputs.size() == at + 4;
  const std::string sk = skip ? s.in(at + 3, "skip") : "(const float *)nullptr";
  const std::string po = s.out(0, "p_out");
  const Storage stepT = s.inType(at + 1);
  if (stepT != Storage::I64 && stepT != Storage::I32)
    s.fail("step must be i64, got " + std::string(rt::dtypeName(stepT)));
  const std::string blk = std::to_string(kBlock);
  const std::string T = s.T(step);
  auto with = [&](std::vector<std::string> a) {
    if (skip)
      a.push_back(sk);
    return a;
  };
  const std::string decay = dbl(I.getFloat("decay_rate")),
                    eps1 = flt(float(I.getFloat("eps1")));
  const int64_t chunks = std::max<int64_t>(1, ceilDiv(d.n, kChunk));
  // Scratch: per-chunk sums of p^2 and of the update's squares, the row
  // means (double), then lr_t and the divisor (float).
  const int64_t means = factored ? d.batch : 0;
  s.scratch((2 * chunks + means) * 8 + 8);
  const std::string base = "static_cast<double *>(dsc_scratch)";
  const std::string partP = base, partU = "(" + base + " + " + n(chunks) + ")",
                    rowMean = factored ? "(" + base + " + " + n(2 * chunks) + ")"
                                       : "(const double *)nullptr",
                    scalars = "reinterpret_cast<float *>(" + base + " + " +
                              n(2 * chunks + means) + ")";
  if (factored) {
    s.kernel(std::max<int64_t>(1, d.batch * (d.M + d.N)), kBlock,
             with({g, v0, v1, step, gs, v0o, v1o}),
             call("adafactorFactors",
                  {n(d.batch), n(d.M), n(d.N), blk, b(skip), T},
                  {g, v0, v1, step, gs, sk, decay, eps1, v0o, v1o}));
    s.kernel(1, kBlock, with({v0o, "dsc_scratch"}),
             call("adafactorRowMeans", {n(d.batch), n(d.M), blk},
                  {v0o, sk, rowMean}));
  } else {
    elementwise(s, d.n, with({g, v0, step, gs, v0o}),
                call("adafactorVector", {n(d.n), b(skip), T},
                     {g, v0, step, gs, sk, decay, eps1, v0o}));
  }
  const std::string fact = b(factored);
  std::vector<std::string> sumArgs = {p, g, gs, v0o, "dsc_scratch"};
  if (factored)
    sumArgs.push_back(v1o);
  s.kernel(chunks, kBlock, with(sumArgs),
           call("adafactorSums",
                {n(d.n), n(d.M), n(d.N), n(kChunk), blk, fact},
                {p, g, gs, sk, v0o, v1o, rowMean, partP, partU}));
  s.kernel(1, kBlock, with({lr, step, "dsc_scratch"}),
           call("adafactorScalars", {n(d.n), n(chunks), blk, T},
                {partP, partU, lr, step, sk, dbl(I.getFloat("eps2")),
                 dbl(I.getFloat("clip_threshold")),
                 b(I.getInt("scale_parameter") != 0),
                 b(I.getInt("relative_step") != 0),
                 b(I.getInt("warmup_init") != 0), scalars}));
  std::vector<std::string> applyArgs = {p, g, gs, step, v0o, "dsc_scratch", po};
  if (factored)
    applyArgs.push_back(v1o);
  if (first) {
    applyArgs.push_back(m);
    applyArgs.push_back(mo);
  }
  const std::string code = s.status("optimizer step counter must be >= 1");
  elementwise(s, d.n, with(applyArgs),
              call("adafactorApply",
                   {n(d.n), n(d.M), n(d.N), fact, b(first), b(skip), T},
                   {p, g, m, gs, step, sk, v0o, v1o, rowMean, scalars,
                    flt(float(I.getFloat("beta1"))),
                    dbl(I.getFloat("weight_decay")), po, mo, code}));
}

} // namespace

void emitOptimizers(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<OptimizersOpcode>(s.I.op)) {
  case OptimizersOpcode::GlobalNorm:
  case OptimizersOpcode::CheckFinite:
    return emitGlobalNormOrCheck(s);
  case OptimizersOpcode::ClipCoefficient:
    return emitClipCoefficient(s);
  case OptimizersOpcode::LrSchedule:
    return emitLrSchedule(s, d);
  case OptimizersOpcode::LossScale:
    return emitLossScale(s);
  case OptimizersOpcode::UnscaleClip:
    return emitUnscaleClip(s);
  case OptimizersOpcode::UpdateLossScale:
    return emitUpdateLossScale(s);
  case OptimizersOpcode::EmaUpdate:
  case OptimizersOpcode::FrozenAdam:
    return emitOnebitAdamUpdate(s, d);
  case OptimizersOpcode::LocalAdam:
    return emitLocalAdam(s, d);
  case OptimizersOpcode::ZeroOneUnwind:
    return emitZeroOneUnwind(s, d);
  case OptimizersOpcode::ZeroOneSync:
    return emitZeroOneSync(s, d);
  case OptimizersOpcode::LambCoeffEma:
    return emitLambCoeffEma(s, d);
  case OptimizersOpcode::MomentumScales:
    return emitMomentumScales(s);
  case OptimizersOpcode::ScaleBy:
    return emitScaleBy(s, d);
  case OptimizersOpcode::OnebitLambUpdate:
    return emitOnebitLambUpdate(s, d);
  case OptimizersOpcode::Adam8bit:
    return emitAdam8bit(s, d);
  case OptimizersOpcode::Adafactor:
    return emitAdafactor(s, d);
  case OptimizersOpcode::Adam:
  case OptimizersOpcode::Lamb:
  case OptimizersOpcode::Sgd:
    // The emitter groups consecutive updates (route Optimizer) into one
    // launch; alone, an update is a group of one.
    return emitOptimizerGroup(s, {&s.I});
  }
}

void emitOptimizerGroup(KernelSpec &s,
                        const std::vector<const rt::Instr *> &group) {
  const Opcode op = s.I.op;
  const bool sgd = op == Opcode::Sgd;
  const size_t outs = size_t(rt::opInfo(op).minOuts), tensors = outs + 1;
  const size_t nIn = tensors + 3;
  std::vector<std::vector<int>> ins(tensors), res(outs);
  for (const rt::Instr *I : group) {
    rt::checkInstr(s.program, *I);
    KernelSpec one(s.program, *I);
    for (size_t k = 0; k < tensors; ++k)
      ins[k].push_back(one.inId(k));
    for (size_t k = 0; k < outs; ++k)
      res[k].push_back(one.outId(k));
  }
  s.requireType(s.inType(tensors), Storage::F32, "lr");
  s.requireType(s.inType(tensors + 2), Storage::F32, "gscale");
  const Storage stepT = s.inType(tensors + 1);
  if (stepT != Storage::I64 && stepT != Storage::I32)
    s.fail("step must be i64, got " + std::string(rt::dtypeName(stepT)));
  const bool skip = s.I.inputs.size() == nIn + 1;
  if (skip)
    s.requireType(s.inType(nIn), Storage::F32, "skip");
  const Chunks c = chunksOf(s, ins[0]);
  const std::string K = std::to_string(group.size());
  const std::string nArr = s.constArray("n", c.n),
                    fArr = s.constArray("first", c.first);
  const char *inNames[] = {"p", "g", sgd ? "buf" : "m", "v"};
  const char *outNames[] = {"p_out", sgd ? "buf_out" : "m_out", "v_out"};
  std::vector<std::string> tables;
  for (size_t k = 0; k < tensors; ++k)
    tables.push_back(s.table(inNames[k], ins[k], false));
  for (size_t k = 0; k < outs; ++k)
    tables.push_back(s.table(outNames[k], res[k], true));
  const std::string lr = s.in(tensors, "lr"), step = s.in(tensors + 1, "step"),
                    gs = s.in(tensors + 2, "gscale");
  const std::string sk = skip ? s.in(nIn, "skip") : "(const float *)nullptr";
  std::vector<std::string> args = tables;
  args.insert(args.end(), {lr, step, gs});
  if (skip)
    args.push_back(sk);
  const std::string code = s.status("optimizer step counter must be >= 1");
  const std::string blk = std::to_string(kBlock);
  const auto &I = s.I;
  const int64_t grid = std::max<int64_t>(1, c.total);
  std::vector<std::string> callArgs = tables;
  callArgs.insert(callArgs.end(), {nArr, fArr, lr, step, gs, sk});
  if (op == Opcode::Adam) {
    callArgs.insert(callArgs.end(),
                    {dbl(I.getFloat("beta1")), dbl(I.getFloat("beta2")),
                     flt(I.getFloat("eps")), dbl(I.getFloat("weight_decay")),
                     code});
    s.kernel(grid, kBlock, args,
             call("adamChunks",
                  {K, n(kChunk), blk, b(I.getInt("adamw") != 0),
                   b(I.getInt("bias_correction") != 0), s.T(step)},
                  callArgs));
    return;
  }
  if (sgd) {
    callArgs.insert(callArgs.end(),
                    {dbl(I.getFloat("momentum")), dbl(I.getFloat("dampening")),
                     flt(I.getFloat("weight_decay")), code});
    s.kernel(grid, kBlock, args,
             call("sgdChunks",
                  {K, n(kChunk), blk, b(I.getInt("nesterov") != 0), s.T(step)},
                  callArgs));
    return;
  }
  // Lamb: moments and per-chunk norms, per-tensor trust ratios, update.
  s.scratch(c.total * 16 + int64_t(group.size()) * 4);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  const std::string coeff = "reinterpret_cast<float *>(static_cast<char *>("
                            "dsc_scratch) + " +
                            n(c.total * 16) + ")";
  const std::string eps = flt(I.getFloat("eps")),
                    wd = flt(I.getFloat("weight_decay"));
  std::vector<std::string> a1 = args;
  a1.push_back("dsc_scratch");
  callArgs.insert(callArgs.end(),
                  {flt(I.getFloat("beta1")), flt(I.getFloat("beta2")), eps, wd,
                   part, code});
  s.kernel(grid, kBlock, a1,
           call("lambMoments", {K, n(kChunk), blk, s.T(step)}, callArgs));
  std::vector<std::string> a2 = {lr, step};
  if (skip)
    a2.push_back(sk);
  a2.push_back("dsc_scratch");
  s.kernel(int64_t(group.size()), kBlock, a2,
           call("lambCoefficients",
                {K, blk, b(I.getInt("bias_correction") != 0), s.T(step)},
                {fArr, part, lr, step, sk, dbl(I.getFloat("beta1")),
                 dbl(I.getFloat("beta2")), flt(I.getFloat("max_coeff")),
                 flt(I.getFloat("min_coeff")), coeff}));
  std::vector<std::string> a3 = {tables[0], tables[tensors + 1],
                                 tables[tensors + 2], tables[tensors], step};
  if (skip)
    a3.push_back(sk);
  a3.push_back("dsc_scratch");
  s.kernel(grid, kBlock, a3,
           call("lambApply", {K, n(kChunk), blk, s.T(step)},
                {tables[0], tables[tensors + 1], tables[tensors + 2],
                 tables[tensors], nArr, fArr, step, sk, eps, wd, coeff}));
}

} // namespace dsc::cuda::detail
