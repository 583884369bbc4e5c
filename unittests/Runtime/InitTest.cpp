// initializeParameters: the documented Philox/Box-Muller scheme.
#include "TestUtil.h"

#include "dsc/Support/Philox.h"
#include "dsc/Program/TensorSlice.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <omp.h>

using namespace dsc;
using namespace dsc::rt;

namespace {
Buffer param(const std::string &name, std::vector<int64_t> shape, InitKind k,
             double std = 0.0) {
  Buffer b;
  b.name = name;
  b.role = BufferRole::Param;
  b.shape = std::move(shape);
  b.init = k;
  b.initStd = std;
  return b;
}
uint32_t fnv1a(const std::string &s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}
} // namespace

TEST(Init, NormalFollowsDocumentedScheme) {
  Program p;
  p.buffers.push_back(param("wte", {101, 33}, InitKind::Normal, 0.02));
  Storage s(p);
  initializeParameters(p, s, 42);
  const float *x = s.f32(0);
  // Element pair 5 by hand.
  PhiloxBlock b = philox4x32_10({5, fnv1a("wte"), 0x1417, 0}, philoxKey(42));
  double u1 = double((b[0] >> 8) + 1) * 0x1p-24, u2 = double(b[1] >> 8) * 0x1p-24;
  double r = std::sqrt(-2 * std::log(u1));
  EXPECT_FLOAT_EQ(x[10], float(0.02 * r * std::cos(2 * M_PI * u2)));
  EXPECT_FLOAT_EQ(x[11], float(0.02 * r * std::sin(2 * M_PI * u2)));
  // Moments of 3333 draws (odd count: the last pair is half used).
  double m = 0, v = 0;
  const int64_t n = 101 * 33;
  for (int64_t i = 0; i < n; ++i)
    m += x[i];
  m /= n;
  for (int64_t i = 0; i < n; ++i)
    v += (x[i] - m) * (x[i] - m);
  v /= n;
  EXPECT_NEAR(m, 0.0, 0.02 * 4 / std::sqrt(double(n)));
  EXPECT_NEAR(std::sqrt(v), 0.02, 0.02 * 0.06);
}

TEST(Init, UniformFollowsDocumentedScheme) {
  // LoRA's A: U(-bound, bound), one Philox draw per element (counter
  // {element, name hash, 0x1418, element >> 32}).
  Program p;
  p.buffers.push_back(param("q.lora_A.weight", {8, 500}, InitKind::Uniform, 0.25));
  Storage s(p);
  initializeParameters(p, s, 42);
  const float *x = s.f32(0);
  PhiloxBlock b =
      philox4x32_10({7, fnv1a("q.lora_A.weight"), 0x1418, 0}, philoxKey(42));
  EXPECT_FLOAT_EQ(x[7], float(0.25 * (2.0 * double(b[0] >> 8) * 0x1p-24 - 1.0)));
  double m = 0, lo = 1, hi = -1;
  const int64_t n = 8 * 500;
  for (int64_t i = 0; i < n; ++i) {
    m += x[i];
    lo = std::min(lo, double(x[i]));
    hi = std::max(hi, double(x[i]));
  }
  EXPECT_GE(lo, -0.25);
  EXPECT_LT(hi, 0.25);
  EXPECT_LT(lo, -0.24); // the draws fill the interval
  EXPECT_GT(hi, 0.24);
  // Mean of n uniforms: standard error 0.25 / sqrt(3 n).
  EXPECT_NEAR(m / n, 0.0, 4 * 0.25 / std::sqrt(3.0 * n));
}

TEST(Init, IndependentOfThreadsAndOtherBuffers) {
  Program a;
  a.buffers.push_back(param("h.0.w", {1000}, InitKind::Normal, 1.0));
  Program b;
  b.buffers.push_back({"tmp", BufferRole::Temp, DType::F32, {7}});
  b.buffers.push_back(param("other", {10}, InitKind::Normal, 1.0));
  b.buffers.push_back(param("h.0.w", {1000}, InitKind::Normal, 1.0));
  Storage sa(a), sb(b);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  initializeParameters(a, sa, 7);
  omp_set_num_threads(saved);
  initializeParameters(b, sb, 7);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(sa.f32(0)[i], sb.f32(2)[i]);
  // Different parameters and different seeds draw different values.
  EXPECT_NE(sb.f32(1)[0], sb.f32(2)[0]);
  Storage sc(a);
  initializeParameters(a, sc, 8);
  EXPECT_NE(sa.f32(0)[0], sc.f32(0)[0]);
}

TEST(Init, FillsAndZeroesByRole) {
  Program p;
  p.buffers.push_back(param("ln.weight", {4}, InitKind::Ones));
  p.buffers.push_back(param("ln.bias", {4}, InitKind::Zeros));
  p.buffers.push_back({"grad/ln.weight", BufferRole::GradAcc, DType::F32, {4}});
  p.buffers.push_back({"exp_avg/ln.weight", BufferRole::OptState, DType::F32, {4}});
  p.buffers.push_back({"tokens", BufferRole::Input, DType::I32, {4}});
  p.buffers.push_back({"tmp", BufferRole::Temp, DType::F32, {4}});
  Storage s(p);
  for (int b = 0; b < 6; ++b)
    for (int i = 0; i < 4; ++i)
      s.f32(b)[i] = 5.0f;
  initializeParameters(p, s, 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.f32(0)[i], 1.0f);
    EXPECT_EQ(s.f32(1)[i], 0.0f);
    EXPECT_EQ(s.f32(2)[i], 0.0f);
    EXPECT_EQ(s.f32(3)[i], 0.0f);
    EXPECT_EQ(s.f32(4)[i], 5.0f); // Input untouched
    EXPECT_EQ(s.f32(5)[i], 5.0f); // Temp untouched
  }
}

