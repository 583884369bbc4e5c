//===- CommonCpu.cpp - CPU helpers of every kernel family -----------------===//
//
// OpenBLAS threading, fill and copy, the Philox bits in batches behind
// every dropout mask, and the f32 copies of 16-bit operands (Exec). Threading: OpenBLAS is made single-threaded and every
// GEMM is tiled over OpenMP threads (GemmCpu.cpp, AttentionCpu.cpp), so the
// process runs one thread pool instead of an OpenMP pool and an OpenBLAS
// pthread pool spinning against each other.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include "dsc/Program/Half.h"
#include "dsc/Support/Philox.h"

#include <cblas.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <mutex>

namespace dsc::rt::cpu {

namespace {
std::once_flag blasOnce;
} // namespace

void configureBlasThreads() {
  std::call_once(blasOnce, [] { openblas_set_num_threads(1); });
}

void fillF32(float *out, int64_t n, float v) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] = v;
}

double sumSquares(const float *x, int64_t n) {
  // Fixed-size chunks summed in order: independent of the thread count.
  const int64_t cb = 1 << 14, chunks = ceilDiv(n, cb);
  std::vector<double> part(size_t(std::max<int64_t>(chunks, 1)), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * cb, i1 = std::min(n, i0 + cb);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; ++i)
      s += double(x[i]) * double(x[i]);
    part[size_t(c)] = s;
  }
  double total = 0.0;
  for (double s : part)
    total += s;
  return total;
}

void copyBytes(void *out, const void *in, size_t bytes) {
  if (out == in || bytes == 0)
    return;
  const size_t chunk = 1 << 20;
  const int64_t chunks = int64_t((bytes + chunk - 1) / chunk);
  char *o = static_cast<char *>(out);
  const char *s = static_cast<const char *>(in);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t b = size_t(c) * chunk;
    std::memmove(o + b, s + b, std::min(chunk, bytes - b));
  }
}

//===----------------------------------------------------------------------===//
// Philox in batches
//===----------------------------------------------------------------------===//

#ifdef __AVX2__
namespace {

/// (hi, lo) 32-bit halves of the 64-bit products m * x for 8 lanes.
inline void mulHiLo(__m256i x, __m256i m, __m256i &hi, __m256i &lo) {
  __m256i even = _mm256_mul_epu32(x, m);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/// Philox4x32-10 of the 8 counters {c0 + l, c1, c2, c3}, l = 0..7; the same
/// rounds as philox4x32_10, eight blocks per instruction.
void philox8(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
             std::array<uint32_t, 2> key, uint32_t *out) {
  const __m256i m0 = _mm256_set1_epi32(int(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  __m256i x0 = _mm256_add_epi32(_mm256_set1_epi32(int(c0)),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i x1 = _mm256_set1_epi32(int(c1)), x2 = _mm256_set1_epi32(int(c2)),
          x3 = _mm256_set1_epi32(int(c3));
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulHiLo(x0, m0, hi0, lo0);
    mulHiLo(x2, m1, hi1, lo1);
    __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1),
                                  _mm256_set1_epi32(int(k0)));
    __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3),
                                  _mm256_set1_epi32(int(k1)));
    x0 = n0;
    x1 = lo1;
    x2 = n2;
    x3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  alignas(32) uint32_t lanes[4][8];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[0]), x0);
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[1]), x1);
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[2]), x2);
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[3]), x3);
  for (int l = 0; l < 8; ++l)
    for (int k = 0; k < 4; ++k)
      out[4 * l + k] = lanes[k][l];
}

} // namespace
#endif

void philoxBlocks(uint32_t firstBlock, int64_t count, uint32_t stream,
                  uint64_t seed, uint64_t offset, uint32_t *out) {
  const auto key = philoxKey(seed);
  const uint32_t lo = uint32_t(offset), hi = uint32_t(offset >> 32);
  int64_t b = 0;
#ifdef __AVX2__
  for (; b + 8 <= count; b += 8)
    philox8(firstBlock + uint32_t(b), stream, lo, hi, key, out + 4 * b);
#endif
  for (; b < count; ++b) {
    PhiloxBlock bits =
        philox4x32_10({firstBlock + uint32_t(b), stream, lo, hi}, key);
    std::copy(bits.begin(), bits.end(), out + 4 * b);
  }
}

//===----------------------------------------------------------------------===//
// 16-bit operands
//===----------------------------------------------------------------------===//

float *Exec::floats(int id, const char *role, bool load) {
  const Buffer &b = P.buffers[size_t(id)];
  if (b.dtype == DType::F32)
    return S.f32(id);
  if (b.dtype != DType::F16 && b.dtype != DType::BF16)
    fail(std::string(role) + " '" + b.name + "' must be f32, f16 or bf16, got " +
         dtypeName(b.dtype));
  auto [it, fresh] = widened.try_emplace(id);
  std::vector<float> &f32 = it->second;
  if (!fresh)
    return f32.data();
  const int64_t n = b.numElements();
  f32.resize(size_t(n));
  if (load) {
    const uint16_t *h = static_cast<const uint16_t *>(S.data(id));
    float *x = f32.data();
    const bool bf16 = b.dtype == DType::BF16;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      x[i] = bf16 ? floatFromBF16(h[i]) : floatFromF16(h[i]);
  }
  return f32.data();
}

void Exec::commit() {
  for (int id : I.outputs) {
    auto it = widened.find(id);
    if (it == widened.end())
      continue;
    const Buffer &b = P.buffers[size_t(id)];
    const float *x = it->second.data();
    uint16_t *h = static_cast<uint16_t *>(S.data(id));
    const int64_t n = b.numElements();
    const bool bf16 = b.dtype == DType::BF16;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      h[i] = bf16 ? bf16FromFloat(x[i]) : f16FromFloat(x[i]);
  }
}

} // namespace dsc::rt::cpu
