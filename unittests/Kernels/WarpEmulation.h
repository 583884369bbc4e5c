//===- WarpEmulation.h - Run a block of CUDA device code on host threads --===//
//
// Test-only: enough of the CUDA execution model to run the device
// library's register-resident attention kernels on a machine without a GPU.
// A block is 128 host threads (one per CUDA thread) that run one after the
// other block by block; __syncthreads is a barrier of the 128, a warp's
// shuffles and mma.sync exchange through a per-warp buffer between two
// barriers of its 32, and __shared__ arrays are function statics (one block
// at a time). mma.sync.m16n8k16 is computed from the operand fragments
// exactly as the PTX ISA lays them out ("Matrix Fragments for
// mma.m16n8k16"), written from the manual, independently of the kernels
// that use it: a kernel that puts an element in the wrong register gets a
// wrong product here as on the GPU.
//
// Include before the device library (Common.cuh, then a family's .cuh),
// with the CUDA toolkit's headers on the include path.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_UNITTESTS_WARPEMULATION_H
#define DSC_UNITTESTS_WARPEMULATION_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

// The toolkit's headers mark these for nvcc; on the host a __shared__ array
// is one per block because blocks run one at a time.
#undef __shared__
#define __shared__ static
#define DSC_WARP_EMULATION 1

namespace dsc_emu {

/// A reusable barrier of `count` threads.
class Barrier {
public:
  explicit Barrier(int count) : count(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    const unsigned long long phase = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generation != phase; });
  }

private:
  std::mutex mutex;
  std::condition_variable changed;
  int count, arrived = 0;
  unsigned long long generation = 0;
};

constexpr int kThreads = 128, kWarps = kThreads / 32;

struct Warp {
  Barrier barrier{32};
  uint32_t word[32];
  uint32_t a[32][4], b[32][2];
};

struct Block {
  Barrier barrier{kThreads};
  Warp warps[kWarps];
};

inline Block &block() {
  static Block b;
  return b;
}

} // namespace dsc_emu

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 blockDim(dsc_emu::kThreads), gridDim(1);

inline void __syncthreads() { dsc_emu::block().barrier.wait(); }
[[noreturn]] inline void __trap() { std::abort(); }

inline unsigned atomicCAS(unsigned *p, unsigned compare, unsigned value) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  const unsigned old = *p;
  if (old == compare)
    *p = value;
  return old;
}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return unsigned((unsigned long long)a * b >> 32);
}
inline float __uint2float_rn(unsigned x) { return float(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }

/// Bit `lane` set where that lane's `predicate` is true (the full-warp mask
/// only).
inline unsigned __ballot_sync(unsigned, bool predicate) {
  dsc_emu::Warp &w = dsc_emu::block().warps[threadIdx.x / 32];
  const int lane = int(threadIdx.x % 32);
  w.word[lane] = predicate ? 1u : 0u;
  w.barrier.wait();
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    bits |= w.word[l] << l;
  w.barrier.wait();
  return bits;
}

template <typename V> V __shfl_xor_sync(unsigned, V v, int laneMask) {
  static_assert(sizeof(V) == 4, "32-bit shuffles only");
  dsc_emu::Warp &w = dsc_emu::block().warps[threadIdx.x / 32];
  const int lane = int(threadIdx.x % 32);
  std::memcpy(&w.word[lane], &v, 4);
  w.barrier.wait();
  V r;
  std::memcpy(&r, &w.word[lane ^ laneMask], 4);
  w.barrier.wait();
  return r;
}

namespace dsc_emu {

template <typename TC> float widen(uint32_t reg, int half) {
  const uint16_t bits = uint16_t(half ? reg >> 16 : reg & 0xffffu);
  if constexpr (std::is_same<TC, __half>::value) {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  } else {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
}

/// c[16 x 8] += A[16 x 16] B[16 x 8] for the calling lane's C fragment,
/// from every lane's A and B fragments.
template <typename TC>
void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  Warp &w = block().warps[threadIdx.x / 32];
  const int lane = int(threadIdx.x % 32);
  std::memcpy(w.a[lane], a, sizeof a);
  w.b[lane][0] = b0;
  w.b[lane][1] = b1;
  w.barrier.wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 2; ++i) {
      // A: a0,a1 (g, 2t+i); a2,a3 (g+8, 2t+i); a4,a5 (g, 2t+8+i);
      // a6,a7 (g+8, 2t+8+i). B: b0,b1 (k 2t+i, n g); b2,b3 (k 2t+8+i, n g).
      A[g][2 * t + i] = widen<TC>(w.a[l][0], i);
      A[g + 8][2 * t + i] = widen<TC>(w.a[l][1], i);
      A[g][2 * t + 8 + i] = widen<TC>(w.a[l][2], i);
      A[g + 8][2 * t + 8 + i] = widen<TC>(w.a[l][3], i);
      B[2 * t + i][g] = widen<TC>(w.b[l][0], i);
      B[2 * t + 8 + i][g] = widen<TC>(w.b[l][1], i);
    }
  }
  // C: c0,c1 (g, 2t+i); c2,c3 (g+8, 2t+i).
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k)
      sum += A[row][k] * B[k][col];
    c[i] += sum;
  }
  w.barrier.wait();
}

/// Runs `body` as `grid` blocks of kThreads threads, one block at a time.
template <typename Body> void launch(int64_t grid, Body body) {
  for (int64_t b = 0; b < grid; ++b) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        threadIdx = make_uint3(unsigned(t), 0, 0);
        blockIdx = make_uint3(unsigned(b), 0, 0);
        body();
      });
    for (std::thread &t : threads)
      t.join();
  }
}

} // namespace dsc_emu

// What the device library's WMMA path names (never instantiated here).
namespace nvcuda::wmma {
struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
enum layout_t { mem_row_major };
template <typename Use, int M, int N, int K, typename T, typename L = void>
struct fragment;
template <typename... A> void load_matrix_sync(A &&...);
template <typename... A> void store_matrix_sync(A &&...);
template <typename... A> void fill_fragment(A &&...);
template <typename... A> void mma_sync(A &&...);
} // namespace nvcuda::wmma

#endif // DSC_UNITTESTS_WARPEMULATION_H
