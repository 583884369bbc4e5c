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

#include "dsc/Runtime/DeviceCollectives.h"
#include "dsc/Runtime/Runtime.h"

#include <cuda_runtime.h>
#include <nccl.h>

namespace dsc::rt {

/// The entry points dsc uses, resolved from the shared library.
struct NcclLibrary {
  ncclResult_t (*getVersion)(int *) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t,
                            ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void *, void *, size_t, ncclDataType_t,
                                ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int,
                            ncclComm_t, cudaStream_t) = nullptr;
  /// ncclCommSplit (NCCL 2.18+); null in an older library, whose groups
  /// are made with a unique id of their own (NcclGroup).
  ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *,
                            ncclConfig_t *) = nullptr;
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

/// The kernels of dsc.norm_all_reduce (NormAllReduce.cuh), from the step's
/// compiled module, and a device float between them.
struct NormKernels {
  cudaKernel_t square = nullptr, sqrt = nullptr;
  float *scratch = nullptr;
};

/// One NCCL communicator over the ranks of a mesh axis's group (each rank
/// on its own GPU, already selected with cudaSetDevice): the whole job's,
/// or split from it.
class NcclGroup final : public DeviceGroup {
public:
  /// The whole job: rank 0's unique id reaches every rank through `host`.
  /// `norm` (the backend's, filled once its kernels are loaded) serves
  /// normAllReduce; it must outlive the group.
  explicit NcclGroup(Communicator &host, const NormKernels *norm = nullptr);
  /// The group of `world`'s ranks passing the same `color`, ranked as in
  /// `host` (the host communicator of those ranks): ncclCommSplit where
  /// the library has it, else a communicator of its own.
  NcclGroup(NcclGroup &world, int color, Communicator &host);
  ~NcclGroup() override;
  NcclGroup(const NcclGroup &) = delete;
  NcclGroup &operator=(const NcclGroup &) = delete;

  int rank() const override { return myRank; }
  int size() const override { return ranks; }
  bool capturable() const override { return true; }
  bool countsTraffic() const override { return false; }
  void allReduce(const void *src, void *dst, int64_t floats, ReduceOp op,
                 void *stream) override;
  void reduceScatter(const void *src, void *dst, int64_t floatsPerRank,
                     ReduceOp op, void *stream) override;
  void allGather(const void *src, void *dst, int64_t bytesPerRank,
                 void *stream) override;
  /// MPI_Alltoall, as grouped ncclSend/ncclRecv pairs.
  void allToAll(const void *src, void *dst, int64_t bytesPerPeer,
                void *stream) override;
  void broadcast(void *data, int64_t bytes, int root, void *stream) override;
  void send(const void *src, int64_t bytes, int to, void *stream) override;
  void recv(void *dst, int64_t bytes, int from, void *stream) override;
  void normAllReduce(const void *norm, void *result, void *stream) override;
  /// Grouped ncclSend/ncclRecv, in the order given.
  void exchange(const std::vector<PeerMessage> &sends,
                const std::vector<PeerMessage> &receives,
                void *stream) override;
  /// The communicator's asynchronous error (a peer lost, a network
  /// failure): ncclSuccess, ncclInProgress or the error.
  ncclResult_t asyncError() const;
  /// Aborts the communicator's operations (they never complete otherwise
  /// when a peer is gone); the group is unusable afterwards.
  void abort();
  const char *errorString(ncclResult_t r) const { return nccl.getErrorString(r); }
  /// How the group was made: "ncclCommSplit" or "its own unique id".
  const char *origin() const { return split ? "ncclCommSplit" : "its own unique id"; }

private:
  const NcclLibrary &nccl;
  ncclComm_t comm = nullptr;
  int ranks = 1, myRank = 0;
  bool split = false;
  const NormKernels *norm = nullptr;
};

} // namespace dsc::rt

#endif // DSC_LIB_CUDARUNTIME_NCCL_H
