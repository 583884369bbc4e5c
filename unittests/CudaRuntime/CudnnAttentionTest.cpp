//===- CudnnAttentionTest.cpp - cuDNN fused attention ---------------------===//
//
// What of cuDNN attention runs without a GPU: libcudnn 9 loads at run time
// (and a missing or wrong library is named in one line), and the frontend
// validates the forward and backward SDPA graphs of GPT-2 124M (the fused
// QKV projection read in place) and of grouped-query attention for a Hopper
// GPU, refusing what cuDNN cannot run. With a GPU, the built graphs run and
// are compared with a float64 attention, directly and replayed from a
// captured CUDA graph.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

constexpr const char *kToolkitCudnn = "/usr/local/cuda/lib64/libcudnn.so.9";

bool fileExists(const char *path) {
  FILE *f = std::fopen(path, "rb");
  if (f)
    std::fclose(f);
  return f != nullptr;
}

/// Loads libcudnn or skips the test: the library is a run-time dependency,
/// so a machine may build this test without having it.
#define REQUIRE_CUDNN()                                                        \
  do {                                                                         \
    try {                                                                      \
      loadCudnn();                                                             \
    } catch (const Error &e) {                                                 \
      if (fileExists(kToolkitCudnn))                                           \
        FAIL() << e.what();                                                    \
      GTEST_SKIP() << e.what();                                                \
    }                                                                          \
  } while (0)

/// Runs loadCudnn in a fresh process (a death test re-executing the binary:
/// the library, once loaded, stays loaded) with DSC_CUDNN_LIBRARY=`library`
/// and prints its one-line error; exits 0 only if it threw one.
void loadExpectingError(const char *library) {
  setenv("DSC_CUDNN_LIBRARY", library, 1);
  try {
    loadCudnn();
  } catch (const Error &e) {
    const std::string message = e.what();
    std::fprintf(stderr, "%s\n", message.c_str());
    std::exit(message.find('\n') == std::string::npos ? 0 : 2);
  }
  std::exit(1);
}

} // namespace

TEST(CudnnLoaderDeathTest, NamesAMissingOverride) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(loadExpectingError("/nonexistent"), testing::ExitedWithCode(0),
              "cuDNN attention: DSC_CUDNN_LIBRARY=/nonexistent cannot be "
              "used \\(/nonexistent: cannot open shared object file");
}

TEST(CudnnLoaderDeathTest, RefusesALibraryThatIsNotCudnn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(loadExpectingError("libm.so.6"), testing::ExitedWithCode(0),
              "DSC_CUDNN_LIBRARY=libm.so.6 cannot be used \\(.*libm.so.6 has "
              "no cudnnGetVersion: not cuDNN\\)");
}

TEST(CudnnLoader, LoadsCudnn9) {
  REQUIRE_CUDNN();
  const CudnnLibraryInfo &info = loadCudnn();
  EXPECT_GE(info.version, 90000u);
  EXPECT_LT(info.version, 100000u);
  EXPECT_EQ(cudnnGetVersion(), info.version) << "through the entry points";
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_SUCCESS),
               "CUDNN_STATUS_SUCCESS");
  EXPECT_EQ(&loadCudnn(), &info) << "loaded once";
  std::printf("loaded %s: cuDNN %zu\n", info.path.c_str(), info.version);
}

TEST(CudnnLoaderDeathTest, LoadsTheToolkitsLibraryByPath) {
  if (!fileExists(kToolkitCudnn))
    GTEST_SKIP() << kToolkitCudnn << " is absent";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("DSC_CUDNN_LIBRARY", kToolkitCudnn, 1);
        const CudnnLibraryInfo &info = loadCudnn();
        std::fprintf(stderr, "%s %zu\n", info.path.c_str(), info.version);
        std::exit(info.version >= 90000 ? 0 : 1);
      },
      testing::ExitedWithCode(0), "libcudnn.so.9 9[0-9]{4}");
}

