//===- ElementwiseEmit.cpp - CUDA launchers of the elementwise family -----===//
//
// fill, iota, copy and convert (conversions), add, reduce_to, gelu,
// dropout, the bias epilogues and their gradients, the head split/merge and
// concat/split: emitElementwise and the emit logic of each op, which
// instantiates the matching template of Elementwise.cuh.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

#include "dsc/Program/Broadcast.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;
using rt::asFamily;
using rt::ElementwiseOpcode;

/// Convert, or a copy between float storage types.
void emitConvert(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.n;
  const std::string x = s.in(0, "x"), y = s.out(0, "y");
  const int vec = vecFor(N);
  elementwise(s, N / vec, {x, y},
              call("convert",
                   {s.T(x), s.T(y), n(N), std::to_string(vec)},
                   {x, y}));
}

void emitFill(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.n;
  const double v = s.I.getFloat("value");
  const std::string out = s.out(0, "out");
  const Storage t = s.outType(0);
  std::string body;
  if (t == Storage::I32)
    body = call("fillInt", {n(N)}, {out, std::to_string(int32_t(v))});
  else if (t == Storage::I64)
    body = call("fillI64", {n(N)}, {out, ll(int64_t(v))});
  else
    body = call("fill", {s.T(out), n(N)}, {out, flt(v)});
  elementwise(s, N, {out}, body);
}

void emitIota(KernelSpec &s, const rt::InstrDims &d) {
  s.requireType(s.outType(0), Storage::I32, "output");
  const int64_t N = d.n;
  const std::string out = s.out(0, "out");
  elementwise(s, N, {out},
              call("iota", {n(N), n(s.I.getInt("start")), n(s.I.getInt("step"))},
                   {out}));
}

void emitAdd(KernelSpec &s, const rt::InstrDims &d) {
  const rt::Buffer &a = s.inBuf(0), &bb = s.inBuf(1);
  const int64_t N = d.n;
  const rt::MergedDims m = rt::mergeBroadcastDims(a.shape, bb.shape);
  const int64_t L = m.len.back();
  std::string boff = "[](dsc_i64 r) -> dsc_i64 { dsc_i64 o = 0;";
  for (size_t i = m.len.size() - 1; i-- > 0;) {
    if (m.bStride[i])
      boff += " o += (r % " + n(m.len[i]) + ") * " + n(m.bStride[i]) + ";";
    boff += " r /= " + n(m.len[i]) + ";";
  }
  boff += " (void)r; return o; }";
  const std::string x = s.in(0, "a"), y = s.in(1, "b"), out = s.out(0, "out");
  const int vec = vecFor(L);
  elementwise(s, N / vec, {x, y, out},
              "auto boff = " + boff + ";\n  " +
                  call("addBroadcast",
                       {s.T(x), s.T(y), s.T(out), n(N), n(L),
                        b(m.full.back()), std::to_string(vec), "decltype(boff)"},
                       {x, y, out, "boff"}));
}

void emitReduceTo(KernelSpec &s) {
  const rt::Buffer &x = s.inBuf(0), &o = s.outBuf(0);
  if (s.inId(0) == s.outId(0))
    s.fail("output must not alias the input");
  const rt::ReduceToPlan plan = rt::planReduceTo(x.shape, o.shape);
  const rt::MergedDims &m = plan.m;
  const std::vector<int64_t> &xStride = plan.xStride;
  // The device twin of ReduceToPlan::xRowOffset, with the sizes baked in.
  std::string xoff = "[](dsc_i64 o, dsc_i64 q) -> dsc_i64 { dsc_i64 off = 0;";
  for (size_t j = plan.fullDims.size(); j-- > 0;) {
    const size_t d = plan.fullDims[j];
    xoff += " off += (o % " + n(m.len[d]) + ") * " + n(xStride[d]) +
            "; o /= " + n(m.len[d]) + ";";
  }
  for (size_t j = plan.bcastDims.size(); j-- > 0;) {
    const size_t d = plan.bcastDims[j];
    xoff += " off += (q % " + n(m.len[d]) + ") * " + n(xStride[d]) +
            "; q /= " + n(m.len[d]) + ";";
  }
  xoff += " (void)o; (void)q; return off; }";
  const std::string in = s.in(0, "x"), out = s.out(0, "out");
  elementwise(s, plan.lastFull ? plan.outRows * plan.L : plan.outRows,
              {in, out},
              "auto xoff = " + xoff + ";\n  " +
                  call(plan.lastFull ? "reduceToColumns" : "reduceToScalars",
                       {s.T(in), s.T(out), n(plan.outRows), n(plan.sumRows),
                        n(plan.L),
                        "decltype(xoff)"},
                       {in, out, "xoff"}));
}

