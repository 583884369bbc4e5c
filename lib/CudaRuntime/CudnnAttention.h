//===- CudnnAttention.h - cuDNN fused attention (SDPA) ----------*- C++ -*-===//
//
// Dense attention through cuDNN's fused scaled-dot-product attention (flash
// attention: what PyTorch's SDPA runs on Hopper), described with the cuDNN
// frontend's graph API. One CudnnSdpa holds the forward and backward graphs
// of one problem shape; it is built once and executed every step, also
// inside a captured CUDA graph.
//
// libcudnn 9 is loaded at run time (loadCudnn), as NCCL is: binaries have no
// link-time dependency on it and start without it; only a step that runs
// cuDNN attention needs it.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_CUDARUNTIME_CUDNNATTENTION_H
#define DSC_LIB_CUDARUNTIME_CUDNNATTENTION_H

#include "dsc/Program/Program.h"

#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <string>

namespace dsc::rt {

/// The problem (shape, mask, dropout) cuDNN cannot run: the caller may fall
/// back to its own attention kernels. Other cuDNN failures are plain Errors.
struct CudnnUnsupported : Error {
  using Error::Error;
};

/// The process's libcudnn, as loadCudnn found it.
struct CudnnLibraryInfo {
  std::string path;   ///< what was dlopen'ed
  size_t version = 0; ///< cudnnGetVersion(): 91900 for 9.19.0
};

/// Loads libcudnn 9 once per process (later calls return the same library)
/// and returns it. Tried in order: $DSC_CUDNN_LIBRARY alone when it is set;
/// else libcudnn.so.9 through the dynamic loader; $CUDA_HOME/lib64 and
/// /usr/local/cuda/lib64; the nvidia-cudnn-cu13 / -cu12 wheels
/// (site-packages/nvidia/cudnn/lib) of $VIRTUAL_ENV, $CONDA_PREFIX,
/// ~/.local, pyenv's versions and the Python prefixes next to the
/// directories of $PATH.
/// Throws Error with one line naming every place tried, or the library
/// found and why it is unusable (not cuDNN 9, a missing entry point).
const CudnnLibraryInfo &loadCudnn();

/// A cuDNN handle (cudnnCreate on the current device) owned for its
/// lifetime. Needs a GPU; loads the library first.
class CudnnHandle {
public:
  CudnnHandle();
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle &) = delete;
  CudnnHandle &operator=(const CudnnHandle &) = delete;
  cudnnHandle_t get() const { return handle; }

private:
  cudnnHandle_t handle = nullptr;
};

/// Element strides of a 4-D attention operand, in the order cuDNN indexes
/// it: (batch, head, sequence, head dimension).
struct SdpaStrides {
  int64_t batch = 0, head = 0, seq = 0, dim = 1;

  /// [B, H, T, D] row-major.
  static SdpaStrides bhsd(int64_t heads, int64_t seq, int64_t headDim);
  /// [B, T, H, D] row-major, with `tokenStride` elements between tokens
  /// (H * D when 0). Q, K and V read in place from a fused QKV projection
  /// laid out [B, T, 3, H, D] are bshd(H, T, D, 3 * H * D), K and V starting
  /// H * D and 2 * H * D elements after Q.
  static SdpaStrides bshd(int64_t heads, int64_t seq, int64_t headDim,
                          int64_t tokenStride = 0);
};

enum class SdpaType { BF16, F16 };

/// One attention problem. Q is [batch, qHeads, qLen, headDim]; K and V are
/// [batch, kvHeads, kvLen, headDim] (grouped-query attention when kvHeads <
/// qHeads: query head h reads key/value head h / (qHeads / kvHeads)); O and
/// its gradient are shaped as Q. The softmax statistics the forward saves
/// for the backward are each row's log-sum-exp of the scaled, masked
/// scores: f32 [batch, qHeads, qLen, 1], contiguous.
struct SdpaProblem {
  int64_t batch = 0, qHeads = 0, kvHeads = 0, qLen = 0, kvLen = 0, headDim = 0;
  SdpaStrides q, k, v, o;     ///< the forward's operands (o: also the
                              ///< backward's O input)
  SdpaStrides dq, dk, dv, dO; ///< the backward's gradients
  /// Key j is masked for query i when j > i + (kvLen - qLen), as
  /// dsc.attention's causal is (cuDNN's bottom-right diagonal, the same as
  /// its top-left one when qLen == kvLen).
  bool causal = false;
  float scale = 1.0f;   ///< multiplies q.k before the softmax
  float dropout = 0.0f; ///< probability of dropping an attention weight
  /// Per-batch valid lengths (int32 device tensors [batch]): keys at or past
  /// kvLens[b] are masked for every query of b. cuDNN's padding mask takes
  /// query lengths too: rows at or past qLens[b] get output 0 (pass qLen
  /// for every b to keep them all).
  bool keyPadding = false;
  SdpaType type = SdpaType::BF16;
  /// Build the backward graph as well (training).
  bool backward = true;