namespace {

/// GPT-2 124M's attention: B 8, H 12, T 1024, D 64, bf16, causal, dropout
/// 0.1, Q/K/V read in place from the [B, T, 3, H, D] QKV projection.
SdpaProblem gpt2() {
  SdpaProblem p = SdpaProblem::fusedQkv(8, 12, 1024, 64);
  p.causal = true;
  p.dropout = 0.1f;
  return p;
}

/// Grouped-query attention: 32 query heads over 8 key/value heads, D 64,
/// T 2048, [B, H, T, D] tensors.
SdpaProblem gqa() {
  SdpaProblem p;
  p.batch = 2;
  p.qHeads = 32;
  p.kvHeads = 8;
  p.qLen = p.kvLen = 2048;
  p.headDim = 64;
  p.q = p.o = p.dq = p.dO = SdpaStrides::bhsd(32, 2048, 64);
  p.k = p.v = p.dk = p.dv = SdpaStrides::bhsd(8, 2048, 64);
  p.causal = true;
  p.scale = 0.125f;
  return p;
}

constexpr int kHopper = 90;

/// The message of the CudnnUnsupported that constructing `p` throws.
std::string unsupportedMessage(const SdpaProblem &p, int sm = kHopper) {
  try {
    CudnnSdpa sdpa(p, sm);
  } catch (const CudnnUnsupported &e) {
    return e.what();
  }
  ADD_FAILURE() << p.describe() << " was accepted";
  return "";
}

} // namespace

TEST(CudnnSdpa, FusedQkvStrides) {
  const SdpaProblem p = SdpaProblem::fusedQkv(8, 12, 1024, 64);
  const int64_t T = 1024, H = 12, D = 64;
  EXPECT_EQ(p.q.batch, T * 3 * H * D);
  EXPECT_EQ(p.q.head, D);
  EXPECT_EQ(p.q.seq, 3 * H * D);
  EXPECT_EQ(p.q.dim, 1);
  EXPECT_EQ(p.dk.seq, 3 * H * D);
  EXPECT_EQ(p.o.batch, T * H * D);
  EXPECT_EQ(p.o.seq, H * D);
  EXPECT_EQ(p.dO.head, D);
  EXPECT_FLOAT_EQ(p.scale, 0.125f);
  EXPECT_EQ(gpt2().describe(),
            "attention B8 H12/12 T1024x1024 D64 bf16 causal dropout 0.1");
}

TEST(CudnnSdpa, ValidatesGpt2ForwardAndBackward) {
  REQUIRE_CUDNN();
  CudnnSdpa sdpa(gpt2(), kHopper);
  EXPECT_FALSE(sdpa.built());
  EXPECT_EQ(sdpa.problem().headDim, 64);
}

TEST(CudnnSdpa, ValidatesGpt2WithKeyPaddingInHalf) {
  REQUIRE_CUDNN();
  SdpaProblem p = gpt2();
  p.causal = false;
  p.keyPadding = true;
  p.type = SdpaType::F16;
  CudnnSdpa sdpa(p, kHopper);
}

TEST(CudnnSdpa, ValidatesGroupedQueryAttention) {
  REQUIRE_CUDNN();
  CudnnSdpa sdpa(gqa(), kHopper);
  SdpaProblem inference = gqa();
  inference.backward = false;
  CudnnSdpa forwardOnly(inference, kHopper);
}