void emitGelu(KernelSpec &s, const rt::InstrDims &d) {
  const bool grad = s.I.op == Opcode::GeluGrad;
  const bool useTanh = d.tanh;
  const int64_t N = d.n;
  const int vec = vecFor(N);
  if (grad) {
    const std::string dy = s.in(0, "dy"), x = s.in(1, "x"),
                      dx = s.out(0, "dx");
    elementwise(s, N / vec, {dy, x, dx},
                call("geluGrad",
                     {s.T(dy), s.T(x), s.T(dx), b(useTanh), n(N),
                      std::to_string(vec)},
                     {dy, x, dx}));
  } else {
    const std::string x = s.in(0, "x"), y = s.out(0, "y");
    elementwise(s, N / vec, {x, y},
                call("gelu",
                     {s.T(x), s.T(y), b(useTanh), n(N), std::to_string(vec)},
                     {x, y}));
  }
}

void emitDropout(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.n;
  const double rate = d.rate;
  if (rate <= 0.0)
    return emitConvert(s, d); // cpu::dropout copies at rate 0
  const std::string x = s.in(0, "x"), y = s.out(0, "y");
  const std::string rng = s.rng();
  const int vec = vecFor(N);
  elementwise(s, N / vec, {x, y, "stream", "seed", "offset"},
              call("dropout", {s.T(x), s.T(y), n(N), std::to_string(vec)},
                   {x, y, flt(rate), flt(1.0 / (1.0 - rate)), rng}));
}

/// BiasGelu, BiasGeluGrad, BiasDropoutAdd, DropoutBiasGrad: [rows, C]
/// tensors with a bias [C].
void emitBiasOps(KernelSpec &s, const rt::InstrDims &d) {
  const Opcode op = s.I.op;
  const int64_t C = d.cols, N = d.n, rows = d.rows;
  const double rate = d.rate;
  const bool tanhApprox = d.tanh;
  const int vec = vecFor(C);
  const std::string V = std::to_string(vec);
  const std::string noRng = "dsc::Rng{0u, 0ull, 0ull}";
  if (op == Opcode::BiasGelu) {
    const std::string x = s.in(0, "x"), bias = s.in(1, "bias"),
                      y = s.out(0, "y");
    elementwise(s, N / vec, {x, bias, y},
                call("biasGelu",
                     {s.T(x), s.T(bias), s.T(y), b(tanhApprox), n(N), n(C), V},
                     {x, bias, y}));
    return;
  }
  if (op == Opcode::BiasDropoutAdd) {
    const std::string x = s.in(0, "x"), bias = s.in(1, "bias"),
                      res = s.in(2, "res"), y = s.out(0, "y");
    std::vector<std::string> args = {x, bias, res, y};
    std::string rng = noRng;
    if (rate > 0.0) {
      rng = s.rng();
      args.insert(args.end(), {"stream", "seed", "offset"});
    }
    elementwise(s, N / vec, args,
                call("biasDropoutAdd",
                     {s.T(x), s.T(bias), s.T(res), s.T(y), b(rate <= 0.0),
                      n(N), n(C), V},
                     {x, bias, res, y, flt(rate),
                      flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0), rng}));
    return;
  }
  // The gradients: rows in blocks of 32 with column partial sums, merged
  // in block order (cpu::rowsWithColumnSum).
  const int64_t blocks = std::max<int64_t>(1, ceilDiv(rows, 32));
  const std::string part = "static_cast<float *>(dsc_scratch)";
  if (op == Opcode::BiasGeluGrad) {
    const std::string dy = s.in(0, "dy"), x = s.in(1, "x"),
                      bias = s.in(2, "bias"), dx = s.out(0, "dx"),
                      db = s.out(1, "dbias");
    s.scratch(blocks * C * 4);
    elementwise(s, blocks * (C / vec), {dy, x, bias, dx, "dsc_scratch"},
                call("biasGeluGradRows",
                     {s.T(dy), s.T(x), s.T(bias), s.T(dx), b(tanhApprox),
                      n(rows), n(C), V},
                     {dy, x, bias, dx, part}));
    elementwise(s, C, {"dsc_scratch", db},
                call("columnSum", {s.T(db), n(blocks), n(C), n(C)},
                     {part, db}));
    return;
  }
  const std::string dy = s.in(0, "dy"), dx = s.out(0, "dx"),
                    db = s.out(1, "dbias");
  std::vector<std::string> args = {dy, dx};
  std::string rng = noRng;
  if (rate > 0.0) {
    rng = s.rng();
    args.insert(args.end(), {"stream", "seed", "offset"});
  }
  s.scratch(blocks * C * 4);
  args.push_back("dsc_scratch");
  elementwise(s, blocks * (C / vec), args,
              call("dropoutBiasGradRows",
                   {s.T(dy), s.T(dx), b(rate <= 0.0), n(rows), n(C), V},
                   {dy, dx, part, flt(rate),
                    flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0), rng}));
  elementwise(s, C, {"dsc_scratch", db},
              call("columnSum", {s.T(db), n(blocks), n(C), n(C)}, {part, db}));
}

