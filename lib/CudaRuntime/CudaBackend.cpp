//===- CudaBackend.cpp - Running a Program on an NVIDIA GPU ---------------===//
//
// Set-up (once per program): emit the CUDA module (lib/Codegen), choosing
// each fused attention's implementation (libcudnn loaded where cuDNN may
// run), compile it with NVRTC through the on-disk cache, load it as a CUDA
// library, allocate the arena, scratch and cuBLASLt workspace, pick a
// cuBLASLt algorithm per distinct GEMM (timed once, then kept in the
// kernel cache directory) and build cuDNN's attention graphs. Per function (first call): turn the emitter's Steps
// into Calls with their kernel arguments resolved to device addresses, and
// build a CUDA graph of them, one node per kernel launch, GEMM or cuDNN
// attention (a child graph captured from the library) and copy, in program
// order. Per call: upload
// nothing (the driver does), patch the Philox seed and offset into the
// kernel nodes that draw random numbers, replay, and read `dsc_status`.
//
// Runtime API only (cudart linked statically): the library management calls
// (cudaLibraryLoadData, cudaLibraryGetKernel) accept NVRTC's CUBIN, and a
// cudaKernel_t may be passed wherever a kernel function is expected
// (cudaLaunchKernel, kernel graph nodes).
//
//===----------------------------------------------------------------------===//

#include "CudaMeshGroups.h"
#include "GemmTiming.h"
#include "CublasLtLibrary.h"
#include "VersionedLibrary.h"
#include "HostSteps.h"
#ifdef DSC_HAVE_CUDNN_FRONTEND
#include "CudnnAttention.h"
#endif

#include "dsc/Runtime/CudaBackend.h"

#include "dsc/Codegen/CudaEmitter.h"
#include "dsc/Codegen/KernelCache.h"
#include "dsc/Codegen/StepLanes.h"
#include "dsc/Runtime/OpcodeProfile.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>