TEST(CudnnSdpa, RefusesHeadDim300) {
  REQUIRE_CUDNN();
  SdpaProblem p = gpt2();
  p.headDim = 300;
  p.q = p.k = p.v = p.dq = p.dk = p.dv =
      SdpaStrides::bshd(12, 1024, 300, 3 * 12 * 300);
  p.o = p.dO = SdpaStrides::bshd(12, 1024, 300);
  const std::string message = unsupportedMessage(p);
  EXPECT_NE(message.find("cuDNN attention B8 H12/12 T1024x1024 D300 bf16 "
                         "causal dropout 0.1: validating the forward: "
                         "GRAPH_NOT_SUPPORTED: "),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  std::printf("%s\n", message.c_str());
}

TEST(CudnnSdpa, RefusesPreAmpereGpus) {
  REQUIRE_CUDNN();
  const std::string message = unsupportedMessage(gpt2(), 75);
  EXPECT_NE(message.find("GRAPH_NOT_SUPPORTED"), std::string::npos) << message;
  std::printf("%s\n", message.c_str());
}

TEST(CudnnSdpa, RefusesWhatNoCudnnRuns) {
  SdpaProblem heads = gqa();
  heads.kvHeads = 5;
  EXPECT_NE(unsupportedMessage(heads).find(
                "query heads must be a multiple of key/value heads"),
            std::string::npos);
  SdpaProblem dropout = gpt2();
  dropout.dropout = 1.0f;
  EXPECT_NE(unsupportedMessage(dropout).find("dropout must be in [0, 1)"),
            std::string::npos);
}

TEST(CudnnSdpa, RunsOnlyOnceBuilt) {
  REQUIRE_CUDNN();
  CudnnSdpa sdpa(gpt2(), kHopper);
  EXPECT_THROW(sdpa.build(nullptr), Error);
  try {
    sdpa.forward(SdpaForwardArgs{}, nullptr);
    ADD_FAILURE() << "an unbuilt forward ran";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "cuDNN attention B8 H12/12 T1024x1024 D64 bf16 "
                           "causal dropout 0.1 forward: not built");
  }
}

namespace {

bool haveGpu() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

} // namespace

TEST(CudnnSdpa, HandleNeedsAGpu) {
  REQUIRE_CUDNN();
  if (haveGpu())
    GTEST_SKIP() << "a GPU is present";
  // cudnnCreate (through the entry points) fails with cuDNN's status name.
  try {
    CudnnHandle handle;
    ADD_FAILURE() << "cudnnCreate succeeded without a GPU";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("cuDNN: cudnnCreate: CUDNN_STATUS_"),
              std::string::npos)
        << e.what();
    std::printf("%s\n", e.what());
  }
}

//===----------------------------------------------------------------------===//
// On a GPU: the numbers
//===----------------------------------------------------------------------===//

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

template <typename T> struct Device {
  explicit Device(size_t n) : n(n) {
    if (cudaMalloc(reinterpret_cast<void **>(&ptr), n * sizeof(T) + 1) !=
        cudaSuccess)
      ptr = nullptr;
  }
  ~Device() { cudaFree(ptr); }
  void write(const std::vector<T> &host) {
    cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> read() const {
    std::vector<T> host(n);
    cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
  size_t n;
  T *ptr = nullptr;
};

float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

/// A small causal self-attention read in place from a fused QKV buffer.
struct SmallProblem {
  static constexpr int64_t B = 2, H = 4, T = 128, D = 64;
  SdpaProblem p = SdpaProblem::fusedQkv(B, H, T, D);
  std::vector<__nv_bfloat16> qkv, dO;

  SmallProblem() {
    p.causal = true;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < B * T * 3 * H * D; ++i)
      qkv.push_back(__float2bfloat16(normal(rng)));
    for (int64_t i = 0; i < B * T * H * D; ++i)
      dO.push_back(__float2bfloat16(normal(rng)));
  }
  double at(const std::vector<__nv_bfloat16> &x, int part, int64_t b, int64_t h,
            int64_t t, int64_t d) const {
    return toFloat(x[size_t((((b * T + t) * 3 + part) * H + h) * D + d)]);
  }

  /// float64 attention and its gradients in the same layouts.
  void reference(std::vector<double> &o, std::vector<double> &dqkv) const {
    o.assign(size_t(B * T * H * D), 0.0);
    dqkv.assign(qkv.size(), 0.0);
    const double scale = p.scale;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> prob(size_t(i + 1));
          double max = -INFINITY, sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d)
              s += at(qkv, 0, b, h, i, d) * at(qkv, 1, b, h, j, d);
            prob[size_t(j)] = s * scale;
            max = std::max(max, prob[size_t(j)]);
          }
          for (double &x : prob)
            sum += (x = std::exp(x - max));
          for (double &x : prob)
            x /= sum;
          const size_t row = size_t(((b * T + i) * H + h) * D);
          std::vector<double> dP(size_t(i + 1));
          double dot = 0;
          for (int64_t j = 0; j <= i; ++j) {
            for (int64_t d = 0; d < D; ++d) {
              o[row + size_t(d)] += prob[size_t(j)] * at(qkv, 2, b, h, j, d);
              dP[size_t(j)] +=
                  toFloat(dO[row + size_t(d)]) * at(qkv, 2, b, h, j, d);
            }
            dot += prob[size_t(j)] * dP[size_t(j)];
          }
          for (int64_t j = 0; j <= i; ++j) {
            const double dS = prob[size_t(j)] * (dP[size_t(j)] - dot) * scale;
            for (int64_t d = 0; d < D; ++d) {
              auto index = [&](int part, int64_t t) {
                return size_t((((b * T + t) * 3 + part) * H + h) * D + d);
              };
              dqkv[index(0, i)] += dS * at(qkv, 1, b, h, j, d);
              dqkv[index(1, j)] += dS * at(qkv, 0, b, h, i, d);
              dqkv[index(2, j)] +=
                  prob[size_t(j)] * toFloat(dO[row + size_t(d)]);
            }
          }
        }
  }
};

