//===- RotaryEmit.cpp - CUDA launchers of the rotary family ---------------===//
//
// rotary, repeat_kv and repeat_kv_grad: emitRotary instantiates the
// grid-stride templates of Rotary.cuh; rotary's frequencies are computed
// here (Rotary.h, as the CPU kernel computes them) and written into the
// kernel as exact double literals.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"
#include "Rotary/Rotary.h"

namespace dsc::cuda::detail {

using rt::Opcode;
using rt::asFamily;
using rt::RotaryOpcode;

void emitRotary(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<RotaryOpcode>(s.I.op)) {
  case RotaryOpcode::Rotary: {
    const std::string x = s.in(0, "x"), y = s.out(0, "y");
    std::string table;
    for (double f : rt::rotaryFrequencies(s.I, d.D))
      table += (table.empty() ? "" : ", ") + dbl(f);
    const int64_t rows = d.B * d.H * d.T;
    elementwise(s, rows * (d.D / 2), {x, y},
                "const double freq[] = {" + table + "};\n  " +
                    call("rotary",
                         {s.T(x), s.T(y), n(rows), n(d.T), n(d.D),
                          b(s.I.getInt("inverse") != 0)},
                         {x, y, "freq"}));
    return;
  }
  case RotaryOpcode::RepeatKv:
  case RotaryOpcode::RepeatKvGrad: {
    const bool grad = s.I.op == Opcode::RepeatKvGrad;
    const std::string x = s.in(0, "input"), y = s.out(0, "output");
    const int64_t items = d.B * d.H * d.T * d.D * (grad ? 1 : d.groups);
    elementwise(s, items, {x, y},
                call(grad ? "repeatKvGrad" : "repeatKv",
                     {s.T(x), s.T(y), n(d.B), n(d.H), n(d.groups),
                      n(d.T * d.D)},
                     {x, y}));
    return;
  }
  }
}

} // namespace dsc::cuda::detail