namespace dsc::rt {

namespace {

void check(cudaError_t e, const std::string &what) {
  if (e != cudaSuccess)
    throw Error("CUDA: " + what + ": " + cudaGetErrorString(e));
}

void checkLt(cublasStatus_t s, const std::string &what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLASLt: " + what + ": " + cublasLtGetStatusString(s));
}

cudaDataType_t cudaType(cuda::Storage s) {
  switch (s) {
  case cuda::Storage::F16:
    return CUDA_R_16F;
  case cuda::Storage::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/// One kernel launch with its argument pointers (into the owning Call's
/// slots or the backend's Philox slots).
struct Launch {
  cudaKernel_t kernel = nullptr;
  dim3 grid, block;
  std::vector<void *> args;
};

/// What one emitter Step does, with every buffer resolved to an address.
struct Call {
  cuda::Step::Kind kind;
  std::vector<size_t> instrs;
  /// Its queue (StepLanes.h) and the earlier calls of other lanes it waits
  /// for; every call is on the device lane without ZeRO-Offload.
  cuda::Lane lane = cuda::Lane::Device;
  std::vector<size_t> waits;
  // Kernel: one 8-byte slot per launcher parameter (pointer or integer;
  // a kernel reads its parameter's size from the start of the slot) and
  // the pointer tables passed by value.
  std::vector<uint64_t> slots;
  std::vector<std::vector<void *>> tables;
  int launcher = -1;
  std::vector<Launch> launches;
  bool drawsRandom = false;
  // Gemm: index into the module's GEMMs and its operands (`launches` then
  // holds the widening of a 16-bit operand and the narrowing of an f32
  // bias, if any, run first; each takes three of `slots`: from, to, n).
  int gemm = -1;
  void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  void *aux = nullptr; ///< a GELU epilogue's pre-activation

  // Attention: index into the module's cuDNN attentions and its operands'
  // addresses, in Step::Kind::Attention's order.
  int attention = -1;
  std::vector<void *> operands;
  // Memcpy, HostCopy: `bytes` from src to dst (HostCopy: `direction`).
  // Collective: `collective` on `group` (the axis's NCCL or staged group)
  // from src to dst.
  const void *src = nullptr;
  void *dst = nullptr;
  size_t bytes = 0;
  cudaMemcpyKind direction = cudaMemcpyDeviceToDevice;
  DeviceCollective collective;
  DeviceGroup *group = nullptr;
};

/// cuBLASLt descriptors of one distinct GEMM, in column-major terms: the
/// row-major C = op(A) op(B) is C^T = op(B)^T op(A)^T, so cuBLASLt's first
/// operand is our B.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float alpha = 1.0f;
  bool bias = false;
  bool aux = false; ///< a GELU epilogue: the aux pointer is set per call
  float beta = 0.0f; ///< 1: accumulate into C (cuda::Gemm::accumulate)
  /// Operand (0: A, 1: B) widened to f32 before the GEMM, or -1.
  /// cuBLASLt multiplies operands of one type only; a GEMM of a 16-bit
  /// activation by an f32 buffer (mixed precision keeps e.g. some
  /// gradients f32) widens the 16-bit operand with dsc_widen_* first, which
  /// is exact: the CPU multiplies the same values.
  int widen = -1;
  /// cuBLASLt adds a bias of the output's type only (an f32 bias to a
  /// 16-bit output is "an unsupported value"), so a bias of another type is
  /// converted first: widened exactly (dsc_widen_*), or rounded to the
  /// 16-bit output's type (dsc_narrow_*), one rounding more than the CPU's,
  /// which adds the f32 bias and then rounds the sum.
  bool convertBias = false;
};

/// Expert parallelism's exchanges: their row counts are read on the host.
bool isExpertExchange(Opcode op) {
  return op == Opcode::MoeExchangeCounts || op == Opcode::MoeExchange;
}

/// Whether `g`'s input bias differs in type from its output
/// (GemmPlan::convertBias); a bias gradient is an output.
bool convertsBias(const cuda::Gemm &g) {
  return g.bias && g.biasType != g.c && !cuda::writesBiasGradient(g.epilogue);
}

/// cuBLASLt's epilogue for `g`.
cublasLtEpilogue_t epilogueOf(const cuda::Gemm &g) {
  switch (g.epilogue) {
  case cuda::GemmEpilogue::GeluAuxBias:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case cuda::GemmEpilogue::DGeluBiasGrad:
    return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  // cuBLASLt's first operand is our B (GemmPlan).
  case cuda::GemmEpilogue::BiasGradFromA:
    return CUBLASLT_EPILOGUE_BGRADB;
  case cuda::GemmEpilogue::BiasGradFromB:
    return CUBLASLT_EPILOGUE_BGRADA;
  case cuda::GemmEpilogue::Plain:
    break;
  }
  return g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/// The kernel (Gemm.cuh) that converts `from` to `to`: a 16-bit type to f32
/// (dsc_widen_*) or f32 to a 16-bit type (dsc_narrow_*).
const char *conversionKernel(cuda::Storage from, cuda::Storage to) {
  const bool widen = to == cuda::Storage::F32;
  const bool bf16 = (widen ? from : to) == cuda::Storage::BF16;
  return widen ? (bf16 ? "dsc_widen_bf16" : "dsc_widen_f16")
               : (bf16 ? "dsc_narrow_bf16" : "dsc_narrow_f16");
}

struct FunctionState {
  std::vector<Call> calls;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  /// Kernel nodes that read the Philox seed/offset, with their parameters.
  std::vector<std::pair<cudaGraphNode_t, cudaKernelNodeParams>> randomNodes;
  bool launched = false;
  uint64_t seed = 0, offset = 0;
  /// A collective runs on the host (staged): the function runs call by
  /// call, not as a graph.
  bool hostWork = false;
  /// ZeRO-Offload: calls on the host lanes, and the storage whose host
  /// arena their copies were resolved against (another rebuilds them).
  bool offloaded = false;
  const Storage *storage = nullptr;
  HostInstructions host;
};

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
/// How many of cuBLASLt's heuristic candidates are timed per GEMM.
constexpr int kGemmCandidates = 8;

class CudaBackend final : public Backend {
public:
  CudaBackend(const Program &program, Communicator &comm,
              const CudaOptions &options);
  ~CudaBackend() override;
  const char *name() const override { return "cuda"; }
  void run(const Program &program, const Function &fn, Storage &storage,
           const RngContext &rng) override;
  void upload(Storage &storage, const std::vector<int> &buffers) override;
  void download(Storage &storage, const std::vector<int> &buffers) override;

private:
  void compileAndLoad();
  void allocate(const Program &program);
  void planGemms();
  /// Which of cuBLASLt's `candidates` for GEMM `k` runs it: the one stored
  /// in the kernel cache directory for this device and descriptor, else the
  /// fastest when timed on the GEMM's first operands (GemmTiming.h), else
  /// (DSC_CUDA_GEMM_TIMING=0, one candidate, no step uses it) the
  /// heuristic's first.
  int chooseGemmAlgorithm(
      size_t k, const GemmPlan &p,
      const std::vector<cublasLtMatmulHeuristicResult_t> &candidates,
      const std::string &what);
  /// Appends to a GEMM's `call` the launch of conversion kernel `name` over
  /// `n` elements, `from` into `to` (its three slots in Call::slots).
  void addConversion(Call &call, const char *name, void *from, void *to,
                     int64_t n);
  /// The calls (and graph) of `fn`, built on its first run, rebuilt when
  /// an offloaded function runs on another storage.
  FunctionState &prepare(const Program &program, const Function &fn,
                         Storage &storage);
  void releaseGraph(FunctionState &state);
  void buildGraph(FunctionState &state, const std::string &fnName);
  /// Captures what `work` launches on a stream as a child graph of
  /// `state.graph`, after node `after` (none: a root); returns its node.
  cudaGraphNode_t addCapturedNode(FunctionState &state,
                                  const std::vector<cudaGraphNode_t> &after,
                                  const std::string &what,
                                  const std::function<void(cudaStream_t)> &work);
  void runGemm(const Call &call, cudaStream_t on);
  /// A collective on its axis's group (NCCL or staged).
  void runCollective(const Call &call, cudaStream_t on);
  /// Chooses the fused attentions' implementations (EmitOptions), loading
  /// libcudnn where cuDNN may run; says so when it cannot.
  cuda::EmitOptions attentionOptions(const cudaDeviceProp &prop);
  /// cuDNN's graphs of the module's attentions (a forward and its gradient
  /// share one), built once, and the workspace and Philox slots they use.
  void planAttention();
  void runAttention(const Call &call, cudaStream_t on);
  /// Writes this call's cuDNN dropout seeds and offsets (one pair per
  /// attention stream) to the device before the function runs.
  void uploadAttentionRng(cudaStream_t on);
  /// Call by call; `debugging` synchronises after each (a failure names
  /// its instruction) and times each under DSC_PROFILE.
  void runEager(const Program &program, const FunctionState &state,
                const Function &fn, Storage &storage, const RngContext &rng,
                bool debugging);
  void checkStatus(const std::string &where);
  std::string describe(const Function &fn, const Call &call) const;

  CudaOptions options;
  Communicator &comm;
  /// Several ranks: each mesh axis's device group (NCCL or staged).
  std::unique_ptr<CudaMeshGroups> meshGroups;
  std::vector<Buffer> buffers;
  cuda::Module module;
  std::string arch, deviceName;
  cudaStream_t stream = nullptr, captureStream = nullptr;
  cudaLibrary_t library = nullptr;
  std::map<std::string, cudaKernel_t> kernels;
  char *widened = nullptr; ///< f32 copy of a mixed GEMM's 16-bit operand
  char *convertedBias = nullptr; ///< a GEMM's bias in its output's type
  unsigned *status = nullptr; ///< the module's dsc_status
  char *arena = nullptr, *scratch = nullptr, *workspace = nullptr;
  std::vector<char *> addresses; ///< per buffer, into the arena; host: null
  PinnedHostArenas pinnedHost;   ///< ZeRO-Offload's host arenas
  cublasLtHandle_t lt = nullptr;
  std::vector<GemmPlan> gemms;
  std::map<std::string, FunctionState> functions;
  // The Philox key and offset of the current call; every launch that draws
  // random numbers points its seed/offset arguments here.
  uint64_t rngSeed = 0, rngOffset = 0;
#ifdef DSC_HAVE_CUDNN_FRONTEND
  std::unique_ptr<CudnnHandle> cudnn;
  std::vector<CudnnSdpa> sdpa;
#endif
  std::vector<int> sdpaOf; ///< per module attention: its CudnnSdpa
  /// Per module attention: its stream's pair in attentionRng (device int64
  /// seed, offset).
  std::vector<int> rngSlotOf;
  std::vector<uint64_t> attentionStreams; ///< by slot
  int64_t *attentionRng = nullptr;
  char *attentionWorkspace = nullptr;
  std::string cudnnMissing; ///< why cuDNN was not loaded, "" if it was
  /// DSC_PROFILE: GPU time per call (CUDA events), by its first
  /// instruction's opcode; the functions then run kernel by kernel.
  std::unique_ptr<OpcodeProfile> profile;
  cudaEvent_t callStart = nullptr, callEnd = nullptr;
};

CudaBackend::CudaBackend(const Program &program, Communicator &comm,
                         const CudaOptions &opts)
    : options(opts), comm(comm), buffers(program.buffers) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "looking for a GPU");
  // Each rank of a node takes the GPU of its local rank.
  if (comm.size() > 1)
    options.device = count > 0 ? comm.localRank() % count : 0;
  if (options.device < 0 || options.device >= count)
    throw Error("CUDA: device " + std::to_string(options.device) +
                " does not exist (" + std::to_string(count) + " found)");
  check(cudaSetDevice(options.device), "selecting the device");
  meshGroups =
      std::make_unique<CudaMeshGroups>(comm, program.mesh(), options.device);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, options.device),
        "reading the device properties");
  deviceName = prop.name;
  arch = "sm_" + std::to_string(prop.major * 10 + prop.minor);
  if (prop.major < 7)
    throw Error("CUDA: " + deviceName + " (" + arch +
                ") is too old; dsc needs sm_70 or newer");
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
        "creating a stream");
  check(cudaStreamCreateWithFlags(&captureStream, cudaStreamNonBlocking),
        "creating a stream");
  module = cuda::emitCuda(program, attentionOptions(prop));
  // Once: why attentions cuDNN would run use dsc's kernels.
  if (module.cudnnCandidates > 0)
    std::fprintf(stderr,
                 "dsc: %d attention%s on dsc's kernels, not cuDNN: %s\n",
                 module.cudnnCandidates,
                 module.cudnnCandidates == 1 ? " runs" : "s run",
                 cudnnMissing.c_str());
  if (options.verbose)
    for (const std::string &choice : module.attentionChoices)
      std::fprintf(stderr, "cuda: attention %s\n", choice.c_str());
  compileAndLoad();
  meshGroups->setNormKernels(kernels.at("dsc_norm_square"),
                             kernels.at("dsc_norm_sqrt"));
  allocate(program);
  checkLt(cublasLtCreate(&lt), "creating the handle");
  planGemms();
  planAttention();
  if (profileRequested()) {
    check(cudaEventCreate(&callStart), "creating an event");
    check(cudaEventCreate(&callEnd), "creating an event");
    profile = std::make_unique<OpcodeProfile>("cuda");
  }
}