/// The largest |got - want| / (tolerance * (1 + |want|)): below 1 passes.
double worstError(const std::vector<__nv_bfloat16> &got,
                  const std::vector<double> &want, double tolerance) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(toFloat(got[i])) - want[i]) /
                                (tolerance * (1 + std::abs(want[i]))));
  return worst;
}

} // namespace

TEST(CudnnSdpaGpu, MatchesFloat64AttentionAndReplaysFromACudaGraph) {
  REQUIRE_CUDNN();
  if (!haveGpu())
    GTEST_SKIP() << "no GPU";
  SmallProblem s;
  const int64_t B = s.B, H = s.H, T = s.T, D = s.D;
  CudnnHandle handle;
  CudnnSdpa sdpa(s.p);
  sdpa.build(handle.get());

  Device<__nv_bfloat16> qkv(s.qkv.size()), o(size_t(B * T * H * D)),
      dO(s.dO.size()), dqkv(s.qkv.size());
  Device<float> stats(size_t(B * H * T));
  Device<char> workspace(size_t(sdpa.workspaceBytes()));
  qkv.write(s.qkv);
  dO.write(s.dO);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  SdpaForwardArgs f;
  f.q = qkv.ptr;
  f.k = qkv.ptr + H * D;
  f.v = qkv.ptr + 2 * H * D;
  f.o = o.ptr;
  f.stats = stats.ptr;
  f.workspace = workspace.ptr;
  sdpa.forward(f, stream);
  SdpaBackwardArgs g;
  g.q = f.q;
  g.k = f.k;
  g.v = f.v;
  g.o = o.ptr;
  g.dO = dO.ptr;
  g.stats = stats.ptr;
  g.dq = dqkv.ptr;
  g.dk = dqkv.ptr + H * D;
  g.dv = dqkv.ptr + 2 * H * D;
  g.workspace = workspace.ptr;
  sdpa.backward(g, stream);
  CUDA_OK(cudaStreamSynchronize(stream));

  std::vector<double> wantO, wantDqkv;
  s.reference(wantO, wantDqkv);
  const std::vector<__nv_bfloat16> gotO = o.read(), gotDqkv = dqkv.read();
  EXPECT_LT(worstError(gotO, wantO, 2e-2), 1.0);
  EXPECT_LT(worstError(gotDqkv, wantDqkv, 4e-2), 1.0);

  // The same step captured into a CUDA graph and replayed.
  CUDA_OK(cudaMemsetAsync(o.ptr, 0, o.n * sizeof(__nv_bfloat16), stream));
  CUDA_OK(cudaMemsetAsync(dqkv.ptr, 0, dqkv.n * sizeof(__nv_bfloat16), stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  sdpa.forward(f, stream);
  sdpa.backward(g, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_LT(worstError(o.read(), wantO, 2e-2), 1.0);
  EXPECT_LT(worstError(dqkv.read(), wantDqkv, 4e-2), 1.0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}
