//===- NormsEmit.cpp - CUDA launchers of the norms family -----------------===//
//
// layer_norm, invertible_layer_norm, rms_norm, invertible_rms_norm,
// bias_dropout_add_layer_norm, add_rms_norm and their gradients: emitNorms
// and the emit logic of each op, which instantiates the matching row kernel
// of Norms.cuh (and, for the weight gradients, Common.cuh's columnSum over
// the 32-row block partial sums).
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;
using rt::asFamily;
using rt::NormsOpcode;

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

/// rms_norm, invertible_rms_norm (x, weight -> y[, rstd]) and add_rms_norm
/// (x, res, weight -> sum, y, rstd).
void emitRmsNorm(KernelSpec &s, const rt::InstrDims &d) {
  const bool withRes = s.I.op == Opcode::AddRmsNorm;
  const bool withRstd = s.I.op != Opcode::RmsNorm;
  const int64_t C = d.cols, rows = d.rows;
  const std::string xs = s.in(0, "x");
  std::vector<std::string> args = {xs};
  std::string res = "(const float *)nullptr", resT = "float",
              sum = "(float *)nullptr", sumT = "float";
  if (withRes) {
    res = s.in(1, "res");
    resT = s.T(res);
    args.push_back(res);
  }
  const std::string w = s.in(withRes ? 2 : 1, "weight");
  args.push_back(w);
  if (withRes) {
    sum = s.out(0, "sum");
    sumT = s.T(sum);
    args.push_back(sum);
  }
  const std::string y = s.out(withRes ? 1 : 0, "y");
  args.push_back(y);
  std::string rstd = "(float *)nullptr", rstdT = "float";
  if (withRstd) {
    rstd = s.out(withRes ? 2 : 1, "rstd");
    rstdT = s.T(rstd);
    args.push_back(rstd);
  }
  const RowConfig c = s.rowConfig(rows, C);
  s.kernel(c.grid, c.block, args,
           call("rmsNorm",
                {s.T(xs), resT, s.T(w), sumT, s.T(y), rstdT, b(withRes),
                 b(withRstd), n(rows), n(C), rowArgs(c)},
                {xs, res, w, sum, y, rstd, flt(s.I.getFloat("epsilon"))}));
}

/// rms_norm_grad (dy, x, weight[, dres]) and rms_norm_grad_from_output (dy,
/// y, weight, rstd[, dres]), both -> dx, dweight.
void emitRmsNormGrad(KernelSpec &s, const rt::InstrDims &d) {
  const bool fromOutput = s.I.op == Opcode::RmsNormGradFromOutput;
  const size_t base = fromOutput ? 4 : 3;
  const bool dres = s.I.inputs.size() == base + 1;
  const int64_t C = d.cols, rows = d.rows;
  const std::string dy = s.in(0, "dy"), xs = s.in(1, fromOutput ? "y" : "x"),
                    w = s.in(2, "weight");
  std::vector<std::string> args = {dy, xs, w};
  std::string rstd = "(const float *)nullptr", rsT = "float";
  if (fromOutput) {
    rstd = s.in(3, "rstd");
    rsT = s.T(rstd);
    args.push_back(rstd);
  }
  std::string dr = "(const float *)nullptr", drT = "float";
  if (dres) {
    dr = s.in(base, "dres");
    drT = s.T(dr);
    args.push_back(dr);
  }
  const std::string dx = s.out(0, "dx"), dw = s.out(1, "dweight");
  const int64_t blocks = std::max<int64_t>(1, ceilDiv(rows, 32));
  s.scratch(blocks * C * 4);
  args.insert(args.end(), {dx, "dsc_scratch"});
  const std::string part = "static_cast<float *>(dsc_scratch)";
  const std::string code =
      fromOutput ? s.status("an RMSNorm weight element is 0, so the input "
                            "cannot be recovered from the output; switch off "
                            "transformer_kernel.normalize_invertible")
                 : "0u";
  const RowConfig c = s.rowConfig(blocks, C);
  s.kernel(c.grid, c.block, args,
           call("rmsNormGradRows",
                {s.T(dy), s.T(xs), s.T(w), rsT, drT, s.T(dx), b(fromOutput),
                 b(dres), n(rows), n(C), rowArgs(c)},
                {dy, xs, w, rstd, dr, dx, part,
                 fromOutput ? "0.0f" : flt(s.I.getFloat("epsilon")), code}));
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

} // namespace

void emitNorms(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<NormsOpcode>(s.I.op)) {
  case NormsOpcode::LayerNorm:
  case NormsOpcode::InvertibleLayerNorm:
    return emitLayerNorm(s, d);
  case NormsOpcode::BiasDropoutAddLayerNorm:
    return emitBiasDropoutAddLayerNorm(s, d);
  case NormsOpcode::LayerNormGrad:
  case NormsOpcode::LayerNormGradFromOutput:
    return emitLayerNormGrad(s, d);
  case NormsOpcode::RmsNorm:
  case NormsOpcode::InvertibleRmsNorm:
  case NormsOpcode::AddRmsNorm:
    return emitRmsNorm(s, d);
  case NormsOpcode::RmsNormGrad:
  case NormsOpcode::RmsNormGradFromOutput:
    return emitRmsNormGrad(s, d);
  }
  s.fail("internal: not a norms opcode");
}

} // namespace dsc::cuda::detail