CudaBackend::~CudaBackend() {
  // Best effort: errors here have nowhere to go.
  for (auto &[name, state] : functions)
    releaseGraph(state);
  for (GemmPlan &g : gemms) {
    cublasLtMatrixLayoutDestroy(g.first);
    cublasLtMatrixLayoutDestroy(g.second);
    cublasLtMatrixLayoutDestroy(g.out);
    cublasLtMatmulDescDestroy(g.desc);
  }
  if (lt)
    cublasLtDestroy(lt);
  if (callStart)
    cudaEventDestroy(callStart);
  if (callEnd)
    cudaEventDestroy(callEnd);
  cudaFree(arena);
  cudaFree(scratch);
  cudaFree(workspace);
  cudaFree(widened);
  cudaFree(convertedBias);
  cudaFree(attentionRng);
  cudaFree(attentionWorkspace);
  if (library)
    cudaLibraryUnload(library);
  if (stream)
    cudaStreamDestroy(stream);
  if (captureStream)
    cudaStreamDestroy(captureStream);
}

void CudaBackend::compileAndLoad() {
  cuda::NvrtcOptions nvrtc;
  nvrtc.arch = arch;
  // Warnings fail the no-GPU CI check (test/Codegen); here they would only
  // stop a run that can proceed.
  nvrtc.warningsAreErrors = false;
  auto start = std::chrono::steady_clock::now();
  cuda::CachedCompile c = cuda::compileCached(module.source, "dsc_step.cu",
                                              nvrtc, options.kernelCacheDir);
  if (!c.result.ok)
    throw Error("NVRTC (" + arch + "): " + c.result.message);
  if (!c.cacheProblem.empty())
    std::fprintf(stderr, "dsc-run: warning: kernel cache: %s\n",
                 c.cacheProblem.c_str());
  if (options.verbose)
    std::fprintf(stderr, "cuda: %s (%s): %zu launchers, %zu GEMMs; kernels %s "
                 "in %.1f s\n",
                 deviceName.c_str(), arch.c_str(), module.launchers.size(),
                 module.gemms.size(),
                 c.hit ? ("loaded from " + c.path).c_str() : "compiled",
                 std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  check(cudaLibraryLoadData(&library, c.result.binary.data(), nullptr, nullptr,
                            0, nullptr, nullptr, 0),
        "loading the compiled kernels");
  for (const cuda::Launcher &L : module.launchers)
    for (const cuda::KernelLaunch &k : L.kernels) {
      if (kernels.count(k.kernel))
        continue;
      cudaKernel_t kernel = nullptr;
      check(cudaLibraryGetKernel(&kernel, library, k.kernel.c_str()),
            "finding kernel " + k.kernel);
      kernels[k.kernel] = kernel;
    }
  for (const char *name :
       {"dsc_widen_f16", "dsc_widen_bf16", "dsc_narrow_f16", "dsc_narrow_bf16",
        "dsc_norm_square", "dsc_norm_sqrt"})
    check(cudaLibraryGetKernel(&kernels[name], library, name),
          std::string("finding kernel ") + name);
  size_t bytes = 0;
  check(cudaLibraryGetGlobal(reinterpret_cast<void **>(&status), &bytes,
                             library, "dsc_status"),
        "finding dsc_status");
}

void CudaBackend::allocate(const Program &program) {
  const cuda::DeviceLayout layout = cuda::deviceLayout(program);
  const size_t total = layout.arenaBytes;
  auto alloc = [&](char *&p, size_t bytes, const char *what) {
    cudaError_t e = cudaMalloc(reinterpret_cast<void **>(&p),
                               std::max<size_t>(bytes, 256));
    if (e != cudaSuccess) {
      size_t free = 0, all = 0;
      cudaGetLastError();
      cudaMemGetInfo(&free, &all);
      throw Error("CUDA: out of memory allocating the " + std::string(what) +
                  " (" + std::to_string(bytes >> 20) + " MiB; " +
                  std::to_string(free >> 20) + " of " +
                  std::to_string(all >> 20) +
                  " MiB free): lower train_micro_batch_size_per_gpu or "
                  "enable activation checkpointing");
    }
  };
  alloc(arena, total, "arena");
  alloc(scratch, size_t(module.scratchBytes), "kernel scratch");
  alloc(workspace, kWorkspaceBytes, "cuBLASLt workspace");
  size_t widenBytes = 0, biasBytes = 0;
  for (const auto &[name, steps] : module.steps)
    for (const cuda::Step &step : steps) {
      if (step.kind != cuda::Step::Kind::Gemm)
        continue;
      const cuda::Gemm &g = module.gemms[size_t(step.index)];
      if (convertsBias(g))
        biasBytes = std::max(
            biasBytes,
            size_t(buffers[size_t(step.args[3].buffers[0])].numElements()) * 4);
      if (g.a != g.b)
        widenBytes = std::max(
            widenBytes,
            size_t(buffers[size_t(step.args[g.a == cuda::Storage::F32 ? 1 : 0]
                                      .buffers[0])]
                       .numElements()) *
                4);
    }
  // Zeroed like the arena: the GEMM timing (chooseGemmAlgorithm) reads them.
  if (widenBytes) {
    alloc(widened, widenBytes, "f32 copy of a 16-bit GEMM operand");
    check(cudaMemset(widened, 0, widenBytes), "zeroing a GEMM operand copy");
  }
  if (biasBytes) {
    alloc(convertedBias, biasBytes, "copy of a GEMM's bias in its output type");
    check(cudaMemset(convertedBias, 0, biasBytes), "zeroing a GEMM bias copy");
  }
  check(cudaMemset(arena, 0, std::max<size_t>(total, 256)),
        "zeroing the arena");
  for (size_t id = 0; id < layout.offsets.size(); ++id)
    addresses.push_back(buffers[id].host ? nullptr
                                         : arena + layout.offsets[id]);
  if (options.verbose)
    std::fprintf(stderr, "cuda: arena %.1f MiB, scratch %.1f MiB\n",
                 double(total) / (1 << 20),
                 double(module.scratchBytes) / (1 << 20));
}

void CudaBackend::planGemms() {
  for (size_t k = 0; k < module.gemms.size(); ++k) {
    const cuda::Gemm &g = module.gemms[k];
    const std::string what = "GEMM " + std::to_string(k) + " (" +
                             opcodeName(g.op) + " " + std::to_string(g.M) +
                             "x" + std::to_string(g.N) + "x" +
                             std::to_string(g.K) + ")";
    GemmPlan p;
    cuda::Storage ta = g.a, tb = g.b;
    if (ta != tb) {
      if (ta != cuda::Storage::F32 && tb != cuda::Storage::F32)
        throw Error("cuBLASLt: " + what + " multiplies " +
                    dtypeName(ta) + " by " + dtypeName(tb));
      p.widen = ta == cuda::Storage::F32 ? 1 : 0;
      ta = tb = cuda::Storage::F32;
    }
    if (g.c != cuda::Storage::F32 && g.c != ta)
      throw Error("cuBLASLt: " + what + " writes " + dtypeName(g.c) +
                  " from " + dtypeName(ta) + " operands");
    p.alpha = float(g.alpha);
    p.bias = g.bias;
    p.beta = g.accumulate ? 1.0f : 0.0f;
    checkLt(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            what);
    cublasOperation_t opFirst = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opSecond = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &opFirst, sizeof opFirst),
            what);
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &opSecond, sizeof opSecond),
            what);
    if (g.bias) {
      p.convertBias = convertsBias(g);
      cublasLtEpilogue_t epilogue = epilogueOf(g);
      cudaDataType_t biasType = cudaType(p.convertBias ? g.c : g.biasType);
      checkLt(cublasLtMatmulDescSetAttribute(p.desc,
                                             CUBLASLT_MATMUL_DESC_EPILOGUE,
                                             &epilogue, sizeof epilogue),
              what);
      checkLt(cublasLtMatmulDescSetAttribute(
                  p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                  sizeof biasType),
              what);
    }
    if (cuda::usesGeluAux(g.epilogue)) {
      // The aux matrix is laid out as the output: column-major rows = N.
      p.aux = true;
      const int64_t auxLd = g.N;
      cudaDataType_t auxType = cudaType(g.auxType);
      checkLt(cublasLtMatmulDescSetAttribute(
                  p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
                  sizeof auxLd),
              what);
      checkLt(cublasLtMatmulDescSetAttribute(
                  p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                  &auxType, sizeof auxType),
              what);
    }
    // Column-major shapes: first = op(B)^T [N,K], second = op(A)^T [K,M],
    // out = C^T [N,M].
    auto layout = [&](cublasLtMatrixLayout_t &l, cuda::Storage t,
                      int64_t rows, int64_t cols, int64_t ld,
                      int64_t stride) {
      checkLt(cublasLtMatrixLayoutCreate(&l, cudaType(t), uint64_t(rows),
                                         uint64_t(cols), ld),
              what);
      if (g.batch > 1) {
        int32_t batch = int32_t(g.batch);
        checkLt(cublasLtMatrixLayoutSetAttribute(
                    l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                    sizeof batch),
                what);
        checkLt(cublasLtMatrixLayoutSetAttribute(
                    l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                    sizeof stride),
                what);
      }
    };
    layout(p.first, tb, g.transB ? g.K : g.N, g.transB ? g.N : g.K, g.ldb,
           g.strideB);
    layout(p.second, ta, g.transA ? g.M : g.K, g.transA ? g.K : g.M, g.lda,
           g.strideA);
    layout(p.out, g.c, g.N, g.M, g.ldc, g.strideC);
    cublasLtMatmulPreference_t pref = nullptr;
    checkLt(cublasLtMatmulPreferenceCreate(&pref), what);
    size_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    std::vector<cublasLtMatmulHeuristicResult_t> candidates(
        kGemmCandidates);
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        lt, p.desc, p.first, p.second, p.out, p.out, pref, kGemmCandidates,
        candidates.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    checkLt(st, what);
    if (found == 0)
      throw Error(
          "cuBLASLt: no algorithm for " + what +
          (g.epilogue == cuda::GemmEpilogue::Plain
               ? std::string()
               : std::string(" with its ") +
                     (cuda::usesGeluAux(g.epilogue) ? "GELU" : "bias-gradient") +
                     " epilogue (DSC_CUDA_EPILOGUES); run without "
                     "DSC_CUDA_EPILOGUES"));
    candidates.resize(size_t(found));
    p.algo = candidates[size_t(chooseGemmAlgorithm(k, p, candidates, what))]
                 .algo;
    gemms.push_back(p);
  }
}

