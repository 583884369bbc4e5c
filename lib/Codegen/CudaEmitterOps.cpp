//===- CudaEmitterOps.cpp - One CUDA launcher per instruction ------------===//
//
// emitKernel is the one switch over every opcode (no default: a new opcode
// in Program.h is a compiler warning here until it has CUDA). The operands
// are checked by rt::checkInstr, as in the CPU backend; each case checks
// the storage types it needs, picks the launch shape and
// vector width, and instantiates the template of lib/Kernels that
// mirrors the opcode's CPU kernel.
//
//===----------------------------------------------------------------------===//

#include "CudaEmitterImpl.h"

#include "dsc/Runtime/Broadcast.h"
#include "dsc/Runtime/InstrCheck.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;

constexpr int kBlock = 256;

std::string tmpl(const std::string &name,
                 const std::vector<std::string> &targs) {
  std::string s = "dsc::" + name + "<";
  for (size_t i = 0; i < targs.size(); ++i)
    s += (i ? ", " : "") + targs[i];
  return s + ">";
}

std::string call(const std::string &fn, const std::vector<std::string> &targs,
                 const std::vector<std::string> &args) {
  std::string s = tmpl(fn, targs) + "(";
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", " : "") + args[i];
  return s + ");";
}

std::string b(bool v) { return v ? "true" : "false"; }
std::string n(int64_t v) { return num(v); }
std::string ll(int64_t v) { return std::to_string(v) + "LL"; }

/// Elementwise launch: `items` work items of a grid-stride loop.
void elementwise(KernelSpec &s, int64_t items,
                 const std::vector<std::string> &args,
                 const std::string &body) {
  s.kernel(gridFor(items, kBlock), kBlock, args, body);
}

std::string rowArgs(const RowConfig &c) {
  return std::to_string(c.threads) + ", " + std::to_string(c.items) + ", " +
         std::to_string(c.vec);
}

