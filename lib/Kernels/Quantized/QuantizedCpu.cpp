//===- QuantizedCpu.cpp - GEMMs over 4-bit weights, CPU --------------------===//
//
// linear_4bit and linear_4bit_grad_input: the output's columns are cut into
// tiles; each OpenMP thread dequantizes the weight's part for its tile into
// a private f32 scratch (a tile of kTile output columns by the reduction
// width) and runs one single-threaded sgemm on it. The whole weight is never
// widened: the scratch holds kTile columns per thread. Each output element
// is one sgemm dot product over the whole reduction (never split), so the
// result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"
#include "Quantized/FourBit.h"

#include <cblas.h>
#include <omp.h>

namespace dsc::rt::cpu {

namespace {

/// Output columns per tile.
constexpr int64_t kTile = 64;

/// A 4-bit weight of [rows, cols] elements, decoded on demand.
struct FourBitWeight {
  const quant::FourBitLayout &layout;
  int64_t cols;
  const uint8_t *codes;
  std::array<float, 16> code;
  std::vector<float> absmax; ///< per block, f32

  FourBitWeight(const InstrDims &d, const uint8_t *blob)
      : layout(d.fourBit), cols(d.transW ? d.K : d.N),
        codes(blob + d.fourBit.codesAt),
        code(quant::codebook(d.fourBitFormat)),
        absmax(size_t(d.fourBit.blocks)) {
    quant::blockAbsmax(layout, blob, absmax.data());
  }
  /// Element (r, c) in f32: the code's value times its block's absmax.
  float at(int64_t r, int64_t c) const {
    const int64_t i = r * cols + c;
    return quant::dequantizedAt(code, codes, absmax.data(), layout.block, i);
  }
  /// tile[j, i] = W[r0 + j, c0 + i] for j < nr, i < nc (row stride nc).
  void rows(int64_t r0, int64_t nr, int64_t c0, int64_t nc,
            float *tile) const {
    for (int64_t j = 0; j < nr; ++j)
      for (int64_t i = 0; i < nc; ++i)
        tile[j * nc + i] = at(r0 + j, c0 + i);
  }
};

/// Runs `tile(t0, t1, scratch)` for the tiles [t0, t1) of `width` columns
/// over the threads, each with a private scratch of `scratchFloats`.
template <typename Tile>
void overTiles(int64_t width, int64_t scratchFloats, Tile tile) {
  configureBlasThreads();
  const int64_t tiles = ceilDiv(width, kTile);
#pragma omp parallel
  {
    std::vector<float> scratch(static_cast<size_t>(scratchFloats));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles; ++t)
      tile(t * kTile, std::min(width, (t + 1) * kTile), scratch.data());
  }
}

/// y[M, N] = x[M, K] @ W: the tile of columns [n0, n1) of y is x times
/// W's columns n0..n1 (rows n0..n1 of W when transposed, [N, K]).
void linear4bit(const FourBitWeight &w, const float *x, float *y,
                const InstrDims &d) {
  const int64_t M = d.M, K = d.K, N = d.N;
  overTiles(N, K * kTile, [&](int64_t n0, int64_t n1, float *tile) {
    const int64_t nt = n1 - n0;
    if (d.transW) { // tile [nt, K] = W[n0:n1, :]; y = x @ tile^T
      w.rows(n0, nt, 0, K, tile);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(nt),
                  int(K), 1.0f, x, int(K), tile, int(K), 0.0f, y + n0,
                  int(N));
    } else { // tile [K, nt] = W[:, n0:n1]; y = x @ tile
      w.rows(0, K, n0, nt, tile);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(nt),
                  int(K), 1.0f, x, int(K), tile, int(nt), 0.0f, y + n0,
                  int(N));
    }
  });
}

/// dx[M, K] = dy[M, N] @ W^T ([N, K] after the transpose): the tile of
/// columns [k0, k1) of dx is dy times W's rows k0..k1 (its columns k0..k1
/// when transposed), transposed.
void linear4bitGradInput(const FourBitWeight &w, const float *dy, float *dx,
                         const InstrDims &d) {
  const int64_t M = d.M, K = d.K, N = d.N;
  overTiles(K, N * kTile, [&](int64_t k0, int64_t k1, float *tile) {
    const int64_t kt = k1 - k0;
    if (d.transW) { // tile [N, kt] = W[:, k0:k1]; dx = dy @ tile
      w.rows(0, N, k0, kt, tile);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(kt),
                  int(N), 1.0f, dy, int(N), tile, int(kt), 0.0f, dx + k0,
                  int(K));
    } else { // tile [kt, N] = W[k0:k1, :]; dx = dy @ tile^T
      w.rows(k0, kt, 0, N, tile);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(kt),
                  int(N), 1.0f, dy, int(N), tile, int(N), 0.0f, dx + k0,
                  int(K));
    }
  });
}

} // namespace

void runQuantized(Exec &e) {
  const InstrDims &d = e.d;
  switch (asFamily<QuantizedOpcode>(e.I.op)) {
  case QuantizedOpcode::Linear4bit: {
    const FourBitWeight w(d, e.u8in(1, "weight"));
    linear4bit(w, e.fin(0, "x"), e.fout(0, "output"), d);
    return;
  }
  case QuantizedOpcode::Linear4bitGradInput: {
    const FourBitWeight w(d, e.u8in(1, "weight"));
    linear4bitGradInput(w, e.fin(0, "dy"), e.fout(0, "dx"), d);
    return;
  }
  }
  e.fail("internal: not a 4-bit GEMM opcode");
}

} // namespace dsc::rt::cpu