int CudaBackend::chooseGemmAlgorithm(
    size_t k, const GemmPlan &p,
    const std::vector<cublasLtMatmulHeuristicResult_t> &candidates,
    const std::string &what) {
  const char *timing = std::getenv("DSC_CUDA_GEMM_TIMING");
  if (candidates.size() == 1 || (timing && std::string(timing) == "0"))
    return 0;
  const cuda::Gemm &g = module.gemms[k];
  std::ostringstream key;
  key << deviceName << "|cublasLt " << cublasLtGetVersion() << "|"
      << opcodeName(g.op) << " batch " << g.batch << " " << g.M << "x" << g.N
      << "x" << g.K << " trans " << g.transA << g.transB << " ld " << g.lda
      << "," << g.ldb << "," << g.ldc << " strides " << g.strideA << ","
      << g.strideB << "," << g.strideC << " types " << dtypeName(g.a) << ","
      << dtypeName(g.b) << "," << dtypeName(g.c) << " widen " << p.widen
      << " alpha " << p.alpha << " beta " << p.beta << " bias " << p.bias
      << (p.bias ? dtypeName(p.convertBias ? g.c : g.biasType) : "")
      << " epilogue " << int(epilogueOf(g)) << " aux "
      << dtypeName(g.auxType) << " workspace " << kWorkspaceBytes
      << " candidates "
      << candidates.size();
  // Within a process every backend keeps the first choice made for a key
  // (check-cuda's and the tests' runs compare backends bit for bit), also
  // without a cache directory.
  static std::mutex chosenMutex;
  static std::map<std::string, int> chosen;
  std::lock_guard<std::mutex> lock(chosenMutex);
  if (auto it = chosen.find(key.str()); it != chosen.end())
    return it->second;
  if (std::optional<cuda::GemmChoice> c =
          cuda::loadGemmChoice(options.kernelCacheDir, key.str());
      c && size_t(c->candidate) < candidates.size())
    return chosen[key.str()] = c->candidate;
  // The GEMM's operands where a step first uses it: the arena is still
  // all zeros (parameters are uploaded later), so the timing leaves it so.
  const cuda::Step *use = nullptr;
  for (const auto &[name, steps] : module.steps)
    for (const cuda::Step &step : steps)
      if (!use && step.kind == cuda::Step::Kind::Gemm &&
          size_t(step.index) == k)
        use = &step;
  if (!use)
    return chosen[key.str()] = 0;
  auto operand = [&](size_t arg) -> void * {
    return int(arg) == p.widen ? widened
                               : addresses[size_t(use->args[arg].buffers[0])];
  };
  GemmLaunch launch;
  launch.lt = lt;
  launch.desc = p.desc;
  launch.first = p.first;
  launch.second = p.second;
  launch.out = p.out;
  launch.alpha = &p.alpha;
  launch.beta = &p.beta;
  launch.firstData = operand(1);
  launch.secondData = operand(0);
  launch.outData = operand(2);
  launch.workspace = workspace;
  launch.workspaceBytes = kWorkspaceBytes;
  launch.stream = stream;
  if (p.bias) {
    void *bias =
        p.convertBias ? convertedBias : addresses[size_t(use->args[3].buffers[0])];
    checkLt(cublasLtMatmulDescSetAttribute(
                p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            what);
  }
  if (p.aux) {
    void *aux = addresses[size_t(use->args[4].buffers[0])];
    checkLt(cublasLtMatmulDescSetAttribute(
                p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                sizeof aux),
            what);
  }
  const cuda::GemmChoice best = fastestGemmCandidate(launch, candidates, what);
  if (options.verbose)
    std::fprintf(stderr, "cuda: %s: algorithm %d of %zu, %.1f us\n",
                 what.c_str(), best.candidate + 1, candidates.size(),
                 best.microseconds);
  if (std::string problem =
          cuda::storeGemmChoice(options.kernelCacheDir, key.str(), best);
      !problem.empty())
    std::fprintf(stderr, "dsc-run: warning: GEMM choice cache: %s\n",
                 problem.c_str());
  return chosen[key.str()] = best.candidate;
}

void CudaBackend::runGemm(const Call &call, cudaStream_t on) {
  const GemmPlan &p = gemms[size_t(call.gemm)];
  if (p.bias)
    checkLt(cublasLtMatmulDescSetAttribute(p.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &call.bias, sizeof call.bias),
            "setting the bias");
  if (p.aux)
    checkLt(cublasLtMatmulDescSetAttribute(
                p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &call.aux,
                sizeof call.aux),
            "setting the epilogue's aux matrix");
  checkLt(cublasLtMatmul(lt, p.desc, &p.alpha, call.b, p.first, call.a,
                         p.second, &p.beta, call.c, p.out, call.c, p.out,
                         &p.algo, workspace, kWorkspaceBytes, on),
          "GEMM " + std::to_string(call.gemm));
}

cuda::EmitOptions CudaBackend::attentionOptions(const cudaDeviceProp &prop) {
  cuda::EmitOptions emit;
  emit.sm = prop.major * 10 + prop.minor;
  emit.cpuDropoutMasks = options.cpuDropoutMasks;
  // cuBLASLt epilogues: opt-in until a GPU shows that its GELU is the tanh
  // form and its bias gradients match (check-cuda with DSC_CUDA_EPILOGUES).
  if (const char *e = std::getenv("DSC_CUDA_EPILOGUES"))
    if (std::string problem = cuda::parseEpilogues(e, emit); !problem.empty())
      throw Error("DSC_CUDA_EPILOGUES: " + problem);
  if (const char *name = std::getenv("DSC_CUDA_ATTENTION")) {
    if (!cuda::parseAttentionKernel(name, emit.attention))
      throw Error(std::string("DSC_CUDA_ATTENTION='") + name +
                  "' is not tiles, registers or cudnn");
    emit.forceAttention = true;
  }
  // cuDNN is loaded only where it may run.
  std::string noCudnn;
  if (emit.forceAttention && emit.attention != cuda::AttentionKernel::Cudnn)
    return emit;
#ifdef DSC_HAVE_CUDNN_FRONTEND
  try {
    const CudnnLibraryInfo &lib = loadCudnn();
    emit.cudnn = true;
    if (options.verbose)
      std::fprintf(stderr, "cuda: cuDNN %zu from %s\n", lib.version,
                   lib.path.c_str());
  } catch (const Error &e) {
    noCudnn = e.what();
  }
#else
  noCudnn = "this dsc was built without the cuDNN frontend's headers "
            "(scripts/setup.sh fetches them)";
#endif
  if (emit.forceAttention && !emit.cudnn)
    throw Error("DSC_CUDA_ATTENTION=cudnn: " + noCudnn);
  cudnnMissing = noCudnn;
  return emit;
}

void CudaBackend::planAttention() {
  if (module.attentions.empty())
    return;
#ifdef DSC_HAVE_CUDNN_FRONTEND
  cudnn = std::make_unique<CudnnHandle>();
  // A forward and its gradient (one stream, one problem) share graphs: the
  // forward's statistics are what the backward reads.
  std::map<std::tuple<uint64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                      int, bool, double, double>,
           int>
      byProblem;
  std::map<uint64_t, int> slotOfStream;
  int64_t workspaceBytes = 0;
  for (const cuda::CudnnAttention &a : module.attentions) {
    const auto key = std::make_tuple(a.stream, a.batch, a.heads, a.kvHeads,
                                     a.seq, a.headDim, int(a.type), a.causal,
                                     a.scale, a.rate);
    auto [it, fresh] = byProblem.try_emplace(key, int(sdpa.size()));
    if (fresh) {
      SdpaProblem p;
      p.batch = a.batch;
      p.qHeads = a.heads;
      p.kvHeads = a.kvHeads;
      p.qLen = p.kvLen = a.seq;
      p.headDim = a.headDim;
      p.q = p.o = p.dq = p.dO = SdpaStrides::bhsd(a.heads, a.seq, a.headDim);
      p.k = p.v = p.dk = p.dv = SdpaStrides::bhsd(a.kvHeads, a.seq, a.headDim);
      p.causal = a.causal;
      p.scale = float(a.scale);
      p.dropout = float(a.rate);
      p.type = a.type == cuda::Storage::F16 ? SdpaType::F16 : SdpaType::BF16;
      p.backward = true; // the statistics dsc.attention returns
      sdpa.emplace_back(p, 0);
      sdpa.back().build(cudnn->get());
      workspaceBytes = std::max(workspaceBytes, sdpa.back().workspaceBytes());
    }
    sdpaOf.push_back(it->second);
    auto [slot, newStream] =
        slotOfStream.try_emplace(a.stream, int(attentionStreams.size()));
    if (newStream)
      attentionStreams.push_back(a.stream);
    rngSlotOf.push_back(slot->second);
  }
  check(cudaMalloc(reinterpret_cast<void **>(&attentionRng),
                   attentionStreams.size() * 2 * sizeof(int64_t)),
        "allocating cuDNN's dropout seeds");
  if (workspaceBytes > 0)
    check(cudaMalloc(reinterpret_cast<void **>(&attentionWorkspace),
                     size_t(workspaceBytes)),
          "allocating cuDNN's attention workspace (" +
              std::to_string(workspaceBytes >> 20) + " MiB)");
  if (options.verbose)
    std::fprintf(stderr,
                 "cuda: %zu cuDNN attention graphs, workspace %lld bytes\n",
                 sdpa.size(), (long long)workspaceBytes);
#else
  throw Error("CUDA: internal: cuDNN attention emitted in a build without "
              "the cuDNN frontend");
#endif
}

void CudaBackend::uploadAttentionRng(cudaStream_t on) {
  if (attentionStreams.empty())
    return;
  // Each stream's own Philox key (a stream is one attention's forward and
  // gradient), this call's offset: masks differ across attentions, layers
  // and micro-batches, and a gradient redraws its forward's.
  std::vector<int64_t> values;
  for (uint64_t s : attentionStreams) {
    values.push_back(int64_t(rngSeed ^ ((s + 1) * 0x9E3779B97F4A7C15ull)));
    values.push_back(int64_t(rngOffset));
  }
  check(cudaMemcpyAsync(attentionRng, values.data(),
                        values.size() * sizeof(int64_t),
                        cudaMemcpyHostToDevice, on),
        "uploading cuDNN's dropout seeds");
  check(cudaStreamSynchronize(on), "uploading cuDNN's dropout seeds");
}

void CudaBackend::runAttention(const Call &call, cudaStream_t on) {
#ifdef DSC_HAVE_CUDNN_FRONTEND
  const cuda::CudnnAttention &a = module.attentions[size_t(call.attention)];
  const CudnnSdpa &plan = sdpa[size_t(sdpaOf[size_t(call.attention)])];
  const int64_t *seed = attentionRng + 2 * rngSlotOf[size_t(call.attention)];
  const std::vector<void *> &x = call.operands;
  if (!a.backward) { // q, k, v, out, lse
    SdpaForwardArgs f;
    f.q = x[0];
    f.k = x[1];
    f.v = x[2];
    f.o = x[3];
    f.stats = static_cast<float *>(x[4]);
    f.seed = seed;
    f.offset = seed + 1;
    f.workspace = attentionWorkspace;
    plan.forward(f, on);
    return;
  }
  SdpaBackwardArgs g; // dout, q, k, v, out, lse, dq, dk, dv
  g.dO = x[0];
  g.q = x[1];
  g.k = x[2];
  g.v = x[3];
  g.o = x[4];
  g.stats = static_cast<const float *>(x[5]);
  g.dq = x[6];
  g.dk = x[7];
  g.dv = x[8];
  g.seed = seed;
  g.offset = seed + 1;
  g.workspace = attentionWorkspace;
  plan.backward(g, on);
#else
  (void)call;
  (void)on;
#endif
}

void CudaBackend::addConversion(Call &call, const char *name, void *from,
                                void *to, int64_t n) {
  call.slots.insert(call.slots.end(),
                    {reinterpret_cast<uint64_t>(from),
                     reinterpret_cast<uint64_t>(to), uint64_t(n)});
  Launch launch;
  launch.kernel = kernels.at(name);
  launch.grid = dim3(unsigned(std::clamp<int64_t>((n + 255) / 256, 1, 65536)));
  launch.block = dim3(256);
  call.launches.push_back(launch);
}

void CudaBackend::releaseGraph(FunctionState &state) {
  if (state.exec)
    cudaGraphExecDestroy(state.exec);
  if (state.graph)
    cudaGraphDestroy(state.graph);
  state.exec = nullptr;
  state.graph = nullptr;
}

FunctionState &CudaBackend::prepare(const Program &program,
                                    const Function &fn, Storage &storage) {
  auto found = functions.find(fn.name);
  if (found != functions.end()) {
    if (!found->second.offloaded || found->second.storage == &storage)
      return found->second;
    releaseGraph(found->second); // its host copies point at other memory
    functions.erase(found);
  }
  auto steps = module.steps.find(fn.name);
  if (steps == module.steps.end())
    throw Error("CUDA: function @" + fn.name + " was not compiled");
  if (const size_t pinned = pinnedHost.pin(program, storage);
      pinned && options.verbose)
    std::fprintf(stderr, "cuda: ZeRO-Offload host arena %.1f MiB page-locked\n",
                 double(pinned) / (1 << 20));
  FunctionState &state = functions[fn.name];
  state.storage = &storage;
  auto address = [&](int id) -> char * {
    char *p = addresses.at(size_t(id));
    if (!p)
      throw Error("CUDA: internal: a device step of @" + fn.name +
                  " uses host buffer '" + buffers[size_t(id)].name + "'");
    return p;
  };
  const cuda::StepLanes lanes =
      cuda::scheduleLanes(program, fn, steps->second);
  // Per lane, its last call so far; per step, the last call of its lane up
  // to it (a skipped step's waiters wait for the call before it).
  std::vector<long> laneLast(cuda::kLaneCount, -1),
      lastCallAtStep(steps->second.size(), -1);
  for (size_t k = 0; k < steps->second.size(); ++k) {
    const cuda::Step &step = steps->second[k];
    Call call;
    call.kind = step.kind;
    call.instrs = step.instrs;
    bool skip = false; // nothing to do (a copy onto itself, no bytes)
    switch (step.kind) {
    case cuda::Step::Kind::Kernel: {
      const cuda::Launcher &L = module.launchers[size_t(step.index)];
      call.launcher = step.index;
      call.slots.assign(L.params.size(), 0);
      call.tables.resize(L.params.size());
      for (size_t i = 0; i < L.params.size(); ++i) {
        const cuda::Step::Arg &arg = step.args[i];
        switch (L.params[i].kind) {
        case cuda::Param::Kind::Buffer:
          call.slots[i] = reinterpret_cast<uint64_t>(address(arg.buffers[0]));
          break;
        case cuda::Param::Kind::Table:
          for (int id : arg.buffers)
            call.tables[i].push_back(address(id));
          break;
        case cuda::Param::Kind::Stream:
          call.slots[i] = arg.value;
          break;
        case cuda::Param::Kind::Seed:
        case cuda::Param::Kind::Offset:
          call.drawsRandom = true;
          break;
        case cuda::Param::Kind::Scratch:
          call.slots[i] = reinterpret_cast<uint64_t>(scratch);
          break;
        case cuda::Param::Kind::GroupRank: {
          const DeviceGroup *g = meshGroups->group(MeshAxis(arg.value));
          call.slots[i] = uint64_t(g ? g->rank() : 0);
          break;
        }
        }
      }
      for (const cuda::KernelLaunch &k : L.kernels) {
        Launch launch;
        launch.kernel = kernels.at(k.kernel);
        launch.grid = dim3(unsigned(k.grid));
        launch.block = dim3(unsigned(k.block));
        call.launches.push_back(launch);
      }
      break;
    }
    case cuda::Step::Kind::Gemm:
      call.gemm = step.index;
      call.a = address(step.args[0].buffers[0]);
      call.b = address(step.args[1].buffers[0]);
      call.c = address(step.args[2].buffers[0]);
      if (step.args.size() > 3)
        call.bias = address(step.args[3].buffers[0]);
      if (step.args.size() > 4)
        call.aux = address(step.args[4].buffers[0]);
      if (int w = gemms[size_t(step.index)].widen; w >= 0) {
        const Buffer &operand =
            buffers[size_t(step.args[size_t(w)].buffers[0])];
        addConversion(call, conversionKernel(operand.dtype, cuda::Storage::F32),
                      w == 0 ? call.a : call.b, widened, operand.numElements());
        (w == 0 ? call.a : call.b) = widened;
      }
      if (gemms[size_t(step.index)].convertBias) {
        const cuda::Gemm &g = module.gemms[size_t(step.index)];
        addConversion(call, conversionKernel(g.biasType, g.c), call.bias,
                      convertedBias,
                      buffers[size_t(step.args[3].buffers[0])].numElements());
        call.bias = convertedBias;
      }
      break;
    case cuda::Step::Kind::Attention:
      call.attention = step.index;
      for (const cuda::Step::Arg &arg : step.args)
        call.operands.push_back(address(arg.buffers[0]));
      break;
    case cuda::Step::Kind::Memcpy: {
      const int from = step.args[0].buffers[0], to = step.args[1].buffers[0];
      call.src = address(from);
      call.dst = address(to);
      call.bytes = buffers[size_t(from)].bytes();
      skip = call.bytes == 0 || from == to;
      break;
    }
    case cuda::Step::Kind::Collective: {
      const std::vector<int> &in = step.args[0].buffers,
                             &out = step.args[1].buffers;
      call.src = in.empty() ? nullptr : address(in[0]);
      call.dst = out.empty() ? nullptr : address(out[0]);
      if (step.scratchOffset >= 0) // in place on the launcher scratch
        call.src = call.dst = scratch + step.scratchOffset;
      call.collective = step.collective;
      call.group = meshGroups->group(step.collective.axis);
      if (isExpertExchange(call.collective.op)) {
        // Its inputs then outputs; the counts are read on the host.
        for (const cuda::Step::Arg &arg : step.args)
          for (int id : arg.buffers)
            call.operands.push_back(address(id));
        if (!call.group)
          throw Error("CUDA: " + call.collective.describe() +
                      ": no group of the axis (one rank exchanges nothing; "
                      "-dsc-expert-parallel emits none there)");
        state.hostWork = true;
        break;
      }
      if (!call.group) {
        // One rank along the axis: a sum, mean or max over it, a gather,
        // exchange, broadcast or shard is the tensor itself (and the norm
        // of one norm the norm).
        call.kind = cuda::Step::Kind::Memcpy;
        call.bytes = out.empty() ? 0 : buffers[size_t(out[0])].bytes();
        skip = call.bytes == 0 || call.src == call.dst;
        break;
      }
      if (!call.group->capturable())
        state.hostWork = true;
      break;
    }
    case cuda::Step::Kind::HostCopy: {
      const int from = step.args[0].buffers[0], to = step.args[1].buffers[0];
      const bool toHost = fn.body[step.instrs.at(0)].op == Opcode::ToHost;
      call.src = toHost ? address(from) : storage.data(from);
      call.dst = toHost ? storage.data(to) : address(to);
      call.direction = toHost ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
      call.bytes = buffers[size_t(from)].bytes();
      skip = call.bytes == 0;
      state.offloaded = true;
      break;
    }
    case cuda::Step::Kind::Host:
      state.offloaded = true;
      break;
    }
    // Host buffers outside a page-locked arena (an unplanned program's,
    // check-cuda's kernel check): pageable copies, so call by call.
    if (state.offloaded && storage.hostArenaBytes() == 0)
      state.hostWork = true;
    const cuda::Lane lane = lanes.lane[k];
    if (!skip) {
      call.lane = lane;
      for (size_t w : lanes.waits[k])
        if (lastCallAtStep[w] >= 0)
          call.waits.push_back(size_t(lastCallAtStep[w]));
      state.calls.push_back(std::move(call));
      laneLast[size_t(lane)] = long(state.calls.size()) - 1;
    }
    lastCallAtStep[k] = laneLast[size_t(lane)];
  }
  // Argument pointers last, when the calls' slot vectors no longer move.
  for (Call &call : state.calls) {
    if (call.kind == cuda::Step::Kind::Gemm)
      for (size_t k = 0; k < call.launches.size(); ++k)
        for (size_t slot = 3 * k; slot < 3 * k + 3; ++slot)
          call.launches[k].args.push_back(&call.slots[slot]);
    if (call.kind != cuda::Step::Kind::Kernel)
      continue;
    const cuda::Launcher &L = module.launchers[size_t(call.launcher)];
    for (size_t k = 0; k < L.kernels.size(); ++k)
      for (int p : L.kernels[k].args) {
        void *arg = nullptr;
        switch (L.params[size_t(p)].kind) {
        case cuda::Param::Kind::Table:
          arg = call.tables[size_t(p)].data();
          break;
        case cuda::Param::Kind::Seed:
          arg = &rngSeed;
          break;
        case cuda::Param::Kind::Offset:
          arg = &rngOffset;
          break;
        default:
          arg = &call.slots[size_t(p)];
        }
        call.launches[k].args.push_back(arg);
      }
  }
  if (options.graphs && !state.hostWork)
    buildGraph(state, fn.name);
  return state;
}

cudaGraphNode_t CudaBackend::addCapturedNode(
    FunctionState &state, const std::vector<cudaGraphNode_t> &after,
    const std::string &what, const std::function<void(cudaStream_t)> &work) {
  cudaGraph_t child = nullptr;
  check(cudaStreamBeginCapture(captureStream, cudaStreamCaptureModeThreadLocal),
        what);
  try {
    work(captureStream);
  } catch (...) {
    cudaStreamEndCapture(captureStream, &child);
    if (child)
      cudaGraphDestroy(child);
    throw;
  }
  check(cudaStreamEndCapture(captureStream, &child), what);
  cudaGraphNode_t node = nullptr;
  cudaError_t e = cudaGraphAddChildGraphNode(&node, state.graph, after.data(),
                                             after.size(), child);
  cudaGraphDestroy(child);
  check(e, what);
  return node;
}

void CudaBackend::buildGraph(FunctionState &state, const std::string &fnName) {
  const std::string what = "building the graph of @" + fnName;
  check(cudaGraphCreate(&state.graph, 0), what);
  // Each call follows the last node of its lane and the calls of other
  // lanes it waits for (without ZeRO-Offload: one lane, program order).
  std::vector<cudaGraphNode_t> laneLast(cuda::kLaneCount, nullptr),
      callNode(state.calls.size(), nullptr);
  for (size_t k = 0; k < state.calls.size(); ++k) {
    Call &call = state.calls[k];
    std::vector<cudaGraphNode_t> deps;
    if (cudaGraphNode_t last = laneLast[size_t(call.lane)])
      deps.push_back(last);
    for (size_t w : call.waits)
      deps.push_back(callNode[w]);
    cudaGraphNode_t node = nullptr;
    // A call's kernels, or the widening before a GEMM.
    for (Launch &launch : call.launches) {
      cudaKernelNodeParams p{};
      p.func = reinterpret_cast<void *>(launch.kernel);
      p.gridDim = launch.grid;
      p.blockDim = launch.block;
      p.kernelParams = launch.args.data();
      check(cudaGraphAddKernelNode(&node, state.graph, deps.data(),
                                   deps.size(), &p),
            what);
      if (call.drawsRandom)
        state.randomNodes.emplace_back(node, p);
      deps = {node};
    }
    switch (call.kind) {
    case cuda::Step::Kind::Kernel:
      break;
    case cuda::Step::Kind::Gemm:
      // cuBLASLt launches what it likes: capture it as a child graph.
      node = addCapturedNode(state, deps, what,
                             [&](cudaStream_t on) { runGemm(call, on); });
      break;
    case cuda::Step::Kind::Attention:
      // So does cuDNN (its graphs were built, kernels compiled, before).
      node = addCapturedNode(state, deps, what,
                             [&](cudaStream_t on) { runAttention(call, on); });
      break;
    case cuda::Step::Kind::Memcpy:
    case cuda::Step::Kind::HostCopy:
      check(cudaGraphAddMemcpyNode1D(&node, state.graph, deps.data(),
                                     deps.size(), call.dst, call.src,
                                     call.bytes, call.direction),
            what);
      break;
    case cuda::Step::Kind::Collective:
      // NCCL's kernels, captured like cuBLASLt's.
      node = addCapturedNode(state, deps, what, [&](cudaStream_t on) {
        runCollective(call, on);
      });
      break;
    case cuda::Step::Kind::Host: {
      cudaHostNodeParams p{};
      p.fn = &HostInstructions::node;
      p.userData = state.host.task(call.instrs.at(0));
      check(cudaGraphAddHostNode(&node, state.graph, deps.data(), deps.size(),
                                 &p),
            what);
      break;
    }
    }
    callNode[k] = node;
    laneLast[size_t(call.lane)] = node;
  }
  check(cudaGraphInstantiate(&state.exec, state.graph, 0),
        "instantiating the graph of @" + fnName);
}

std::string CudaBackend::describe(const Function &fn, const Call &call) const {
  std::string s = "@" + fn.name;
  for (size_t i : call.instrs)
    s += std::string(" #") + std::to_string(i) + " " +
         opcodeName(fn.body[i].op);
  return s;
}

void CudaBackend::runEager(const Program &program, const FunctionState &state,
                           const Function &fn, Storage &storage,
                           const RngContext &rng, bool debugging) {
  // Kernel by kernel: a function with staged collectives, or the debugging
  // mode (DSC_CUDA_GRAPHS=0, DSC_PROFILE), which synchronises after each
  // call so that a failure names its instruction, and times it.
  const bool timing = debugging && profile;
  for (const Call &call : state.calls) {
    if (timing)
      check(cudaEventRecord(callStart, stream), "timing " + describe(fn, call));
    for (const Launch &launch : call.launches) // kernels, or a widening
      check(cudaLaunchKernel(reinterpret_cast<const void *>(launch.kernel),
                             launch.grid, launch.block,
                             const_cast<void **>(launch.args.data()), 0,
                             stream),
            "launching " + describe(fn, call));
    switch (call.kind) {
    case cuda::Step::Kind::Kernel:
      break;
    case cuda::Step::Kind::Gemm:
      runGemm(call, stream);
      break;
    case cuda::Step::Kind::Attention:
      runAttention(call, stream);
      break;
    case cuda::Step::Kind::Memcpy:
    case cuda::Step::Kind::HostCopy:
      check(cudaMemcpyAsync(call.dst, call.src, call.bytes, call.direction,
                            stream),
            "copying in " + describe(fn, call));
      break;
    case cuda::Step::Kind::Collective:
      runCollective(call, stream);
      break;
    case cuda::Step::Kind::Host:
      // In program order: after what the device did so far.
      check(cudaStreamSynchronize(stream), "waiting for " + describe(fn, call));
      runOnHost(program, storage, fn.body[call.instrs.at(0)], rng,
                comm.localSize());
      break;
    }
    if (!debugging)
      continue;
    if (timing)
      check(cudaEventRecord(callEnd, stream), "timing " + describe(fn, call));
    checkStatus(describe(fn, call));
    if (timing && !call.instrs.empty()) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, callStart, callEnd),
            "timing " + describe(fn, call));
      std::vector<const Instr *> instrs;
      for (size_t i : call.instrs)
        instrs.push_back(&fn.body[i]);
      profile->addWork(program, instrs, ms / 1000.0);
    }
  }
}