/// Convert (RoundToHalf or a copy between storage types).
void emitConvert(KernelSpec &s, const rt::InstrDims &d, int round) {
  const int64_t N = d.n;
  const std::string x = s.in(0, "x"), y = s.out(0, "y");
  const int vec = vecFor(N);
  elementwise(s, N / vec, {x, y},
              call("convert",
                   {s.T(x), s.T(y), std::to_string(round), n(N),
                    std::to_string(vec)},
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

void emitEmbedding(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t V = d.vocab, C = d.cols, rows = d.rows;
  s.requireType(s.inType(1), Storage::I32, "ids");
  const std::string table = s.in(0, "table"), ids = s.in(1, "ids"),
                    out = s.out(0, "out");
  const int vec = vecFor(C);
  const std::string code =
      s.status("token id out of range [0," + std::to_string(V) + ")");
  elementwise(s, rows * (C / vec), {table, ids, out},
              call("embedding",
                   {s.T(table), s.T(out), n(rows), n(V), n(C),
                    std::to_string(vec)},
                   {table, ids, out, code}));
}

void emitEmbeddingGrad(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t V = d.vocab, C = d.cols, rows = d.rows;
  s.requireType(s.inType(0), Storage::I32, "ids");
  const std::string ids = s.in(0, "ids"), dy = s.in(1, "dy"),
                    out = s.out(0, "dtable");
  // Threads (column, vocabulary part): about 32k of them.
  const int64_t parts =
      std::clamp<int64_t>(32768 / std::max<int64_t>(C, 1), 1, std::max<int64_t>(V, 1));
  const std::string code =
      s.status("token id out of range [0," + std::to_string(V) + ")");
  elementwise(s, C * parts, {ids, dy, out},
              call("embeddingGrad",
                   {s.T(dy), s.T(out), n(rows), n(V), n(C), n(parts)},
                   {ids, dy, out, code}));
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
  const rt::MergedDims m = rt::mergeBroadcastDims(x.shape, o.shape);
  const size_t k = m.len.size();
  const int64_t L = m.len.back();
  std::vector<int64_t> xStride(k, 0);
  int64_t st = L;
  for (size_t i = k - 1; i-- > 0;) {
    xStride[i] = st;
    st *= m.len[i];
  }
  std::vector<size_t> fullDims, bcastDims;
  for (size_t i = 0; i + 1 < k; ++i)
    (m.full[i] ? fullDims : bcastDims).push_back(i);
  int64_t outRows = 1, sumRows = 1;
  for (size_t i : fullDims)
    outRows *= m.len[i];
  for (size_t i : bcastDims)
    sumRows *= m.len[i];
  std::string xoff = "[](dsc_i64 o, dsc_i64 q) -> dsc_i64 { dsc_i64 off = 0;";
  for (size_t j = fullDims.size(); j-- > 0;) {
    const size_t d = fullDims[j];
    xoff += " off += (o % " + n(m.len[d]) + ") * " + n(xStride[d]) +
            "; o /= " + n(m.len[d]) + ";";
  }
  for (size_t j = bcastDims.size(); j-- > 0;) {
    const size_t d = bcastDims[j];
    xoff += " off += (q % " + n(m.len[d]) + ") * " + n(xStride[d]) +
            "; q /= " + n(m.len[d]) + ";";
  }
  xoff += " (void)o; (void)q; return off; }";
  const std::string in = s.in(0, "x"), out = s.out(0, "out");
  const bool lastFull = m.full.back();
  elementwise(s, lastFull ? outRows * L : outRows, {in, out},
              "auto xoff = " + xoff + ";\n  " +
                  call(lastFull ? "reduceToColumns" : "reduceToScalars",
                       {s.T(in), s.T(out), n(outRows), n(sumRows), n(L),
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
    return emitConvert(s, d, 0); // cpu::dropout copies at rate 0
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
  switch (op) {
  case Opcode::BiasGelu: {
    const std::string x = s.in(0, "x"), bias = s.in(1, "bias"),
                      y = s.out(0, "y");
    elementwise(s, N / vec, {x, bias, y},
                call("biasGelu",
                     {s.T(x), s.T(bias), s.T(y), b(tanhApprox), n(N), n(C), V},
                     {x, bias, y}));
    return;
  }
  case Opcode::BiasDropoutAdd: {
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
  default:
    break;
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
  const bool concat = s.I.op == Opcode::Concat;
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

void emitLayerNorm(KernelSpec &s, const rt::InstrDims &d) {
  const bool withRstd = s.I.op == Opcode::InvertibleLayerNorm;
  const int64_t C = d.cols, rows = d.rows;
  const std::string xs = s.in(0, "x"), g = s.in(1, "gamma"),
                    be = s.in(2, "beta"), y = s.out(0, "y");
  std::vector<std::string> args = {xs, g, be, y};
  std::string rstd = "(float *)nullptr", rstdT = "float";
  if (withRstd) {
    rstd = s.out(1, "rstd");
    rstdT = s.T(rstd);
    args.push_back(rstd);
  }
  const RowConfig c = s.rowConfig(rows, C);
  s.kernel(c.grid, c.block, args,
           call("layerNorm",
                {s.T(xs), s.T(g), s.T(be), s.T(y), rstdT, b(withRstd), n(rows),
                 n(C),
                 rowArgs(c)},
                {xs, g, be, y, rstd, flt(s.I.getFloat("epsilon"))}));
}

void emitRmsNorm(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t C = d.cols, rows = d.rows;
  const std::string xs = s.in(0, "x"), w = s.in(1, "weight"),
                    y = s.out(0, "y");
  const RowConfig c = s.rowConfig(rows, C);
  s.kernel(c.grid, c.block, {xs, w, y},
           call("rmsNorm",
                {s.T(xs), s.T(w), s.T(y), n(rows), n(C), rowArgs(c)},
                {xs, w, y, flt(s.I.getFloat("epsilon"))}));
}

void emitRmsNormGrad(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t C = d.cols, rows = d.rows;
  const std::string dy = s.in(0, "dy"), xs = s.in(1, "x"),
                    w = s.in(2, "weight"), dx = s.out(0, "dx"),
                    dw = s.out(1, "dweight");
  const int64_t blocks = std::max<int64_t>(1, ceilDiv(rows, 32));
  s.scratch(blocks * C * 4);
  const std::string part = "static_cast<float *>(dsc_scratch)";
  const RowConfig c = s.rowConfig(blocks, C);
  s.kernel(c.grid, c.block, {dy, xs, w, dx, "dsc_scratch"},
           call("rmsNormGradRows",
                {s.T(dy), s.T(xs), s.T(w), s.T(dx), n(rows), n(C),
                 rowArgs(c)},
                {dy, xs, w, dx, part, flt(s.I.getFloat("epsilon"))}));
  elementwise(s, C, {"dsc_scratch", dw},
              call("columnSum", {s.T(dw), n(blocks), n(C), n(C)}, {part, dw}));
}

void emitBiasDropoutAddLayerNorm(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t C = d.cols, rows = d.rows;
  const double rate = d.rate;
  const std::string xs = s.in(0, "x"), bias = s.in(1, "bias"),
                    res = s.in(2, "res"), g = s.in(3, "gamma"),
                    be = s.in(4, "beta"), sum = s.out(0, "sum"),
                    y = s.out(1, "y"), rstd = s.out(2, "rstd");
  std::vector<std::string> args = {xs, bias, res, g, be, sum, y, rstd};
  std::string rng = "dsc::Rng{0u, 0ull, 0ull}";
  if (rate > 0.0) {
    rng = s.rng();
    args.insert(args.end(), {"stream", "seed", "offset"});
  }
  const RowConfig c = s.rowConfig(rows, C);
  s.kernel(c.grid, c.block, args,
           call("biasDropoutAddLayerNorm",
                {s.T(xs), s.T(bias), s.T(res), s.T(g), s.T(be), s.T(sum),
                 s.T(y), s.T(rstd), b(rate <= 0.0), n(rows), n(C),
                 rowArgs(c)},
                {xs, bias, res, g, be, sum, y, rstd, flt(rate),
                 flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0),
                 flt(s.I.getFloat("epsilon")), rng}));
}

void emitLayerNormGrad(KernelSpec &s, const rt::InstrDims &d) {
  const bool fromOutput = s.I.op == Opcode::LayerNormGradFromOutput;
  // LayerNormGrad: dy, x, gamma[, dres]; FromOutput: dy, y, gamma, beta,
  // rstd[, dres].
  const size_t base = fromOutput ? 5 : 3;
  const int64_t C = d.cols, rows = d.rows;
  const bool dres = s.I.inputs.size() == base + 1;
  const std::string dy = s.in(0, "dy"), xs = s.in(1, fromOutput ? "y" : "x"),
                    g = s.in(2, "gamma");
  std::vector<std::string> args = {dy, xs, g};
  std::string be = "(const float *)nullptr", rstd = "(const float *)nullptr",
              beT = "float", rsT = "float";
  if (fromOutput) {
    be = s.in(3, "beta");
    rstd = s.in(4, "rstd");
    beT = s.T(be);
    rsT = s.T(rstd);
    args.insert(args.end(), {be, rstd});
  }
  std::string dr = "(const float *)nullptr", drT = "float";
  if (dres) {
    dr = s.in(base, "dres");
    drT = s.T(dr);
    args.push_back(dr);
  }
  const std::string dx = s.out(0, "dx"), dg = s.out(1, "dgamma"),
                    db = s.out(2, "dbeta");
  const int64_t blocks = std::max<int64_t>(1, ceilDiv(rows, 32));
  s.scratch(blocks * 2 * C * 4);
  args.insert(args.end(), {dx, "dsc_scratch"});
  const std::string part = "static_cast<float *>(dsc_scratch)";
  const std::string code =
      fromOutput ? s.status("a LayerNorm weight element is 0, so the input "
                            "cannot be recovered from the output; switch off "
                            "transformer_kernel.normalize_invertible")
                 : "0u";
  // Row kernel over 32-row blocks: one block of rows per row-group.
  RowConfig c = s.rowConfig(blocks, C);
  s.kernel(c.grid, c.block, args,
           call("layerNormGradRows",
                {s.T(dy), s.T(xs), s.T(g), beT, rsT, drT, s.T(dx), b(fromOutput),
                 b(dres), n(rows), n(C), rowArgs(c)},
                {dy, xs, g, be, rstd, dr, dx, part,
                 fromOutput ? "0.0f" : flt(s.I.getFloat("epsilon")), code}));
  elementwise(s, C, {"dsc_scratch", dg},
              call("columnSum", {s.T(dg), n(blocks), n(C), n(2 * C)},
                   {part, dg}));
  elementwise(s, C, {"dsc_scratch", db},
              call("columnSum", {s.T(db), n(blocks), n(C), n(2 * C)},
                   {part + " + " + n(C), db}));
}

void emitSoftmax(KernelSpec &s, const rt::InstrDims &d) {
  const Opcode op = s.I.op;
  const bool grad = op == Opcode::SoftmaxGrad || op == Opcode::SoftmaxDropoutGrad;
  const bool drop = op == Opcode::SoftmaxDropout || op == Opcode::SoftmaxDropoutGrad;
  // SoftmaxDropoutGrad reads the forward's mask off its `dropped` output
  // (third input), as the CPU backend does.
  const bool maskFromDropped = op == Opcode::SoftmaxDropoutGrad;
  const int64_t TK = d.cols, TQ = d.tq, rows = d.rows;
  const float scale = s.I.has("scale") ? float(s.I.getFloat("scale")) : 1.0f;
  const double rate = d.rate;
  const std::string keepScale = flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0);
  const RowConfig c = s.rowConfig(rows, TK);
  std::string rng = "dsc::Rng{0u, 0ull, 0ull}";
  if (grad) {
    const std::string dy = s.in(0, "dy"), y = s.in(1, "y");
    std::string dropped = "(const float *)nullptr", dropT = "float";
    std::vector<std::string> args = {dy, y};
    if (maskFromDropped) {
      dropped = s.in(2, "dropped");
      dropT = s.T(dropped);
      args.push_back(dropped);
    }
    const std::string dx = s.out(0, "dx");
    args.push_back(dx);
    const int mask = maskFromDropped ? 2 : 0;
    s.kernel(c.grid, c.block, args,
             call("softmaxGradRows",
                  {s.T(dy), s.T(y), dropT, s.T(dx), std::to_string(mask),
                   n(rows), n(TK), rowArgs(c)},
                  {dy, y, dropped, dx, flt(scale), flt(rate), keepScale,
                   rng}));
    return;
  }
  const bool causal = s.I.has("causal") && s.I.getInt("causal") != 0;
  const std::string xs = s.in(0, "x");
  std::string probs, dropped = "(float *)nullptr", dropT = "float";
  std::vector<std::string> args = {xs};
  if (drop) {
    dropped = s.out(0, "dropped");
    probs = s.out(1, "probs");
    dropT = s.T(dropped);
    args.insert(args.end(), {dropped, probs});
    rng = s.rng();
    args.insert(args.end(), {"stream", "seed", "offset"});
  } else {
    probs = s.out(0, "y");
    args.push_back(probs);
  }
  s.kernel(c.grid, c.block, args,
           call("softmaxRows",
                {s.T(xs), s.T(probs), dropT, b(causal), b(drop), n(rows),
                 n(TQ), n(TK), rowArgs(c)},
                {xs, probs, dropped, flt(scale), flt(rate), keepScale, rng}));
}

/// Shared memory of the fused attention kernels (Attention.cuh
/// attentionForward / attentionGradKV / attentionGradQ) at one tile size:
/// tiles of the compute type TC plus f32 scores and accumulators.
int64_t attentionSmem(bool grad, int64_t tile, int64_t D, int64_t tc) {
  if (!grad)
    return (2 * tile * D + tile * tile) * tc +
           (tile * tile + tile * D + 2 * tile) * 4;
  const int64_t kv = (4 * tile * D + 2 * tile * tile) * tc +
                     (2 * tile * tile + 2 * tile * D) * 4;
  const int64_t q = (4 * tile * D + tile * tile) * tc +
                    (2 * tile * tile + tile * D) * 4;
  return std::max(kv, q);
}

/// Attention and AttentionGrad (cpu::attention / attentionGrad): one block
/// of 4 warps per (batch*head, tile). The tiles are stored as the inputs'
/// half type when q, k, v (and dout) share it and D is a multiple of 16
/// (WMMA tensor cores), else as f32 (FMA); the tile is the largest of 64,
/// 32, 16 whose kernels fit the 48 KiB of static shared memory.
void emitAttention(KernelSpec &s, const rt::InstrDims &d) {
  const bool grad = s.I.op == Opcode::AttentionGrad;
  const size_t qi = grad ? 1 : 0;
  const int64_t BH = d.BH, T = d.T, D = d.D;
  const float scale = float(s.I.getFloat("scale"));
  const bool causal = s.I.getInt("causal") != 0;
  const double rate = d.rate;
  const std::string keepScale = flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0);

  Storage tc = s.inType(qi);
  for (size_t k = grad ? 0 : 1; k < qi + 3; ++k)
    if (s.inType(k) != tc)
      tc = Storage::F32;
  if (D % 16 != 0)
    tc = Storage::F32;
  const int64_t tcBytes = tc == Storage::F32 ? 4 : 2;
  int64_t tile = 0;
  for (int64_t t : {64, 32, 16})
    if (attentionSmem(grad, t, D, tcBytes) <= 48 * 1024) {
      tile = t;
      break;
    }
  if (!tile)
    s.fail("head dim " + std::to_string(D) +
           " needs more than 48 KiB of shared memory per block; set "
           "dsc.fusion.attention to false");
  const int warps = 4;
  const int64_t grid = BH * ceilDiv(T, tile);
  const std::string TC = storageCType(tc), rng = s.rng();
  const std::string shape = n(BH) + ", " + n(T) + ", " + n(D) + ", " +
                            n(tile) + ", " + b(causal) + ", " +
                            std::to_string(warps);
  const std::string tail = flt(scale) + ", " + flt(rate) + ", " + keepScale +
                           ", " + rng;
  if (!grad) {
    const std::string q = s.in(0, "q"), k = s.in(1, "k"), v = s.in(2, "v"),
                      out = s.out(0, "out"), lse = s.out(1, "lse");
    s.requireType(s.outType(1), Storage::F32, "lse");
    s.kernel(grid, warps * 32, {q, k, v, out, lse, "stream", "seed", "offset"},
             call("attentionForward",
                  {s.T(q), s.T(k), s.T(v), s.T(out), TC, shape},
                  {q, k, v, out, lse, tail}));
    return;
  }
  const std::string g = s.in(0, "dout"), q = s.in(1, "q"), k = s.in(2, "k"),
                    v = s.in(3, "v"), o = s.in(4, "out"), lse = s.in(5, "lse"),
                    dq = s.out(0, "dq"), dk = s.out(1, "dk"),
                    dv = s.out(2, "dv");
  s.requireType(s.inType(5), Storage::F32, "lse");
  if (s.outType(1) != s.outType(2))
    s.fail("dk and dv must have one storage type");
  s.scratch(BH * T * 4);
  const std::string rowDot = "static_cast<float *>(dsc_scratch)";
  elementwise(s, BH * T, {g, o, "dsc_scratch"},
              call("attentionRowDot", {s.T(g), s.T(o), n(BH * T), n(D)},
                   {g, o, rowDot}));
  const std::string types =
      s.T(g) + ", " + s.T(q) + ", " + s.T(k) + ", " + s.T(v);
  s.kernel(grid, warps * 32,
           {g, q, k, v, lse, "dsc_scratch", dk, dv, "stream", "seed",
            "offset"},
           call("attentionGradKV", {types, s.T(dk), TC, shape},
                {g, q, k, v, lse, rowDot, dk, dv, tail}));
  s.kernel(grid, warps * 32,
           {g, q, k, v, lse, "dsc_scratch", dq, "stream", "seed", "offset"},
           call("attentionGradQ", {types, s.T(dq), TC, shape},
                {g, q, k, v, lse, rowDot, dq, tail}));
}

void emitCrossEntropy(KernelSpec &s, const rt::InstrDims &d) {
  const bool grad = s.I.op == Opcode::CrossEntropyGrad;
  const size_t li = grad ? 1 : 0;
  const int64_t V = d.cols, rows = d.rows;
  s.requireType(s.inType(li + 1), Storage::I32, "labels");
  const int64_t ignore =
      s.I.has("ignore_index") ? s.I.getInt("ignore_index") : -100;
  const int threads = V <= 2048 ? 32 : 256;
  const int block = threads == 32 ? 128 : threads;
  const int64_t grid = std::max<int64_t>(1, threads == 32 ? ceilDiv(rows, 4) : rows);
  const std::string code = s.status(
      std::string(grad ? "cross_entropy_grad" : "cross_entropy") +
      ": a label is out of range [0," + std::to_string(V) +
      ") and not ignore_index " + std::to_string(ignore));
  if (grad) {
    const std::string dl = s.in(0, "dloss"), logits = s.in(1, "logits"),
                      labels = s.in(2, "labels"), dx = s.out(0, "dlogits");
    s.scratch(16);
    const std::string k = "static_cast<float *>(dsc_scratch)";
    s.kernel(1, kBlock, {dl, labels, "dsc_scratch"},
             call("crossEntropyGradScale",
                  {s.T(dl), n(rows), n(ignore), std::to_string(kBlock)},
                  {dl, labels, k}));
    s.kernel(grid, block, {"dsc_scratch", logits, labels, dx},
             call("crossEntropyGradRows",
                  {s.T(logits), s.T(dx), n(rows), n(V), n(ignore),
                   std::to_string(threads)},
                  {k, logits, labels, dx, code}));
    return;
  }
  const std::string logits = s.in(0, "logits"), labels = s.in(1, "labels"),
                    loss = s.out(0, "loss");
  s.scratch(std::max<int64_t>(rows, 1) * 8);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  s.kernel(grid, block, {logits, labels, "dsc_scratch"},
           call("crossEntropyRows",
                {s.T(logits), n(rows), n(V), n(ignore), std::to_string(threads)},
                {logits, labels, part, code}));
  s.kernel(1, kBlock, {"dsc_scratch", labels, loss},
           call("crossEntropyFinish",
                {s.T(loss), n(rows), n(ignore), std::to_string(kBlock)},
                {part, labels, loss}));
}

void emitMlmMask(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.n, vocab = s.I.getInt("vocab_size");
  if (s.inId(0) == s.outId(0) || s.inId(0) == s.outId(1) ||
      s.outId(0) == s.outId(1))
    s.fail("outputs must not alias the input or each other");
  for (size_t k = 0; k < 2; ++k)
    s.requireType(s.outType(k), Storage::I32, k ? "labels" : "inputs");
  s.requireType(s.inType(0), Storage::I32, "ids");
  const std::string ids = s.in(0, "ids"), in = s.out(0, "inputs"),
                    lab = s.out(1, "labels");
  s.rng();
  elementwise(s, N, {ids, in, lab, "stream", "seed", "offset"},
              call("mlmMask", {n(N)},
                   {ids, in, lab, flt(s.I.getFloat("mask_prob")),
                    std::to_string(int32_t(s.I.getInt("mask_token_id"))),
                    std::to_string(uint32_t(vocab)) + "u", "stream", "seed",
                    "offset"}));
}

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

/// One-thread kernels for the scalar bookkeeping of the step.
void emitScalarOp(KernelSpec &s, const rt::InstrDims &d) {
  switch (s.I.op) {
  case Opcode::ClipCoefficient: {
    const std::string in = s.in(0, "norm"), out = s.out(0, "out");
    s.kernel(1, 1, {in, out},
             call("clipCoefficient", {s.T(in), s.T(out)},
                  {in, out, dbl(s.I.getFloat("max_norm"))}));
    return;
  }
  case Opcode::LrSchedule: {
    const Storage st = s.inType(0);
    if (st != Storage::I64 && st != Storage::I32)
      s.fail("step must be i64, got " + std::string(storageName(st)));
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
    return;
  }
  case Opcode::LossScale: {
    s.requireType(s.inType(0), Storage::F32, "state");
    const std::string st = s.in(0, "state"), out = s.out(0, "scale");
    s.kernel(1, 1, {st, out},
             call("lossScale", {s.T(out)},
                  {st, out, dbl(s.I.getFloat("initial_scale")),
                   dbl(s.I.getFloat("multiplier"))}));
    return;
  }
  case Opcode::UnscaleClip: {
    s.requireType(s.outType(0), Storage::F32, "grad_scale");
    s.requireType(s.outType(1), Storage::F32, "norm");
    const std::string sn = s.in(0, "scaled_norm"), sc = s.in(1, "scale"),
                      gs = s.out(0, "grad_scale"), nm = s.out(1, "norm");
    s.kernel(1, 1, {sn, sc, gs, nm},
             call("unscaleClip", {s.T(sn), s.T(sc)},
                  {sn, sc, gs, nm, dbl(s.I.getFloat("max_norm"))}));
    return;
  }
  case Opcode::UpdateLossScale: {
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
    return;
  }
  default:
    s.fail("internal: not a scalar op");
  }
}

} // namespace

void emitKernel(KernelSpec &s) {
  const rt::InstrDims d = rt::checkInstr(s.program, s.I);
  switch (s.I.op) {
  case Opcode::Fill:
    return emitFill(s, d);
  case Opcode::Iota:
    return emitIota(s, d);
  case Opcode::Embedding:
    return emitEmbedding(s, d);
  case Opcode::EmbeddingGrad:
    return emitEmbeddingGrad(s, d);
  case Opcode::Add:
    return emitAdd(s, d);
  case Opcode::ReduceTo:
    return emitReduceTo(s);
  case Opcode::LayerNorm:
  case Opcode::InvertibleLayerNorm:
    return emitLayerNorm(s, d);
  case Opcode::BiasDropoutAddLayerNorm:
    return emitBiasDropoutAddLayerNorm(s, d);
  case Opcode::LayerNormGrad:
  case Opcode::LayerNormGradFromOutput:
    return emitLayerNormGrad(s, d);
  case Opcode::RmsNorm:
    return emitRmsNorm(s, d);
  case Opcode::RmsNormGrad:
    return emitRmsNormGrad(s, d);
  case Opcode::Gelu:
  case Opcode::GeluGrad:
    return emitGelu(s, d);
  case Opcode::Dropout:
    return emitDropout(s, d);
  case Opcode::BiasGelu:
  case Opcode::BiasGeluGrad:
  case Opcode::BiasDropoutAdd:
  case Opcode::DropoutBiasGrad:
    return emitBiasOps(s, d);
  case Opcode::SplitHeads:
  case Opcode::BiasSplitHeads:
  case Opcode::MergeHeads:
    return emitHeads(s, d);
  case Opcode::Concat:
  case Opcode::Split:
    return emitConcatSplit(s, d);
  case Opcode::Softmax:
  case Opcode::SoftmaxDropout:
  case Opcode::SoftmaxGrad:
  case Opcode::SoftmaxDropoutGrad:
    return emitSoftmax(s, d);
  case Opcode::Attention:
  case Opcode::AttentionGrad:
    return emitAttention(s, d);
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyGrad:
    return emitCrossEntropy(s, d);
  case Opcode::MlmMask:
    return emitMlmMask(s, d);
  case Opcode::GlobalNorm:
  case Opcode::CheckFinite:
    return emitGlobalNormOrCheck(s);
  case Opcode::ClipCoefficient:
  case Opcode::LrSchedule:
  case Opcode::LossScale:
  case Opcode::UnscaleClip:
  case Opcode::UpdateLossScale:
    return emitScalarOp(s, d);
  case Opcode::RoundToHalf: {
    // A half output rounds as it stores; an f32 output rounds explicitly.
    const int round = s.outType(0) != Storage::F32 ? 0 : d.bf16 ? 2 : 1;
    return emitConvert(s, d, round);
  }
  case Opcode::Copy:
    if (s.inType(0) == Storage::I32 || s.inType(0) == Storage::I64 ||
        s.outType(0) == Storage::I32 || s.outType(0) == Storage::I64)
      s.fail("integer copies are device memcpys, not kernels");
    return emitConvert(s, d, 0);
  // Not kernels: GEMMs are cuBLASLt descriptors, collectives go to the
  // communicator, optimizers are grouped by emitOptimizer.
  case Opcode::Linear:
  case Opcode::LinearGradInput:
  case Opcode::LinearGradWeight:
  case Opcode::BatchMatmul:
  case Opcode::AllReduce:
  case Opcode::Adam:
  case Opcode::Lamb:
  case Opcode::Sgd:
    s.fail("internal: not emitted as a single kernel");
  }
  s.fail("unknown opcode " + std::to_string(int(s.I.op)));
}

void emitOptimizer(KernelSpec &s, const std::vector<const rt::Instr *> &group) {
  const Opcode op = s.I.op;
  const bool sgd = op == Opcode::Sgd;
  const size_t outs = size_t(rt::opInfo(op).minOuts), tensors = outs + 1;
  const size_t nIn = tensors + 3;
  std::vector<std::vector<int>> ins(tensors), res(outs);
  for (const rt::Instr *I : group) {
    rt::checkInstr(s.program, *I);
    KernelSpec one(s.program, s.storage, s.remap, *I);
    for (size_t k = 0; k < tensors; ++k)
      ins[k].push_back(one.inId(k));
    for (size_t k = 0; k < outs; ++k)
      res[k].push_back(one.outId(k));
  }
  s.requireType(s.inType(tensors), Storage::F32, "lr");
  s.requireType(s.inType(tensors + 2), Storage::F32, "gscale");
  const Storage stepT = s.inType(tensors + 1);
  if (stepT != Storage::I64 && stepT != Storage::I32)
    s.fail("step must be i64, got " + std::string(storageName(stepT)));
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
