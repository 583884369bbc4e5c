//===- CudaEmitter.h - rt::Program -> CUDA C++ -----------------*- C++ -*-===//
//
// Emits one CUDA translation unit for a lowered step program: one C-ABI
// launcher (`cudaError_t dsc_<op>_<k>(args..., cudaStream_t)`) per distinct
// specialised instruction, each launching one or more `extern "C"
// __global__` kernels with every shape, dtype and attribute baked in; GEMM
// instructions become cuBLASLt descriptors instead of kernels. Plain C++
// over rt::Program (no MLIR), like the runtime.
//
// Every buffer is stored on the GPU in its Program dtype (f16/bf16
// activations after -dsc-mixed-precision): kernels load through typed
// pointers, compute in f32 and round when they store, as the CPU backend
// does; GEMMs read half operands and accumulate in f32. The device arena is
// the Program's memory plan (deviceLayout), so `dsc-run estimate` is what
// the GPU allocates.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_CUDAEMITTER_H
#define DSC_CODEGEN_CUDAEMITTER_H

#include "dsc/Program/DeviceCollective.h"
#include "dsc/Program/Program.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dsc::cuda {

/// How a buffer is stored on the GPU: its Program dtype.
using Storage = rt::DType;

/// The element type's C spelling: float, __half, __nv_bfloat16, int,
/// long long, signed char, unsigned char.
const char *storageCType(Storage s);

/// Where each buffer lives in the device arena: a planned Program's offsets
/// and arena (Program::arenaBytes), else the buffers packed at 256-byte
/// boundaries in id order. Host buffers (Buffer::host) are not in it
/// (offset 0).
struct DeviceLayout {
  std::vector<size_t> offsets; ///< per Program buffer
  size_t arenaBytes = 0;
};
DeviceLayout deviceLayout(const rt::Program &program);

/// One parameter of a C-ABI launcher (the `cudaStream_t cuda_stream` is
/// always last and not listed).
struct Param {
  enum class Kind {
    Buffer,  ///< device pointer to one Program buffer
    Table,   ///< host array of `tableSize` device pointers (f32 tensors)
    Stream,  ///< the instruction's Philox stream (attr), unsigned int
    Seed,    ///< RngContext::seed, unsigned long long
    Offset,  ///< RngContext::offset, unsigned long long
    Scratch, ///< device workspace of Launcher::scratchBytes, void *
    /// the rank's coordinate along the mesh axis its Step::Arg::value
    /// names (int(rt::MeshAxis)), int
    GroupRank,
  };
  Kind kind;
  std::string name;
  std::string ctype; ///< C type in the launcher's signature
  int tableSize = 0;
};

/// One kernel launch made by a launcher: kernel symbol, 1-D grid and block,
/// arguments as launcher parameter indices (a Table parameter is passed by
/// value as `dsc::Ptrs<tableSize>`, a struct of that many pointers).
struct KernelLaunch {
  std::string kernel;
  int64_t grid = 1;
  int block = 1;
  std::vector<int> args;
};

struct Launcher {
  std::string name; ///< the C-ABI symbol, dsc_<opcode>_<k>
  rt::Opcode op;
  std::vector<Param> params;
  std::vector<KernelLaunch> kernels;
  int64_t scratchBytes = 0;
  std::string summary; ///< shapes and dtypes of the first instruction
};

/// A GEMM for cuBLASLt, in row-major terms as the CPU backend computes it:
/// for b < batch, C[b] = alpha * op(A[b]) @ op(B[b]) (+ bias[N] on every
/// row when `bias`), op(A) [M,K], op(B) [K,N], leading dimensions and batch
/// strides in elements, f32 accumulation. (Row-major C = A B is column-major
/// C^T = B^T A^T: swap the operands for cuBLASLt; the bias is then
/// CUBLASLT_EPILOGUE_BIAS over the N column-major rows.)
/// What cuBLASLt does after a GEMM's product (its epilogue).
enum class GemmEpilogue {
  /// Nothing, or the bias (`Gemm::bias`): cuBLASLt's DEFAULT / BIAS.
  Plain,
  /// Linear + BiasGelu: D = gelu(product + bias) and the aux output the
  /// pre-activation product + bias (GELU_AUX_BIAS).
  GeluAuxBias,
  /// LinearGradInput + BiasGeluGrad: D = product * gelu'(aux) and the
  /// bias "pointer" the column sums of D, the bias gradient (DGELU_BGRAD).
  DGeluBiasGrad,
  /// LinearGradWeight + the ReduceTo that sums its dy into the bias
  /// gradient: the bias "pointer" gets bias[m] = sum_k op(A)[m, k] (dy is
  /// A: a weight [N, K], dw = dy^T x). cuBLASLt's first operand is our B,
  /// so this is its BGRADB.
  BiasGradFromA,
  /// The same with dy as B (a weight [K, N], dw = x^T dy): bias[n] =
  /// sum_k op(B)[k, n], cuBLASLt's BGRADA.
  BiasGradFromB,
};

