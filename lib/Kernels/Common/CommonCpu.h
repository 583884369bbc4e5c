//===- CommonCpu.h - What the CPU kernel families share ---------*- C++ -*-===//
//
// Internal to the CPU backend (lib/Runtime/CpuBackend.cpp) and the
// <Family>Cpu.cpp files of lib/Kernels: the helpers more than one family
// uses, then Exec, the typed operands of one instruction, and run<Family>,
// which executes an instruction of its family (the backend's switch over
// Opcode picks the family, the family's own switch the kernel). Every
// kernel is deterministic: each reduction has a fixed order, so no result
// depends on the number of OpenMP threads.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_COMMON_COMMONCPU_H
#define DSC_LIB_KERNELS_COMMON_COMMONCPU_H

#include "dsc/Program/Half.h"
#include "dsc/Program/InstrCheck.h"
#include "dsc/Program/KernelOpcodes.h"
#include "dsc/Runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace dsc::rt::cpu {

//===----------------------------------------------------------------------===//
// Helpers (the out-of-line ones in CommonCpu.cpp)
//===----------------------------------------------------------------------===//

/// Makes OpenBLAS single-threaded: GEMMs are partitioned over OpenMP threads
/// by their callers (GemmCpu.cpp, AttentionCpu.cpp), so the process has one
/// thread pool, not two fighting over the cores. Idempotent.
void configureBlasThreads();

/// out[0, n) = v.
void fillF32(float *out, int64_t n, float v);
/// The sum of squares of x[0, n), accumulated in double over fixed chunks
/// summed in order (the same on any thread count).
double sumSquares(const float *x, int64_t n);
/// memmove in 1 MiB chunks over the threads; nothing when out == in.
void copyBytes(void *out, const void *in, size_t bytes);

/// The Philox bits of blocks [firstBlock, firstBlock + count) of `stream`
/// (counter {block, stream, offset}, the dropout convention of Philox.h),
/// 4 per block in element order; eight blocks at a time with AVX2.
void philoxBlocks(uint32_t firstBlock, int64_t count, uint32_t stream,
                  uint64_t seed, uint64_t offset, uint32_t *out);

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

//===----------------------------------------------------------------------===//
// Vectorisable math. Written branch-free so `#pragma omp simd` loops compile
// to AVX2 code (the libm calls would not vectorise).
//===----------------------------------------------------------------------===//

/// exp(x), Cephes polynomial on [-ln2/2, ln2/2], ~2 ulp for x in
/// [-87.3, 88.3]; inputs are clamped to that range (exp(-87.3) ~ 1e-38).
inline float expApprox(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // Round x*log2(e) to the nearest integer n with the 1.5*2^23 trick: the
  // integer lands in the low mantissa bits of k (no roundps/cvt needed).
  const float k = x * 1.44269504088896341f + 12582912.0f;
  int32_t ki;
  std::memcpy(&ki, &k, 4);
  const float n = k - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * fromBits(uint32_t((ki - 0x4B400000 + 127) << 23));
}

//===----------------------------------------------------------------------===//
// Dropout masks and blocked column sums
//===----------------------------------------------------------------------===//

/// Calls `f(i, keep)` for i in [i0, i1) with the Philox dropout decision of
/// element i (keep is always true for rate 0): the mask of dsc.dropout.
/// The bits come from philoxBlocks in chunks, so the Philox rounds run eight
/// blocks at a time, and the decision is an integer compare so the loop over
/// a chunk vectorises: philoxUniform(x) = (x >> 8) * 2^-24 >= rate exactly
/// when the integer x >> 8 >= ceil(rate * 2^24) (rate as a float, scaled by
/// a power of two: exact).
template <typename F>
inline void forDropoutMask(int64_t i0, int64_t i1, double rate,
                           uint32_t stream, uint64_t seed, uint64_t offset,
                           F f) {
  if (rate <= 0.0) {
    for (int64_t i = i0; i < i1; ++i)
      f(i, true);
    return;
  }
  const uint32_t threshold =
      uint32_t(std::ceil(double(float(rate)) * 16777216.0));
  constexpr int64_t kChunkBlocks = 64;
  uint32_t bits[4 * kChunkBlocks];
  for (int64_t q0 = i0 / 4; q0 * 4 < i1; q0 += kChunkBlocks) {
    const int64_t blocks = std::min<int64_t>(kChunkBlocks, ceilDiv(i1, 4) - q0);
    philoxBlocks(uint32_t(q0), blocks, stream, seed, offset, bits);
    const int64_t lo = std::max(i0, q0 * 4),
                  hi = std::min(i1, (q0 + blocks) * 4), first = q0 * 4;
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i)
      f(i, (bits[i - first] >> 8) >= threshold);
  }
}