namespace {
/// A program of one parameter on a data x tensor mesh.
Program meshProgram(Buffer b, int64_t data, int64_t tensor) {
  Program p;
  p.buffers.push_back(std::move(b));
  p.meta["world_size"] = data * tensor;
  p.meta["mesh_data"] = data;
  p.meta["mesh_tensor"] = tensor;
  p.meta["mesh_pipeline"] = int64_t(1);
  return p;
}
std::vector<char> bytesOf(Storage &s, const Program &p) {
  const char *x = static_cast<const char *>(s.data(0));
  return std::vector<char>(x, x + p.buffers[0].bytes());
}
} // namespace

// A tensor-parallel slice (GPT-2's fused QKV: 3 sections of dimension 1)
// holds its part of the values the whole tensor gets, alone and sharded by
// ZeRO over the data axis; SliceMap puts the parts back together.
TEST(Init, TensorSliceIsItsPartOfTheWhole) {
  Program whole = meshProgram(param("qkv", {4, 12}, InitKind::Normal, 0.5),
                              1, 1);
  Storage ws(whole);
  initializeParameters(whole, ws, 7);
  const std::vector<char> wholeBytes = bytesOf(ws, whole);

  Buffer sliced = param("qkv", {4, 6}, InitKind::Normal, 0.5);
  sliced.sliceDim = 1;
  sliced.sliceGroups = 3;
  sliced.sliceSize = 12;
  Program tp = meshProgram(sliced, 1, 2);
  std::vector<char> parts;
  for (int rank = 0; rank < 2; ++rank) {
    Storage s(tp);
    initializeParameters(tp, s, 7, rank);
    std::vector<char> mine = bytesOf(s, tp);
    const SliceMap map = SliceMap::of(tp.buffers[0], {4, 6}, 2);
    EXPECT_EQ(map.wholeShape(), (std::vector<int64_t>{4, 12}));
    EXPECT_EQ(mine, map.extract(wholeBytes, rank, sizeof(float)));
    parts.insert(parts.end(), mine.begin(), mine.end());
  }
  // Part 1, row 1, column 2: section 1 (columns 4..7 of the whole), the
  // second half of it.
  Storage s1(tp);
  initializeParameters(tp, s1, 7, 1);
  EXPECT_EQ(s1.f32(0)[1 * 6 + 2], ws.f32(0)[1 * 12 + 6]);
  EXPECT_EQ(SliceMap::of(tp.buffers[0], {4, 6}, 2).assemble(parts,
                                                            sizeof(float)),
            wholeBytes);

  // ZeRO over 2 data ranks of each slice: rank 3 is data 1, tensor 1 (the
  // tensor coordinate varies fastest), so it holds the second half of
  // part 1's elements.
  Buffer shard = param("qkv", {12}, InitKind::Normal, 0.5);
  shard.wholeShape = {4, 6};
  shard.sliceDim = 1;
  shard.sliceGroups = 3;
  shard.sliceSize = 12;
  Program both = meshProgram(shard, 2, 2);
  Storage s3(both);
  initializeParameters(both, s3, 7, 3);
  std::vector<char> part1 = SliceMap::of(tp.buffers[0], {4, 6}, 2)
                                .extract(wholeBytes, 1, sizeof(float));
  EXPECT_EQ(0, std::memcmp(s3.data(0), part1.data() + 12 * sizeof(float),
                           12 * sizeof(float)));
}

// A vocabulary-parallel table of 5 rows over 2 ranks: 3 rows each, the
// last row of part 1 padding (zero, absent from the whole tensor).
TEST(Init, PaddedVocabularySlice) {
  Program whole = meshProgram(param("wte", {5, 2}, InitKind::Normal, 1.0),
                              1, 1);
  Storage ws(whole);
  initializeParameters(whole, ws, 3);
  Buffer rows = param("wte", {3, 2}, InitKind::Normal, 1.0);
  rows.sliceDim = 0;
  rows.sliceSize = 5;
  Program tp = meshProgram(rows, 1, 2);
  std::vector<char> parts;
  for (int rank = 0; rank < 2; ++rank) {
    Storage s(tp);
    initializeParameters(tp, s, 3, rank);
    for (int64_t i = 0; i < 6; ++i) {
      const int64_t w = rank * 6 + i; // element of the whole tensor
      EXPECT_EQ(s.f32(0)[i], w < 10 ? ws.f32(0)[w] : 0.0f) << rank << " " << i;
    }
    std::vector<char> mine = bytesOf(s, tp);
    parts.insert(parts.end(), mine.begin(), mine.end());
  }
  const SliceMap map = SliceMap::of(tp.buffers[0], {3, 2}, 2);
  EXPECT_EQ(map.wholeShape(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(map.assemble(parts, sizeof(float)), bytesOf(ws, whole));
  std::vector<char> last = map.extract(bytesOf(ws, whole), 1, sizeof(float));
  EXPECT_EQ(0, std::memcmp(last.data(), ws.f32(0) + 6, 4 * sizeof(float)));
  EXPECT_EQ(0.0f, reinterpret_cast<const float *>(last.data())[4]);
  // 3 rows per part cannot hold 7 rows, nor does part 1 hold only padding
  // when the whole has 3.
  EXPECT_THROW(SliceMap({3, 2}, 0, 1, 2, 7), Error);
  EXPECT_THROW(SliceMap({3, 2}, 0, 1, 2, 3), Error);
}
