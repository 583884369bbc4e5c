//===- GatedEmit.cpp - CUDA launchers of the gated family -----------------===//
//
// silu, mul, swiglu, scale, softcap, the sigmoid row gate and their
// gradients: emitGated instantiates the grid-stride templates of Gated.cuh.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

namespace dsc::cuda::detail {

using rt::Opcode;
using rt::asFamily;
using rt::GatedOpcode;

void emitGated(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.n;
  const int vec = vecFor(N);
  const std::string V = std::to_string(vec);
  switch (asFamily<GatedOpcode>(s.I.op)) {
  case GatedOpcode::Silu:
  case GatedOpcode::Mul:
  case GatedOpcode::Swiglu:
  case GatedOpcode::Scale: {
    const int op = s.I.op == Opcode::Silu    ? 0
                   : s.I.op == Opcode::Mul   ? 1
                   : s.I.op == Opcode::Swiglu ? 2
                                              : 3;
    const bool binary = op == 1 || op == 2;
    const std::string a = s.in(0, "a"), y = s.out(0, "y");
    const std::string bArg = binary ? s.in(1, "b") : "(const float *)nullptr";
    const std::string bT = binary ? s.T(bArg) : "float";
    std::vector<std::string> args = {a, y};
    if (binary)
      args.push_back(bArg);
    const double factor = op == 3 ? s.I.getFloat("factor") : 1.0;
    elementwise(s, N / vec, args,
                call("gatedForward",
                     {std::to_string(op), s.T(a), bT, s.T(y), n(N), V},
                     {a, bArg, y, flt(factor)}));
    return;
  }
  case GatedOpcode::SiluGrad: {
    const std::string dy = s.in(0, "dy"), x = s.in(1, "x"),
                      dx = s.out(0, "dx");
    elementwise(s, N / vec, {dy, x, dx},
                call("siluGrad", {s.T(dy), s.T(x), s.T(dx), n(N), V},
                     {dy, x, dx}));
    return;
  }
  case GatedOpcode::Softcap: {
    const std::string x = s.in(0, "x"), y = s.out(0, "y");
    elementwise(s, N / vec, {x, y},
                call("softcap", {s.T(x), s.T(y), n(N), V},
                     {x, y, flt(s.I.getFloat("cap"))}));
    return;
  }
  case GatedOpcode::SoftcapGrad: {
    const std::string dy = s.in(0, "dy"), y = s.in(1, "y"),
                      dx = s.out(0, "dx");
    elementwise(s, N / vec, {dy, y, dx},
                call("softcapGrad", {s.T(dy), s.T(y), s.T(dx), n(N), V},
                     {dy, y, dx, flt(s.I.getFloat("cap"))}));
    return;
  }
  case GatedOpcode::SwigluGrad: {
    const std::string dy = s.in(0, "dy"), gate = s.in(1, "gate"),
                      up = s.in(2, "up"), dg = s.out(0, "dgate"),
                      du = s.out(1, "dup");
    if (s.outType(0) != s.outType(1))
      s.fail("dgate and dup must have one storage type");
    elementwise(s, N / vec, {dy, gate, up, dg, du},
                call("swigluGrad",
                     {s.T(dy), s.T(gate), s.T(up), s.T(dg), n(N), V},
                     {dy, gate, up, dg, du}));
    return;
  }
  case GatedOpcode::SigmoidGate: {
    const std::string gate = s.in(0, "gate"), x = s.in(1, "x"),
                      y = s.out(0, "y");
    elementwise(s, d.n, {gate, x, y},
                call("sigmoidGate",
                     {s.T(gate), s.T(x), s.T(y), n(d.rows), n(d.cols)},
                     {gate, x, y}));
    return;
  }
  case GatedOpcode::SigmoidGateGrad: {
    const std::string dy = s.in(0, "dy"), gate = s.in(1, "gate"),
                      x = s.in(2, "x"), dg = s.out(0, "dgate"),
                      dx = s.out(1, "dx");
    elementwise(s, d.rows, {dy, gate, x, dg, dx},
                call("sigmoidGateGrad",
                     {s.T(dy), s.T(gate), s.T(x), s.T(dg), s.T(dx), n(d.rows),
                      n(d.cols)},
                     {dy, gate, x, dg, dx}));
    return;
  }
  }
}

} // namespace dsc::cuda::detail