/// Rows of [rows, N] in blocks of 32 (in parallel); `row(r, acc)` handles
/// row r and adds its column-sum contribution (a bias or norm-weight
/// gradient) into `acc` ([N]); the block sums are merged into `db` in block
/// order, so the result does not depend on the thread count.
template <typename RowFn>
void rowsWithColumnSum(int64_t rows, int64_t N, float *db, RowFn row) {
  const int64_t RB = 32, blocks = std::max<int64_t>(1, ceilDiv(rows, RB));
  std::vector<float> part(size_t(blocks * N), 0.0f);
#pragma omp parallel for schedule(static) if (rows * N > (1 << 15))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float *acc = part.data() + blk * N;
    for (int64_t r = blk * RB, r1 = std::min(rows, r + RB); r < r1; ++r)
      row(r, acc);
  }
  fillF32(db, N, 0.0f);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float *acc = part.data() + blk * N;
#pragma omp simd
    for (int64_t c = 0; c < N; ++c)
      db[c] += acc[c];
  }
}

/// Row r of dsc.bias_dropout_add: y = res + dropout(x + b); also the first
/// half of a row of dsc.bias_dropout_add_layer_norm (NormsCpu.cpp).
inline void biasDropoutAddRow(const float *x, const float *b, const float *res,
                              float *y, int64_t r, int64_t N, double rate,
                              uint32_t stream, uint64_t seed,
                              uint64_t offset) {
  const float scale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  forDropoutMask(r * N, (r + 1) * N, rate, stream, seed, offset,
                 [&, row = r * N](int64_t i, bool keep) {
                   float v = x[i] + b[i - row];
                   y[i] = res[i] + (keep ? (rate > 0.0 ? v * scale : v)
                                         : 0.0f);
                 });
}

//===----------------------------------------------------------------------===//
// Executing one instruction
//===----------------------------------------------------------------------===//

/// Typed access to the operands of one instruction that checkInstr passed,
/// with its sizes (checkInstr's) and the step's Philox context.
class Exec {
public:
  Exec(const Program &prog, Storage &st, const Instr &instr,
       const InstrDims &dims, const RngContext &rngContext)
      : P(prog), S(st), I(instr), d(dims), rng(rngContext),
        op(opcodeName(instr.op)) {}

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

  /// A float operand as f32 values: an f32 buffer itself; an f16 or bf16
  /// buffer through an f32 copy, widened when first touched (an output
  /// only when it is also an input: in place), narrowed back into the
  /// buffer by commit(). Kernels compute in f32 either way.
  const float *fin(size_t k, const char *role) {
    return floats(inId(k), role, true);
  }
  float *fout(size_t k, const char *role) {
    const int id = outId(k);
    return floats(id, role,
                  std::find(I.inputs.begin(), I.inputs.end(), id) !=
                      I.inputs.end());
  }
  /// Stores the f32 copies of 16-bit outputs into their buffers (rounding
  /// to nearest, ties to even); the backend calls it after the kernel.
  void commit();
  const int32_t *iin(size_t k, const char *role) {
    dtype(in(k), DType::I32, role);
    return S.i32(inId(k));
  }
  int32_t *iout(size_t k, const char *role) {
    dtype(out(k), DType::I32, role);
    return S.i32(outId(k));
  }
  const uint8_t *u8in(size_t k, const char *role) {
    dtype(in(k), DType::U8, role);
    return S.u8(inId(k));
  }
  uint8_t *u8out(size_t k, const char *role) {
    dtype(out(k), DType::U8, role);
    return S.u8(outId(k));
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
      copyBytes(dst, src, size_t(in(k).numElements()) * 4);
    return dst;
  }

  const Program &P;
  Storage &S;
  const Instr &I;
  const InstrDims &d;
  const RngContext &rng;
  const char *op;

private:
  float *floats(int id, const char *role, bool load);
  /// The f32 copies of this instruction's 16-bit operands, by buffer id.
  std::map<int, std::vector<float>> widened;
};

/// Executes `e.I`, an instruction of the family
/// (<Family>/<Family>Cpu.cpp).
void runElementwise(Exec &e);
void runNorms(Exec &e);
void runAttention(Exec &e);
void runEmbeddingLoss(Exec &e);
/// The vocabulary-parallel embedding and loss over `group` (the ranks of
/// the instruction's axis; this rank holds slice group.rank()).
void runVocabParallel(Exec &e, Communicator &group);
void runOptimizers(Exec &e);
void runCompression(Exec &e);
void runGated(Exec &e);
void runRotary(Exec &e);
void runMoe(Exec &e);
/// Expert parallelism's exchanges (MoeExchangeCounts, MoeExchange) over
/// `group`, the ranks of the instruction's axis. Returns the bytes of this
/// rank's part of the all-to-all (its counts, or the rows it holds for the
/// exchange, its own among them): comms_logger's message size.
int64_t runExpertExchange(Exec &e, Communicator &group);
void runGemm(Exec &e);
void runQuantized(Exec &e);
/// Executes `e.I` with its family's kernels (not a collective's:
/// CpuBackend runs those over its groups). In lib/Runtime/CpuBackend.cpp.
void runKernels(Exec &e);

} // namespace dsc::rt::cpu

#endif // DSC_LIB_KERNELS_COMMON_COMMONCPU_H
