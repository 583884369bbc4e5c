//===- CudaMeshGroups.h - A CUDA job's collectives, per mesh axis -*- C++ -*-===//
//
// The device groups the CUDA backend runs a step's collectives on: per mesh
// axis with more than one rank (data, tensor, pipeline, and the data
// axis's split for hybrid sharding and hpZ), an NCCL communicator (the job's, or split
// from it for the axis's group) or, where ranks share a GPU (NCCL refuses
// two ranks on one device) or DSC_CUDA_COMM=staged asks for it, a group
// that stages device buffers through host memory over the job's own
// communicator (MPI or TCP). Made collectively by every rank at start-up,
// after each has selected its GPU; ranks whose GPUs differ in model or
// compute capability are refused here, naming both.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_CUDARUNTIME_CUDAMESHGROUPS_H
#define DSC_LIB_CUDARUNTIME_CUDAMESHGROUPS_H

#include "Nccl.h"

#include "dsc/Runtime/DeviceCollectives.h"

#include <cuda_runtime.h>

#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

/// Copies on one CUDA stream, synchronised where DeviceCopies asks.
class CudaCopies final : public DeviceCopies {
public:
  void toHost(void *host, const void *device, size_t bytes,
              void *stream) override;
  void toDevice(void *device, const void *host, size_t bytes,
                void *stream) override;
  void within(void *to, const void *from, size_t bytes, void *stream) override;
  void zero(void *device, size_t bytes, void *stream) override;
};

class CudaMeshGroups {
public:
  /// Collective over `world` (each rank on device `device`, selected).
  CudaMeshGroups(Communicator &world, const Mesh &mesh, int device);
  ~CudaMeshGroups();
  CudaMeshGroups(const CudaMeshGroups &) = delete;
  CudaMeshGroups &operator=(const CudaMeshGroups &) = delete;

  /// The group of `axis`, or null where it has one rank (its collectives
  /// are copies or nothing).
  DeviceGroup *group(MeshAxis axis) const { return groups[int(axis)]; }
  DeviceCopies &copies() { return copier; }
  /// Device buffers go through host memory (no CUDA graph captures them).
  bool staged() const { return stagedMode; }
  /// Waits for the work queued on `stream`. With NCCL groups it polls the
  /// stream and their asynchronous errors: a failed or silent peer (none
  /// finishes within DSC_COMM_TIMEOUT) aborts the communicators and
  /// throws, naming `what` and the group, instead of waiting forever.
  void wait(cudaStream_t stream, const std::string &what);
  /// The kernels of dsc.norm_all_reduce on NCCL, once the step's module
  /// is loaded.
  void setNormKernels(cudaKernel_t square, cudaKernel_t sqrt);

private:
  /// Refuses ranks with different GPU models; whether two ranks share a
  /// device (then NCCL cannot run), naming them in `shared`.
  bool sharesDevice(Communicator &world, int device, std::string &shared);

  std::unique_ptr<MeshGroups> host;
  CudaCopies copier;
  NormKernels norm;
  std::unique_ptr<NcclGroup> ncclWorld;
  std::vector<std::unique_ptr<DeviceGroup>> owned;
  /// The NCCL groups and the axis each serves (for wait's messages).
  std::vector<std::pair<NcclGroup *, MeshAxis>> ncclGroups;
  DeviceGroup *groups[std::size(kMeshAxes)] = {};
  bool stagedMode = false;
};

} // namespace dsc::rt

#endif // DSC_LIB_CUDARUNTIME_CUDAMESHGROUPS_H