void emitHeads(KernelSpec &s, const rt::InstrDims &d) {
  const Opcode op = s.I.op;
  const bool split = op != Opcode::MergeHeads;
  const bool biased = op == Opcode::BiasSplitHeads;
  const int64_t P = d.parts, B = d.B, T = d.T, H = d.H, D = d.D;
  // Tokens per shared-memory tile: at most 16 KiB of f32.
  const int64_t TT = std::clamp<int64_t>(4096 / std::max<int64_t>(D, 1), 1, 32);
  const int64_t grid = std::max<int64_t>(1, B * H * ceilDiv(T, TT));
  const std::string dims = n(T) + ", " + n(H) + ", " + n(D) + ", " + n(P) +
                           ", " + std::to_string(TT);
  if (split) {
    const std::string xs = s.in(0, "x");
    const std::string bias = biased ? s.in(1, "bias") : "";
    for (int64_t p = 0; p < P; ++p) {
      const std::string h = s.out(size_t(p), "head" + std::to_string(p));
      std::vector<std::string> args = {xs};
      if (biased)
        args.push_back(bias);
      args.push_back(h);
      s.kernel(grid, kBlock, args,
               call("splitHeadsPart",
                    {s.T(xs), biased ? s.T(bias) : "float", s.T(h), b(biased),
                     dims},
                    {xs, biased ? bias : "(const float *)nullptr", h,
                     std::to_string(p)}));
    }
  } else {
    std::vector<std::string> heads;
    for (int64_t p = 0; p < P; ++p)
      heads.push_back(s.in(size_t(p), "head" + std::to_string(p)));
    const std::string xs = s.out(0, "x");
    for (int64_t p = 0; p < P; ++p)
      s.kernel(grid, kBlock, {heads[size_t(p)], xs},
               call("mergeHeadsPart", {s.T(heads[size_t(p)]), s.T(xs), dims},
                    {heads[size_t(p)], xs, std::to_string(p)}));
  }
}

