//===- QuantizedEmit.cpp - CUDA launchers of the 4-bit GEMMs --------------===//
//
// linear_4bit and linear_4bit_grad_input: emitQuantized instantiates
// Quantized.cuh's tiled GEMM with the weight's strides, its blob layout and
// its code book (FourBit.h, the CPU's table) written in as exact literals.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"
#include "Quantized/FourBit.h"

namespace dsc::cuda::detail {

using rt::Opcode;

void emitQuantized(KernelSpec &s, const rt::InstrDims &d) {
  const bool fwd = s.I.op == Opcode::Linear4bit;
  if (!fwd && s.I.op != Opcode::Linear4bitGradInput)
    s.fail("internal: not a 4-bit GEMM opcode");
  const std::string a = s.in(0, fwd ? "x" : "dy"), w = s.in(1, "weight"),
                    y = s.out(0, fwd ? "y" : "dx");
  // y[M, P] = a[M, Q] @ B, B(q, p) = weight element q * sq + p * sp. The
  // weight is [K, N], or [N, K] when transposed; the gradient multiplies
  // by its transpose.
  const int64_t M = d.M, P = fwd ? d.N : d.K, Q = fwd ? d.K : d.N;
  const int64_t rowStride = d.transW ? d.K : d.N; // elements per stored row
  const bool qIsRow = fwd ? !d.transW : d.transW;
  const int64_t sq = qIsRow ? rowStride : 1, sp = qIsRow ? 1 : rowStride;
  std::string table;
  for (float v : quant::codebook(d.fourBitFormat))
    table += (table.empty() ? "" : ", ") + flt(v);
  const quant::FourBitLayout &l = d.fourBit;
  const std::string blob = "dsc::FourBitBlob{" + n(l.block) + ", " +
                           b(l.doubleQuant) + ", " + n(l.absmaxAt) + ", " +
                           n(l.codesAt) + "}";
  s.kernel(ceilDiv(M, 16) * ceilDiv(P, 16), 256, {a, w, y},
           "const float code[16] = {" + table + "};\n  " +
               call("fourBitGemm", {s.T(a), s.T(y)},
                    {a, w, y, n(M), n(P), n(Q), n(sq), n(sp), blob, "code"}));
}

} // namespace dsc::cuda::detail