void CudaBackend::checkStatus(const std::string &where) {
  unsigned code = 0;
  check(cudaMemcpyAsync(&code, status, sizeof code, cudaMemcpyDeviceToHost,
                        stream),
        "reading dsc_status");
  meshGroups->wait(stream, "running " + where);
  if (code == 0)
    return;
  check(cudaMemsetAsync(status, 0, sizeof code, stream), "resetting dsc_status");
  const std::string message = code < module.statusMessages.size()
                                  ? module.statusMessages[code]
                                  : "unknown status " + std::to_string(code);
  throw Error(where + ": " + message);
}

void CudaBackend::runCollective(const Call &call, cudaStream_t on) {
  if (!isExpertExchange(call.collective.op))
    return runDeviceCollective(*call.group, meshGroups->copies(),
                               call.collective, call.src, call.dst, on);
  const int64_t sent = runDeviceExpertExchange(
      *call.group, meshGroups->copies(), call.collective, call.operands, on);
  // The rows' bytes depend on the routing: NCCL's are counted here (the
  // counts' all-to-all was counted with the static collectives).
  if (call.collective.op == Opcode::MoeExchange &&
      !call.group->countsTraffic())
    comm.countSent(CollectiveKind::AllToAll, sent);
}

void CudaBackend::run(const Program &program, const Function &fn,
                      Storage &storage, const RngContext &rng) {
  if (program.buffers.size() != buffers.size())
    throw Error("CUDA: the backend was set up for another program");
  FunctionState &state = prepare(program, fn, storage);
  rngSeed = rng.seed;
  rngOffset = rng.offset;
  // What NCCL's collectives of this call send (Communicator::traffic's
  // ring volumes); the staged groups' host communicators count their own.
  for (const Call &call : state.calls)
    if (call.kind == cuda::Step::Kind::Collective &&
        !call.group->countsTraffic() &&
        trafficKind(call.collective) != CollectiveKind::Count)
      comm.countSent(trafficKind(call.collective),
                     sentBytes(call.collective, call.group->rank()));
  uploadAttentionRng(stream);
  if (!options.graphs || profile || state.hostWork) {
    runEager(program, state, fn, storage, rng, !options.graphs || profile);
    if (state.hostWork && options.graphs && !profile)
      checkStatus("@" + fn.name);
    return;
  }
  if (!state.exec) // a function without work
    return;
  if (!state.launched || state.seed != rngSeed || state.offset != rngOffset)
    for (auto &[node, params] : state.randomNodes)
      check(cudaGraphExecKernelNodeSetParams(state.exec, node, &params),
            "updating the Philox offset of @" + fn.name);
  state.launched = true;
  state.seed = rngSeed;
  state.offset = rngOffset;
  state.host.begin(program, fn, storage, rng, comm.localSize());
  check(cudaGraphLaunch(state.exec, stream), "launching @" + fn.name);
  try {
    checkStatus("@" + fn.name);
  } catch (...) {
    state.host.rethrow(); // a failed host update explains what followed
    throw;
  }
  state.host.rethrow();
}

