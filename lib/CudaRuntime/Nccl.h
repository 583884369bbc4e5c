//===- Nccl.h - NCCL for the CUDA backend's multi-rank jobs ----*- C++ -*-===//
//
// NCCL is loaded at run time (dlopen of libnccl.so.2, or $DSC_NCCL_LIBRARY)
// and only by a job of several CUDA ranks, so dsc-run starts on a machine
// without NCCL (the GPU bundle carries none) and one-GPU runs never need it.
// The communicator's unique id is made on rank 0 and handed to the other
// ranks over the job's host communicator (MPI).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_CUDARUNTIME_NCCL_H
#define DSC_LIB_CUDARUNTIME_NCCL_H

#include "dsc/Runtime/Runtime.h"

#include <nccl.h>

namespace dsc::rt {

/// The entry points dsc uses, resolved from the shared library.
struct NcclLibrary {
  ncclResult_t (*getVersion)(int *) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t,
                            ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  const char *(*getErrorString)(ncclResult_t) = nullptr;
  int version = 0;

  /// The process's NCCL, loaded once; throws Error naming the library and
  /// the missing symbol or the loader's message.
  static const NcclLibrary &get();
  /// Throws Error "<what>: NCCL: <message>" unless `r` is ncclSuccess.
  void check(ncclResult_t r, const std::string &what) const;
};

/// Rank 0's ncclGetUniqueId, received by every rank of `host`.
ncclUniqueId shareUniqueId(const NcclLibrary &nccl, Communicator &host);

/// One NCCL communicator over the ranks of `host` (each on its own GPU,
/// already selected with cudaSetDevice).
class NcclComm {
public:
  explicit NcclComm(Communicator &host);
  ~NcclComm();
  NcclComm(const NcclComm &) = delete;
  NcclComm &operator=(const NcclComm &) = delete;
  /// `count` floats from `src` to `dst` (in place when equal) on `stream`.
  void allReduce(const void *src, void *dst, size_t count, ReduceOp op,
                 cudaStream_t stream) const;
  /// Rank r's `bytesPerRank` bytes land at dst + r * bytesPerRank on every
  /// rank.
  void allGather(const void *src, void *dst, size_t bytesPerRank,
                 cudaStream_t stream) const;
  /// Block j of `bytesPerPeer` bytes of src goes to rank j, which stores
  /// it at dst + (this rank) * bytesPerPeer: MPI_Alltoall, as grouped
  /// ncclSend/ncclRecv pairs.
  void allToAll(const void *src, void *dst, size_t bytesPerPeer,
                cudaStream_t stream) const;

private:
  const NcclLibrary &nccl;
  ncclComm_t comm = nullptr;
  int ranks = 1;
};

} // namespace dsc::rt

#endif // DSC_LIB_CUDARUNTIME_NCCL_H