void emitConcatSplit(KernelSpec &s, const rt::InstrDims &d) {
  const bool concat = s.I.op == Opcode::Concat || s.I.op == Opcode::Pack;
  const size_t pieces = d.widths.size();
  const int64_t outer = d.outer, inner = d.inner;
  const std::vector<int64_t> &widths = d.widths;
  int64_t total = 0;
  for (int64_t width : widths)
    total += width;
  std::vector<std::string> names;
  std::string w;
  if (concat) {
    for (size_t k = 0; k < pieces; ++k)
      names.push_back(s.in(k, "piece" + std::to_string(k)));
    w = s.out(0, "whole");
  } else {
    w = s.in(0, "whole");
    for (size_t k = 0; k < pieces; ++k)
      names.push_back(s.out(k, "piece" + std::to_string(k)));
  }
  int64_t at = 0;
  for (size_t k = 0; k < pieces; ++k) {
    const int64_t run = widths[k] * inner;
    const int vec = run % 4 == 0 && (total * inner) % 4 == 0 &&
                            (at * inner) % 4 == 0
                        ? 4
                        : 1;
    const std::string &src = concat ? names[k] : w, &dst = concat ? w : names[k];
    elementwise(s, outer * (run / vec), {src, dst},
                call("copyPiece",
                     {s.T(src), s.T(dst), b(concat), n(outer), n(inner),
                      n(total), n(at), n(widths[k]), std::to_string(vec)},
                     {src, dst}));
    at += widths[k];
  }
}

} // namespace

void emitElementwise(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<ElementwiseOpcode>(s.I.op)) {
  case ElementwiseOpcode::Fill:
    return emitFill(s, d);
  case ElementwiseOpcode::Iota:
    return emitIota(s, d);
  case ElementwiseOpcode::Add:
    return emitAdd(s, d);
  case ElementwiseOpcode::ReduceTo:
    return emitReduceTo(s);
  case ElementwiseOpcode::Gelu:
  case ElementwiseOpcode::GeluGrad:
    return emitGelu(s, d);
  case ElementwiseOpcode::Dropout:
    return emitDropout(s, d);
  case ElementwiseOpcode::BiasGelu:
  case ElementwiseOpcode::BiasGeluGrad:
  case ElementwiseOpcode::BiasDropoutAdd:
  case ElementwiseOpcode::DropoutBiasGrad:
    return emitBiasOps(s, d);
  case ElementwiseOpcode::SplitHeads:
  case ElementwiseOpcode::BiasSplitHeads:
  case ElementwiseOpcode::MergeHeads:
    return emitHeads(s, d);
  case ElementwiseOpcode::Concat:
  case ElementwiseOpcode::Split:
  case ElementwiseOpcode::Pack:
  case ElementwiseOpcode::Unpack:
    return emitConcatSplit(s, d);
  case ElementwiseOpcode::Convert:
    return emitConvert(s, d);
  case ElementwiseOpcode::FlatResize: {
    // ZeRO's padding to whole shards (f32, or 4-bit weights' bytes),
    // 1-bit compression's to whole bytes.
    if (s.inType(0) != Storage::U8)
      s.requireType(s.inType(0), Storage::F32, "input");
    s.requireType(s.outType(0), s.inType(0), "result");
    const int64_t from = s.inBuf(0).numElements(),
                  to = s.outBuf(0).numElements();
    const std::string x = s.in(0, "x"), y = s.out(0, "y");
    return elementwise(s, to, {x, y},
                       call("flatResize", {n(from), n(to)}, {x, y}));
  }
  case ElementwiseOpcode::Copy:
  case ElementwiseOpcode::TpCopy:
    if (s.inType(0) == Storage::I32 || s.inType(0) == Storage::I64 ||
        s.outType(0) == Storage::I32 || s.outType(0) == Storage::I64)
      s.fail("integer copies are device memcpys, not kernels");
    return emitConvert(s, d);
  case ElementwiseOpcode::ToHost:
  case ElementwiseOpcode::ToDevice:
  case ElementwiseOpcode::SwapIn:
  case ElementwiseOpcode::SwapOut:
    s.fail("internal: ZeRO-Offload's copies and swaps are the backend's "
           "host steps (Step::Kind::HostCopy, Host), not kernels");
  }
  s.fail("internal: not an elementwise opcode");
}

} // namespace dsc::cuda::detail