  /// Self-attention of batch x heads x seq x headDim in the layouts of a
  /// fused QKV projection: Q, K, V (and dQ, dK, dV) in place in [B, T, 3, H,
  /// D], O and dO [B, T, H, D]; scale 1/sqrt(headDim).
  static SdpaProblem fusedQkv(int64_t batch, int64_t heads, int64_t seq,
                              int64_t headDim);
  /// The one-line description the error messages use, e.g.
  /// "attention B8 H12/12 T1024x1024 D64 bf16 causal dropout 0.1".
  std::string describe() const;
};

/// Device pointers of one forward call.
struct SdpaForwardArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *o = nullptr;
  float *stats = nullptr; ///< written when the problem has a backward
  /// Dropout's Philox seed and offset, one int64 each in device memory, read
  /// when the kernels run: a captured CUDA graph replays with new values.
  /// The backward must see the forward's values.
  const int64_t *seed = nullptr, *offset = nullptr;
  const int32_t *qLens = nullptr, *kvLens = nullptr; ///< keyPadding only
  void *workspace = nullptr; ///< CudnnSdpa::workspaceBytes()
};

/// Device pointers of one backward call: dq, dk, dv are overwritten.
struct SdpaBackwardArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr,
             *dO = nullptr;
  const float *stats = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  const int64_t *seed = nullptr, *offset = nullptr;
  const int32_t *qLens = nullptr, *kvLens = nullptr;
  void *workspace = nullptr;
};

/// The forward and backward cuDNN graphs of one SdpaProblem.
///
/// CUDA graphs: forward() and backward() may be stream-captured. They only
/// enqueue work on `stream` (cudnnBackendExecute, plus the frontend's own
/// cudaMemsetAsync/cudaMemcpyAsync of workspace for some engines); the
/// frontend (1.32, cudnn_frontend/plans.h retain_plan_on_capturing_stream
/// and graph_interface.h run_auxiliary_kernels) detects a capturing stream
/// and makes the captured graph hold a reference to runtime-compiled kernels
/// and host sources, and its native-CUDA-graph API tells users whose engine
/// lacks it to "capture execute() on a stream instead". Building (build())
/// compiles kernels and must happen before capture, as the frontend's
/// Python README says ("call compile() before capture and capture only
/// execute() with preallocated tensors"). Pointers, workspace and the
/// seed/offset values are baked into a capture as for any kernel launch.
class CudnnSdpa {
public:
  /// Describes both graphs and validates them for a GPU of compute
  /// capability `smVersion` (90 for Hopper; 0 reads the current device).
  /// Needs the library (loads it), not a GPU when smVersion is given.
  /// Throws CudnnUnsupported naming the problem and cuDNN's reason when
  /// cuDNN does not support it, Error for anything else.
  explicit CudnnSdpa(const SdpaProblem &problem, int smVersion = 0);
  ~CudnnSdpa();
  CudnnSdpa(CudnnSdpa &&) noexcept;
  CudnnSdpa &operator=(CudnnSdpa &&) noexcept;

  const SdpaProblem &problem() const;
  /// Lowers the graphs to cuDNN and builds their execution plans (cuDNN's
  /// heuristics, then its fallback list): compiles kernels, so call it once,
  /// outside stream capture. `handle` must outlive this object. Needs a GPU.
  void build(cudnnHandle_t handle);
  bool built() const;
  /// Workspace bytes forward() and backward() need (after build()); one
  /// buffer of workspaceBytes() serves both.
  int64_t forwardWorkspaceBytes() const;
  int64_t backwardWorkspaceBytes() const;
  int64_t workspaceBytes() const;

  /// Enqueues the forward on `stream` (sets the handle's stream).
  void forward(const SdpaForwardArgs &args, cudaStream_t stream) const;
  /// Enqueues the backward on `stream`; the problem must have `backward`.
  void backward(const SdpaBackwardArgs &args, cudaStream_t stream) const;

private:
  struct Graphs;
  std::unique_ptr<Graphs> graphs;
};

} // namespace dsc::rt

#endif // DSC_LIB_CUDARUNTIME_CUDNNATTENTION_H