void CudaBackend::upload(Storage &storage, const std::vector<int> &ids) {
  for (int id : ids) {
    const Buffer &b = buffers.at(size_t(id));
    if (b.host) // ZeRO-Offload: it lives in `storage` itself
      continue;
    check(cudaMemcpyAsync(addresses[size_t(id)], storage.data(id), b.bytes(),
                          cudaMemcpyHostToDevice, stream),
          "uploading '" + b.name + "'");
  }
}

void CudaBackend::download(Storage &storage, const std::vector<int> &ids) {
  for (int id : ids) {
    const Buffer &b = buffers.at(size_t(id));
    if (b.host)
      continue;
    check(cudaMemcpyAsync(storage.data(id), addresses[size_t(id)], b.bytes(),
                          cudaMemcpyDeviceToHost, stream),
          "downloading '" + b.name + "'");
  }
  check(cudaStreamSynchronize(stream), "downloading buffers");
}

} // namespace

bool cudaBackendBuilt() { return true; }

std::string cudaUnavailableReason() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return std::string("no CUDA device (") + cudaGetErrorName(e) + ": " +
           cudaGetErrorString(e) + ")";
  if (count == 0)
    return "no CUDA device found";
  return "";
}

std::vector<std::string> cudaDevices() {
  std::vector<std::string> lines;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess)
    return lines;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
      continue;
    lines.push_back(std::to_string(d) + ": " + prop.name + " (sm_" +
                    std::to_string(prop.major * 10 + prop.minor) + "), " +
                    std::to_string(prop.totalGlobalMem >> 20) + " MiB");
  }
  return lines;
}

/// "<name> <major.minor.patch> from <path>" of the library `load` loads,
/// else "not loaded: <why>".
template <typename Load>
static std::string libraryStatus(const char *name, Load load) {
  try {
    const auto &lib = load();
    return std::string(name) + " " + dottedVersion(lib.version) + " from " +
           lib.path;
  } catch (const Error &e) {
    return std::string("not loaded: ") + e.what();
  }
}

std::string cudnnStatus() {
#ifdef DSC_HAVE_CUDNN_FRONTEND
  return libraryStatus("cuDNN", loadCudnn);
#else
  return "not loaded: this dsc was built without the cuDNN frontend's "
         "headers (scripts/setup.sh fetches them)";
#endif
}

std::string cublasLtStatus() { return libraryStatus("cuBLASLt", loadCublasLt); }

std::unique_ptr<Backend> createCudaBackend(const Program &program,
                                           Communicator &comm,
                                           const CudaOptions &options) {
  return std::make_unique<CudaBackend>(program, comm, options);
}

} // namespace dsc::rt