/// Whether `e` writes a bias gradient into the bias pointer (rather than
/// reading a bias).
inline bool writesBiasGradient(GemmEpilogue e) {
  return e == GemmEpilogue::DGeluBiasGrad || e == GemmEpilogue::BiasGradFromA ||
         e == GemmEpilogue::BiasGradFromB;
}

/// Whether `e` is a GELU epilogue (an aux matrix: the pre-activation).
inline bool usesGeluAux(GemmEpilogue e) {
  return e == GemmEpilogue::GeluAuxBias || e == GemmEpilogue::DGeluBiasGrad;
}

struct Gemm {
  rt::Opcode op;
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0, strideA = 0, strideB = 0, strideC = 0;
  double alpha = 1.0;
  bool bias = false;
  /// C += op(A) op(B) (cuBLASLt's beta = 1): a weight gradient added
  /// straight into its f32 accumulator, the Add that followed absorbed.
  bool accumulate = false;
  Storage a = Storage::F32, b = Storage::F32, c = Storage::F32,
          biasType = Storage::F32;
  /// Epilogues (EmitOptions::geluEpilogues, biasGradEpilogues): the bias
  /// (args[3]) is the input bias (GeluAuxBias) or the f32 bias gradient
  /// it writes (writesBiasGradient); a GELU epilogue's aux buffer is the
  /// step's args[4], [M, N] row-major of `auxType`.
  GemmEpilogue epilogue = GemmEpilogue::Plain;
  Storage auxType = Storage::F32;
  bool operator==(const Gemm &o) const;
};

/// A fused attention for cuDNN's SDPA (Step::Kind::Attention). Operands
/// row-major: q, out and their gradients [batch, heads, seq, headDim]; k, v
/// and theirs [batch, kvHeads, seq, headDim]; lse f32 [batch, heads, seq],
/// each row's log-sum-exp of the scaled, masked scores (what cuDNN calls
/// the softmax stats), written by the forward and read by the backward.
struct CudnnAttention {
  bool backward = false;
  int64_t batch = 0, heads = 0, kvHeads = 0, seq = 0, headDim = 0;
  Storage type = Storage::BF16; ///< q, k, v, out and the gradients
  bool causal = false;
  double scale = 1.0, rate = 0.0; ///< softmax scale, dropout probability
  /// The instruction's Philox stream: the forward and backward of one
  /// attention draw the same cuDNN dropout mask (not the CPU's).
  uint64_t stream = 0;
};

/// "forward bf16 B8 H12/12 T1024 D64 causal dropout 0.1" (heads/kvHeads).
std::string describeAttention(const CudnnAttention &attention);

/// Element strides (batch, head, seq, dim) of a row-major [B, heads, seq,
/// headDim] attention operand.
std::array<int64_t, 4> attentionStrides(int64_t heads, int64_t seq,
                                        int64_t headDim);

/// What the runtime does for one or more instructions of a function.
struct Step {
  enum class Kind {
    Kernel,    ///< call launcher `index` with `args`
    Gemm,      ///< gemm `index` on buffers args: A, B, C[, bias[, aux]]
    /// cuDNN attention `index`: forward q, k, v, out, lse; backward dout,
    /// q, k, v, out, lse, dq, dk, dv
    Attention,
    Memcpy,    ///< device copy of args[1] <- args[0] (same storage)
    /// `collective` on its mesh axis's group, from args[0] to args[1]
    /// (send: args[0] only; recv: args[1] only, args[0] empty)
    Collective,
    /// ZeRO-Offload: args[1] <- args[0] between the memories, device to
    /// host (to_host) or host to device (to_device), same storage.
    HostCopy,
    /// ZeRO-Offload: instruction instrs[0], placed on the host (Instr::
    /// host: an update, a swap of ZeRO-Infinity's file), run by the CPU
    /// backend's kernels over the host buffers.
    Host,
  };
  Kind kind;
  std::vector<size_t> instrs; ///< indices into Function::body
  int index = -1;
  /// Per launcher parameter (Kernel) or operand: buffer ids (one, or the
  /// table's), or the value of a Stream parameter.
  struct Arg {
    std::vector<int> buffers;
    uint64_t value = 0;
  };
  std::vector<Arg> args;
  rt::DeviceCollective collective; ///< Kind::Collective
  /// Kind::Collective in place on the launcher scratch from this byte
  /// offset (the vocabulary-parallel loss's row statistics) instead of on
  /// args' buffers; -1: on the buffers.
  int64_t scratchOffset = -1;
};

struct Module {
  std::string source; ///< the .cu: device library, kernels, host launchers
  std::string header; ///< launcher prototypes, GEMM table, status messages
  std::vector<Launcher> launchers;
  std::vector<Gemm> gemms;
  std::vector<CudnnAttention> attentions;
  std::map<std::string, std::vector<Step>> steps; ///< per function
  /// Per fused attention instruction, in emission order: "@fn #i:
  /// <implementation> (<shape>)" (DSC_CUDA_VERBOSE=1 prints them).
  std::vector<std::string> attentionChoices;
  /// 16-bit attentions that would run on cuDNN if it were loaded.
  int cudnnCandidates = 0;
  /// dsc_status codes: index = code, 0 = no error.
  std::vector<std::string> statusMessages;
  int64_t scratchBytes = 0; ///< the most any launcher needs
};

/// The implementations of a fused attention (dsc.attention and its
/// gradient).
enum class AttentionKernel {
  /// attentionForward, attentionGradKV, attentionGradQ: tiles and scores in
  /// shared memory, WMMA; any dtype and sm_70 or newer. Every fp32
  /// attention runs them.
  Tiles,
  /// attention{Forward,GradKV,GradQ}Registers: scores and accumulators in
  /// registers, mma.sync; 16-bit inputs, head dim a multiple of 16 up to
  /// 128 (64 for the backward), dense or blocks of a multiple of 64; needs
  /// sm_80. Their dropout masks are the CPU backend's.
  Registers,
  /// cuDNN's fused SDPA (Step::Kind::Attention, run by the backend): 16-bit
  /// q, k, v of one type, head dim a multiple of 8 up to 128, dense, no key
  /// padding mask; needs libcudnn 9 at run time. Its dropout masks are
  /// cuDNN's own.
  Cudnn,
};

/// "tiles", "registers" or "cudnn" (dsc-translate --attention-kernel,
/// DSC_CUDA_ATTENTION); false for anything else.
bool parseAttentionKernel(const std::string &name, AttentionKernel &kernel);
const char *attentionKernelName(AttentionKernel kernel);

struct EmitOptions {
  std::string headerName = "dsc_kernels.h"; ///< #include'd by the source
  /// The implementation every 16-bit fused attention must use (an error
  /// where it cannot); unset: chosen per attention, the first that applies
  /// of cuDNN, the register kernels and the tiles kernels. fp32 attention
  /// always runs the tiles kernels.
  bool forceAttention = false;
  AttentionKernel attention = AttentionKernel::Tiles;
  bool cudnn = false; ///< libcudnn 9 is loaded: cuDNN attention may run
  int sm = 90;        ///< the device's compute capability (80: sm_80)
  /// Dropout must draw the CPU backend's masks (check-cuda): no cuDNN for
  /// an attention with dropout.
  bool cpuDropoutMasks = false;
  /// A tanh-GELU MLP's bias + GELU and its gradient run as cuBLASLt
  /// epilogues of the GEMMs before them (GemmEpilogue); off by default
  /// until a GPU has shown that cuBLASLt's GELU is the tanh form
  /// (DSC_CUDA_EPILOGUES=1, dsc-translate --gelu-epilogues).
  bool geluEpilogues = false;
  /// A bias gradient that sums the dy of a weight-gradient GEMM runs as
  /// that GEMM's BGRADA/BGRADB epilogue (GemmEpilogue::BiasGradFromA/B);
  /// off by default until a GPU has run it (DSC_CUDA_EPILOGUES=bgrad,
  /// dsc-translate --bias-grad-epilogues).
  bool biasGradEpilogues = false;
};

/// Reads DSC_CUDA_EPILOGUES's value into `options`: "1" or "all" (every
/// epilogue), or a comma-separated list of "gelu" and "bgrad"; "0" or ""
/// none. Returns an error message naming a bad entry, or "".
std::string parseEpilogues(const std::string &value, EmitOptions &options);

/// Emits the module. Throws rt::Error("<opcode>: <why>") for an instruction
/// it cannot emit (bad operands, an unsupported attribute value).
Module emitCuda(const rt::Program &program, const EmitOptions &options = {});

} // namespace dsc::cuda

#endif // DSC_CODEGEN_CUDAEMITTER_H
